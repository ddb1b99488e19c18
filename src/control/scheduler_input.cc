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
  window_stale_ = true;
  auto it = jobs_.find(job.id);
  if (it != jobs_.end()) {
    Unlink(it->second.job);
    jobs_.erase(it);
  }
  by_queue_[job.queue].emplace(0, job.submit_order, job.id);
  by_share_[job.queue][job.share_identifier].emplace(-int64_t{job.scheduling_priority},
                                                     job.submit_order, job.id);
  std::string id = job.id;
  jobs_.emplace(std::move(id), Kept{std::move(job), std::move(reason)});
}

void SchedulerInput::EraseJob(const std::string& id) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return;
  changed_ = true;
  window_stale_ = true;
  Unlink(it->second.job);
  jobs_.erase(it);
}

void SchedulerInput::Unlink(const sched::Job& job) {
  auto q = by_queue_.find(job.queue);
  q->second.erase(OrderKey{0, job.submit_order, job.id});
  if (q->second.empty()) by_queue_.erase(q);
  auto shares = by_share_.find(job.queue);
  auto share = shares->second.find(job.share_identifier);
  share->second.erase(OrderKey{-int64_t{job.scheduling_priority}, job.submit_order, job.id});
  if (share->second.empty()) shares->second.erase(share);
  if (shares->second.empty()) by_share_.erase(shares);
}

const sched::Job* SchedulerInput::FindJob(const std::string& id) const {
  auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : &it->second.job;
}

void SchedulerInput::SetEnvironments(sched::Snapshot environments) {
  environments.jobs.clear();
  if (!SameEnvironments(window_, environments)) {
    changed_ = true;
    window_stale_ = true;  // a queue may have come, gone or changed its policy
  }
  window_.hosts = std::move(environments.hosts);
  window_.compute_environments = std::move(environments.compute_environments);
  window_.queues = std::move(environments.queues);
  window_.config = environments.config;
  window_.consumables = std::move(environments.consumables);
}

void SchedulerInput::TakeHeads(const std::set<OrderKey>& order) {
  size_t taken = 0;
  for (auto it = order.begin(); it != order.end() && taken < depth_; ++it, ++taken)
    window_.jobs.push_back(jobs_.at(std::get<2>(*it)).job);
}

const sched::Snapshot& SchedulerInput::Window() {
  if (!window_stale_) return window_;
  window_.jobs.clear();
  for (const sched::JobQueue& q : window_.queues) {
    if (!q.fair_share) {
      auto it = by_queue_.find(q.name);
      if (it != by_queue_.end()) TakeHeads(it->second);
      continue;
    }
    auto shares = by_share_.find(q.name);
    if (shares == by_share_.end()) continue;
    for (const auto& [share, order] : shares->second) TakeHeads(order);
  }
  window_stale_ = false;
  return window_;
}

bool SchedulerInput::DecideDue(int64_t now) const {
  if (changed_ || decided_at_ms_ < 0) return true;
  // An idle instance whose idle timeout passed since the last Decide (which
  // may remove it, or keep it for minvCpus: then it is not due again).
  for (const sched::ComputeEnvironment& ce : window_.compute_environments) {
    for (const sched::Instance& inst : ce.instances) {
      if (inst.idle_since_ms == sched::Instance::kBusy) continue;
      const int64_t due = inst.idle_since_ms + window_.config.idle_timeout_ms;
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
  auto it = jobs_.find(id);
  if (it == jobs_.end() || it->second.reason == reason) return false;
  it->second.reason = reason;
  return true;
}

bool SameEnvironments(const sched::Snapshot& a, const sched::Snapshot& b) {
  return a.hosts == b.hosts && a.compute_environments == b.compute_environments &&
         a.config == b.config && a.consumables == b.consumables &&
         WithoutHistory(a.queues) == WithoutHistory(b.queues);
}

}  // namespace lote::control
