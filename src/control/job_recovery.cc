// The job loop's start-up: the jobs loaded from the store, their running
// nodes recovered from the backends by the stored references, their log
// streams resumed.
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <algorithm>
#include <utility>

#include "control/job_loop.h"
#include "exec/batch_env.h"

namespace lote::control {
namespace {

// Jobs that ended this recently (at most this many, the latest) may have
// output not stored yet when the server stopped: start-up reads them back.
constexpr int64_t kRecentlyEndedMs = 10 * 60 * 1000;
constexpr int64_t kRecentlyEndedJobs = 1000;

}  // namespace

Status JobLoop::Load() {
  failures_seen_ = store_->failure_count();
  RETURN_IF_ERROR(LoadConsumablesLocked());
  // The jobs not finished, in submission order (the scheduler's FIFO).
  ASSIGN_OR_RETURN(std::vector<store::UnfinishedJob> rows, store_->LoadUnfinishedJobs());
  for (const store::UnfinishedJob& row : rows) {
    // An unfinished job's row may lag behind its events: replayed.
    ASSIGN_OR_RETURN(Job job, JobFromRow(row.row, row.last_seq, &row.later_events));
    last_seq_[row.row.job_id] = row.last_seq;
    row_seq_[row.row.job_id] = SeqHeldByRow(row.row, row.last_seq);
    submit_order_[row.row.job_id] = next_submit_order_++;
    jobs_[row.row.job_id] = std::move(job);
  }
  index_.Rebuild(jobs_);
  // The finished ones stay in the store: counted there.
  ASSIGN_OR_RETURN(std::vector<store::JobCount> finished, store_->CountFinishedJobs());
  for (const store::JobCount& c : finished) {
    ASSIGN_OR_RETURN(JobStatus status, ParseJobStatus(c.status));
    index_.AddCount(c.queue_arn, status, c.count);
  }
  for (const auto& [id, job] : jobs_) {
    if (!job.IsArrayParent()) continue;
    ASSIGN_OR_RETURN(auto children, store_->FinishedChildCounts(id));
    for (const auto& [name, n] : children) {
      ASSIGN_OR_RETURN(JobStatus status, ParseJobStatus(name));
      index_.AddChildCount(id, status, static_cast<int32_t>(n));
    }
  }
  // The latest that ended, read back for a while: the rest of their output
  // is stored (ResumeLogs) with their last progress, then they leave again.
  if (output_ != nullptr) {
    ASSIGN_OR_RETURN(
        std::vector<store::JobRow> recent,
        store_->RecentlyEndedJobs(clock_->NowMillis() - kRecentlyEndedMs, kRecentlyEndedJobs));
    for (const store::JobRow& row : recent) {
      if (jobs_.count(row.job_id)) continue;
      ASSIGN_OR_RETURN(Json doc, ParseJson(row.doc));
      ASSIGN_OR_RETURN(Job job, JobFromJson(doc));
      ASSIGN_OR_RETURN(last_seq_[row.job_id], store_->LastJobEventSeq(row.job_id));
      finishing_[row.job_id] = 0;
      index_.Restore(jobs_[row.job_id] = std::move(job));
    }
  }
  for (const auto& [key, count] : index_.CountsByQueue()) CountJobsLocked(key.first, key.second);

  // Virtual instances that hold running nodes.
  for (const auto& [id, job] : jobs_) {
    const Attempt* attempt = job.CurrentAttempt();
    if (attempt == nullptr) continue;
    Result<ComputeEnvironmentSpec> ce =
        control_->FindComputeEnvironment(attempt->compute_environment);
    sched::Resources shape;
    if (ce.ok() && !ce->instance_types.empty()) shape = ShapeOf(ce->instance_types.front());
    for (const NodeAttempt& node : attempt->nodes) {
      if (instances_.count(node.instance_id)) continue;
      VirtualInstance inst{node.instance_id, attempt->compute_environment, shape, node.private_ipv4,
                           sched::Instance::kBusy};
      instances_[node.instance_id] = inst;
      next_instance_index_ =
          std::max(next_instance_index_, exec::InstanceIndexOfPrivateIp(node.private_ipv4) + 1);
    }
  }
  RebuildQuarantineLocked();
  RestoreCapacityHoldsLocked();
  return Status();
}

exec::Backend* JobLoop::BackendOf(const Attempt& attempt) {
  // The backend recorded at launch first: the environment may be gone.
  Result<ComputeEnvironmentSpec> ce = Status::NotFound("no backend recorded");
  if (attempt.backend.is_object()) {
    ComputeEnvironmentSpec recorded;
    recorded.name = attempt.compute_environment;
    recorded.managed = attempt.backend.value("managed", true);
    const Json tags = attempt.backend.value("tags", Json::object());
    for (const auto& [k, v] : tags.items())
      if (v.is_string()) recorded.lote_tags[k] = v.get<std::string>();
    ce = std::move(recorded);
  } else {
    ce = control_->FindComputeEnvironment(attempt.compute_environment);
  }
  if (!ce.ok()) return nullptr;
  Result<exec::Backend*> backend = options_.backends->ForEnvironment(*ce);
  if (!backend.ok()) {
    spdlog::warn("jobs: compute environment {}: {}", attempt.compute_environment,
                 backend.status().ToString());
    return nullptr;
  }
  return *backend;
}

Status JobLoop::RecoverNodes() {
  std::map<exec::Backend*, std::vector<exec::RecoverItem>> expected;
  size_t total = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [id, job] : jobs_) {
      const Attempt* attempt = job.CurrentAttempt();
      if (attempt == nullptr) continue;
      exec::Backend* backend = BackendOf(*attempt);
      if (backend == nullptr) {
        // Its environment is gone (or its backend cannot be set up): nothing
        // can report on its nodes.
        spdlog::warn("jobs: {} runs on {}, which has no backend now; it is lost", id,
                     attempt->compute_environment);
        continue;
      }
      const int32_t number = static_cast<int32_t>(job.attempts.size());
      for (const NodeAttempt& node : attempt->nodes) {
        if (IsFinal(node.status)) continue;
        expected[backend].push_back(exec::RecoverItem{
            exec::NodeKey{exec::AttemptKey{id, number}, node.node_index}, attempt->backend_ref});
        ++total;
      }
    }
  }
  // Every backend recovers, also with nothing expected (it ends orphans).
  for (exec::Backend* backend : options_.backends->All()) expected.try_emplace(backend);
  exec::RecoverReport report;
  for (auto& [backend, items] : expected) {
    ASSIGN_OR_RETURN(exec::RecoverReport r, backend->Recover(items));
    auto append = [](std::vector<exec::NodeKey>& to, const std::vector<exec::NodeKey>& from) {
      to.insert(to.end(), from.begin(), from.end());
    };
    append(report.adopted, r.adopted);
    append(report.finished, r.finished);
    append(report.lost, r.lost);
    append(report.never_started, r.never_started);
    append(report.orphans_terminated, r.orphans_terminated);
  }
  // An attempt none of whose nodes ever ran its command (the server stopped
  // while it was STARTING) fails as NOT_STARTED, which does not count against
  // retryStrategy.attempts: the job runs again as if it had not been tried.
  {
    std::map<exec::AttemptKey, size_t> never;
    for (const exec::NodeKey& key : report.never_started) ++never[key.attempt];
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [attempt, count] : never) {
      auto it = jobs_.find(attempt.job_id);
      if (it == jobs_.end() || it->second.CurrentAttempt() == nullptr) continue;
      const Attempt& open = *it->second.CurrentAttempt();
      bool untouched = count == open.nodes.size();
      for (const NodeAttempt& node : open.nodes)
        untouched = untouched && node.status == JobStatus::kStarting;
      if (untouched) unstarted_attempts_.insert(attempt);
    }
  }
  if (total > 0) {
    spdlog::info("jobs: recovered {} running node(s): {} adopted, {} finished, {} lost", total,
                 report.adopted.size(), report.finished.size(), report.lost.size());
  }
  return Status();
}

void JobLoop::ResumeLogs() {
  if (output_ == nullptr) return;
  size_t followed = 0, caught_up = 0;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [id, job] : jobs_) {
    for (size_t a = 0; a < job.attempts.size(); ++a) {
      const Attempt& attempt = job.attempts[a];
      const int32_t number = static_cast<int32_t>(a + 1);
      const bool open = &attempt == job.CurrentAttempt();
      exec::Backend* backend = nullptr;
      for (const NodeAttempt& node : attempt.nodes) {
        if (node.log_stream_name.empty()) continue;
        if (backend == nullptr) backend = BackendOf(attempt);
        if (backend == nullptr) break;
        const NodeOutputKey key{id, number, node.node_index};
        Result<std::string> output =
            backend->OutputPath(exec::NodeKey{exec::AttemptKey{id, number}, node.node_index});
        if (!output.ok()) continue;
        if (open && !IsFinal(node.status)) {
          // Running (adopted) or about to be reported ended by the backend.
          output_->Follow(key, *output, node.log_stream_name, node.started_at);
          ++followed;
          continue;
        }
        struct stat st;
        if (::stat(output->c_str(), &st) != 0 || st.st_size == 0) continue;
        Result<int64_t> stored = output_->StoredOffset(node.log_stream_name);
        if (stored.ok() && *stored >= st.st_size) continue;
        output_->Follow(key, *output, node.log_stream_name, node.started_at);
        output_->Complete(key);
        ++caught_up;
        // Its final progress may be in the part not stored yet.
        const exec::AttemptKey closed{id, number};
        if (!open && std::find(closed_attempts_.begin(), closed_attempts_.end(), closed) ==
                         closed_attempts_.end())
          closed_attempts_.push_back(closed);
      }
    }
  }
  if (followed + caught_up > 0)
    spdlog::info("logs: following {} running node(s); storing the rest of {} ended node(s)",
                 followed, caught_up);
}
}  // namespace lote::control
