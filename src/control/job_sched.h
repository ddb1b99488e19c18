// The bridge between jobs and the scheduling policy (src/sched): a RUNNABLE
// Job as a sched::Job, and a sched::Placement as the Scheduled event.
//
// Pure functions; thread-compatible.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/status.h"
#include "control/job_model.h"
#include "control/job_state.h"
#include "sched/scheduler.h"
#include "sched/snapshot.h"

namespace lote::control {

// The job as the scheduler sees it: queue name (from the queue ARN), order,
// share identifier, priority and its node ranges (one range of one node for a
// single-node job or array child; the multi-node ranges in node order, equal
// neighbours merged). FailedPrecondition for array parents (their children
// are scheduled) and jobs that are not RUNNABLE.
Result<sched::Job> SchedulerJob(const Job& job, int64_t submit_order);

// The Scheduled event for a placement. `launched_instance_ids[i]` is the id of
// the instance created for Decisions::launches[i]; `private_ipv4_of` gives an
// instance's address (the executor's 127.0.1.x for local instances).
// InvalidArgument when a node refers to a launch that has no id.
Result<JobEvent> ScheduledEvent(
    const sched::Placement& placement, const std::vector<std::string>& launched_instance_ids,
    const std::function<std::string(const std::string& instance_id)>& private_ipv4_of,
    int64_t at_ms);

}  // namespace lote::control
