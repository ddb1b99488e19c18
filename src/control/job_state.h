// The job state machine: a pure transition Apply(job, event) and Replay(events).
//
//   SUBMITTED -> PENDING -> RUNNABLE -> STARTING -> RUNNING -> SUCCEEDED | FAILED
//
// (docs/jobs.md has the full table.) Apply is a pure function of the job and
// the event: every time comes from the event (`at_ms`), nothing is read from
// a clock or the store. The control plane appends every accepted event to the
// store's events table and keeps Apply's result as the job's row; Replay of a
// job's events rebuilds exactly that row. Side effects (starting and killing
// processes, cascading cancels to array children) belong to the caller.
//
// Apply returns:
//  - the new job when the event changes it;
//  - the job unchanged when the event is a no-op as AWS defines it (CancelJob
//    on a STARTING job, TerminateJob on a finished job) or is stale (a node
//    event for an earlier attempt, arriving after that attempt ended);
//  - FailedPrecondition when the event cannot apply to the job (Scheduled on a
//    PENDING job, Submitted twice): a caller bug, never to be stored.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "control/job_model.h"

namespace lote::control {

enum class JobEventType {
  kSubmitted,             // the job as PrepareSubmit made it
  kDependenciesPending,   // SUBMITTED -> PENDING: it waits for dependencies
  kDependenciesResolved,  // SUBMITTED | PENDING -> RUNNABLE
  kDependencyFailed,      // SUBMITTED | PENDING -> FAILED "Dependent Job failed"
  kStatusReason,          // the scheduler's explanation for a waiting job
  kScheduled,             // RUNNABLE -> STARTING: a new attempt placed on instances
  kNodeStarted,           // a node's process runs; the main node makes the job RUNNING
  kNodeExited,            // a node's process exited (code or signal)
  kAttemptFailed,         // the attempt (or a not yet started job) failed with a category
  kTimedOut,              // attemptDurationSeconds passed
  kCancelRequested,       // CancelJob
  kTerminateRequested,    // TerminateJob
  kProgress,              // a LOTE_PROGRESS line
  kArrayChildrenUpdated,  // array parents: the children's status counts changed
  kTagsChanged,           // TagResource / UntagResource on the job's ARN
  kLaunched,              // the attempt's gang was handed to its backend (backend_ref)
  kBackendPending,        // the backend holds the attempt waiting (reason: the backend's)
  kNodePulled,            // a node's image was pulled (container mode): when, for the timeline
};
std::string_view JobEventTypeName(JobEventType type);

struct ScheduledNode {
  int32_t node_index = 0;
  std::string instance_id;
  std::string private_ipv4;
  std::vector<int32_t> devices;
  friend bool operator==(const ScheduledNode&, const ScheduledNode&) = default;
};

// One event. Only the fields of its type are meaningful; build them with the
// factories below.
struct JobEvent {
  JobEventType type = JobEventType::kSubmitted;
  int64_t at_ms = 0;
  Json job;                          // kSubmitted: JobToJson of the new job
  std::string reason;                // kDependencyFailed (dependency id), kStatusReason,
                                     // kAttemptFailed, kCancelRequested, kTerminateRequested,
                                     // kNodeExited (an injected fault's sentence)
  std::string compute_environment;   // kScheduled
  std::vector<ScheduledNode> nodes;  // kScheduled: every node, index order
  int32_t attempt = 0;               // 1-based attempt the node event is about (0 = the job)
  int32_t node_index = -1;           // kNodeStarted, kNodeExited, kAttemptFailed (-1 = none)
  std::string task_arn;              // kNodeStarted
  std::string log_stream_name;       // kNodeStarted
  std::vector<std::string> notices;  // kNodeStarted: lote's notices about the node
  // kNodeStarted: the accelerator devices the backend's own scheduler bound
  // the node to (Slurm GRES), replacing the node's; empty: lote chose them.
  std::vector<int32_t> devices;
  int32_t exit_code = 0;  // kNodeExited
  int32_t signal = 0;     // kNodeExited: killed by this signal (exit code 128 + signal)
  FailureCategory category = FailureCategory::kNone;  // kAttemptFailed
  Json progress;                                      // kProgress: the LOTE_PROGRESS object
  std::map<std::string, int32_t> child_counts;        // kArrayChildrenUpdated: count per status
  std::map<std::string, std::string> tags_set;        // kTagsChanged: added or replaced
  std::vector<std::string> tags_removed;              // kTagsChanged: keys removed
  std::string backend_ref;                            // kLaunched
  Json backend;                                       // kLaunched (Attempt::backend)
  int64_t pull_started_at = 0;                        // kNodePulled
  int64_t pull_stopped_at = 0;                        // kNodePulled

  static JobEvent Submitted(const Job& job, int64_t at_ms);
  static JobEvent DependenciesPending(int64_t at_ms);
  static JobEvent DependenciesResolved(int64_t at_ms);
  static JobEvent DependencyFailed(std::string dependency_id, int64_t at_ms);
  static JobEvent StatusReason(std::string reason, int64_t at_ms);
  static JobEvent Scheduled(std::string compute_environment, std::vector<ScheduledNode> nodes,
                            int64_t at_ms);
  static JobEvent NodeStarted(int32_t attempt, int32_t node_index, std::string task_arn,
                              std::string log_stream_name, int64_t at_ms,
                              std::vector<std::string> notices = {},
                              std::vector<int32_t> devices = {});
  // `reason`: set when the exit was an injected fault (control/fault_plan.h);
  // it becomes the failed attempt's reason.
  static JobEvent NodeExited(int32_t attempt, int32_t node_index, int32_t exit_code, int32_t signal,
                             int64_t at_ms, std::string reason = "");
  static JobEvent AttemptFailed(int32_t attempt, FailureCategory category, std::string reason,
                                int32_t node_index, int64_t at_ms);
  static JobEvent TimedOut(int32_t attempt, int64_t at_ms);
  static JobEvent CancelRequested(std::string reason, int64_t at_ms);
  static JobEvent TerminateRequested(std::string reason, int64_t at_ms);
  static JobEvent Progress(Json progress, int64_t at_ms);
  static JobEvent ArrayChildrenUpdated(std::map<std::string, int32_t> counts, int64_t at_ms);
  static JobEvent TagsChanged(std::map<std::string, std::string> set,
                              std::vector<std::string> removed, int64_t at_ms);
  static JobEvent Launched(int32_t attempt, std::string backend_ref, int64_t at_ms,
                           Json backend = Json());
  static JobEvent BackendPending(int32_t attempt, std::string reason, int64_t at_ms);
  static JobEvent NodePulled(int32_t attempt, int32_t node_index, int64_t pull_started_at,
                             int64_t pull_stopped_at, int64_t at_ms);

  friend bool operator==(const JobEvent&, const JobEvent&) = default;
};

// Json for the events table (lossless).
Json EventToJson(const JobEvent& event);
// EventToJson(event).dump(), without copying a Submitted event's job document
// into a second one (what the journal stores for every event). For a
// Submitted event, `job_doc` (when given) receives event.job.dump().
std::string EventPayload(const JobEvent& event, std::string* job_doc = nullptr);
Result<JobEvent> EventFromJson(const Json& json);

// The transition. See the contract at the top of this file.
Result<Job> Apply(const Job& job, const JobEvent& event);

// Rebuilds a job from its events in order (the first is kSubmitted).
Result<Job> Replay(const std::vector<JobEvent>& events);

// AWS texts.
inline constexpr char kEssentialContainerExited[] = "Essential container in task exited";
inline constexpr char kDependentJobFailed[] = "Dependent Job failed";
inline constexpr char kTimeoutReason[] = "Job attempt duration exceeded timeout";

// --- Retry decision -------------------------------------------------------

// AWS glob: exact match, or prefix match when the pattern ends with '*'
// ("*" matches everything). '*' elsewhere is literal (validation rejects it).
bool GlobMatches(std::string_view pattern, std::string_view text);

// What a failed attempt is matched on.
struct AttemptOutcome {
  std::string status_reason;  // the attempt's statusReason
  std::string reason;         // the container reason, with the category prefix
  std::optional<int32_t> exit_code;
};

// The action of the first evaluateOnExit rule whose every given condition
// matches; RETRY when none matches (AWS). A rule with onExitCode never
// matches an outcome without an exit code.
RetryAction EvaluateOnExitAction(const RetryStrategy& strategy, const AttemptOutcome& outcome);

// Whether a failed attempt is retried: the category allows it (not TIMEOUT,
// TERMINATED or CAPACITY), attempts remain, and the rules say RETRY.
bool ShouldRetry(const RetryStrategy& strategy, int32_t attempts_made, FailureCategory category,
                 const AttemptOutcome& outcome);

// --- Helpers for the control loop -----------------------------------------

// When the open attempt times out: its startedAt + attemptDurationSeconds
// (RUNNING jobs with a timeout only), else nullopt. Emit TimedOut at or after it.
std::optional<int64_t> AttemptDeadlineMs(const Job& job);

// The dependency event a SUBMITTED or PENDING job needs now, given the status
// of the jobs it waits for (nullopt from status_of = no such job: it fails).
// nullopt when there is nothing to do (still waiting in PENDING, or not
// SUBMITTED/PENDING, or an array parent, whose status follows its children).
std::optional<JobEvent> DependencyEvent(
    const Job& job, const std::function<std::optional<JobStatus>(const std::string&)>& status_of,
    int64_t at_ms);

// Counts per status name (all seven keys) for kArrayChildrenUpdated.
std::map<std::string, int32_t> CountStatuses(const std::vector<JobStatus>& statuses);

}  // namespace lote::control
