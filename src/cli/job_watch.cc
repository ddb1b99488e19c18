#include "cli/job_watch.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <thread>

#include "cli/status_table.h"

namespace lote::cli {
namespace {

JobOutcome OutcomeOf(const Json& job) {
  JobOutcome o;
  o.job_id = job.value("jobId", "");
  o.name = job.value("jobName", "");
  o.status = job.value("status", "");
  o.reason = job.value("statusReason", "");
  o.failure_category = job.value("failureCategory", "");
  o.exit_code = ExitCodeForStatus(o.status);
  return o;
}

bool IsFinal(const std::string& status) { return status == "SUCCEEDED" || status == "FAILED"; }

}  // namespace

Sleeper RealSleeper() {
  return [](int64_t ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); };
}

Result<JobLogPlan> ReadJobLogPlan(BatchClient* client, const std::string& job_id) {
  ASSIGN_OR_RETURN(Json job, client->DescribeJob(job_id));
  std::vector<Json> views;
  const Json nodes = job.value("nodeProperties", Json::object());
  if (nodes.is_object() && nodes.contains("numNodes") && !job.contains("nodeDetails")) {
    int64_t n = nodes.value("numNodes", int64_t{0});
    std::vector<std::string> ids;
    for (int64_t i = 0; i < n; ++i) ids.push_back(job_id + "#" + std::to_string(i));
    ASSIGN_OR_RETURN(views, client->DescribeJobs(ids));
  }
  return PlanJobLogs(job, views);
}

StreamPages::StreamPages(BatchClient* client, std::string stream,
                         std::optional<int64_t> start_time_ms)
    : client_(client), stream_(std::move(stream)), start_time_ms_(start_time_ms) {}

Result<std::vector<LogLine>> StreamPages::NextPage() {
  std::vector<LogLine> lines;
  // A page with no events whose token moved skipped events outside the time
  // range: keep reading until events come or the token stands still.
  for (;;) {
    Json request = {{"logGroupName", std::string(kJobLogGroup)},
                    {"logStreamName", stream_},
                    {"startFromHead", true}};
    if (token_) request["nextToken"] = *token_;
    if (start_time_ms_) request["startTime"] = *start_time_ms_;
    Result<LogEventsPage> page = client_->GetLogEvents(request);
    if (!page.ok()) {
      if (page.status().IsNotFound()) return lines;  // not created yet: no output so far
      return page.status().WithContext("GetLogEvents on stream " + stream_);
    }
    const std::string& next = page->next_forward_token;
    lines.reserve(lines.size() + page->events.size());
    for (Json& e : page->events) {
      if (!e.is_object()) continue;
      LogLine line;
      line.timestamp_ms = e.value("timestamp", int64_t{0});
      auto m = e.find("message");
      if (m != e.end() && m->is_string()) line.message = std::move(m->get_ref<std::string&>());
      lines.push_back(std::move(line));
    }
    bool stood_still = next.empty() || (token_ && next == *token_);
    if (!next.empty()) token_ = next;
    if (!lines.empty() || stood_still) return lines;
  }
}

Result<JobOutcome> RunLogs(BatchClient* client, const LogsOptions& options,
                           const std::function<void(std::string_view)>& write, const Clock* clock,
                           const Sleeper& sleep) {
  ASSIGN_OR_RETURN(JobLogPlan plan, ReadJobLogPlan(client, options.job_id));
  {
    JobLogPlan check = plan;
    RETURN_IF_ERROR(FilterPlan(&check, options.node, options.attempt));
    int32_t known = plan.attempts.empty() ? 0 : plan.attempts.back().number;
    if (!options.follow && options.attempt && *options.attempt > known) {
      return Status::InvalidArgument(
          "job " + plan.job_id + " has " + std::to_string(known) + " attempt" +
          (known == 1 ? "" : "s") + " so far" +
          (known > 0 ? ": use --attempt 1 to " + std::to_string(known) : "") +
          " (or --follow to wait for it)");
    }
  }
  std::optional<int64_t> start;
  if (options.since_ms) start = std::max<int64_t>(0, clock->NowMillis() - *options.since_ms);

  LogPrinter printer(plan.multi_node, false, write);
  LogMerger merger;
  std::set<std::string> added;
  int rounds_after_final = 0;
  for (;;) {
    JobLogPlan shown = plan;
    RETURN_IF_ERROR(FilterPlan(&shown, options.node, options.attempt));
    printer.set_mark_attempts(plan.max_attempts > 1 || plan.attempts.size() > 1);
    for (const AttemptRef& a : shown.attempts) printer.KnowAttempt(a);
    for (const StreamRef& s : shown.streams) {
      if (added.insert(s.stream).second) {
        merger.Add(s.attempt, s.node, std::make_unique<StreamPages>(client, s.stream, start));
      }
    }
    ASSIGN_OR_RETURN(uint64_t printed,
                     merger.Drain([&](int32_t attempt, int32_t node, const LogLine& line) {
                       printer.Line(attempt, node, line);
                     }));
    printer.AnnounceAttempts();
    // Once the job has ended, stop when a round read to the end of every
    // stream and found nothing (output stored just after the end is picked
    // up); without --follow, only a job that ended moments ago is re-read.
    if (plan.Final() && plan.logs_complete) {
      // The server said every stream was complete before this round read
      // them to the end; while it is not, keep reading (bounded).
      if (*plan.logs_complete) break;
      if (clock->NowMillis() - plan.stopped_at_ms > kMaxStoreLagMs) break;
    } else if (plan.Final()) {
      const bool recent = clock->NowMillis() - plan.stopped_at_ms < kSettleMs;
      if (!options.follow && !recent) break;
      if ((printed == 0 && rounds_after_final > 0) || rounds_after_final > 50) break;
      ++rounds_after_final;
    } else if (!options.follow) {
      break;
    }
    sleep(printed == 0 ? options.poll_ms : std::min<int64_t>(options.poll_ms, 20));
    ASSIGN_OR_RETURN(plan, ReadJobLogPlan(client, options.job_id));
  }
  JobOutcome outcome;
  outcome.job_id = plan.job_id;
  outcome.name = plan.job_name;
  outcome.status = plan.status;
  outcome.reason = plan.status_reason;
  outcome.failure_category = plan.failure_category;
  outcome.exit_code = ExitCodeForStatus(plan.status);
  return outcome;
}

Result<JobOutcome> WaitForJob(BatchClient* client, const std::string& job_id,
                              std::optional<int64_t> timeout_ms, const Clock* clock,
                              const Sleeper& sleep) {
  const int64_t deadline = timeout_ms ? clock->NowMillis() + *timeout_ms : INT64_MAX;
  int64_t delay = 50;
  for (;;) {
    ASSIGN_OR_RETURN(Json job, client->DescribeJob(job_id));
    JobOutcome outcome = OutcomeOf(job);
    if (IsFinal(outcome.status)) return outcome;
    int64_t now = clock->NowMillis();
    if (now >= deadline) {
      return Status::DeadlineExceeded("job " + job_id + " is still " + outcome.status +
                                      " after the --timeout of " +
                                      std::to_string(*timeout_ms / 1000) + " s");
    }
    sleep(std::min(delay, deadline - now));
    delay = std::min<int64_t>(delay * 2, 1000);
  }
}

std::string FormatOutcome(const JobOutcome& o) {
  std::string s = "job " + o.job_id;
  if (!o.name.empty()) s += " (" + o.name + ")";
  s += " " + o.status;
  if (o.status == "FAILED" && !o.failure_category.empty()) s += " [" + o.failure_category + "]";
  if (!o.reason.empty()) s += ": " + o.reason;
  return s;
}

Result<std::string> RenderStatus(BatchClient* client, const std::optional<std::string>& queue,
                                 int64_t now_ms) {
  std::vector<std::string> queues;
  std::vector<std::string> names;
  if (queue) names.push_back(*queue);
  ASSIGN_OR_RETURN(std::vector<Json> described_queues, client->DescribeJobQueues(names));
  for (const Json& q : described_queues) queues.push_back(q.value("jobQueueName", ""));
  if (queue && queues.empty()) {
    return Status::NotFound("no job queue '" + *queue + "' (`lote queues` lists them)");
  }
  // Most interesting first.
  static const char* const kActive[] = {"RUNNING", "STARTING", "RUNNABLE", "PENDING", "SUBMITTED"};
  std::vector<JobRow> rows;
  for (const std::string& q : queues) {
    std::vector<Json> summaries;
    for (const char* status : kActive) {
      ASSIGN_OR_RETURN(std::vector<Json> found,
                       client->ListJobs({{"jobQueue", q}, {"jobStatus", status}}));
      std::stable_sort(found.begin(), found.end(), [](const Json& a, const Json& b) {
        return a.value("createdAt", int64_t{0}) < b.value("createdAt", int64_t{0});
      });
      for (Json& j : found) summaries.push_back(std::move(j));
    }
    std::vector<std::string> ids;
    for (const Json& s : summaries) ids.push_back(s.value("jobId", ""));
    ASSIGN_OR_RETURN(std::vector<Json> described, client->DescribeJobs(ids));
    std::map<std::string, Json> by_id;
    for (Json& j : described) {
      // Not in one expression: Json's operator= takes its argument by value,
      // and that move happens before the key is read.
      std::string id = j.value("jobId", "");
      by_id[id] = std::move(j);
    }
    for (const Json& s : summaries) {
      auto it = by_id.find(s.value("jobId", ""));
      rows.push_back(JobRowFromJson(it != by_id.end() ? it->second : s, q, now_ms));
    }
  }
  return RenderStatusTable(queues, rows);
}

}  // namespace lote::cli
