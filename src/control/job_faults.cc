// The job loop's side of injected faults (docs/faults.md): lote's InjectFault
// operation (a fault asked for while a job runs, handed to the runner of the
// node through the attempt's backend; the request is kept in the job's events
// as StatusReason "Fault injection requested: ...", and when the runner fires
// it the attempt's reason says so, as for a fault planned at submission,
// fault_plan.h), the sentence of a fault a node's runner fired, and the
// injected capacity shortage of a job or of its queue's environments, with
// its holds rebuilt from the stored events after a restart (capacity_hold.h).
#include <spdlog/spdlog.h>

#include "control/capacity_hold.h"
#include "control/fault_plan.h"
#include "control/job_loop.h"
#include "control/job_model.h"

namespace lote::control {

std::string JobLoop::InjectedFaultLocked(const Job& job, const exec::NodeEvent& ev) {
  std::string sentence = RunnersInjectedFaultLocked(job, ev);
  if (sentence.empty()) return sentence;
  return sentence + FaultOrigin(job, ev.node.attempt.attempt);
}

std::string JobLoop::RunnersInjectedFaultLocked(const Job& job, const exec::NodeEvent& ev) {
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
    RETURN_IF_ERROR(ApplyLocked(
        id, JobEvent::StatusReason("Fault injection requested: " + DescribeFaultPlan(plan),
                                   clock_->NowMillis())));
    ticket = FlushLocked();
  }
  RETURN_IF_ERROR(WaitTicket(std::move(ticket)));
  return Json{{"jobId", id}, {"attempt", attempt}, {"fault", DescribeFaultPlan(plan)}};
}

std::optional<InjectedShortage> JobLoop::InjectedShortageLocked(const Job& job) {
  // The job's own key wins (and a job with it costs no lookup of its queue).
  if (job.LoteSetting(kInjectCapacityShortageKey) != nullptr) return InjectedShortageOf(job, {});
  // The queue's environments, read once per pass for all its jobs.
  auto cached = queue_shortages_.find(job.queue_arn);
  if (cached != queue_shortages_.end()) return cached->second;
  std::optional<InjectedShortage> shortage;
  Result<JobQueueSpec> queue = control_->FindJobQueue(job.queue_arn);
  if (queue.ok()) {
    std::vector<ComputeEnvironmentSpec> environments;
    for (const std::string& arn : queue->compute_environment_arns) {
      Result<ComputeEnvironmentSpec> ce = control_->FindComputeEnvironment(arn);
      if (ce.ok()) environments.push_back(std::move(*ce));
    }
    if (environments.size() == queue->compute_environment_arns.size())
      shortage = InjectedShortageOf(job, environments);
  }
  queue_shortages_[job.queue_arn] = shortage;
  return shortage;
}

void JobLoop::RestoreCapacityHoldsLocked() {
  queue_shortages_.clear();
  size_t held = 0, served = 0;
  for (const auto& [id, job] : jobs_) {
    if (job.status != JobStatus::kRunnable || job.IsArrayParent()) continue;
    std::optional<InjectedShortage> shortage = InjectedShortageLocked(job);
    if (!shortage) continue;
    Result<std::vector<store::JobEvent>> rows = store_->JobEvents(id);
    if (!rows.ok()) {
      spdlog::warn("jobs: events of {} not read; its capacity hold starts again: {}", id,
                   rows.status().ToString());
      continue;
    }
    std::vector<JobEvent> events;
    for (const store::JobEvent& row : *rows) {
      Result<Json> doc = ParseJson(row.payload);
      if (!doc.ok()) continue;
      Result<JobEvent> e = EventFromJson(*doc);
      if (e.ok()) events.push_back(std::move(*e));
    }
    std::optional<RecordedHold> recorded = RecordedHoldOf(events, *shortage);
    if (!recorded) continue;  // not held yet in this RUNNABLE period: the next pass holds it
    shortage_served_[id] = job.attempts.size();
    if (recorded->ended) {
      ++served;
    } else {
      capacity_holds_.Hold(id, *shortage, recorded->since_ms);
      ++held;
    }
  }
  if (held + served > 0)
    spdlog::info("jobs: injected capacity shortages: {} held on from before the restart, {} ended",
                 held, served);
}

}  // namespace lote::control
