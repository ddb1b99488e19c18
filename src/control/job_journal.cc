// The job loop's journal: every accepted event applied to the in-memory
// table and the index, appended to the store's job_events with the job row
// rewritten, in the batch the next flush commits.
#include <spdlog/spdlog.h>

#include <optional>
#include <set>
#include <utility>

#include "control/job_loop.h"

namespace lote::control {

Result<Job> JobLoop::ApplyLocked(const std::string& id, const JobEvent& event) {
  auto it = jobs_.find(id);
  static const Job kNone;
  const Job& before = it == jobs_.end() ? kNone : it->second;
  ASSIGN_OR_RETURN(Job after, Apply(before, event));
  if (it != jobs_.end() && after == before) return after;  // no-op or stale: nothing stored
  const int64_t seq = ++last_seq_[after.id];
  batch_.AppendJobEvent(store::JobEvent{after.id, seq, event.at_ms,
                                        std::string(JobEventTypeName(event.type)),
                                        EventToJson(event).dump()});
  batch_jobs_.insert(after.id);
  batch_.PutJob(store::JobRow{after.id, after.name, after.queue_arn,
                              std::string(JobStatusName(after.status)), after.created_at,
                              event.at_ms, JobToJson(after).dump()});
  if (it == jobs_.end()) {
    submit_order_[after.id] = next_submit_order_++;
    index_.Update(nullptr, jobs_[after.id] = after);
  } else {
    const Job previous = std::move(it->second);
    it->second = after;
    AfterChangeLocked(previous, after);
    if (previous.status != after.status) CountJobsLocked(previous.queue_arn, previous.status);
  }
  CountJobsLocked(after.queue_arn, after.status);
  dirty_ = true;
  return after;
}

void JobLoop::AfterChangeLocked(const Job& before, const Job& after) {
  index_.Update(&before, after);
  // An attempt that closed: tear down whatever still runs of it (gang rule).
  if (before.CurrentAttempt() != nullptr &&
      (after.CurrentAttempt() == nullptr || after.attempts.size() != before.attempts.size())) {
    to_terminate_.push_back(
        exec::AttemptKey{before.id, static_cast<int32_t>(before.attempts.size())});
    launch_warnings_.erase(
        exec::AttemptKey{before.id, static_cast<int32_t>(before.attempts.size())});
    NoteClosedAttemptLocked(after, before.attempts.size() - 1);
    if (output_ != nullptr)
      closed_attempts_.push_back(
          exec::AttemptKey{before.id, static_cast<int32_t>(before.attempts.size())});
  }
}

void JobLoop::CountJobsLocked(const std::string& queue_arn, JobStatus status) {
  auto it = index_.CountsByQueue().find({queue_arn, status});
  metrics_.SetJobCount(queue_arn, status, it == index_.CountsByQueue().end() ? 0 : it->second);
}

Result<uint64_t> JobLoop::FlushLocked() {
  if (batch_.empty()) return uint64_t{0};
  store::WriteBatch batch = std::move(batch_);
  batch_ = store::WriteBatch();
  std::vector<std::string> ids(batch_jobs_.begin(), batch_jobs_.end());
  batch_jobs_.clear();
  store::Store::Ticket committed = 0;
  Result<uint64_t> ticket =
      store_->EnqueueUnlessFailed(std::move(batch), failures_seen_, &committed);
  if (!ticket.ok()) {
    // A write failed since this memory was last known to match the store.
    unstored_.emplace_back(0, std::move(ids));
    ReconcileLocked();
    return ticket.status();
  }
  while (!unstored_.empty() && unstored_.front().first <= committed) unstored_.pop_front();
  unstored_.emplace_back(*ticket, std::move(ids));
  return ticket;
}

Status JobLoop::WaitTicket(Result<uint64_t> ticket) {
  if (!ticket.ok()) return ticket.status();
  if (*ticket == 0) return Status();
  Status st = store_->Wait(*ticket);
  if (!st.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    if (store_->failure_count() != failures_seen_) ReconcileLocked();
  }
  return st;
}

void JobLoop::SyncWithStoreLocked() {
  if (store_->failure_count() != failures_seen_) ReconcileLocked();
}

void JobLoop::ReconcileLocked() {
  // Once a write failed, every batch queued by then has failed too (the
  // store's contract) and none of ours was queued since (EnqueueUnlessFailed):
  // reading the jobs those batches touched gives what is committed.
  failures_seen_ = store_->failure_count();
  std::set<std::string> ids(batch_jobs_.begin(), batch_jobs_.end());
  for (const auto& [ticket, touched] : unstored_) ids.insert(touched.begin(), touched.end());
  unstored_.clear();
  batch_jobs_.clear();
  batch_ = store::WriteBatch();
  for (const std::string& id : ids) {
    Status st = ReloadJobLocked(id);
    if (!st.ok()) spdlog::error("jobs: {} could not be read back: {}", id, st.ToString());
  }
  index_.Rebuild(jobs_);
  metrics_.ClearJobCounts();
  for (const auto& [key, count] : index_.CountsByQueue()) CountJobsLocked(key.first, key.second);
  rebuild_sched_input_ = true;
  // What made the loop dirty is undone; the next pass comes on its own time
  // (no pass after pass while the disk stays full).
  dirty_ = false;
  spdlog::warn("jobs: a store write failed: {} job(s) set back to what is stored", ids.size());
}

Status JobLoop::ReloadJobLocked(const std::string& id) {
  ASSIGN_OR_RETURN(std::optional<store::JobRow> row, store_->FindJob(id));
  if (!row) {
    jobs_.erase(id);
    last_seq_.erase(id);
    submit_order_.erase(id);
    return Status::Ok();
  }
  ASSIGN_OR_RETURN(Json doc, ParseJson(row->doc));
  ASSIGN_OR_RETURN(Job job, JobFromJson(doc));
  ASSIGN_OR_RETURN(std::vector<store::JobEvent> events, store_->JobEvents(id));
  last_seq_[id] = events.empty() ? 0 : events.back().seq;
  jobs_[id] = std::move(job);
  return Status::Ok();
}

}  // namespace lote::control
