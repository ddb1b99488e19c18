#include "control/scheduler_input.h"

#include <utility>

namespace lote::control {
namespace {

std::vector<sched::JobQueue> WithoutHistory(std::vector<sched::JobQueue> queues) {
  for (sched::JobQueue& q : queues) {
    for (sched::ShareUsage& u : q.share_usage) {
      u.history_vcpu_seconds = 0;
      u.history_as_of_ms = 0;
    }
  }
  return queues;
}

}  // namespace

void SchedulerInput::PutJob(sched::Job job, std::string reason) {
  changed_ = true;
  auto [it, added] = position_.try_emplace(job.id, snapshot_.jobs.size());
  if (added) {
    snapshot_.jobs.push_back(std::move(job));
    reasons_.push_back(std::move(reason));
    return;
  }
  snapshot_.jobs[it->second] = std::move(job);
  reasons_[it->second] = std::move(reason);
}

void SchedulerInput::EraseJob(const std::string& id) {
  auto it = position_.find(id);
  if (it == position_.end()) return;
  changed_ = true;
  // The last job takes its place: the policy reads jobs in any order.
  const size_t at = it->second;
  const size_t last = snapshot_.jobs.size() - 1;
  position_.erase(it);
  if (at != last) {
    snapshot_.jobs[at] = std::move(snapshot_.jobs[last]);
    reasons_[at] = std::move(reasons_[last]);
    position_[snapshot_.jobs[at].id] = at;
  }
  snapshot_.jobs.pop_back();
  reasons_.pop_back();
}

const sched::Job* SchedulerInput::FindJob(const std::string& id) const {
  auto it = position_.find(id);
  return it == position_.end() ? nullptr : &snapshot_.jobs[it->second];
}

void SchedulerInput::SetEnvironments(sched::Snapshot environments) {
  environments.jobs.clear();
  if (!SameEnvironments(snapshot_, environments)) changed_ = true;
  snapshot_.compute_environments = std::move(environments.compute_environments);
  snapshot_.queues = std::move(environments.queues);
  snapshot_.config = environments.config;
}

bool SchedulerInput::DecideDue(int64_t now) const {
  if (changed_ || decided_at_ms_ < 0) return true;
  // An idle instance whose idle timeout passed since the last Decide (which
  // may remove it, or keep it for minvCpus: then it is not due again).
  for (const sched::ComputeEnvironment& ce : snapshot_.compute_environments) {
    for (const sched::Instance& inst : ce.instances) {
      if (inst.idle_since_ms == sched::Instance::kBusy) continue;
      const int64_t due = inst.idle_since_ms + snapshot_.config.idle_timeout_ms;
      if (due > decided_at_ms_ && due <= now) return true;
    }
  }
  return false;
}

void SchedulerInput::MarkDecided(int64_t now) {
  changed_ = false;
  decided_at_ms_ = now;
}

bool SchedulerInput::ChangeReason(const std::string& id, const std::string& reason) {
  auto it = position_.find(id);
  if (it == position_.end() || reasons_[it->second] == reason) return false;
  reasons_[it->second] = reason;
  return true;
}

bool SameEnvironments(const sched::Snapshot& a, const sched::Snapshot& b) {
  return a.compute_environments == b.compute_environments && a.config == b.config &&
         WithoutHistory(a.queues) == WithoutHistory(b.queues);
}

}  // namespace lote::control
