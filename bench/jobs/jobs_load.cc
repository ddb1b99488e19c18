// Load client for bench/jobs: jobs end to end through the AWS Batch API.
//
//   1. (--setup) creates a MANAGED EC2 compute environment of --instance-type
//      with maxvCpus large enough that every job finds capacity at once, a job
//      queue and a job definition running `true` (VCPU 1, MEMORY 64 MiB), and
//      waits for them to be VALID;
//   2. submits --jobs SubmitJob requests from --clients concurrent keep-alive
//      SigV4 connections (the same code measures lote and moto_server);
//   3. with --wait-seconds > 0, waits until every job is SUCCEEDED (stops at
//      the first FAILED one): it polls the server's job counts (GET /metrics,
//      lote_jobs{queue,status}: a few lines, whatever the number of jobs) and
//      lists the jobs once they add up; without /metrics it polls ListJobs,
//      each poll listing every job that succeeded so far (server work the
//      measure, which uses the server's own times, does not need). Then it
//      reads each job's createdAt,
//      startedAt and stoppedAt (server clock) for completed jobs/s and the
//      submit -> RUNNING / SUCCEEDED latencies under that burst; then it
//      submits --paced-jobs more, one at a time --paced-ms apart, for the
//      same latencies on idle capacity; with --wait-seconds 0 it
//      waits --sample-after seconds and describes up to 100 jobs to show what
//      became of them (moto_server runs jobs in Docker; without it they fail).
//   With --ce-state DISABLED the jobs wait RUNNABLE (no usable compute
//   environment) and --windows A-B,... reports SubmitJob/s over submissions
//   A..B (their completion order), e.g. the first 2,000 against 8,000-10,000:
//   how the submit path's cost follows the number of jobs waiting.
// Prints one JSON line.
#include <httplib.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "bench_client.h"
#include "cli/batch_client.h"

namespace {

using lote::Json;
using lote::Result;
using lote::Status;

int64_t WallMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

double Since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

struct Options {
  lote::bench::Target target;
  int jobs = 2000;
  int clients = 8;
  std::string prefix = "jobs-bench";
  bool setup = false;
  std::string instance_type = "local";
  int64_t max_vcpus = 0;  // 0: 2 x jobs
  std::string service_role;
  std::string subnet = "subnet-bench";
  std::string security_group;
  std::string instance_role;
  double wait_seconds = 300;
  double sample_after = 3;
  int poll_ms = 250;
  int warmup = 10;
  int paced_jobs = 100;
  int paced_ms = 50;
  std::string ce_state = "ENABLED";
  std::string windows;  // "0-2000,8000-10000"
  int array_size = 0;   // > 0: one array job of this many children instead
};

// SubmitJob/s over each window "A-B" of `windows`: (B - A) submissions
// between the A-th and the B-th completed one (`done_ms`: completion times,
// sorted). Windows beyond the submissions are left out.
Json WindowRates(const std::string& windows, const std::vector<double>& done_ms) {
  Json out = Json::array();
  size_t pos = 0;
  while (pos < windows.size()) {
    size_t comma = windows.find(',', pos);
    if (comma == std::string::npos) comma = windows.size();
    const std::string w = windows.substr(pos, comma - pos);
    pos = comma + 1;
    const size_t dash = w.find('-');
    if (dash == std::string::npos) continue;
    const size_t a = std::stoul(w.substr(0, dash)), b = std::stoul(w.substr(dash + 1));
    if (b <= a || b > done_ms.size()) continue;
    const double start = a == 0 ? 0.0 : done_ms[a - 1];
    const double seconds = (done_ms[b - 1] - start) / 1000;
    out.push_back(Json{{"from", a}, {"to", b}, {"rps", static_cast<double>(b - a) / seconds}});
  }
  return out;
}

using lote::cli::BatchClient;

// Polls `describe` until the resource is VALID.
Status WaitValid(const std::string& name,
                 const std::function<Result<std::optional<Json>>()>& describe) {
  for (int i = 0; i < 600; ++i) {
    ASSIGN_OR_RETURN(std::optional<Json> item, describe());
    if (item) {
      const std::string status = item->value("status", "");
      if (status == "VALID") return Status();
      if (status == "INVALID")
        return Status::FailedPrecondition(name + " is INVALID: " + item->value("statusReason", ""));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return Status::DeadlineExceeded(name + " did not become VALID within 30 s");
}

Status Setup(const Options& o, BatchClient& c) {
  Json resources = {{"type", "EC2"},
                    {"minvCpus", 0},
                    {"maxvCpus", o.max_vcpus > 0 ? o.max_vcpus : int64_t{2} * o.jobs},
                    {"instanceTypes", Json::array({o.instance_type})},
                    {"subnets", Json::array({o.subnet})}};
  if (!o.security_group.empty()) resources["securityGroupIds"] = Json::array({o.security_group});
  if (!o.instance_role.empty()) resources["instanceRole"] = o.instance_role;
  const std::string ce_name = o.prefix + "-ce", queue_name = o.prefix + "-q";
  Json ce = {{"computeEnvironmentName", ce_name},
             {"type", "MANAGED"},
             {"state", o.ce_state},
             {"computeResources", resources}};
  if (!o.service_role.empty()) ce["serviceRole"] = o.service_role;
  RETURN_IF_ERROR(c.CreateComputeEnvironment(ce).status());
  RETURN_IF_ERROR(WaitValid(ce_name, [&] { return c.DescribeComputeEnvironment(ce_name); }));
  Json queue = {{"jobQueueName", queue_name},
                {"state", "ENABLED"},
                {"priority", 1},
                {"computeEnvironmentOrder",
                 Json::array({Json{{"order", 1}, {"computeEnvironment", ce_name}}})}};
  RETURN_IF_ERROR(c.CreateJobQueue(queue).status());
  RETURN_IF_ERROR(WaitValid(queue_name, [&] { return c.DescribeJobQueue(queue_name); }));
  Json definition = {
      {"jobDefinitionName", o.prefix + "-true"},
      {"type", "container"},
      {"containerProperties",
       {{"image", "host"},
        {"command", Json::array({"true"})},
        {"resourceRequirements", Json::array({Json{{"type", "VCPU"}, {"value", "1"}},
                                              Json{{"type", "MEMORY"}, {"value", "64"}}})}}}};
  return c.RegisterJobDefinition(definition).status();
}

// Every job of the queue in `status` (all pages).
Result<std::vector<Json>> ListAll(BatchClient& c, const std::string& queue,
                                  const std::string& status) {
  return c.ListJobs({{"jobQueue", queue}, {"jobStatus", status}, {"maxResults", 1000}});
}

// The queue's SUCCEEDED and FAILED job counts from GET /metrics (lote's
// lote_jobs gauge); nullopt when the server has no such endpoint (moto).
struct QueueCounts {
  int64_t succeeded = 0, failed = 0, in_flight = 0;  // in flight: every other status
};
std::optional<QueueCounts> ScrapeQueueCounts(httplib::Client& http, const std::string& queue) {
  httplib::Result r = http.Get("/metrics");
  if (!r || r->status != 200) return std::nullopt;
  QueueCounts counts;
  bool seen = false;
  const std::string prefix = "lote_jobs{queue=\"" + queue + "\",status=\"";
  size_t start = 0;
  while (start < r->body.size()) {
    size_t end = r->body.find('\n', start);
    if (end == std::string::npos) end = r->body.size();
    const std::string line = r->body.substr(start, end - start);
    start = end + 1;
    if (line.rfind(prefix, 0) != 0) continue;
    seen = true;
    const size_t quote = line.find('"', prefix.size());
    const std::string status = line.substr(prefix.size(), quote - prefix.size());
    const int64_t value = std::atoll(line.c_str() + line.rfind(' ') + 1);
    if (status == "SUCCEEDED") {
      counts.succeeded = value;
    } else if (status == "FAILED") {
      counts.failed = value;
    } else {
      counts.in_flight += value;
    }
  }
  if (!seen) return std::nullopt;
  return counts;
}

// Waits until every job of `ids` is SUCCEEDED (their summaries); fails at the
// first FAILED job of the queue (its summary put in `out`). The server's job
// counts are polled while they fall short (cheap), ListJobs once they add up.
Result<std::vector<Json>> WaitAllSucceeded(const Options& o, BatchClient& c,
                                           const std::vector<std::string>& ids, Json* out) {
  const std::string queue = o.prefix + "-q";
  std::set<std::string> wanted(ids.begin(), ids.end());
  wanted.erase("");  // submissions that failed
  const auto start = std::chrono::steady_clock::now();
  httplib::Client http(o.target.endpoint);
  // The count also holds jobs that succeeded before these (the warm-up):
  // listing starts once it covers them all, or nothing is in flight any more.
  const std::optional<QueueCounts> before = ScrapeQueueCounts(http, queue);
  while (true) {
    if (before) {
      std::optional<QueueCounts> now = ScrapeQueueCounts(http, queue);
      const bool may_be_done =
          !now || now->failed > 0 || now->in_flight == 0 ||
          now->succeeded >= before->succeeded + static_cast<int64_t>(wanted.size());
      if (!may_be_done && Since(start) <= o.wait_seconds * 1000) {
        std::this_thread::sleep_for(std::chrono::milliseconds(o.poll_ms));
        continue;
      }
    }
    ASSIGN_OR_RETURN(std::vector<Json> failed, ListAll(c, queue, "FAILED"));
    if (!failed.empty()) {
      (*out)["failed"] = failed.size();
      (*out)["failed_example"] = failed.front();
      return Status::Internal(std::to_string(failed.size()) + " job(s) FAILED");
    }
    ASSIGN_OR_RETURN(std::vector<Json> succeeded, ListAll(c, queue, "SUCCEEDED"));
    std::vector<Json> mine;
    for (Json& j : succeeded)
      if (wanted.count(j.value("jobId", ""))) mine.push_back(std::move(j));
    if (mine.size() >= wanted.size()) return mine;
    if (Since(start) > o.wait_seconds * 1000) {
      (*out)["succeeded"] = mine.size();
      return Status::DeadlineExceeded("not every job succeeded in time");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(o.poll_ms));
  }
}

// --array-size: one array job of `o.array_size` children, waited for until
// it SUCCEEDED (polling DescribeJobs of the parent); completed children/s is
// the size over first submit -> the parent's stoppedAt (server clock).
int RunArray(const Options& o, BatchClient& c, Json out) {
  out["array_size"] = o.array_size;
  auto fail = [&](const std::string& what, const Status& s) {
    out["error"] = what + ": " + s.ToString();
    std::printf("%s\n", out.dump(-1, ' ', false, Json::error_handler_t::replace).c_str());
    return 1;
  };
  const int64_t first_submit_ms = WallMs();
  const auto t0 = std::chrono::steady_clock::now();
  Result<Json> r = c.SubmitJob({{"jobName", "array"},
                                {"jobQueue", o.prefix + "-q"},
                                {"jobDefinition", o.prefix + "-true"},
                                {"arrayProperties", {{"size", o.array_size}}}});
  if (!r.ok()) return fail("SubmitJob", r.status());
  out["submit_ms"] = Since(t0);
  const std::string id = (*r).value("jobId", "");
  Json parent;
  while (true) {
    Result<std::vector<Json>> d = c.DescribeJobs({id});
    if (!d.ok()) return fail("DescribeJobs", d.status());
    if (!d->empty()) parent = d->front();
    const std::string status = parent.value("status", "");
    if (status == "SUCCEEDED" || status == "FAILED") break;
    if (Since(t0) > o.wait_seconds * 1000) {
      out["parent"] = parent;
      return fail("wait", Status::DeadlineExceeded("the array did not end in time"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(o.poll_ms));
  }
  const double wall_s =
      static_cast<double>(parent.value("stoppedAt", int64_t{0}) - first_submit_ms) / 1000;
  out["completed"] = {{"status", parent.value("status", "")},
                      {"status_summary", parent["arrayProperties"].value("statusSummary", Json())},
                      {"first_submit_to_last_stop_s", wall_s},
                      {"jobs_per_s", static_cast<double>(o.array_size) / wall_s}};
  std::printf("%s\n", out.dump(-1, ' ', false, Json::error_handler_t::replace).c_str());
  return parent.value("status", "") == "SUCCEEDED" ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"lote jobs end-to-end load client"};
  Options o;
  lote::bench::AddTargetOptions(app, &o.target);
  app.add_option("--jobs", o.jobs, "SubmitJob requests to make");
  app.add_option("--clients", o.clients, "concurrent keep-alive connections");
  app.add_option("--prefix", o.prefix, "names: PREFIX-ce, PREFIX-q, PREFIX-true");
  app.add_flag("--setup", o.setup, "create the compute environment, queue and job definition");
  app.add_option("--instance-type", o.instance_type);
  app.add_option("--max-vcpus", o.max_vcpus, "maxvCpus of the environment (0: 2 x jobs)");
  app.add_option("--service-role", o.service_role);
  app.add_option("--subnet", o.subnet);
  app.add_option("--security-group", o.security_group);
  app.add_option("--instance-role", o.instance_role);
  app.add_option("--wait-seconds", o.wait_seconds,
                 "wait this long for every job to succeed (0: do not wait, describe a sample)");
  app.add_option("--sample-after", o.sample_after,
                 "with --wait-seconds 0: seconds before the sample");
  app.add_option("--poll-ms", o.poll_ms, "ListJobs polling interval while waiting");
  app.add_option("--warmup", o.warmup, "jobs submitted (one connection) before the timed ones");
  app.add_option("--paced-jobs", o.paced_jobs,
                 "then this many jobs one at a time (latency on idle capacity; 0: none)");
  app.add_option("--paced-ms", o.paced_ms, "interval between the paced submissions");
  app.add_option("--ce-state", o.ce_state,
                 "state of the compute environment made by --setup (DISABLED: jobs wait)");
  app.add_option("--windows", o.windows, "SubmitJob/s over these submissions, e.g. 0-2000");
  app.add_option("--array-size", o.array_size,
                 "submit one array job of this many children instead (waits for it)");
  CLI11_PARSE(app, argc, argv);
  const std::string queue = o.prefix + "-q";
  Json out = {{"endpoint", o.target.endpoint}, {"jobs", o.jobs}, {"clients", o.clients}};
  auto fail = [&](const std::string& what, const Status& s) {
    out["error"] = what + ": " + s.ToString();
    std::printf("%s\n", out.dump(-1, ' ', false, Json::error_handler_t::replace).c_str());
    return 1;
  };

  // The control connection: the typed client, without retries (a throttled
  // request is a measurement, not something to hide).
  Result<std::unique_ptr<lote::cli::ApiClient>> api = lote::bench::Connect(o.target);
  if (!api.ok()) return fail("connect", api.status());
  lote::cli::RetryPolicy no_retries;
  no_retries.attempts = 1;
  auto control = std::make_unique<BatchClient>(std::move(*api), no_retries);
  if (o.setup) {
    if (Status s = Setup(o, *control); !s.ok()) return fail("setup", s);
  }
  if (o.array_size > 0) return RunArray(o, *control, out);

  // Warm up (moto_server loads its Batch code on first use), then submit.
  for (int i = 0; i < o.warmup; ++i) {
    Json req = {{"jobName", "warmup" + std::to_string(i)},
                {"jobQueue", queue},
                {"jobDefinition", o.prefix + "-true"}};
    if (Result<Json> r = control->SubmitJob(req); !r.ok())
      return fail("warm-up SubmitJob", r.status());
  }
  std::vector<std::string> ids(static_cast<size_t>(o.jobs));
  std::vector<std::vector<double>> latencies(static_cast<size_t>(o.clients));
  std::vector<std::vector<double>> done_at(static_cast<size_t>(o.clients));  // ms since t0
  std::atomic<int> next{0};
  std::atomic<int64_t> errors{0};
  std::string first_error;
  std::mutex mu;
  const int64_t first_submit_ms = WallMs();
  const auto t0 = std::chrono::steady_clock::now();
  // The timed submissions: the raw transport, one keep-alive connection per client.
  Status run = lote::bench::RunOnClients(o.target, o.clients, [&](int t, lote::cli::ApiClient& c) {
    for (int i = next++; i < o.jobs; i = next++) {
      Json req = {{"jobName", "j" + std::to_string(i)},
                  {"jobQueue", queue},
                  {"jobDefinition", o.prefix + "-true"}};
      const auto start = std::chrono::steady_clock::now();
      Result<Json> r = c.Batch("POST", "/v1/submitjob", req);
      const double ms = Since(start);
      if (!r.ok()) {
        ++errors;
        std::lock_guard<std::mutex> lock(mu);
        if (first_error.empty()) first_error = r.status().ToString();
        continue;
      }
      ids[static_cast<size_t>(i)] = (*r).value("jobId", "");
      latencies[static_cast<size_t>(t)].push_back(ms);
      done_at[static_cast<size_t>(t)].push_back(Since(t0));
    }
  });
  const double submit_ms = Since(t0);
  if (!run.ok()) return fail("connect", run);
  std::vector<double> all;
  for (auto& l : latencies) all.insert(all.end(), l.begin(), l.end());
  lote::bench::LatencySummary submit = lote::bench::Summarize(all);
  out["submit"] = lote::bench::ToJson(submit);
  out["submit"]["errors"] = errors.load();
  out["submit"]["seconds"] = submit_ms / 1000;
  out["submit"]["rps"] = static_cast<double>(submit.count) / (submit_ms / 1000);
  if (!first_error.empty()) out["submit"]["first_error"] = first_error.substr(0, 300);
  if (!o.windows.empty()) {
    std::vector<double> done_ms;
    for (auto& d : done_at) done_ms.insert(done_ms.end(), d.begin(), d.end());
    std::sort(done_ms.begin(), done_ms.end());
    out["windows"] = WindowRates(o.windows, done_ms);
  }

  if (o.wait_seconds <= 0) {
    // What became of the jobs (moto_server: it tries Docker).
    std::this_thread::sleep_for(std::chrono::duration<double>(o.sample_after));
    std::vector<std::string> sample_ids;
    for (const std::string& id : ids) {
      if (!id.empty() && sample_ids.size() < 100) sample_ids.push_back(id);
    }
    Result<std::vector<Json>> d = control->DescribeJobs(sample_ids);
    if (!d.ok()) return fail("describe sample", d.status());
    std::map<std::string, int> statuses;
    std::string reason;
    for (const Json& j : *d) {
      statuses[j.value("status", "?")]++;
      if (reason.empty()) reason = j.value("statusReason", "");
    }
    out["sample"] = {{"after_s", o.sample_after},
                     {"described", sample_ids.size()},
                     {"statuses", statuses},
                     {"status_reason", reason}};
    std::printf("%s\n", out.dump(-1, ' ', false, Json::error_handler_t::replace).c_str());
    return errors.load() == 0 ? 0 : 1;
  }

  // Wait until every timed job succeeded (or one failed).
  Result<std::vector<Json>> done_or = WaitAllSucceeded(o, *control, ids, &out);
  if (!done_or.ok()) return fail("wait", done_or.status());
  const std::vector<Json>& done = *done_or;
  std::vector<double> to_running, to_succeeded, running_to_succeeded;
  int64_t last_stop = 0;
  int64_t first_created = std::numeric_limits<int64_t>::max();
  for (const Json& j : done) {
    const int64_t created = j.value("createdAt", int64_t{0});
    const int64_t started = j.value("startedAt", int64_t{0});
    const int64_t stopped = j.value("stoppedAt", int64_t{0});
    first_created = std::min(first_created, created);
    last_stop = std::max(last_stop, stopped);
    to_running.push_back(static_cast<double>(started - created));
    to_succeeded.push_back(static_cast<double>(stopped - created));
    running_to_succeeded.push_back(static_cast<double>(stopped - started));
  }
  const double wall_s = static_cast<double>(last_stop - first_submit_ms) / 1000;
  out["completed"] = {
      {"succeeded", done.size()},
      {"first_submit_to_last_stop_s", wall_s},
      {"jobs_per_s", static_cast<double>(done.size()) / wall_s},
      {"first_created_after_first_submit_ms", first_created - first_submit_ms},
      {"submit_to_running", lote::bench::ToJson(lote::bench::Summarize(to_running))},
      {"submit_to_succeeded", lote::bench::ToJson(lote::bench::Summarize(to_succeeded))},
      {"running_to_succeeded", lote::bench::ToJson(lote::bench::Summarize(running_to_succeeded))}};

  // Latency on idle capacity: jobs submitted one at a time, --paced-ms apart,
  // after the burst has drained (nothing else queued or running).
  if (o.paced_jobs > 0) {
    std::vector<std::string> paced;
    for (int i = 0; i < o.paced_jobs; ++i) {
      Json req = {{"jobName", "paced" + std::to_string(i)},
                  {"jobQueue", queue},
                  {"jobDefinition", o.prefix + "-true"}};
      Result<Json> r = control->SubmitJob(req);
      if (!r.ok()) return fail("paced SubmitJob", r.status());
      paced.push_back((*r).value("jobId", ""));
      std::this_thread::sleep_for(std::chrono::milliseconds(o.paced_ms));
    }
    Result<std::vector<Json>> paced_done = WaitAllSucceeded(o, *control, paced, &out);
    if (!paced_done.ok()) return fail("wait (paced)", paced_done.status());
    std::vector<double> p_running, p_succeeded;
    for (const Json& j : *paced_done) {
      p_running.push_back(
          static_cast<double>(j.value("startedAt", int64_t{0}) - j.value("createdAt", int64_t{0})));
      p_succeeded.push_back(
          static_cast<double>(j.value("stoppedAt", int64_t{0}) - j.value("createdAt", int64_t{0})));
    }
    out["paced"] = {
        {"jobs", o.paced_jobs},
        {"interval_ms", o.paced_ms},
        {"submit_to_running", lote::bench::ToJson(lote::bench::Summarize(p_running))},
        {"submit_to_succeeded", lote::bench::ToJson(lote::bench::Summarize(p_succeeded))}};
  }
  std::printf("%s\n", out.dump(-1, ' ', false, Json::error_handler_t::replace).c_str());
  return errors.load() == 0 ? 0 : 1;
}
