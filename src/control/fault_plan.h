// The faults a job asks lote to inject, from its `lote:inject...` keys
// (parameters first, then tags, so requests stay valid AWS requests):
//
//   lote:injectKillNode=K     + lote:injectKillAtStep=S | lote:injectKillAfterSeconds=T
//   lote:injectPreemptNode=K  + lote:injectPreemptAtStep=S | ...AfterSeconds=T
//   lote:injectStopNode=K     + lote:injectStopAtStep=S | ...AfterSeconds=T
//   lote:injectSlowNode=K     + lote:injectSlowAtStep=S | ...AfterSeconds=T
//                             [+ lote:injectSlowPercent=P, 1 to 99, default 50]
//   lote:injectUploadFailSeconds=N [+ lote:injectUploadFailAtStep=S, default 1]
//
// Kill: SIGKILL to node K's command (its whole process group). Preempt:
// SIGTERM with the job's lote:terminationGraceSeconds (default 30 s), as a
// spot reclaim. Stop: SIGSTOP, a node that makes no more progress (hang
// detection, lote:progressTimeoutSeconds, then fires). Slow: node K runs P%
// of its time from then on (SIGSTOP and SIGCONT in turns every 100 ms, any
// host; exec::Throttle). The step is the
// gang's, from the main node's LOTE_PROGRESS lines; the time counts from
// when node K's command started. The node defaults to 0. UploadFail: every
// checkpoint write of every node fails for N seconds from when training
// reaches step S (the runner passes it to `lote train` in its environment,
// docs/faults.md); the run survives and the next checkpoint lands.
//
// One fault per job, in its first attempt only (the retry runs undisturbed,
// so a test can check that it recovers). The runner of node K fires it
// (exec/node_fault.h); nothing happens unless asked.
//
// A compute environment may carry the same keys as tags: its fault applies
// to every job placed on it, in the job's first attempt on that environment,
// unless the job asks for a fault of its own (the job's keys win). The
// job loop records the runner's sentence with where the fault came from
// (FaultOrigin).
//
// Refused with a message (never silently ignored): an unknown lote:inject
// key, two fault kinds, a node out of range, both or neither of AtStep and
// AfterSeconds, lote:injectUploadFailAtStep without ...Seconds,
// lote:injectSlowPercent without a slow node's AtStep or AfterSeconds.
//
// Pure: no I/O.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "common/status.h"
#include "control/control_plane.h"
#include "control/job_model.h"
#include "control/validation.h"
#include "exec/node_fault.h"

namespace lote::control {

inline constexpr const char* kInjectPrefix = "lote:inject";

struct FaultPlan {
  exec::FaultAction action = exec::FaultAction::kNone;
  int32_t node = 0;
  int64_t at_step = 0;              // > 0, or
  int64_t after_seconds = -1;       // >= 0
  int64_t upload_fail_seconds = 0;  // kUploadFail (at_step: where it begins)
  int64_t slow_percent = 0;         // kSlow: the CPU share kept, 1 to 99
  // The compute environment whose tags asked for it; empty: the job itself.
  std::string environment = {};
  bool operator==(const FaultPlan&) const = default;
};

// nullopt when the job asks for no fault; InvalidArgument (a ClientException
// for SubmitJob) naming the key when what it asks for is wrong.
Result<std::optional<FaultPlan>> ParseFaultPlan(const Job& job);

// The fault the tags of compute environment `environment` ask for (nullopt:
// none). The node is checked against a job only at placement (a job without
// that node is not disturbed), here only as a whole number.
Result<std::optional<FaultPlan>> ParseEnvironmentFaultPlan(const std::string& environment,
                                                           const TagMap& tags);
// CreateComputeEnvironment / TagResource of an environment: InvalidArgument
// (ClientException) naming the key when its lote:inject... tags are wrong,
// as SubmitJob refuses a job's (lote:injectCapacityShortageSeconds included).
Status ValidateEnvironmentFaultTags(const std::string& environment, const TagMap& tags);
// TagResource: the same for the resource `arn` when it is a compute
// environment (`tags`: what it would carry); OK for any other resource.
Status ValidateResourceFaultTags(const std::string& arn, const TagMap& tags);

// lote's InjectFault request: {"jobId", "action": "kill"|"preempt"|"stop"|"slow",
// "nodeIndex" (default 0), exactly one of "atStep" and "afterSeconds",
// "cpuPercent" (slow only, 1 to 99, default 50)}.
// InvalidArgument naming the member that is wrong.
Result<FaultPlan> FaultPlanFromRequest(const Json& request, int32_t num_nodes);

// The runner's fault for `plan` (the grace period of a preemption: the
// job's lote:terminationGraceSeconds, else 30 s).
exec::NodeFault NodeFaultOf(const FaultPlan& plan, const Job& job);

// " (asked by the tags of compute environment X)" when the fault that
// attempt `attempt` of `job` was given came from its environment's tags (read
// from the tags recorded with the attempt at launch, Attempt::backend), else
// "": appended to the runner's sentence when the job loop records it.
std::string FaultOrigin(const Job& job, int32_t attempt);

// "kill node 1 at step 8", for DescribeJobs and messages.
std::string DescribeFaultPlan(const FaultPlan& plan);

// What node `node_index` of attempt `attempt`, placed on `ce`, must inject:
// the job's own plan in its first attempt, else the environment's in the
// job's first attempt on `ce`; kNone for every other node (an upload failure
// is every node's), attempt, or without a plan.
exec::NodeFault NodeFaultFor(const Job& job, const ComputeEnvironmentSpec& ce, int32_t attempt,
                             int32_t node_index);

}  // namespace lote::control
