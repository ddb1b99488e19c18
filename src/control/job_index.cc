#include "control/job_index.h"

#include "control/job_state.h"

namespace lote::control {
namespace {

bool IsRunnable(const Job& job) {
  return job.status == JobStatus::kRunnable && !job.IsArrayParent();
}

bool WaitsOnDependencies(const Job& job) {
  return !job.IsArrayParent() &&
         (job.status == JobStatus::kSubmitted || job.status == JobStatus::kPending);
}

// Whether a queue's ListJobs shows the job (not an array child, not a node view).
bool ListedInQueue(const Job& job) { return !job.IsArrayChild() && job.node_index < 0; }

// The job whose status a dependency reads (a node of a multi-node job: the job).
std::string DependencyKey(const std::string& dep) {
  if (auto node = ParseNodeJobId(dep)) return node->first;
  return dep;
}

}  // namespace

void JobIndex::Update(const Job* before, const Job& after) {
  const bool status_changed = before == nullptr || before->status != after.status;
  if (IsRunnable(after) != (before != nullptr && IsRunnable(*before)))
    runnable_changes_.insert(after.id);
  if (before != nullptr) Remove(*before);
  Add(after);
  if (status_changed) {
    if (auto w = waiters_.find(after.id); w != waiters_.end())
      dependency_candidates_.insert(w->second.begin(), w->second.end());
    if (auto child = ParseArrayChildId(after.id); child && after.array && !after.IsArrayParent()) {
      auto& counts = child_counts_[child->first];
      if (before != nullptr && --counts[before->status] == 0) counts.erase(before->status);
      ++counts[after.status];
      changed_parents_.insert(child->first);
    }
  }
  if (WaitsOnDependencies(after) && (status_changed || before->wait_for != after.wait_for))
    dependency_candidates_.insert(after.id);
}

void JobIndex::Remove(const Job& job, bool counted) {
  if (auto d = deadline_of_.find(job.id); d != deadline_of_.end()) {
    deadlines_.erase({d->second, job.id});
    deadline_of_.erase(d);
  }
  hang_watched_.erase(job.id);
  if (WaitsOnDependencies(job)) {
    for (const std::string& dep : job.wait_for) {
      auto w = waiters_.find(DependencyKey(dep));
      if (w == waiters_.end()) continue;
      w->second.erase(job.id);
      if (w->second.empty()) waiters_.erase(w);
    }
  }
  if (auto q = runnable_.find(job.queue_arn); q != runnable_.end()) {
    q->second.erase(job.id);
    if (q->second.empty()) runnable_.erase(q);
  }
  holding_.erase(job.id);
  if (counted) AddCount(job.queue_arn, job.status, -1);
  if (!ListedInQueue(job)) return;
  if (auto l = listed_.find({job.queue_arn, ShownStatus(job)}); l != listed_.end()) {
    l->second.erase({job.created_at, job.id});
    if (l->second.empty()) listed_.erase(l);
  }
}

void JobIndex::Add(const Job& job, bool counted) {
  if (std::optional<int64_t> deadline = AttemptDeadlineMs(job)) {
    deadlines_.insert({*deadline, job.id});
    deadline_of_[job.id] = *deadline;
  }
  if (job.status == JobStatus::kRunning && job.CurrentAttempt() != nullptr &&
      ProgressTimeoutSeconds(job))
    hang_watched_.insert(job.id);
  if (WaitsOnDependencies(job))
    for (const std::string& dep : job.wait_for) waiters_[DependencyKey(dep)].insert(job.id);
  if (IsRunnable(job)) runnable_[job.queue_arn].insert(job.id);
  if (job.CurrentAttempt() != nullptr) holding_.insert(job.id);
  if (counted) AddCount(job.queue_arn, job.status, 1);
  if (ListedInQueue(job))
    listed_[{job.queue_arn, ShownStatus(job)}].insert({job.created_at, job.id});
}

void JobIndex::Evict(const Job& job) { Remove(job, /*counted=*/false); }

void JobIndex::Restore(const Job& job) { Add(job, /*counted=*/false); }

void JobIndex::Forget(const Job& job) {
  Remove(job);
  if (auto child = ParseArrayChildId(job.id); child && job.array && !job.IsArrayParent())
    AddChildCount(child->first, job.status, -1);
  runnable_changes_.insert(job.id);
  if (auto w = waiters_.find(job.id); w != waiters_.end())
    dependency_candidates_.insert(w->second.begin(), w->second.end());
}

void JobIndex::AddCount(const std::string& queue_arn, JobStatus status, int64_t delta) {
  auto [c, added] = counts_.try_emplace({queue_arn, status}, 0);
  c->second += delta;
  if (c->second <= 0) counts_.erase(c);
}

void JobIndex::AddChildCount(const std::string& parent, JobStatus status, int32_t delta) {
  auto& counts = child_counts_[parent];
  auto [c, added] = counts.try_emplace(status, 0);
  c->second += delta;
  if (c->second <= 0) counts.erase(c);
  changed_parents_.insert(parent);
}

void JobIndex::ForgetChildCounts(const std::string& parent) {
  child_counts_.erase(parent);
  changed_parents_.erase(parent);
}

const JobIndex::Listed* JobIndex::ListedJobs(const std::string& queue_arn, JobStatus shown) const {
  auto it = listed_.find({queue_arn, shown});
  return it == listed_.end() ? nullptr : &it->second;
}

void JobIndex::Rebuild(const JobTable& jobs) {
  *this = JobIndex();
  for (const auto& [id, job] : jobs) Update(nullptr, job);
}

std::vector<std::string> JobIndex::DueTimeouts(int64_t now) const {
  std::vector<std::string> due;
  for (auto it = deadlines_.begin(); it != deadlines_.end() && it->first <= now; ++it)
    due.push_back(it->second);
  return due;
}

std::vector<std::string> JobIndex::TakeDependencyCandidates() {
  std::vector<std::string> out(dependency_candidates_.begin(), dependency_candidates_.end());
  dependency_candidates_.clear();
  return out;
}

std::vector<std::string> JobIndex::TakeChangedArrayParents() {
  std::vector<std::string> out(changed_parents_.begin(), changed_parents_.end());
  changed_parents_.clear();
  return out;
}

std::vector<std::string> JobIndex::TakeRunnableChanges() {
  std::vector<std::string> out(runnable_changes_.begin(), runnable_changes_.end());
  runnable_changes_.clear();
  return out;
}

std::map<std::string, int32_t> JobIndex::ArrayChildCounts(const std::string& parent) const {
  std::vector<JobStatus> none;
  std::map<std::string, int32_t> counts = CountStatuses(none);
  if (auto it = child_counts_.find(parent); it != child_counts_.end())
    for (const auto& [status, n] : it->second) counts[std::string(JobStatusName(status))] = n;
  return counts;
}

std::set<std::string> JobIndex::WaitersOf(const std::string& id) const {
  auto it = waiters_.find(id);
  return it == waiters_.end() ? std::set<std::string>() : it->second;
}

bool JobIndex::operator==(const JobIndex& o) const {
  return deadlines_ == o.deadlines_ && deadline_of_ == o.deadline_of_ &&
         hang_watched_ == o.hang_watched_ && waiters_ == o.waiters_ &&
         child_counts_ == o.child_counts_ && runnable_ == o.runnable_ && holding_ == o.holding_ &&
         counts_ == o.counts_ && listed_ == o.listed_;
}

}  // namespace lote::control
