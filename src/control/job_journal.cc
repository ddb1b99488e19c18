// The job loop's journal: every accepted event applied to the in-memory
// table and the index, appended to the store's job_events with the job row
// rewritten, in the batch the next flush commits.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <optional>
#include <set>
#include <utility>

#include "control/job_loop.h"

namespace lote::control {
namespace {

// Events after which the row of an unfinished job may lag (the job as stored
// is its row with the later events applied): its dependencies resolved, the
// steps of placing, launching and starting it, its wait's reason and its
// progress. A job's row is rewritten for any other event, and when it ends: a
// finished job's row is its state (reads of finished jobs replay nothing). A
// job of `true` writes two rows, its submission and its end.
bool RowMayLag(JobEventType type) {
  switch (type) {
    case JobEventType::kDependenciesResolved:
    case JobEventType::kScheduled:
    case JobEventType::kLaunched:
    case JobEventType::kNodeStarted:
    case JobEventType::kNodePulled:
    case JobEventType::kProgress:
    case JobEventType::kBackendPending:
    case JobEventType::kStatusReason:
      return true;
    default:
      return false;
  }
}

// At most this many events after its row, so that a long job's replay at
// start-up stays short.
constexpr int64_t kMaxRowLag = 64;

// The store's row of a job, with the columns its reads filter on; `doc`
// is JobToJson(job).dump(), made here when not given.
store::JobRow RowOf(const Job& job, int64_t updated_ms, int64_t row_seq, std::string doc = "") {
  store::JobRow row{job.id,
                    job.name,
                    job.queue_arn,
                    std::string(JobStatusName(job.status)),
                    job.created_at,
                    updated_ms,
                    doc.empty() ? JobToJson(job).dump() : std::move(doc)};
  row.row_seq = row_seq;
  if (job.IsArrayChild()) {
    row.parent_id = job.array_parent_id;
    row.array_index = job.array->index;
  }
  row.definition_name = job.definition_name;
  row.definition_arn = job.definition_arn;
  row.share_identifier = job.share_identifier;
  if (IsFinal(job.status)) row.stopped_ms = job.stopped_at > 0 ? job.stopped_at : updated_ms;
  for (const Attempt& a : job.attempts)
    if (a.failure_category == FailureCategory::kNodeLost ||
        a.failure_category == FailureCategory::kHang)
      row.node_failed_ms = std::max(row.node_failed_ms, a.stopped_at);
  return row;
}

}  // namespace

Status JobLoop::ApplyLocked(const std::string& id, const JobEvent& event) {
  auto it = jobs_.find(id);
  if (it == jobs_.end() && event.type != JobEventType::kSubmitted) {
    // A finished job that left memory: read back, then changed.
    ASSIGN_OR_RETURN(bool restored, RestoreLocked(id));
    if (restored) it = jobs_.find(id);
  }
  static const Job kNone;
  const Job& before = it == jobs_.end() ? kNone : it->second;
  ASSIGN_OR_RETURN(Job after, Apply(before, event));
  if (it != jobs_.end() && after == before) return Status::Ok();  // no-op or stale: nothing stored
  const int64_t seq = ++last_seq_[after.id];
  std::string job_doc;
  batch_.AppendJobEvent(store::JobEvent{after.id, seq, event.at_ms,
                                        std::string(JobEventTypeName(event.type)),
                                        EventPayload(event, &job_doc)});
  PendingRow& pending = batch_jobs_[after.id];  // its row: at the flush
  pending.updated_ms = event.at_ms;
  pending.due = pending.due || !RowMayLag(event.type);
  pending.submitted_doc = std::move(job_doc);  // "" but for a Submitted event
  if (IsFinal(after.status)) finishing_[after.id] = kUnflushed;
  const std::string queue_arn = after.queue_arn;
  const JobStatus status = after.status;
  if (it == jobs_.end()) {
    submit_order_[after.id] = next_submit_order_++;
    Job& stored = jobs_[after.id];
    stored = std::move(after);
    index_.Update(nullptr, stored);
  } else {
    const Job previous = std::move(it->second);
    it->second = std::move(after);
    AfterChangeLocked(previous, it->second);
    if (previous.status != status) CountJobsLocked(previous.queue_arn, previous.status);
  }
  CountJobsLocked(queue_arn, status);
  dirty_ = true;
  return Status::Ok();
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
    // NON_REPLENISHABLE units the attempt held are used up, stored with its
    // end, when its command ran on some node (not a launch that failed, or a
    // node lost before it started).
    const Attempt& closed = after.attempts[before.attempts.size() - 1];
    const bool ran = std::any_of(
        closed.nodes.begin(), closed.nodes.end(),
        [](const NodeAttempt& n) { return n.started_at > 0 || n.exit_code.has_value(); });
    if (ran)
      for (const auto& [name, units] : ConsumableUnits(before))
        if (auto used = consumables_.UseUp(name, units)) StoreConsumableLocked(*used);
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
  std::vector<std::string> ids;
  ids.reserve(batch_jobs_.size());
  for (auto& [id, pending] : batch_jobs_) {
    ids.push_back(id);
    auto it = jobs_.find(id);
    if (it == jobs_.end()) continue;
    const Job& job = it->second;
    const int64_t seq = last_seq_[id];
    auto stored = row_seq_.find(id);
    if (!IsFinal(job.status) && !pending.due && stored != row_seq_.end() &&
        seq - stored->second < kMaxRowLag) {
      continue;  // the row lags: the events of this batch carry the change
    }
    batch_.PutJob(RowOf(job, pending.updated_ms, seq, std::move(pending.submitted_doc)));
    if (IsFinal(job.status)) {
      row_seq_.erase(id);
    } else {
      row_seq_[id] = seq;
    }
  }
  batch_jobs_.clear();
  store::WriteBatch batch = std::move(batch_);
  batch_ = store::WriteBatch();
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
  for (const std::string& id : ids)
    if (auto f = finishing_.find(id); f != finishing_.end()) f->second = *ticket;
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
  std::set<std::string> ids;
  for (const auto& [id, pending] : batch_jobs_) ids.insert(id);
  for (const auto& [ticket, touched] : unstored_) ids.insert(touched.begin(), touched.end());
  unstored_.clear();
  batch_jobs_.clear();
  batch_ = store::WriteBatch();
  if (Status st = LoadConsumablesLocked(); !st.ok())
    spdlog::error("jobs: consumable resources could not be read back: {}", st.ToString());
  for (const std::string& id : ids) {
    Status st = ReloadJobLocked(id);
    if (!st.ok()) spdlog::error("jobs: {} could not be read back: {}", id, st.ToString());
  }
  metrics_.ClearJobCounts();
  for (const auto& [key, count] : index_.CountsByQueue()) CountJobsLocked(key.first, key.second);
  rebuild_sched_input_ = true;
  // What made the loop dirty is undone; the next pass comes on its own time
  // (no pass after pass while the disk stays full).
  dirty_ = false;
  spdlog::warn("jobs: a store write failed: {} job(s) set back to what is stored", ids.size());
}

Status JobLoop::ReloadJobLocked(const std::string& id) {
  // The index follows each job (Update), not Rebuild: it also counts the
  // finished jobs only the store holds.
  auto it = jobs_.find(id);
  ASSIGN_OR_RETURN(std::optional<store::JobRow> row, store_->FindJob(id));
  if (!row) {
    if (it != jobs_.end()) {
      index_.Forget(it->second);
      jobs_.erase(it);
    }
    last_seq_.erase(id);
    row_seq_.erase(id);
    submit_order_.erase(id);
    finishing_.erase(id);
    return Status::Ok();
  }
  ASSIGN_OR_RETURN(int64_t seq, store_->LastJobEventSeq(id));
  ASSIGN_OR_RETURN(Job job, JobFromRow(*row, seq));
  const bool final = IsFinal(job.status);
  if (final) {
    row_seq_.erase(id);
  } else {
    row_seq_[id] = SeqHeldByRow(*row, seq);
  }
  if (it == jobs_.end()) {
    if (final) return Status::Ok();  // left memory once committed: counted already
    submit_order_[id] = next_submit_order_++;
    index_.Update(nullptr, jobs_[id] = std::move(job));
  } else {
    const Job before = std::move(it->second);
    it->second = std::move(job);
    index_.Update(&before, it->second);
  }
  last_seq_[id] = seq;
  if (final) {
    finishing_[id] = 0;  // committed
  } else {
    finishing_.erase(id);
  }
  return Status::Ok();
}

Result<Job> JobLoop::JobFromRow(const store::JobRow& row, std::optional<int64_t> last_seq,
                                const std::vector<store::JobEvent>* later) {
  ASSIGN_OR_RETURN(Json doc, ParseJson(row.doc));
  ASSIGN_OR_RETURN(Job job, JobFromJson(doc));
  // A finished job's row is current (written with its last change).
  if (row.row_seq <= 0 || IsFinal(job.status)) return job;
  if (last_seq && *last_seq <= row.row_seq) return job;
  std::vector<store::JobEvent> read;
  if (later == nullptr) {
    ASSIGN_OR_RETURN(read, store_->JobEvents(row.job_id, row.row_seq));
    later = &read;
  }
  for (const store::JobEvent& e : *later) {
    ASSIGN_OR_RETURN(Json payload, ParseJson(e.payload));
    ASSIGN_OR_RETURN(JobEvent event, EventFromJson(payload));
    ASSIGN_OR_RETURN(job, Apply(job, event));
  }
  return job;
}

Result<std::optional<Job>> JobLoop::StoredJob(const std::string& id) {
  ASSIGN_OR_RETURN(std::optional<store::JobRow> row, store_->FindJob(id));
  if (!row) return std::optional<Job>();
  ASSIGN_OR_RETURN(Job job, JobFromRow(*row, std::nullopt));
  return std::optional<Job>(std::move(job));
}

Result<std::optional<Job>> JobLoop::FindJobLocked(const std::string& id) {
  if (auto it = jobs_.find(id); it != jobs_.end()) return std::optional<Job>(it->second);
  if (retiring_.count(id)) return std::optional<Job>();
  return StoredJob(id);
}

Result<bool> JobLoop::RestoreLocked(const std::string& id) {
  if (retiring_.count(id)) return false;
  ASSIGN_OR_RETURN(std::optional<Job> job, StoredJob(id));
  // Only finished jobs leave memory: another row not in memory is not one of ours.
  if (!job || !IsFinal(job->status)) return false;
  ASSIGN_OR_RETURN(int64_t seq, store_->LastJobEventSeq(id));
  last_seq_[id] = seq;
  finishing_[id] = 0;  // committed: it leaves again once its change is
  index_.Restore(jobs_[id] = std::move(*job));
  return true;
}

void JobLoop::EvictFinishedLocked() {
  metrics_.SetJobsInMemory(static_cast<int64_t>(jobs_.size()));
  if (finishing_.empty()) return;
  const uint64_t seen = failures_seen_;
  const store::Store::Ticket committed = store_->finished_through();
  // A failed write since: ReconcileLocked decides first.
  if (store_->failure_count() != seen) return;
  std::set<std::string> progress_due;  // the final progress of an attempt still to store
  for (const exec::AttemptKey& key : closed_attempts_) progress_due.insert(key.job_id);
  std::vector<std::string> gone;
  // Backwards: an array's children ("<id>:<i>") before their parent.
  for (auto f = finishing_.rbegin(); f != finishing_.rend(); ++f) {
    const std::string& id = f->first;
    if (f->second > committed || progress_due.count(id)) continue;
    auto it = jobs_.find(id);
    if (it == jobs_.end() || !IsFinal(it->second.status)) {
      gone.push_back(id);
      continue;
    }
    if (it->second.IsArrayParent()) {
      const std::string prefix = id + ":";
      auto child = jobs_.lower_bound(prefix);
      if (child != jobs_.end() && child->first.compare(0, prefix.size(), prefix) == 0) continue;
      index_.ForgetChildCounts(id);
    }
    index_.Evict(it->second);
    jobs_.erase(it);
    last_seq_.erase(id);
    row_seq_.erase(id);
    submit_order_.erase(id);
    shortage_served_.erase(id);
    queue_positions_.erase(id);
    gone.push_back(id);
  }
  for (const std::string& id : gone) finishing_.erase(id);
  metrics_.SetJobsInMemory(static_cast<int64_t>(jobs_.size()));
}

void JobLoop::RetireExpiredJobs(int64_t now) {
  const int64_t retention = options_.job_retention_ms;
  if (retention <= 0 || now < next_retention_ms_) return;
  // Checked again after a quarter of the retention, at most a minute later.
  const int64_t idle_interval = std::clamp<int64_t>(retention / 4, 1, 60'000);
  next_retention_ms_ = now + idle_interval;
  Result<store::ExpiredJobs> expired =
      store_->FindExpiredJobs(now - retention, options_.retention_batch_rows);
  if (!expired.ok()) {
    spdlog::warn("jobs: retention: {}", expired.status().ToString());
    return;
  }
  if (expired->jobs.empty()) return;
  std::vector<const store::ExpiredJob*> deleting;
  Result<uint64_t> ticket = uint64_t{0};
  {
    std::lock_guard<std::mutex> lock(mu_);
    store::WriteBatch batch;
    for (const store::ExpiredJob& job : expired->jobs) {
      // Read back for a change meanwhile: deleted by a later batch.
      if (jobs_.count(job.job_id)) continue;
      batch.DeleteJob(job.job_id);
      retiring_.insert(job.job_id);
      deleting.push_back(&job);
    }
    if (deleting.empty()) return;
    ticket = store_->EnqueueUnlessFailed(std::move(batch), failures_seen_);
  }
  const Status st = ticket.ok() ? store_->Wait(*ticket) : ticket.status();
  int64_t rows = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const store::ExpiredJob* job : deleting) {
      retiring_.erase(job->job_id);
      if (!st.ok()) continue;
      rows += job->rows;
      for (const store::JobCount& c : job->counts) {
        Result<JobStatus> status = ParseJobStatus(c.status);
        if (!status.ok()) continue;
        index_.AddCount(c.queue_arn, *status, -c.count);
        CountJobsLocked(c.queue_arn, *status);
      }
    }
  }
  if (!st.ok()) {
    spdlog::warn("jobs: retention: the deletion was not stored: {}", st.ToString());
    return;
  }
  // Their folders go with them (records, outputs, working directories),
  // outside the lock: a home's disk use follows the retention, not the
  // history. An array's children are <id>:0 .. <id>:<rows - 2>. The logs stay
  // in their log streams.
  int64_t refused = 0;
  for (const store::ExpiredJob* job : deleting) {
    std::vector<std::string> ids{job->job_id};
    for (int64_t i = 0; i + 1 < job->rows; ++i)
      ids.push_back(ArrayChildId(job->job_id, static_cast<int32_t>(i)));
    for (exec::Backend* backend : options_.backends->All())
      for (const std::string& id : ids)
        if (Status removed = backend->RemoveJobFiles(id); !removed.ok()) {
          if (++refused <= 3) spdlog::warn("jobs: retention: {}", removed.ToString());
        }
  }
  spdlog::info("jobs: retention: {} finished job(s) that ended over {} s ago deleted", rows,
               retention / 1000);
  // A full batch: more may be due at once.
  if (expired->rows >= options_.retention_batch_rows) next_retention_ms_ = now;
}

}  // namespace lote::control
