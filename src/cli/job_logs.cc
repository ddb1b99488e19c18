#include "cli/job_logs.h"

#include <algorithm>
#include <queue>
#include <set>
#include <tuple>

#include "cli/durations.h"
#include "common/clock.h"

namespace lote::cli {
namespace {

std::string StreamOf(const Json& entry) {
  if (!entry.is_object()) return "";
  auto c = entry.find("container");
  if (c == entry.end() || !c->is_object()) return "";
  auto s = c->find("logStreamName");
  return s != c->end() && s->is_string() ? s->get<std::string>() : "";
}

int64_t IntOr(const Json& j, const char* key, int64_t fallback) {
  if (!j.is_object()) return fallback;
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<int64_t>() : fallback;
}

// The streams of one DescribeJobs entry: each finished attempt's, then the
// container's when no finished attempt has it (the attempt in progress).
void CollectStreams(const Json& entry, int32_t node, std::vector<StreamRef>* out) {
  std::set<std::string> seen;
  const Json attempts = entry.value("attempts", Json::array());
  int32_t count = 0;
  if (attempts.is_array()) {
    for (const Json& a : attempts) {
      ++count;
      std::string name = StreamOf(a);
      if (name.empty()) continue;
      seen.insert(name);
      out->push_back({count, node, name});
    }
  }
  std::string current = StreamOf(entry);
  if (!current.empty() && !seen.count(current)) out->push_back({count + 1, node, current});
}

}  // namespace

Result<JobLogPlan> PlanJobLogs(const Json& job, const std::vector<Json>& node_views) {
  if (!job.is_object() || !job.contains("jobId")) {
    return Status::InvalidArgument("DescribeJobs returned a job without a jobId");
  }
  JobLogPlan plan;
  plan.job_id = job.value("jobId", "");
  plan.job_name = job.value("jobName", "");
  plan.status = job.value("status", "");
  plan.status_reason = job.value("statusReason", "");
  plan.failure_category = job.value("failureCategory", "");
  plan.stopped_at_ms = IntOr(job, "stoppedAt", 0);
  if (job.contains("logsComplete") && job["logsComplete"].is_boolean())
    plan.logs_complete = job["logsComplete"].get<bool>();
  const Json retry = job.value("retryStrategy", Json::object());
  plan.max_attempts = static_cast<int32_t>(std::max<int64_t>(1, IntOr(retry, "attempts", 1)));

  const Json array = job.value("arrayProperties", Json::object());
  if (array.is_object() && array.contains("size")) {
    int64_t size = IntOr(array, "size", 0);
    return Status::InvalidArgument(
        "job " + plan.job_id + " is an array job: its output is in its " + std::to_string(size) +
        " child jobs' streams; run lote logs " + plan.job_id + ":INDEX (INDEX 0 to " +
        std::to_string(size - 1) + ")");
  }

  const Json nodes = job.value("nodeProperties", Json::object());
  plan.multi_node = nodes.is_object() && nodes.contains("numNodes") && !job.contains("nodeDetails");
  if (plan.multi_node) {
    plan.num_nodes = static_cast<int32_t>(IntOr(nodes, "numNodes", 1));
    for (const Json& view : node_views) {
      const Json details = view.value("nodeDetails", Json::object());
      int64_t index = IntOr(details, "nodeIndex", -1);
      if (index < 0 || index >= plan.num_nodes) continue;
      CollectStreams(view, static_cast<int32_t>(index), &plan.streams);
    }
  } else {
    CollectStreams(job, 0, &plan.streams);
  }
  std::sort(plan.streams.begin(), plan.streams.end(), [](const StreamRef& a, const StreamRef& b) {
    return std::tie(a.attempt, a.node) < std::tie(b.attempt, b.node);
  });

  // Start times: finished attempts say theirs; the attempt in progress is the
  // job's startedAt when that is later than the last finished attempt.
  const Json finished = job.value("attempts", Json::array());
  const int32_t finished_count = finished.is_array() ? static_cast<int32_t>(finished.size()) : 0;
  int64_t last_stop = finished_count > 0 ? IntOr(finished.back(), "stoppedAt", 0) : 0;
  for (const StreamRef& s : plan.streams) {
    if (!plan.attempts.empty() && plan.attempts.back().number == s.attempt) continue;
    AttemptRef a{s.attempt, 0};
    if (s.attempt <= finished_count) {
      a.started_at_ms = IntOr(finished[s.attempt - 1], "startedAt", 0);
    } else {
      int64_t started = IntOr(job, "startedAt", 0);
      if (started > last_stop) a.started_at_ms = started;
    }
    plan.attempts.push_back(a);
  }
  return plan;
}

Status FilterPlan(JobLogPlan* plan, std::optional<int32_t> node, std::optional<int32_t> attempt) {
  if (node) {
    if (!plan->multi_node && *node != 0) {
      return Status::InvalidArgument("job " + plan->job_id +
                                     " is a single-node job: --node applies to multi-node jobs "
                                     "(leave it out, or use --node 0)");
    }
    if (*node < 0 || *node >= plan->num_nodes) {
      return Status::InvalidArgument("job " + plan->job_id + " has " +
                                     std::to_string(plan->num_nodes) + " nodes: use --node 0 to " +
                                     std::to_string(plan->num_nodes - 1));
    }
  }
  if (attempt && *attempt < 1) {
    return Status::InvalidArgument("--attempt counts from 1 (the first attempt is --attempt 1)");
  }
  std::erase_if(plan->streams, [&](const StreamRef& s) {
    return (node && s.node != *node) || (attempt && s.attempt != *attempt);
  });
  std::erase_if(plan->attempts, [&](const AttemptRef& a) {
    return std::none_of(plan->streams.begin(), plan->streams.end(),
                        [&](const StreamRef& s) { return s.attempt == a.number; });
  });
  return Status::Ok();
}

int ExitCodeForStatus(std::string_view status) { return status == "FAILED" ? 1 : 0; }

void LogMerger::Add(int32_t attempt, int32_t node, std::unique_ptr<PageSource> source) {
  Input in;
  in.attempt = attempt;
  in.node = node;
  in.source = std::move(source);
  inputs_.push_back(std::move(in));
}

Result<uint64_t> LogMerger::Drain(const Emit& emit) {
  // A min-heap of inputs by their next line's (attempt, timestamp, node).
  auto key = [this](size_t i) {
    const Input& in = inputs_[i];
    return std::make_tuple(in.attempt, in.page[in.next].timestamp_ms, in.node, i);
  };
  auto later = [&](size_t a, size_t b) { return key(a) > key(b); };
  std::priority_queue<size_t, std::vector<size_t>, decltype(later)> heap(later);
  // Makes sure input i has a line in hand; false when its stream has nothing more now.
  auto refill = [this](size_t i) -> Result<bool> {
    Input& in = inputs_[i];
    if (in.next < in.page.size()) return true;
    ASSIGN_OR_RETURN(in.page, in.source->NextPage());
    in.next = 0;
    return !in.page.empty();
  };
  for (size_t i = 0; i < inputs_.size(); ++i) {
    ASSIGN_OR_RETURN(bool has, refill(i));
    if (has) heap.push(i);
  }
  uint64_t emitted = 0;
  while (!heap.empty()) {
    size_t i = heap.top();
    heap.pop();
    Input& in = inputs_[i];
    emit(in.attempt, in.node, in.page[in.next]);
    ++in.next;
    ++emitted;
    ASSIGN_OR_RETURN(bool has, refill(i));
    if (has) heap.push(i);
  }
  return emitted;
}

std::string AttemptHeader(const AttemptRef& attempt) {
  std::string when = attempt.started_at_ms > 0 ? "started " + Iso8601Utc(attempt.started_at_ms)
                                               : "not started yet";
  return "--- attempt " + std::to_string(attempt.number) + " (" + when + ") ---\n";
}

std::string FormatLogLine(bool node_prefix, int32_t node, std::string_view message) {
  std::string out;
  out.reserve(message.size() + 16);
  if (node_prefix) out += "[node " + std::to_string(node) + "] ";
  out += message;
  out += '\n';
  return out;
}

LogPrinter::LogPrinter(bool node_prefix, bool mark_attempts, Write write)
    : node_prefix_(node_prefix), mark_attempts_(mark_attempts), write_(std::move(write)) {}

void LogPrinter::KnowAttempt(const AttemptRef& attempt) {
  auto it = std::lower_bound(known_.begin(), known_.end(), attempt.number,
                             [](const AttemptRef& a, int32_t number) { return a.number < number; });
  if (it != known_.end() && it->number == attempt.number) {
    if (attempt.started_at_ms > 0) it->started_at_ms = attempt.started_at_ms;
  } else {
    known_.insert(it, attempt);
  }
}

void LogPrinter::AnnounceUpTo(int32_t attempt) {
  if (!mark_attempts_) return;
  for (const AttemptRef& a : known_) {
    if (a.number > announced_ && a.number <= attempt) {
      write_(AttemptHeader(a));
      announced_ = a.number;
    }
  }
  // An attempt with output but never made known still gets its header.
  if (attempt > announced_) {
    write_(AttemptHeader(AttemptRef{attempt, 0}));
    announced_ = attempt;
  }
}

void LogPrinter::Line(int32_t attempt, int32_t node, const LogLine& line) {
  if (attempt > announced_) AnnounceUpTo(attempt);
  write_(FormatLogLine(node_prefix_, node, line.message));
}

void LogPrinter::AnnounceAttempts() {
  if (!known_.empty()) AnnounceUpTo(known_.back().number);
}

}  // namespace lote::cli
