#include "control/job_state.h"

#include <algorithm>
#include <string>
#include <utility>

#include "exec/node_fault.h"

namespace lote::control {
namespace {

constexpr std::pair<JobEventType, std::string_view> kEventNames[] = {
    {JobEventType::kSubmitted, "Submitted"},
    {JobEventType::kDependenciesPending, "DependenciesPending"},
    {JobEventType::kDependenciesResolved, "DependenciesResolved"},
    {JobEventType::kDependencyFailed, "DependencyFailed"},
    {JobEventType::kStatusReason, "StatusReason"},
    {JobEventType::kScheduled, "Scheduled"},
    {JobEventType::kNodeStarted, "NodeStarted"},
    {JobEventType::kNodeExited, "NodeExited"},
    {JobEventType::kAttemptFailed, "AttemptFailed"},
    {JobEventType::kTimedOut, "TimedOut"},
    {JobEventType::kCancelRequested, "CancelRequested"},
    {JobEventType::kTerminateRequested, "TerminateRequested"},
    {JobEventType::kProgress, "Progress"},
    {JobEventType::kArrayChildrenUpdated, "ArrayChildrenUpdated"},
    {JobEventType::kTagsChanged, "TagsChanged"},
    {JobEventType::kLaunched, "Launched"},
    {JobEventType::kBackendPending, "BackendPending"},
    {JobEventType::kNodePulled, "NodePulled"},
};

Status NotApplicable(const Job& job, const JobEvent& event, std::string_view why = "") {
  std::string message = std::string(JobEventTypeName(event.type)) + " does not apply to job " +
                        job.id + " in status " + std::string(JobStatusName(job.status));
  if (!why.empty()) message += ": " + std::string(why);
  return Status::FailedPrecondition(message);
}

bool IsPreStart(JobStatus s) {
  return s == JobStatus::kSubmitted || s == JobStatus::kPending || s == JobStatus::kRunnable;
}

bool IsActive(JobStatus s) { return s == JobStatus::kStarting || s == JobStatus::kRunning; }

void Finish(Job& job, JobStatus status, int64_t at, std::string reason) {
  job.status = status;
  job.stopped_at = at;
  job.status_reason = std::move(reason);
}

// True when a node-level event refers to the open attempt of `job`.
bool IsCurrentAttempt(const Job& job, int32_t attempt) {
  return IsActive(job.status) && attempt == static_cast<int32_t>(job.attempts.size());
}

// True when `attempt` is the job's last one, open or closed.
bool IsLastAttempt(const Job& job, int32_t attempt) {
  return attempt >= 1 && attempt == static_cast<int32_t>(job.attempts.size());
}

// Ends a node still open when its gang ends: never before it started (a
// node's start and the gang's end are timestamps of different processes).
void StopNode(NodeAttempt& n, JobStatus status, int64_t at, std::string reason) {
  n.status = status;
  n.stopped_at = std::max(at, n.started_at);
  n.reason = std::move(reason);
}

std::string WithCategory(FailureCategory category, const std::string& text) {
  return std::string(FailureCategoryName(category)) + ": " + text;
}

// Closes the open attempt as failed and decides: retry (RUNNABLE) or FAILED.
Job FailAttempt(Job job, FailureCategory category, const std::string& status_reason,
                int32_t failed_node, std::optional<int32_t> exit_code, int64_t at) {
  Attempt& a = job.attempts.back();
  a.stopped_at = at;
  a.status_reason = status_reason;
  a.reason = WithCategory(category, status_reason);
  a.failure_category = category;
  a.failed_node = failed_node;
  // A failed launch (no node ever ran): one reason, the attempt's, on every node.
  bool launched = false;
  for (const NodeAttempt& n : a.nodes) launched |= n.started_at > 0;
  for (NodeAttempt& n : a.nodes) {
    if (IsFinal(n.status)) continue;
    if (!launched) {
      if (n.node_index == failed_node) n.exit_code = exit_code;
      StopNode(n, JobStatus::kFailed, at, a.reason);
    } else if (n.node_index == failed_node) {
      n.exit_code = exit_code;
      StopNode(n, JobStatus::kFailed, at, a.reason);
    } else if (failed_node >= 0) {
      StopNode(n, JobStatus::kFailed, at,
               "stopped: node " + std::to_string(failed_node) + " failed the attempt (" + a.reason +
                   ")");
    } else {
      StopNode(n, JobStatus::kFailed, at, a.reason);
    }
  }
  job.failure_category = category;
  const int32_t number = static_cast<int32_t>(job.attempts.size());
  const int32_t made = AttemptsConsumed(job);
  AttemptOutcome outcome{a.status_reason, a.reason, exit_code};
  if (ShouldRetry(job.retry_strategy, made, category, outcome)) {
    job.status = JobStatus::kRunnable;
    job.status_reason = ConsumesAttempt(category)
                            ? "attempt " + std::to_string(made) + " of " +
                                  std::to_string(job.retry_strategy.attempts) + " failed (" +
                                  a.reason + "); retrying"
                            : "attempt " + std::to_string(number) + " did not count (" + a.reason +
                                  "); running it again";
    return job;
  }
  Finish(job, JobStatus::kFailed, at, status_reason);
  return job;
}

Result<Job> ApplySubmitted(const Job& job, const JobEvent& e) {
  if (!job.id.empty()) return NotApplicable(job, e, "the job was already submitted");
  Result<Job> submitted = JobFromJson(e.job);
  if (!submitted.ok())
    return Status::InvalidArgument("Submitted event: " + submitted.status().message());
  if (submitted->status != JobStatus::kSubmitted) {
    return Status::InvalidArgument("Submitted event: the job must be SUBMITTED");
  }
  return submitted;
}

Result<Job> ApplyScheduled(Job job, const JobEvent& e) {
  if (job.IsArrayParent())
    return NotApplicable(job, e, "an array parent never runs; schedule its children");
  if (job.status != JobStatus::kRunnable)
    return NotApplicable(job, e, "only RUNNABLE jobs are placed");
  const int32_t n = job.NumNodes();
  if (static_cast<int32_t>(e.nodes.size()) != n) {
    return NotApplicable(job, e,
                         "the placement has " + std::to_string(e.nodes.size()) +
                             " nodes, the job " + std::to_string(n));
  }
  Attempt a;
  a.compute_environment = e.compute_environment;
  a.scheduled_at = e.at_ms;
  for (int32_t i = 0; i < n; ++i) {
    const ScheduledNode& s = e.nodes[static_cast<size_t>(i)];
    if (s.node_index != i)
      return NotApplicable(job, e, "placement nodes must be in node index order 0..n-1");
    NodeAttempt node;
    node.node_index = i;
    node.status = JobStatus::kStarting;
    node.instance_id = s.instance_id;
    node.private_ipv4 = s.private_ipv4;
    node.devices = s.devices;
    a.nodes.push_back(std::move(node));
  }
  job.attempts.push_back(std::move(a));
  job.status = JobStatus::kStarting;
  job.status_reason.clear();
  return job;
}

Result<Job> ApplyNodeStarted(Job job, const JobEvent& e) {
  if (!IsLastAttempt(job, e.attempt)) return job;  // stale
  Attempt& a = job.attempts.back();
  NodeAttempt* node = a.MutableNode(e.node_index);
  if (node == nullptr) return NotApplicable(job, e, "no node " + std::to_string(e.node_index));
  if (IsFinal(node->status) && node->started_at == 0) {
    // It started as its gang ended (reported after): when, never after its end.
    node->started_at = std::min(e.at_ms, node->stopped_at);
    return job;
  }
  if (!IsCurrentAttempt(job, e.attempt)) return job;     // stale
  if (node->status != JobStatus::kStarting) return job;  // duplicate
  node->status = JobStatus::kRunning;
  node->started_at = e.at_ms;
  node->task_arn = e.task_arn;
  node->log_stream_name = e.log_stream_name;
  node->notices = e.notices;
  if (!e.devices.empty()) node->devices = e.devices;  // the backend's scheduler chose them
  a.pending_reason.clear();
  if (e.node_index == job.MainNode()) {
    a.started_at = e.at_ms;
    job.status = JobStatus::kRunning;
    job.started_at = e.at_ms;
  }
  return job;
}

Result<Job> ApplyNodeExited(Job job, const JobEvent& e) {
  if (!IsLastAttempt(job, e.attempt)) return job;  // stale
  Attempt& a = job.attempts.back();
  NodeAttempt* node = a.MutableNode(e.node_index);
  if (node == nullptr) return NotApplicable(job, e, "no node " + std::to_string(e.node_index));
  const int32_t code = e.signal > 0 ? 128 + e.signal : e.exit_code;
  if (IsFinal(node->status)) {
    // Stopped with its gang, its own end reported after: its exit code is
    // known now (128 + the signal that stopped it).
    if (!node->exit_code && node->started_at > 0) node->exit_code = code;
    // A fault injected before it was stopped (a slow node whose main node
    // finished first) stays with it as a notice, as for a node that survived one.
    if (e.reason.rfind(exec::kInjectedFaultPrefix, 0) == 0 &&
        std::find(node->notices.begin(), node->notices.end(), e.reason) == node->notices.end())
      node->notices.push_back(e.reason);
    return job;
  }
  if (!IsCurrentAttempt(job, e.attempt)) return job;  // stale
  if (code != 0) {
    const FailureCategory category = CategoryOfExit(code, e.signal > 0);
    return FailAttempt(std::move(job), category,
                       e.reason.empty() ? std::string(kEssentialContainerExited) : e.reason,
                       e.node_index, code, e.at_ms);
  }
  node->status = JobStatus::kSucceeded;
  node->exit_code = 0;
  node->stopped_at = e.at_ms;
  node->reason = kEssentialContainerExited;
  // A fault the node survived (an injected upload failure): its sentence
  // stays with the node as a notice, so DescribeJobs shows it was injected.
  if (!e.reason.empty() &&
      std::find(node->notices.begin(), node->notices.end(), e.reason) == node->notices.end())
    node->notices.push_back(e.reason);
  if (e.node_index != job.MainNode()) return job;  // a child node finished early: the gang goes on
  // The main node decides: the job succeeded; the remaining nodes are stopped.
  a.stopped_at = e.at_ms;
  a.status_reason = kEssentialContainerExited;
  a.reason = kEssentialContainerExited;
  for (NodeAttempt& n : a.nodes) {
    if (IsFinal(n.status)) continue;
    StopNode(n, JobStatus::kSucceeded, e.at_ms, "stopped: the main node exited");
  }
  if (job.started_at == 0) job.started_at = e.at_ms;
  Finish(job, JobStatus::kSucceeded, e.at_ms, kEssentialContainerExited);
  return job;
}

Result<Job> ApplyAttemptFailed(Job job, const JobEvent& e) {
  if (e.category == FailureCategory::kNone)
    return NotApplicable(job, e, "a failure needs a category");
  if (e.attempt == 0 && IsPreStart(job.status) && !job.IsArrayParent()) {
    // The job fails before any attempt (e.g. CAPACITY: it can never fit).
    job.failure_category = e.category;
    Finish(job, JobStatus::kFailed, e.at_ms, WithCategory(e.category, e.reason));
    return job;
  }
  if (e.attempt == 0 && IsActive(job.status)) {
    return FailAttempt(std::move(job), e.category, e.reason, e.node_index, std::nullopt, e.at_ms);
  }
  if (!IsCurrentAttempt(job, e.attempt)) return job;  // stale or finished
  return FailAttempt(std::move(job), e.category, e.reason, e.node_index, std::nullopt, e.at_ms);
}

Result<Job> ApplyCancelOrTerminate(Job job, const JobEvent& e) {
  const bool terminate = e.type == JobEventType::kTerminateRequested;
  if (IsFinal(job.status)) return job;  // AWS: succeeds, changes nothing
  if (job.IsArrayParent()) {
    // The caller applies the request to every child; the parent follows them.
    if (terminate) {
      job.is_terminated = true;
    } else {
      job.is_cancelled = true;
    }
    if (job.status_reason.empty()) job.status_reason = e.reason;
    return job;
  }
  if (IsPreStart(job.status)) {
    job.is_cancelled = true;
    Finish(job, JobStatus::kFailed, e.at_ms, e.reason);
    return job;
  }
  // CancelJob does not stop STARTING or RUNNING jobs (AWS), but it does stop
  // one that its backend still holds waiting (shown RUNNABLE, ShownStatus).
  if (!terminate && ShownStatus(job) != JobStatus::kRunnable) return job;
  (terminate ? job.is_terminated : job.is_cancelled) = true;
  job = FailAttempt(std::move(job), FailureCategory::kTerminated, e.reason, -1, std::nullopt,
                    e.at_ms);
  return job;
}

Result<Job> ApplyArrayChildren(Job job, const JobEvent& e) {
  if (!job.IsArrayParent()) return NotApplicable(job, e, "only array parents summarise children");
  int32_t total = 0;
  std::map<std::string, int32_t> summary;
  for (JobStatus s : kAllJobStatuses) summary[std::string(JobStatusName(s))] = 0;
  for (const auto& [name, count] : e.child_counts) {
    if (!ParseJobStatus(name).ok() || count < 0) {
      return Status::InvalidArgument("ArrayChildrenUpdated: bad count " + name + "=" +
                                     std::to_string(count));
    }
    summary[name] = count;
    total += count;
  }
  if (total != job.array->size) {
    return Status::InvalidArgument("ArrayChildrenUpdated: counts add up to " +
                                   std::to_string(total) + " but the array has " +
                                   std::to_string(job.array->size) + " children");
  }
  job.array->status_summary = summary;
  job.array->status_summary_updated_at = e.at_ms;
  const int32_t succeeded = summary["SUCCEEDED"];
  const int32_t failed = summary["FAILED"];
  if (succeeded == total) {
    if (!IsFinal(job.status)) Finish(job, JobStatus::kSucceeded, e.at_ms, "");
  } else if (succeeded + failed == total) {
    if (!IsFinal(job.status)) {
      std::string reason =
          (job.is_cancelled || job.is_terminated) && !job.status_reason.empty()
              ? job.status_reason
              : std::to_string(failed) + " of " + std::to_string(total) + " child jobs failed";
      Finish(job, JobStatus::kFailed, e.at_ms, reason);
    }
  } else if (summary["SUBMITTED"] < total) {
    job.status = JobStatus::kPending;
  } else {
    job.status = JobStatus::kSubmitted;
  }
  return job;
}

}  // namespace

std::string_view JobEventTypeName(JobEventType type) {
  for (const auto& [t, name] : kEventNames) {
    if (t == type) return name;
  }
  return "Unknown";
}

JobEvent JobEvent::Submitted(const Job& job, int64_t at_ms) {
  JobEvent e;
  e.type = JobEventType::kSubmitted;
  e.at_ms = at_ms;
  e.job = JobToJson(job);
  return e;
}

JobEvent JobEvent::DependenciesPending(int64_t at_ms) {
  JobEvent e;
  e.type = JobEventType::kDependenciesPending;
  e.at_ms = at_ms;
  return e;
}

JobEvent JobEvent::DependenciesResolved(int64_t at_ms) {
  JobEvent e;
  e.type = JobEventType::kDependenciesResolved;
  e.at_ms = at_ms;
  return e;
}

JobEvent JobEvent::DependencyFailed(std::string dependency_id, int64_t at_ms) {
  JobEvent e;
  e.type = JobEventType::kDependencyFailed;
  e.at_ms = at_ms;
  e.reason = std::move(dependency_id);
  return e;
}

JobEvent JobEvent::StatusReason(std::string reason, int64_t at_ms) {
  JobEvent e;
  e.type = JobEventType::kStatusReason;
  e.at_ms = at_ms;
  e.reason = std::move(reason);
  return e;
}

JobEvent JobEvent::Scheduled(std::string compute_environment, std::vector<ScheduledNode> nodes,
                             int64_t at_ms) {
  JobEvent e;
  e.type = JobEventType::kScheduled;
  e.at_ms = at_ms;
  e.compute_environment = std::move(compute_environment);
  e.nodes = std::move(nodes);
  return e;
}

JobEvent JobEvent::NodeStarted(int32_t attempt, int32_t node_index, std::string task_arn,
                               std::string log_stream_name, int64_t at_ms,
                               std::vector<std::string> notices, std::vector<int32_t> devices) {
  JobEvent e;
  e.type = JobEventType::kNodeStarted;
  e.at_ms = at_ms;
  e.attempt = attempt;
  e.node_index = node_index;
  e.task_arn = std::move(task_arn);
  e.log_stream_name = std::move(log_stream_name);
  e.notices = std::move(notices);
  e.devices = std::move(devices);
  return e;
}

JobEvent JobEvent::Launched(int32_t attempt, std::string backend_ref, int64_t at_ms, Json backend) {
  JobEvent e;
  e.type = JobEventType::kLaunched;
  e.at_ms = at_ms;
  e.attempt = attempt;
  e.backend_ref = std::move(backend_ref);
  e.backend = std::move(backend);
  return e;
}

JobEvent JobEvent::BackendPending(int32_t attempt, std::string reason, int64_t at_ms) {
  JobEvent e;
  e.type = JobEventType::kBackendPending;
  e.at_ms = at_ms;
  e.attempt = attempt;
  e.reason = std::move(reason);
  return e;
}

JobEvent JobEvent::NodePulled(int32_t attempt, int32_t node_index, int64_t pull_started_at,
                              int64_t pull_stopped_at, int64_t at_ms) {
  JobEvent e;
  e.type = JobEventType::kNodePulled;
  e.at_ms = at_ms;
  e.attempt = attempt;
  e.node_index = node_index;
  e.pull_started_at = pull_started_at;
  e.pull_stopped_at = pull_stopped_at;
  return e;
}

JobEvent JobEvent::NodeExited(int32_t attempt, int32_t node_index, int32_t exit_code,
                              int32_t signal, int64_t at_ms, std::string reason) {
  JobEvent e;
  e.type = JobEventType::kNodeExited;
  e.reason = std::move(reason);
  e.at_ms = at_ms;
  e.attempt = attempt;
  e.node_index = node_index;
  e.exit_code = exit_code;
  e.signal = signal;
  return e;
}

JobEvent JobEvent::AttemptFailed(int32_t attempt, FailureCategory category, std::string reason,
                                 int32_t node_index, int64_t at_ms) {
  JobEvent e;
  e.type = JobEventType::kAttemptFailed;
  e.at_ms = at_ms;
  e.attempt = attempt;
  e.category = category;
  e.reason = std::move(reason);
  e.node_index = node_index;
  return e;
}

JobEvent JobEvent::TimedOut(int32_t attempt, int64_t at_ms) {
  JobEvent e;
  e.type = JobEventType::kTimedOut;
  e.at_ms = at_ms;
  e.attempt = attempt;
  return e;
}

JobEvent JobEvent::CancelRequested(std::string reason, int64_t at_ms) {
  JobEvent e;
  e.type = JobEventType::kCancelRequested;
  e.at_ms = at_ms;
  e.reason = std::move(reason);
  return e;
}

JobEvent JobEvent::TerminateRequested(std::string reason, int64_t at_ms) {
  JobEvent e;
  e.type = JobEventType::kTerminateRequested;
  e.at_ms = at_ms;
  e.reason = std::move(reason);
  return e;
}

JobEvent JobEvent::Progress(Json progress, int64_t at_ms) {
  JobEvent e;
  e.type = JobEventType::kProgress;
  e.at_ms = at_ms;
  e.progress = std::move(progress);
  return e;
}

JobEvent JobEvent::ArrayChildrenUpdated(std::map<std::string, int32_t> counts, int64_t at_ms) {
  JobEvent e;
  e.type = JobEventType::kArrayChildrenUpdated;
  e.at_ms = at_ms;
  e.child_counts = std::move(counts);
  return e;
}

JobEvent JobEvent::TagsChanged(std::map<std::string, std::string> set,
                               std::vector<std::string> removed, int64_t at_ms) {
  JobEvent e;
  e.type = JobEventType::kTagsChanged;
  e.at_ms = at_ms;
  e.tags_set = std::move(set);
  e.tags_removed = std::move(removed);
  return e;
}

std::string EventPayload(const JobEvent& e, std::string* job_doc) {
  if (e.type != JobEventType::kSubmitted) return EventToJson(e).dump();
  std::string doc = e.job.dump();
  // The members in EventToJson's order (nlohmann's objects sort their keys).
  std::string payload = "{\"at\":" + std::to_string(e.at_ms) + ",\"job\":" + doc +
                        ",\"type\":" + Json(std::string(JobEventTypeName(e.type))).dump() + "}";
  if (job_doc != nullptr) *job_doc = std::move(doc);
  return payload;
}

Json EventToJson(const JobEvent& e) {
  Json j = {{"type", JobEventTypeName(e.type)}, {"at", e.at_ms}};
  switch (e.type) {
    case JobEventType::kSubmitted:
      j["job"] = e.job;
      break;
    case JobEventType::kDependenciesPending:
    case JobEventType::kDependenciesResolved:
      break;
    case JobEventType::kDependencyFailed:
    case JobEventType::kStatusReason:
    case JobEventType::kCancelRequested:
    case JobEventType::kTerminateRequested:
      j["reason"] = e.reason;
      break;
    case JobEventType::kScheduled: {
      j["computeEnvironment"] = e.compute_environment;
      Json nodes = Json::array();
      for (const ScheduledNode& n : e.nodes) {
        nodes.push_back({{"nodeIndex", n.node_index},
                         {"instanceId", n.instance_id},
                         {"privateIpv4Address", n.private_ipv4},
                         {"devices", n.devices}});
      }
      j["nodes"] = nodes;
      break;
    }
    case JobEventType::kNodeStarted:
      j["attempt"] = e.attempt;
      j["nodeIndex"] = e.node_index;
      j["taskArn"] = e.task_arn;
      j["logStreamName"] = e.log_stream_name;
      if (!e.notices.empty()) j["notices"] = e.notices;
      if (!e.devices.empty()) j["devices"] = e.devices;
      break;
    case JobEventType::kNodeExited:
      j["attempt"] = e.attempt;
      j["nodeIndex"] = e.node_index;
      j["exitCode"] = e.exit_code;
      j["signal"] = e.signal;
      if (!e.reason.empty()) j["reason"] = e.reason;
      break;
    case JobEventType::kNodePulled:
      j["attempt"] = e.attempt;
      j["nodeIndex"] = e.node_index;
      j["pullStartedAt"] = e.pull_started_at;
      j["pullStoppedAt"] = e.pull_stopped_at;
      break;
    case JobEventType::kAttemptFailed:
      j["attempt"] = e.attempt;
      j["nodeIndex"] = e.node_index;
      j["category"] = FailureCategoryName(e.category);
      j["reason"] = e.reason;
      break;
    case JobEventType::kTimedOut:
      j["attempt"] = e.attempt;
      break;
    case JobEventType::kLaunched:
      j["attempt"] = e.attempt;
      j["backendRef"] = e.backend_ref;
      if (!e.backend.is_null()) j["backend"] = e.backend;
      break;
    case JobEventType::kBackendPending:
      j["attempt"] = e.attempt;
      j["reason"] = e.reason;
      break;
    case JobEventType::kProgress:
      j["progress"] = e.progress;
      break;
    case JobEventType::kArrayChildrenUpdated: {
      Json counts = Json::object();
      for (const auto& [k, v] : e.child_counts) counts[k] = v;
      j["counts"] = counts;
      break;
    }
    case JobEventType::kTagsChanged: {
      Json set = Json::object();
      for (const auto& [k, v] : e.tags_set) set[k] = v;
      j["tagsSet"] = set;
      j["tagsRemoved"] = e.tags_removed;
      break;
    }
  }
  return j;
}

Result<JobEvent> EventFromJson(const Json& j) {
  if (!j.is_object() || !j.value("type", Json()).is_string() ||
      !j.value("at", Json()).is_number_integer()) {
    return Status::InvalidArgument("a stored job event needs a string type and an integer at");
  }
  JobEvent e;
  const std::string type = j["type"].get<std::string>();
  bool known = false;
  for (const auto& [t, name] : kEventNames) {
    if (name == type) {
      e.type = t;
      known = true;
    }
  }
  if (!known) return Status::InvalidArgument("unknown job event type '" + type + "'");
  e.at_ms = j["at"].get<int64_t>();
  try {
    e.job = j.value("job", Json());
    e.reason = j.value("reason", "");
    e.compute_environment = j.value("computeEnvironment", "");
    for (const Json& n : j.value("nodes", Json::array())) {
      e.nodes.push_back({n.at("nodeIndex").get<int32_t>(), n.value("instanceId", ""),
                         n.value("privateIpv4Address", ""),
                         n.value("devices", std::vector<int32_t>{})});
    }
    e.attempt = j.value("attempt", 0);
    e.node_index = j.value("nodeIndex", -1);
    e.task_arn = j.value("taskArn", "");
    e.log_stream_name = j.value("logStreamName", "");
    e.notices = j.value("notices", std::vector<std::string>{});
    if (e.type == JobEventType::kNodeStarted)
      e.devices = j.value("devices", std::vector<int32_t>{});
    e.exit_code = j.value("exitCode", 0);
    e.signal = j.value("signal", 0);
    ASSIGN_OR_RETURN(e.category, ParseFailureCategory(j.value("category", "")));
    e.progress = j.value("progress", Json());
    const Json counts = j.value("counts", Json::object());
    for (auto it = counts.begin(); it != counts.end(); ++it)
      e.child_counts[it.key()] = it.value().get<int32_t>();
    const Json tags_set = j.value("tagsSet", Json::object());
    for (auto it = tags_set.begin(); it != tags_set.end(); ++it)
      e.tags_set[it.key()] = it.value().get<std::string>();
    e.tags_removed = j.value("tagsRemoved", std::vector<std::string>{});
    e.backend_ref = j.value("backendRef", "");
    e.backend = j.value("backend", Json());
    e.pull_started_at = j.value("pullStartedAt", int64_t{0});
    e.pull_stopped_at = j.value("pullStoppedAt", int64_t{0});
  } catch (const Json::exception& ex) {
    return Status::InvalidArgument(std::string("malformed job event: ") + ex.what());
  }
  return e;
}

Result<Job> Apply(const Job& job, const JobEvent& e) {
  if (e.type == JobEventType::kSubmitted) return ApplySubmitted(job, e);
  if (job.id.empty()) return NotApplicable(job, e, "the first event of a job must be Submitted");
  Job next = job;
  switch (e.type) {
    case JobEventType::kSubmitted:
      break;
    case JobEventType::kDependenciesPending:
      if (job.status == JobStatus::kPending) return next;
      if (job.status != JobStatus::kSubmitted) return NotApplicable(job, e);
      next.status = JobStatus::kPending;
      return next;
    case JobEventType::kDependenciesResolved:
      if (job.status == JobStatus::kRunnable) return next;
      if (job.status != JobStatus::kSubmitted && job.status != JobStatus::kPending)
        return NotApplicable(job, e);
      next.status = JobStatus::kRunnable;
      next.status_reason.clear();
      return next;
    case JobEventType::kDependencyFailed:
      if (IsFinal(job.status)) return next;
      if (job.status != JobStatus::kSubmitted && job.status != JobStatus::kPending)
        return NotApplicable(job, e);
      Finish(next, JobStatus::kFailed, e.at_ms, kDependentJobFailed);
      return next;
    case JobEventType::kStatusReason:
      if (IsPreStart(job.status)) next.status_reason = e.reason;
      return next;
    case JobEventType::kScheduled:
      return ApplyScheduled(std::move(next), e);
    case JobEventType::kNodeStarted:
      return ApplyNodeStarted(std::move(next), e);
    case JobEventType::kNodeExited:
      return ApplyNodeExited(std::move(next), e);
    case JobEventType::kNodePulled: {
      // Any status of the node: the runner reports the pull with its end.
      if (!IsLastAttempt(job, e.attempt)) return next;  // stale
      NodeAttempt* node = next.attempts.back().MutableNode(e.node_index);
      if (node == nullptr) return NotApplicable(job, e, "no node " + std::to_string(e.node_index));
      node->pull_started_at = e.pull_started_at;
      node->pull_stopped_at = e.pull_stopped_at;
      return next;
    }
    case JobEventType::kAttemptFailed:
      return ApplyAttemptFailed(std::move(next), e);
    case JobEventType::kTimedOut:
      if (!IsCurrentAttempt(job, e.attempt)) return next;
      return FailAttempt(std::move(next), FailureCategory::kTimeout, kTimeoutReason, -1,
                         std::nullopt, e.at_ms);
    case JobEventType::kCancelRequested:
    case JobEventType::kTerminateRequested:
      return ApplyCancelOrTerminate(std::move(next), e);
    case JobEventType::kProgress:
      if (!e.progress.is_object())
        return Status::InvalidArgument("Progress: the progress must be a Json object");
      next.progress = e.progress;
      return next;
    case JobEventType::kArrayChildrenUpdated:
      return ApplyArrayChildren(std::move(next), e);
    case JobEventType::kLaunched:
      if (!IsCurrentAttempt(job, e.attempt)) return next;  // stale
      next.attempts.back().backend_ref = e.backend_ref;
      next.attempts.back().backend = e.backend;
      return next;
    case JobEventType::kBackendPending: {
      if (!IsCurrentAttempt(job, e.attempt)) return next;  // stale
      Attempt& a = next.attempts.back();
      for (const NodeAttempt& n : a.nodes)
        if (n.status != JobStatus::kStarting) return next;  // it runs already
      a.pending_reason = e.reason;
      return next;
    }
    case JobEventType::kTagsChanged: {
      // Any state, as AWS (tags of finished jobs can change too).
      for (const auto& [k, v] : e.tags_set) next.tags[k] = v;
      for (const std::string& k : e.tags_removed) next.tags.erase(k);
      if (next.tags.size() > 50)
        return Status::InvalidArgument("job " + job.id + " would have " +
                                       std::to_string(next.tags.size()) +
                                       " tags; the limit is 50, remove some with UntagResource");
      return next;
    }
  }
  return NotApplicable(job, e, "unknown event");
}

Result<Job> Replay(const std::vector<JobEvent>& events) {
  Job job;
  for (size_t i = 0; i < events.size(); ++i) {
    Result<Job> next = Apply(job, events[i]);
    if (!next.ok()) return next.status().WithContext("replaying event " + std::to_string(i));
    job = std::move(next).value();
  }
  if (job.id.empty())
    return Status::InvalidArgument("no events to replay: a job starts with Submitted");
  return job;
}

bool GlobMatches(std::string_view pattern, std::string_view text) {
  if (!pattern.empty() && pattern.back() == '*') {
    std::string_view prefix = pattern.substr(0, pattern.size() - 1);
    return text.substr(0, prefix.size()) == prefix;
  }
  return pattern == text;
}

RetryAction EvaluateOnExitAction(const RetryStrategy& strategy, const AttemptOutcome& outcome) {
  for (const EvaluateOnExit& rule : strategy.evaluate_on_exit) {
    if (!rule.on_status_reason.empty() &&
        !GlobMatches(rule.on_status_reason, outcome.status_reason))
      continue;
    if (!rule.on_reason.empty() && !GlobMatches(rule.on_reason, outcome.reason)) continue;
    if (!rule.on_exit_code.empty() &&
        (!outcome.exit_code ||
         !GlobMatches(rule.on_exit_code, std::to_string(*outcome.exit_code)))) {
      continue;
    }
    return rule.action;
  }
  return RetryAction::kRetry;
}

bool ShouldRetry(const RetryStrategy& strategy, int32_t attempts_made, FailureCategory category,
                 const AttemptOutcome& outcome) {
  if (category == FailureCategory::kTimeout || category == FailureCategory::kTerminated ||
      category == FailureCategory::kCapacity) {
    return false;
  }
  if (attempts_made >= strategy.attempts) return false;
  return EvaluateOnExitAction(strategy, outcome) == RetryAction::kRetry;
}

std::optional<int64_t> AttemptDeadlineMs(const Job& job) {
  if (!job.timeout_seconds || job.status != JobStatus::kRunning || job.attempts.empty())
    return std::nullopt;
  const Attempt& a = job.attempts.back();
  if (a.started_at == 0) return std::nullopt;
  return a.started_at + int64_t{*job.timeout_seconds} * 1000;
}

std::optional<JobEvent> DependencyEvent(
    const Job& job, const std::function<std::optional<JobStatus>(const std::string&)>& status_of,
    int64_t at_ms) {
  if (job.IsArrayParent()) return std::nullopt;
  if (job.status != JobStatus::kSubmitted && job.status != JobStatus::kPending) return std::nullopt;
  bool waiting = false;
  for (const std::string& id : job.wait_for) {
    std::optional<JobStatus> s = status_of(id);
    if (!s || *s == JobStatus::kFailed) return JobEvent::DependencyFailed(id, at_ms);
    if (*s != JobStatus::kSucceeded) waiting = true;
  }
  if (!waiting) return JobEvent::DependenciesResolved(at_ms);
  if (job.status == JobStatus::kSubmitted) return JobEvent::DependenciesPending(at_ms);
  return std::nullopt;
}

std::map<std::string, int32_t> CountStatuses(const std::vector<JobStatus>& statuses) {
  std::map<std::string, int32_t> counts;
  for (JobStatus s : kAllJobStatuses) counts[std::string(JobStatusName(s))] = 0;
  for (JobStatus s : statuses) ++counts[std::string(JobStatusName(s))];
  return counts;
}

}  // namespace lote::control
