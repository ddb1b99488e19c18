// lote's InjectFault operation (docs/faults.md): a fault asked for while a
// job runs, handed to the runner of the node through the attempt's backend.
// The request is kept in the job's events (StatusReason "Fault injection
// requested: ..."); when the runner fires it, the attempt's reason says so,
// as for a fault planned at submission (fault_plan.h).
#include "control/fault_plan.h"
#include "control/job_loop.h"
#include "control/job_model.h"

namespace lote::control {

std::string JobLoop::InjectedFaultLocked(const Job& job, const exec::NodeEvent& ev) {
  if (!ev.injected.empty()) return ev.injected;
  const bool failed = ev.outcome == exec::NodeOutcome::kSignaled || ev.exit_code != 0;
  const int32_t number = ev.node.attempt.attempt;
  if (!failed || ev.terminated || number < 1 || number > static_cast<int32_t>(job.attempts.size()))
    return "";
  const Attempt& attempt = job.attempts[static_cast<size_t>(number - 1)];
  if (attempt.stopped_at != 0) return "";  // already ended: a gang member's late end
  exec::Backend* backend = BackendOf(attempt);
  return backend == nullptr ? "" : backend->InjectedFault(ev.node.attempt, job.NumNodes());
}

Result<Json> JobLoop::InjectFault(const Json& request) {
  std::string id =
      request.value("jobId", Json()).is_string() ? request["jobId"].get<std::string>() : "";
  if (id.empty()) return Status::InvalidArgument("InjectFault: jobId is required");
  if (auto node = ParseNodeJobId(id)) id = node->first;
  Result<uint64_t> ticket = uint64_t{0};
  FaultPlan plan;
  int32_t attempt = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    SyncWithStoreLocked();
    auto it = jobs_.find(id);
    if (it == jobs_.end()) return Status::NotFound("InjectFault: job " + id + " does not exist");
    const Job& job = it->second;
    if (job.status != JobStatus::kRunning || job.CurrentAttempt() == nullptr)
      return Status::InvalidArgument("InjectFault: job " + id + " is " +
                                     std::string(JobStatusName(job.status)) +
                                     "; a fault can be injected into a RUNNING job only");
    ASSIGN_OR_RETURN(plan, FaultPlanFromRequest(request, job.NumNodes()));
    attempt = static_cast<int32_t>(job.attempts.size());
    exec::Backend* backend = BackendOf(*job.CurrentAttempt());
    if (backend == nullptr)
      return Status::FailedPrecondition("InjectFault: the backend of job " + id + " is gone");
    const exec::NodeKey key{exec::AttemptKey{id, attempt}, plan.node};
    Status s = backend->InjectFault(key, NodeFaultOf(plan, job), job.MainNode());
    if (s.code() == StatusCode::kUnimplemented || s.code() == StatusCode::kNotFound)
      return Status::InvalidArgument("InjectFault: " + s.message());
    RETURN_IF_ERROR(s);
    RETURN_IF_ERROR(ApplyLocked(id, JobEvent::StatusReason(
                                        "Fault injection requested: " + DescribeFaultPlan(plan),
                                        clock_->NowMillis()))
                        .status());
    ticket = FlushLocked();
  }
  RETURN_IF_ERROR(WaitTicket(std::move(ticket)));
  return Json{{"jobId", id}, {"attempt", attempt}, {"fault", DescribeFaultPlan(plan)}};
}

}  // namespace lote::control
