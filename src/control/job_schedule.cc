// The job loop's scheduling step: the scheduler's kept input brought up to
// date with what changed (PrepareScheduleLocked), and the policy's decisions
// applied (ApplyDecisionsLocked). sched::Decide runs between the two without
// the lock (JobLoop::Pass), so a decision about a job that changed meanwhile
// (cancelled, terminated) is dropped when it is applied.
#include <spdlog/spdlog.h>

#include <utility>

#include "control/capacity_hold.h"
#include "control/job_controller.h"
#include "control/job_loop.h"
#include "control/job_sched.h"
#include "control/quarantine.h"
#include "exec/batch_env.h"

namespace lote::control {
namespace {

// The scheduler's view of a RUNNABLE job; a retry after a node failure keeps
// off the failed node's instance when it can (InstancesToAvoid).
sched::Job SchedulerJobWithAvoidance(const Job& job, int64_t submit_order) {
  sched::Job sj = SchedulerJobOrNodeless(job, submit_order);
  sj.avoid_instances = InstancesToAvoid(job);
  return sj;
}

}  // namespace

bool JobLoop::PrepareScheduleLocked(int64_t now) {
  // Capacity of the environments whose backend owns its machines (Slurm).
  backend_capacity_.clear();
  for (const ComputeEnvironmentSpec& ce : control_->ComputeEnvironments()) {
    if (!ce.instance_types.empty()) continue;  // lote launches its instances
    Result<exec::Backend*> backend = options_.backends->ForEnvironment(ce);
    if (!backend.ok()) continue;
    std::optional<exec::Capacity> c = (*backend)->GetCapacity();
    if (c) {
      backend_capacity_[ce.name] = *c;
      control_->SetBackendCapacity(ce.name, Json{{"nodes", c->nodes},
                                                 {"vcpusPerNode", c->milli_vcpu_per_node / 1000},
                                                 {"memoryMiBPerNode", c->memory_mib_per_node},
                                                 {"description", c->description},
                                                 {"backend", (*backend)->Name()}});
    }
  }
  if (rebuild_sched_input_) {
    sched_input_ = SchedulerInput(options_.schedule_depth);
    rebuild_sched_input_ = false;
  }
  // Only the jobs that entered or left RUNNABLE are converted; a job with an
  // injected capacity shortage enters the input when its hold ends.
  EndCapacityHoldsLocked(now);
  for (const std::string& id : index_.TakeRunnableChanges()) {
    auto it = jobs_.find(id);
    if (it != jobs_.end() && it->second.status == JobStatus::kRunnable &&
        !it->second.IsArrayParent()) {
      if (HoldForInjectedShortageLocked(it->second, now)) continue;
      sched_input_.PutJob(SchedulerJobWithAvoidance(it->second, submit_order_.at(id)),
                          it->second.status_reason);
    } else {
      capacity_holds_.Release(id);
      shortage_served_.erase(id);
      sched_input_.EraseJob(id);
    }
  }
  std::vector<const Job*> holding;
  for (const std::string& id : index_.Holding()) holding.push_back(&jobs_.at(id));
  Result<sched::Snapshot> environments = BuildSchedulerEnvironments(
      holding, &instances_, control_, share_history_, now, backend_capacity_);
  if (!environments.ok()) {
    spdlog::error("jobs: snapshot: {}", environments.status().ToString());
    return false;
  }
  BindHostDevicesLocked(holding, &*environments);
  MaskQuarantinedLocked(&*environments, now);
  environments->consumables = consumables_.ForScheduler(UnitsInUseLocked());
  sched_input_.SetEnvironments(std::move(*environments));
  if (sched_input_.size() == 0) {
    queue_order_.clear();
    return false;
  }
  return sched_input_.DecideDue(now);
}

void JobLoop::BindHostDevicesLocked(const std::vector<const Job*>& holding,
                                    sched::Snapshot* environments) {
  if (options_.host_devices == nullptr) return;
  std::shared_ptr<const HostDevicesView> view = options_.host_devices->Current();
  std::vector<HeldDevices> held;
  std::map<int32_t, std::string> holders;  // position -> job (node) holding it
  const std::vector<ComputeEnvironmentSpec> specs = control_->ComputeEnvironments();
  std::set<std::string> host_ces;
  for (const ComputeEnvironmentSpec& ce : specs)
    if (UsesHostDevices(*view, ce)) host_ces.insert(ce.name);
  for (const Job* job : holding) {
    const Attempt* a = job->CurrentAttempt();
    if (a == nullptr) continue;
    for (const NodeAttempt& n : a->nodes) {
      if (n.devices.empty()) continue;
      held.push_back(HeldDevices{a->compute_environment, n.instance_id, n.devices});
      if (!host_ces.count(a->compute_environment)) continue;
      for (int32_t d : n.devices)
        holders[d] = job->IsMultiNode() ? NodeJobId(job->id, n.node_index) : job->id;
    }
  }
  BindHostDevices(*view, specs, held, environments);
  // DescribeComputeEnvironments' loteAccelerators, on the environments that use them.
  Json shown = DescribeHostDevices(*view, holders);
  for (const ComputeEnvironmentSpec& ce : specs)
    control_->SetAccelerators(ce.name, host_ces.count(ce.name) ? shown : Json());
}

bool JobLoop::HoldForInjectedShortageLocked(const Job& job, int64_t now) {
  const std::string id = job.id;  // job may be replaced by ApplyLocked
  if (capacity_holds_.IsHeld(id)) return true;
  std::optional<InjectedShortage> shortage = InjectedShortageLocked(job);
  if (!shortage) return false;
  auto served = shortage_served_.find(id);
  if (served != shortage_served_.end() && served->second == job.attempts.size()) return false;
  shortage_served_[id] = job.attempts.size();
  capacity_holds_.Hold(id, *shortage, now);
  sched_input_.EraseJob(id);
  Status r = ApplyLocked(id, JobEvent::StatusReason(InjectedShortageReason(*shortage), now));
  if (!r.ok()) spdlog::warn("jobs: capacity hold of {} not recorded: {}", id, r.ToString());
  return true;
}

void JobLoop::EndCapacityHoldsLocked(int64_t now) {
  queue_shortages_.clear();  // the environments' tags are read again this pass
  for (const auto& [id, shortage] : capacity_holds_.TakeEnded(now)) {
    auto it = jobs_.find(id);
    if (it == jobs_.end() || it->second.status != JobStatus::kRunnable) continue;
    // The end is recorded, and the job enters the scheduler's input.
    Status r = ApplyLocked(id, JobEvent::StatusReason(InjectedShortageEndReason(shortage), now));
    if (!r.ok())
      spdlog::warn("jobs: end of capacity hold of {} not recorded: {}", id, r.ToString());
    const Job& job = jobs_.at(id);
    sched_input_.PutJob(SchedulerJobWithAvoidance(job, submit_order_.at(id)), job.status_reason);
  }
}

std::vector<std::pair<std::string, std::string>> JobLoop::ChangedReasons(
    const sched::Decisions& decisions) {
  std::vector<std::pair<std::string, std::string>> changed;
  for (const sched::Wait& w : decisions.waiting)
    if (sched_input_.ChangeReason(w.job_id, w.message)) changed.emplace_back(w.job_id, w.message);
  return changed;
}

bool JobLoop::StillRunnableLocked(const std::string& id) const {
  auto it = jobs_.find(id);
  return it != jobs_.end() && it->second.status == JobStatus::kRunnable &&
         it->second.CurrentAttempt() == nullptr;
}

void JobLoop::ApplyDecisionsLocked(sched::Decisions decisions,
                                   const std::vector<std::pair<std::string, std::string>>& reasons,
                                   int64_t now, std::vector<std::string>* launches) {
  auto apply = [&](const std::string& id, const JobEvent& e) {
    if (!StillRunnableLocked(id)) return;  // changed while the policy ran
    Status r = ApplyLocked(id, e);
    if (!r.ok())
      spdlog::warn("jobs: event {} on {} not applied: {}", JobEventTypeName(e.type), id,
                   r.ToString());
  };
  queue_order_ = std::move(decisions.order);
  std::vector<std::string> launched_ids;
  for (const sched::Launch& l : decisions.launches) {
    const std::string iid = NewInstanceIdLocked();
    Result<std::string> ip = exec::InstancePrivateIp(next_instance_index_);
    ++next_instance_index_;
    instances_[iid] = VirtualInstance{iid, l.compute_environment, l.shape,
                                      ip.ok() ? *ip : std::string("127.0.0.1"), now};
    launched_ids.push_back(iid);
  }
  for (const sched::Removal& r : decisions.removals) instances_.erase(r.instance_id);
  for (const sched::CeTarget& t : decisions.targets) {
    if (backend_capacity_.count(t.compute_environment)) continue;  // nothing to scale
    Status st =
        control_->SetDesiredVcpus(t.compute_environment, static_cast<int32_t>(t.desired_vcpus));
    if (!st.ok())
      spdlog::warn("jobs: desiredvCpus of {}: {}", t.compute_environment, st.ToString());
  }
  for (const sched::ShareUsageUpdate& u : decisions.share_usage)
    share_history_[u.queue + "/" + u.share_identifier] = u;
  for (const sched::NeverFits& nf : decisions.never_fits)
    apply(nf.job_id, JobEvent::AttemptFailed(0, FailureCategory::kCapacity, nf.message, -1, now));
  // A malformed request fails its own job, never the pass; a job whose queue
  // has gone is left RUNNABLE.
  for (const sched::Rejected& r : decisions.rejected) {
    if (!KnownQueue(r.job_id)) continue;
    spdlog::warn("jobs: {} cannot be scheduled: {}", r.job_id, r.message);
    apply(r.job_id, JobEvent::AttemptFailed(0, FailureCategory::kCapacity,
                                            "the job cannot be scheduled: " + r.message, -1, now));
  }
  for (const auto& [id, message] : reasons) apply(id, JobEvent::StatusReason(message, now));
  auto ip_of = [this](const std::string& iid) {
    auto it = instances_.find(iid);
    return it == instances_.end() ? std::string() : it->second.private_ip;
  };
  // A placement that cannot be recorded fails its own job (with the reason),
  // never the pass, and never leaves the job silently RUNNABLE.
  auto placement_failed = [&](const std::string& id, const Status& why) {
    spdlog::error("jobs: placement of {}: {}", id, why.ToString());
    apply(id, JobEvent::AttemptFailed(0, FailureCategory::kInfrastructure,
                                      "lote could not place the job: " + why.message(), -1, now));
  };
  for (const sched::Placement& p : decisions.placements) {
    if (!StillRunnableLocked(p.job_id)) continue;  // its capacity waits for the next pass
    Result<JobEvent> e = ScheduledEvent(p, launched_ids, ip_of, now);
    if (!e.ok()) {
      placement_failed(p.job_id, e.status());
      continue;
    }
    Status r = ApplyLocked(p.job_id, *e);
    if (r.ok()) {
      launches->push_back(p.job_id);
    } else {
      placement_failed(p.job_id, r);
    }
  }
}

bool JobLoop::KnownQueue(const std::string& job_id) const {
  const sched::Job* job = sched_input_.FindJob(job_id);
  if (job == nullptr) return false;
  for (const sched::JobQueue& q : sched_input_.queues())
    if (q.name == job->queue) return true;
  return false;
}

}  // namespace lote::control
