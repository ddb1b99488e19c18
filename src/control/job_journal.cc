// The job loop's journal: every accepted event applied to the in-memory
// table and the index, appended to the store's job_events with the job row
// rewritten, in the batch the next flush commits.
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
  return store_->Enqueue(std::move(batch));
}

Status JobLoop::WaitTicket(Result<uint64_t> ticket) {
  if (!ticket.ok()) return ticket.status();
  if (*ticket == 0) return Status();
  return store_->Wait(*ticket);
}
}  // namespace lote::control
