// The decisions of the job loop that are not the state machine itself, as
// functions of the jobs and the control plane's resources: the scheduler's
// snapshot of the virtual instances and RUNNABLE jobs, array parents'
// summaries, and hang detection's key and reason. The loop that calls them,
// persists the events and drives the backends is job_loop.h.
//
// No I/O, no clock, no locks: the caller holds whatever guards its tables.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "control/control_plane.h"
#include "control/job_model.h"
#include "control/job_state.h"
#include "exec/backend.h"
#include "sched/scheduler.h"
#include "sched/snapshot.h"

namespace lote::control {

// A virtual instance of a compute environment (a share of this host).
struct VirtualInstance {
  std::string id;
  std::string compute_environment;  // name
  sched::Resources shape;
  std::string private_ip;
  int64_t idle_since_ms = 0;  // sched::Instance::kBusy while it holds a node
};

using JobTable = std::map<std::string, Job>;         // every job incl. array children
using SubmitOrder = std::map<std::string, int64_t>;  // per job: FIFO position
using InstanceTable = std::map<std::string, VirtualInstance>;
using ShareHistory = std::map<std::string, sched::ShareUsageUpdate>;  // "queue/share"

// An instance type's shape for the scheduler (milli-vCPU, MiB, accelerators).
sched::Resources ShapeOf(const InstanceType& type);

// The scheduler's input: every managed compute environment with its
// instances (what their running nodes hold; idle_since_ms is updated in
// `instances`), every queue with its fair-share policy and usage, and the
// RUNNABLE jobs of known queues.
//
// `backend_capacity`: per UNMANAGED compute environment served by a backend
// that owns its machines (Slurm), what it holds. Such an environment becomes
// `nodes` fixed instances of that shape ("<ce>/node-<k>", kept in
// `instances`, no private address: the backend knows it), which the
// scheduler places on but never launches or removes (min = max vCPUs). Their
// resources are never held: the backend queues what does not fit now, so they
// only decide what can never fit.
//
// `jobs`: the jobs that hold an attempt and the RUNNABLE ones (the job loop
// keeps both as index sets); the JobTable overload finds them by a scan.
struct SchedulerJobs {
  std::vector<const Job*> holding;
  std::vector<const Job*> runnable;  // array parents excluded
};
Result<sched::Snapshot> BuildSchedulerSnapshot(
    const SchedulerJobs& jobs, const SubmitOrder& submit_order, InstanceTable* instances,
    ControlPlane* control, const ShareHistory& share_history, int64_t now,
    const std::map<std::string, exec::Capacity>& backend_capacity = {});
Result<sched::Snapshot> BuildSchedulerSnapshot(
    const JobTable& jobs, const SubmitOrder& submit_order, InstanceTable* instances,
    ControlPlane* control, const ShareHistory& share_history, int64_t now,
    const std::map<std::string, exec::Capacity>& backend_capacity = {});

// BuildSchedulerSnapshot in two parts, for a caller that keeps the jobs
// across passes (SchedulerInput): the environments, queues and instances
// (what `holding` jobs hold), without jobs; and one RUNNABLE job as the
// scheduler sees it (a job without nodes as a nodeless one, which the pass
// rejects with a reason instead of leaving it RUNNABLE for ever).
Result<sched::Snapshot> BuildSchedulerEnvironments(
    const std::vector<const Job*>& holding, InstanceTable* instances, ControlPlane* control,
    const ShareHistory& share_history, int64_t now,
    const std::map<std::string, exec::Capacity>& backend_capacity = {});
sched::Job SchedulerJobOrNodeless(const Job& job, int64_t submit_order);

// The ArrayChildrenUpdated event of an array parent given its children's
// status counts (CountStatuses' shape); nullopt when they did not change or
// not every child is counted yet.
std::optional<JobEvent> ArrayParentEvent(const Job& parent, std::map<std::string, int32_t> counts,
                                         int64_t now);

// Hang detection's key, in a job's parameters (first) or tags.
inline constexpr const char* kProgressTimeoutKey = "lote:progressTimeoutSeconds";
inline constexpr int64_t kMaxProgressTimeoutSeconds = 30LL * 24 * 3600;

// The job's hang timeout in seconds; nullopt when it has none (or an invalid one).
std::optional<int64_t> ProgressTimeoutSeconds(const Job& job);

// `lote:terminationGraceSeconds` (parameter or tag): how long a node of this job may
// take between SIGTERM and SIGKILL when it is terminated, e.g. for `lote train` to
// write its checkpoint (cooperative preemption). Whole seconds, 1..3600.
inline constexpr const char* kTerminationGraceKey = "lote:terminationGraceSeconds";
inline constexpr int64_t kMaxTerminationGraceSeconds = 3600;
std::optional<int64_t> TerminationGraceSeconds(const Job& job);
// InvalidArgument naming the key when its value is not 1..kMaxTerminationGraceSeconds.
Status ValidateTerminationGrace(const Job& job);
// InvalidArgument naming the key when its value is not 1..kMaxProgressTimeoutSeconds.
Status ValidateProgressTimeout(const Job& job);

// Of the `stalled` nodes of a multi-node attempt, those that hang: while some
// node reports progress (`progress`, JobOutput::Progress: its "nodes"), a
// node that never printed a LOTE_PROGRESS line is not hung for its silence
// (one process of a job prints them, as lote train's rank 0 does); its hang
// shows as the reporting node's. Without any report, every stalled node.
std::vector<int32_t> HungNodes(const std::vector<int32_t>& stalled,
                               const std::optional<Json>& progress);

// The reason of a HANG failure: "node(s) 1, 3 reported no progress (...) for
// 30 s (...); last lines of node 1: | ... | ..." (single-node: "the job ...").
// `last_lines(stream)` gives a node's last stored lines.
std::string HangReason(
    const Job& job, const Attempt& attempt, const std::vector<int32_t>& stalled,
    int64_t timeout_seconds,
    const std::function<std::vector<std::string>(const std::string&)>& last_lines);

}  // namespace lote::control
