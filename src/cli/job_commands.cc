// `lote logs`, `lote wait` and `lote status`: client subcommands over the
// AWS Batch and CloudWatch Logs APIs (see job_watch.h).
//
// Exit codes: logs and wait exit 0 when the job SUCCEEDED (logs also when it
// has not ended and --follow is not given), 1 when it FAILED, 2 on an error
// (unknown job, bad option, server unreachable); wait exits 124 on --timeout.
#include <cctype>
#include <cstdio>
#include <exception>
#include <functional>
#include <memory>

#include "cli/batch_client.h"
#include "cli/durations.h"
#include "cli/job_watch.h"
#include "lote/registry.h"

namespace lote::cli {
namespace {

constexpr int kExitError = 2;

// Runs a command body; an exception (a server answer of an unexpected shape)
// becomes an error message and exit code instead of an abort.
void Guarded(const char* command, int error_code, const std::function<void()>& body) {
  try {
    body();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lote %s: unexpected answer from the server: %s\n", command, e.what());
    lote::SetExitCode(error_code);
  }
}
constexpr int kExitTimeout = 124;

void AddEndpointOption(CLI::App* sub, std::string* endpoint) {
  sub->add_option("--endpoint", *endpoint,
                  "Server URL; default $LOTE_ENDPOINT, $AWS_ENDPOINT_URL_BATCH or "
                  "http://127.0.0.1:7480");
}

std::unique_ptr<BatchClient> Connect(const char* command, const std::string& endpoint,
                                     int timeout_seconds = ClientOptions{}.timeout_seconds) {
  ClientOptions options;
  options.endpoint = endpoint;
  options.timeout_seconds = timeout_seconds;
  auto client = BatchClient::Connect(options);
  if (!client.ok()) {
    std::fprintf(stderr, "lote %s: %s\n", command, client.status().message().c_str());
    return nullptr;
  }
  return std::move(*client);
}

// "600" (seconds) or a duration such as "10m".
Result<int64_t> ParseTimeout(const std::string& text) {
  bool digits = !text.empty();
  for (char c : text) digits = digits && std::isdigit(static_cast<unsigned char>(c));
  if (digits) {
    if (text.size() > 12) return Status::InvalidArgument("--timeout " + text + " is too long");
    return std::stoll(text) * 1000;
  }
  Result<int64_t> d = ParseDuration(text);
  if (!d.ok()) return Status::InvalidArgument("--timeout: " + d.status().message());
  return d;
}

struct LogsArgs {
  std::string endpoint, job_id, since;
  int32_t node = -1, attempt = -1;
  bool follow = false;
};

lote::CommandRegistrar logs_command([](CLI::App& app) {
  auto args = std::make_shared<LogsArgs>();
  auto* sub = app.add_subcommand(
      "logs",
      "Print a job's output: every node's log stream merged by time ([node N] prefixes for "
      "multi-node jobs), every attempt; exit code 0 if the job SUCCEEDED, 1 if it FAILED");
  sub->add_option("JOB_ID", args->job_id, "The job (also JOBID#N for one node of a gang)")
      ->required();
  auto* node =
      sub->add_option("--node", args->node, "Only this node of a multi-node job (0-based)");
  auto* attempt = sub->add_option("--attempt", args->attempt, "Only this attempt (1 = the first)");
  sub->add_flag("-f,--follow", args->follow,
                "Keep printing new output until the job ends, across retries");
  sub->add_option("--since", args->since, "Only output newer than this: 30s, 10m, 2h, 1d");
  AddEndpointOption(sub, &args->endpoint);
  sub->callback([args, node, attempt] {
    Guarded("logs", kExitError, [&] {
      LogsOptions options;
      options.job_id = args->job_id;
      if (node->count() > 0) options.node = args->node;
      if (attempt->count() > 0) options.attempt = args->attempt;
      options.follow = args->follow;
      if (!args->since.empty()) {
        Result<int64_t> since = ParseDuration(args->since);
        if (!since.ok()) {
          std::fprintf(stderr, "lote logs: --since: %s\n", since.status().message().c_str());
          lote::SetExitCode(kExitError);
          return;
        }
        options.since_ms = *since;
      }
      std::unique_ptr<BatchClient> client = Connect("logs", args->endpoint);
      if (!client) {
        lote::SetExitCode(kExitError);
        return;
      }
      Sleeper real = RealSleeper();
      auto write = [](std::string_view text) { std::fwrite(text.data(), 1, text.size(), stdout); };
      Result<JobOutcome> outcome =
          RunLogs(client.get(), options, write, SystemClock::Default(), [&real](int64_t ms) {
            std::fflush(stdout);
            real(ms);
          });
      std::fflush(stdout);
      if (!outcome.ok()) {
        std::fprintf(stderr, "lote logs: %s\n", outcome.status().message().c_str());
        lote::SetExitCode(kExitError);
        return;
      }
      if (options.follow) std::fprintf(stderr, "%s\n", FormatOutcome(*outcome).c_str());
      lote::SetExitCode(outcome->exit_code);
    });
  });
});

struct WaitArgs {
  std::string endpoint, job_id, timeout;
};

lote::CommandRegistrar wait_command([](CLI::App& app) {
  auto args = std::make_shared<WaitArgs>();
  auto* sub = app.add_subcommand(
      "wait",
      "Block until a job ends and print its final status and reason; exit code 0 only if it "
      "SUCCEEDED (1 FAILED, 2 error, 124 timeout)");
  sub->add_option("JOB_ID", args->job_id, "The job")->required();
  sub->add_option("--timeout", args->timeout,
                  "Give up after this long: seconds, or 30s, 10m, 2h, 1d (default: no limit)");
  AddEndpointOption(sub, &args->endpoint);
  sub->callback([args] {
    Guarded("wait", kExitError, [&] {
      std::optional<int64_t> timeout;
      if (!args->timeout.empty()) {
        Result<int64_t> t = ParseTimeout(args->timeout);
        if (!t.ok()) {
          std::fprintf(stderr, "lote wait: %s\n", t.status().message().c_str());
          lote::SetExitCode(kExitError);
          return;
        }
        timeout = *t;
      }
      std::unique_ptr<BatchClient> client = Connect("wait", args->endpoint);
      if (!client) {
        lote::SetExitCode(kExitError);
        return;
      }
      Result<JobOutcome> outcome =
          WaitForJob(client.get(), args->job_id, timeout, SystemClock::Default(), RealSleeper());
      if (!outcome.ok()) {
        std::fprintf(stderr, "lote wait: %s\n", outcome.status().message().c_str());
        lote::SetExitCode(outcome.status().code() == StatusCode::kDeadlineExceeded ? kExitTimeout
                                                                                   : kExitError);
        return;
      }
      std::printf("%s\n", FormatOutcome(*outcome).c_str());
      lote::SetExitCode(outcome->exit_code);
    });
  });
});

struct StatusArgs {
  std::string endpoint, queue;
};

lote::CommandRegistrar status_command([](CLI::App& app) {
  auto args = std::make_shared<StatusArgs>();
  auto* sub = app.add_subcommand(
      "status",
      "A table of job queues and their active jobs with progress (step/total, loss, ETA) from "
      "LOTE_PROGRESS lines");
  sub->add_option("--queue", args->queue, "Only this job queue (name or ARN)");
  AddEndpointOption(sub, &args->endpoint);
  sub->callback([args] {
    Guarded("status", 1, [&] {
      std::unique_ptr<BatchClient> client = Connect("status", args->endpoint);
      if (!client) {
        lote::SetExitCode(1);
        return;
      }
      std::optional<std::string> queue;
      if (!args->queue.empty()) queue = args->queue;
      Result<std::string> table =
          RenderStatus(client.get(), queue, SystemClock::Default()->NowMillis());
      if (!table.ok()) {
        std::fprintf(stderr, "lote status: %s\n", table.status().message().c_str());
        lote::SetExitCode(1);
        return;
      }
      std::fwrite(table->data(), 1, table->size(), stdout);
    });
  });
});

struct JobsArgs {
  std::string endpoint, job_id;
  int32_t kill_node = -1, preempt_node = -1, stop_node = -1, slow_node = -1;
  int64_t at_step = 0, after_seconds = -1, cpu_percent = 0;
};

// The InjectFault request of `lote jobs inject`'s options; an error names the option.
Result<Json> InjectRequest(const JobsArgs& a) {
  Json r = Json::object();
  int kinds = 0;
  for (const auto& [node, action] : {std::pair{a.kill_node, "kill"},
                                     {a.preempt_node, "preempt"},
                                     {a.stop_node, "stop"},
                                     {a.slow_node, "slow"}}) {
    if (node < 0) continue;
    ++kinds;
    r["action"] = action;
    r["nodeIndex"] = node;
  }
  if (kinds != 1)
    return Status::InvalidArgument(
        "give exactly one of --kill-node, --preempt-node, --stop-node, --slow-node");
  if (a.cpu_percent != 0 && a.slow_node < 0)
    return Status::InvalidArgument("--cpu-percent is for --slow-node");
  if (a.cpu_percent != 0) r["cpuPercent"] = a.cpu_percent;
  if ((a.at_step > 0) == (a.after_seconds >= 0))
    return Status::InvalidArgument("give exactly one of --at-step and --after");
  if (a.at_step > 0) r["atStep"] = a.at_step;
  if (a.after_seconds >= 0) r["afterSeconds"] = a.after_seconds;
  return r;
}

void InjectCommand(CLI::App* jobs) {
  auto args = std::make_shared<JobsArgs>();
  auto* sub = jobs->add_subcommand(
      "inject",
      "Inject a fault into a RUNNING job, once (lote's InjectFault; docs/faults.md): kill "
      "(SIGKILL), preempt (SIGTERM with the job's grace period, as a spot reclaim) or stop "
      "(SIGSTOP: a hang) or slow (SIGSTOP and SIGCONT in turns: a CPU-throttled node) one node, at "
      "a training step (the main node's LOTE_PROGRESS) or after "
      "some seconds from now. The attempt's reason then says it was injected.");
  sub->add_option("JOB_ID", args->job_id, "The job")->required();
  sub->add_option("--kill-node", args->kill_node, "SIGKILL this node's processes (0-based)");
  sub->add_option("--preempt-node", args->preempt_node,
                  "SIGTERM this node's processes, SIGKILL after the grace period");
  sub->add_option("--stop-node", args->stop_node, "SIGSTOP this node's processes");
  sub->add_option("--slow-node", args->slow_node,
                  "Slow this node: its processes run --cpu-percent of each 100 ms");
  sub->add_option("--cpu-percent", args->cpu_percent,
                  "With --slow-node: the share of its time the node keeps (1-99, default 50)");
  sub->add_option("--at-step", args->at_step, "When the job's progress reaches this step");
  sub->add_option("--after", args->after_seconds, "This many seconds from now (0: at once)");
  sub->footer(
      "Example: lote jobs inject JOB_ID --kill-node 1 --at-step 50\n"
      "Faults at submission: the lote:inject... parameters (docs/faults.md).");
  AddEndpointOption(sub, &args->endpoint);
  sub->callback([args] {
    Guarded("jobs inject", kExitError, [&] {
      Result<Json> request = InjectRequest(*args);
      if (!request.ok()) {
        std::fprintf(stderr, "lote jobs inject: %s\n", request.status().message().c_str());
        return lote::SetExitCode(kExitError);
      }
      std::unique_ptr<BatchClient> client = Connect("jobs inject", args->endpoint);
      if (!client) return lote::SetExitCode(kExitError);
      Result<Json> r = client->InjectFault(args->job_id, *request);
      if (!r.ok()) {
        std::fprintf(stderr, "lote jobs inject: %s\n", r.status().message().c_str());
        return lote::SetExitCode(kExitError);
      }
      std::printf("job %s attempt %d: %s (requested)\n", r->value("jobId", "").c_str(),
                  r->value("attempt", 0), r->value("fault", "").c_str());
    });
  });
}

void DumpCommand(CLI::App* jobs) {
  auto args = std::make_shared<JobsArgs>();
  auto* sub = jobs->add_subcommand(
      "dump",
      "Stack dumps of every process of every node of a RUNNING job (all threads, with gdb or "
      "eu-stack), stored as each node's log stream <stream>/dump; prints where and which node "
      "stands out (the straggler). The job goes on running.");
  sub->add_option("JOB_ID", args->job_id, "The job")->required();
  AddEndpointOption(sub, &args->endpoint);
  sub->callback([args] {
    Guarded("jobs dump", kExitError, [&] {
      // gdb on every process of every node: seconds each (up to 60 s per
      // process, and under Slurm 15 s more for a runner's answer).
      std::unique_ptr<BatchClient> client = Connect("jobs dump", args->endpoint, 300);
      if (!client) return lote::SetExitCode(kExitError);
      Result<Json> r = client->DumpJob(args->job_id);
      if (!r.ok()) {
        std::fprintf(stderr, "lote jobs dump: %s\n", r.status().message().c_str());
        return lote::SetExitCode(kExitError);
      }
      for (const Json& n : r->value("nodes", Json::array()))
        std::printf("node %d%s: /aws/batch/job %s\n", n.value("nodeIndex", 0),
                    n.value("stopped", false) ? " (stopped)" : "",
                    n.value("dumpLogStreamName", "").c_str());
      std::printf("%s\n", r->value("summary", "").c_str());
    });
  });
}

lote::CommandRegistrar jobs_command([](CLI::App& app) {
  auto* jobs = app.add_subcommand(
      "jobs", "Fault injection and hang evidence for running jobs: inject, dump (docs/faults.md)");
  jobs->require_subcommand(1);
  InjectCommand(jobs);
  DumpCommand(jobs);
});

}  // namespace
}  // namespace lote::cli
