// The job loop: one pass over what the backends reported, the clock and the
// index sets (timeouts, hangs, dependencies, array parents), then a
// scheduling pass whose placements are handed to the backends
// (job_launch.cc). Start-up is job_recovery.cc, the API operations
// job_operations.cc, applying and storing events job_journal.cc.
#include "control/job_loop.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <utility>

#include "control/job_controller.h"
#include "control/job_sched.h"
#include "exec/batch_env.h"
#include "logs/stream_names.h"

namespace lote::control {
namespace {

double SecondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

JobLoop::JobLoop(JobLoopOptions options)
    : options_(std::move(options)),
      clock_(options_.clock),
      store_(options_.store),
      control_(options_.control),
      output_(options_.output),
      metrics_(options_.metrics != nullptr ? options_.metrics : &own_metrics_),
      sched_input_(options_.schedule_depth),
      quarantine_(options_.quarantine),
      consumables_([control = options_.control](const std::string& name) {
        return control->MakeArn("consumable-resource/" + name);
      }) {}

Result<std::unique_ptr<JobLoop>> JobLoop::Create(JobLoopOptions options) {
  if (options.clock == nullptr || options.store == nullptr || options.control == nullptr ||
      options.backends == nullptr)
    return Status::InvalidArgument("JobLoop needs a clock, a store, a control plane and backends");
  std::unique_ptr<JobLoop> loop(new JobLoop(std::move(options)));
  RETURN_IF_ERROR(loop->Load());
  RETURN_IF_ERROR(loop->RecoverNodes());
  loop->ResumeLogs();
  return loop;
}

void JobLoop::Wake() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    dirty_ = true;
  }
  if (options_.wake) options_.wake();
}

bool JobLoop::TakeDirty() {
  std::lock_guard<std::mutex> lock(mu_);
  const bool was = dirty_;
  dirty_ = false;
  return was;
}

void JobLoop::Stop() {
  std::lock_guard<std::mutex> lock(mu_);
  stopping_ = true;
}

bool JobLoop::InMemory(const std::string& job_id) {
  std::lock_guard<std::mutex> lock(mu_);
  return jobs_.count(job_id) > 0;
}

// --- The loop -----------------------------------------------------------------

std::string JobLoop::NewInstanceIdLocked() {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "i-%017x", static_cast<unsigned>(next_instance_index_));
  return buf;
}

void JobLoop::UpdateArrayParentLocked(const std::string& parent_id, int64_t now) {
  auto parent = jobs_.find(parent_id);
  if (parent == jobs_.end()) return;
  std::optional<JobEvent> e =
      ArrayParentEvent(parent->second, index_.ArrayChildCounts(parent_id), now);
  if (!e) return;
  Status r = ApplyLocked(parent_id, *e);
  if (!r.ok()) spdlog::warn("jobs: array parent {}: {}", parent_id, r.ToString());
}

void JobLoop::PersistClosedAttemptsLocked(int64_t now) {
  std::vector<exec::AttemptKey> closed;
  closed.swap(closed_attempts_);
  for (const exec::AttemptKey& key : closed) {
    // The final progress is the one of the attempt's last line: wait until
    // every line is stored (JobLogs::OnStored wakes the loop).
    if (output_->AttemptPending(key.job_id, key.attempt)) {
      closed_attempts_.push_back(key);
      continue;
    }
    std::optional<Json> progress = output_->Progress(key.job_id, key.attempt, now);
    if (progress && jobs_.count(key.job_id)) {
      Status r = ApplyLocked(key.job_id, JobEvent::Progress(std::move(*progress), now));
      if (!r.ok()) spdlog::warn("jobs: progress of {}: {}", key.job_id, r.ToString());
    }
    output_->ReleaseAttempt(key.job_id, key.attempt);
  }
}

std::vector<std::pair<std::string, JobEvent>> JobLoop::HangEventsLocked(int64_t now) {
  std::vector<std::pair<std::string, JobEvent>> hangs;
  if (output_ == nullptr) return hangs;
  for (const std::string& id : index_.HangWatched()) {
    const Job& job = jobs_.at(id);
    const std::optional<int64_t> timeout_s = ProgressTimeoutSeconds(job);
    const Attempt* attempt = job.CurrentAttempt();
    if (!timeout_s || attempt == nullptr) continue;
    const int32_t number = static_cast<int32_t>(job.attempts.size());
    std::vector<int32_t> stalled = output_->StalledNodes(id, number, now, *timeout_s * 1000);
    if (!stalled.empty()) stalled = HungNodes(stalled, output_->Progress(id, number, now));
    if (stalled.empty()) continue;
    // The stacks first (CollectHangEvidence, after this pass); then it fails.
    auto evidence = hang_evidence_.find(exec::AttemptKey{id, number});
    if (evidence == hang_evidence_.end()) {
      if (evidence_collecting_.count(exec::AttemptKey{id, number}) > 0) continue;  // under way
      evidence_wanted_.insert(exec::AttemptKey{id, number});
      evidence_due_ = true;
      continue;
    }
    const std::string reason =
        (evidence->second.injected.empty() ? "" : evidence->second.injected + "; then ") +
        HangReason(job, *attempt, stalled, *timeout_s,
                   [this](const std::string& stream) { return output_->LastLines(stream, 3); }) +
        evidence->second.sentence;
    hang_evidence_.erase(evidence);
    hangs.emplace_back(
        id, JobEvent::AttemptFailed(number, FailureCategory::kHang, reason, stalled.front(), now));
  }
  return hangs;
}

void JobLoop::ApplyNodeEventsLocked(const std::vector<exec::NodeEvent>& events, int64_t now) {
  auto apply = [&](const std::string& id, const JobEvent& e) {
    Status r = ApplyLocked(id, e);
    if (!r.ok())
      spdlog::warn("jobs: event {} on {} not applied: {}", JobEventTypeName(e.type), id,
                   r.ToString());
  };
  for (const exec::NodeEvent& ev : events) {
    const std::string& id = ev.node.attempt.job_id;
    auto it = jobs_.find(id);
    if (it == jobs_.end()) {
      // A late report of a finished job's node (its exit after the gang's
      // teardown): read back to record it.
      Result<bool> restored = RestoreLocked(id);
      if (!restored.ok() || !*restored) continue;
      it = jobs_.find(id);
    }
    const int32_t attempt = ev.node.attempt.attempt;
    // The backend's own time of what happened (never in the future of ours).
    const int64_t at = ev.at_ms > 0 ? std::min(ev.at_ms, now) : now;
    switch (ev.kind) {
      case exec::NodeEventKind::kPending:
        apply(id, JobEvent::BackendPending(attempt, ev.reason, at));
        continue;
      case exec::NodeEventKind::kRunning: {
        std::vector<std::string> notices;
        auto w = launch_warnings_.find(ev.node.attempt);
        if (w != launch_warnings_.end()) {
          auto n = w->second.find(ev.node.node_index);
          if (n != w->second.end()) notices = std::move(n->second);
        }
        apply(id, NodeStartedLocked(it->second, ev, std::move(notices)));
        continue;
      }
      case exec::NodeEventKind::kEnded:
        break;
    }
    if (output_ != nullptr) output_->Complete(NodeOutputKey{id, attempt, ev.node.node_index});
    if (ev.pull_started_at_ms > 0)
      apply(id, JobEvent::NodePulled(attempt, ev.node.node_index, ev.pull_started_at_ms,
                                     ev.pull_stopped_at_ms, at));
    switch (ev.outcome) {
      case exec::NodeOutcome::kExited:
      case exec::NodeOutcome::kSignaled:
        apply(id, JobEvent::NodeExited(attempt, ev.node.node_index,
                                       ev.outcome == exec::NodeOutcome::kExited ? ev.exit_code : 0,
                                       ev.outcome == exec::NodeOutcome::kSignaled ? ev.signal : 0,
                                       at, InjectedFaultLocked(it->second, ev)));
        break;
      case exec::NodeOutcome::kLost:
      case exec::NodeOutcome::kStartFailed: {
        const FailureCategory category =
            FailureCategoryOf(ev, unstarted_attempts_.count(ev.node.attempt) > 0);
        if (category == FailureCategory::kNotStarted)
          spdlog::info("jobs: attempt {} of {} never started; running it again", attempt, id);
        apply(id, JobEvent::AttemptFailed(attempt, category, ev.reason, ev.node.node_index, at));
        break;
      }
    }
  }
}

JobEvent JobLoop::NodeStartedLocked(const Job& job, const exec::NodeEvent& ev,
                                    std::vector<std::string> notices) {
  const int64_t at = ev.at_ms > 0 ? std::min(ev.at_ms, clock_->NowMillis()) : clock_->NowMillis();
  const std::string task_id = logs::NewTaskId();  // 32 hex digits, as ECS
  const std::string stream = DefaultLogStreamName(job.definition_name, task_id);
  const int32_t number = ev.node.attempt.attempt;
  const bool current =
      number == static_cast<int32_t>(job.attempts.size()) && job.CurrentAttempt() != nullptr;
  if (output_ != nullptr && current) {
    exec::Backend* backend = BackendOf(*job.CurrentAttempt());
    Result<std::string> path = !ev.output_path.empty() ? Result<std::string>(ev.output_path)
                               : backend == nullptr
                                   ? Result<std::string>(Status::NotFound("no backend"))
                                   : backend->OutputPath(ev.node);
    if (path.ok()) {
      output_->Follow(NodeOutputKey{job.id, number, ev.node.node_index}, *path, stream, at);
    } else {
      spdlog::warn("jobs: output of {}: {}", ev.node.ToString(), path.status().ToString());
    }
  }
  for (const std::string& w : notices)
    spdlog::info("jobs: {} attempt {} node {}: {}", job.id, number, ev.node.node_index, w);
  return JobEvent::NodeStarted(number, ev.node.node_index, control_->MakeArn("task/" + task_id),
                               stream, at, std::move(notices), ev.devices);
}

void JobLoop::Pass(std::vector<exec::NodeEvent> node_events) {
  const auto began = std::chrono::steady_clock::now();
  std::vector<std::string> launches;
  std::vector<exec::AttemptKey> terminate;
  Result<uint64_t> ticket = uint64_t{0};
  Result<uint64_t> placed_ticket = uint64_t{0};
  int64_t now = 0;
  bool decide = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    SyncWithStoreLocked();
    now = clock_->NowMillis();
    auto apply = [&](const std::string& id, const JobEvent& e) {
      Status r = ApplyLocked(id, e);
      if (!r.ok())
        spdlog::warn("jobs: event {} on {} not applied: {}", JobEventTypeName(e.type), id,
                     r.ToString());
    };
    // 1. What the backends saw (first what a pass could not store).
    if (!unstored_events_.empty()) {
      node_events.insert(node_events.begin(), unstored_events_.begin(), unstored_events_.end());
      unstored_events_.clear();
    }
    ApplyNodeEventsLocked(node_events, now);
    // 2. Timeouts.
    for (const std::string& id : index_.DueTimeouts(now))
      apply(id, JobEvent::TimedOut(static_cast<int32_t>(jobs_.at(id).attempts.size()), now));
    // 2b. Hangs (no LOTE_PROGRESS for too long).
    for (const auto& [id, e] : HangEventsLocked(now)) apply(id, e);
    // 3. Dependencies, until nothing changes (a failure cascades down chains).
    auto status_of = [this](const std::string& dep) -> std::optional<JobStatus> {
      std::string key = dep;
      if (auto node = ParseNodeJobId(dep)) key = node->first;
      if (auto it = jobs_.find(key); it != jobs_.end()) return it->second.status;
      // Finished and gone from memory: the store's row says how it ended.
      Result<std::optional<Job>> stored = FindJobLocked(key);
      if (!stored.ok() || !*stored) return std::nullopt;
      return (*stored)->status;
    };
    // Array parents follow their children (a parent's own dependencies are
    // its children's); both only for what changed.
    for (int round = 0; round < 1000; ++round) {
      const std::vector<std::string> candidates = index_.TakeDependencyCandidates();
      const std::vector<std::string> parents = index_.TakeChangedArrayParents();
      if (candidates.empty() && parents.empty()) break;
      for (const std::string& id : candidates) {
        auto it = jobs_.find(id);
        if (it == jobs_.end()) continue;
        if (std::optional<JobEvent> e = DependencyEvent(it->second, status_of, now)) apply(id, *e);
      }
      for (const std::string& p : parents) UpdateArrayParentLocked(p, now);
    }
    // Progress of the attempts that ended is kept with the job.
    PersistClosedAttemptsLocked(now);
    // 5. Scheduling (nothing new starts once the server is stopping), when
    // something the policy reads changed.
    decide = !stopping_ && PrepareScheduleLocked(now);
    ticket = FlushLocked();
    if (!ticket.ok()) decide = false;  // memory was set back to the store
  }
  // The policy runs without the lock: the API goes on meanwhile, and what it
  // changes is checked when the decisions are applied.
  if (decide) {
    const auto decide_began = std::chrono::steady_clock::now();
    Result<sched::Decisions> decisions = sched::Decide(sched_input_.Window(), now);
    sched_input_.MarkDecided(now);
    metrics_.decide_seconds()->Observe(SecondsSince(decide_began));
    if (decisions.ok()) {
      const std::vector<std::pair<std::string, std::string>> reasons = ChangedReasons(*decisions);
      std::lock_guard<std::mutex> lock(mu_);
      SyncWithStoreLocked();
      ApplyDecisionsLocked(std::move(*decisions), reasons, now, &launches);
      placed_ticket = FlushLocked();
    } else {
      spdlog::error("jobs: scheduling pass failed: {}", decisions.status().ToString());
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    terminate.swap(to_terminate_);
  }
  // Placements are durable before anything runs. When a write failed,
  // memory was set back to the store (WaitTicket): the backends' events are
  // applied again by the next pass, and placements stored after that (a
  // batch queued after the failure) still run.
  const Status events_stored = WaitTicket(std::move(ticket));
  const Status placed = WaitTicket(std::move(placed_ticket));
  if (!events_stored.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    unstored_events_.insert(unstored_events_.end(), node_events.begin(), node_events.end());
    spdlog::error("jobs: store commit failed: {}", events_stored.ToString());
  }
  if (!placed.ok()) {
    spdlog::error("jobs: store commit of placements failed: {}", placed.ToString());
    return;
  }
  TerminateAttempts(terminate);
  LaunchPlaced(launches);
  CollectHangEvidence();
  {
    // Finished jobs whose end is committed leave memory (read from the store).
    std::lock_guard<std::mutex> lock(mu_);
    EvictFinishedLocked();
  }
  RetireExpiredJobs(now);
  metrics_.pass_seconds()->Observe(SecondsSince(began));
}
}  // namespace lote::control
