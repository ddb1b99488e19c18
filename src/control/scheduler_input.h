// SchedulerInput: the scheduler's snapshot (sched::Snapshot) kept from one
// pass to the next, so that a pass converts only what changed, skips the
// policy when nothing it reads did, and hands the policy only the heads of
// the queues. The jobs are changed one at a time (PutJob / EraseJob for the
// jobs that entered or left RUNNABLE) and kept in the scheduler's order, per
// queue (submit order, then id: what a FIFO queue tries) and per queue and
// share identifier (higher schedulingPriority first, then submit order, then
// id: what a fair-share queue tries within a share). The environments,
// queues and config are replaced each pass and compared with the previous
// ones. Decide is due when a job came or went, the environments differ
// (share usage history aside: it follows each Decide), or an idle instance
// reached its idle timeout since the last Decide.
//
// Window(): what Decide reads: the environments, and per known queue its
// first `depth` jobs (a fair-share queue: the first `depth` of each share),
// so that a pass costs O(queues x depth), not O(jobs waiting). A queue's
// order is the same whether it is cut or not, so the jobs tried are exactly
// the first ones a full pass would try; the jobs past the depth wait for a
// later pass (each placement changes the input, so the next pass comes at
// once). Jobs of a queue the environments do not name are left out.
//
// Also the statusReason each job was last given, so that applying a pass's
// Wait decisions finds the changed reasons without the job table.
//
// No I/O, no clock, no locks: owned by the thread that runs the passes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "sched/snapshot.h"

namespace lote::control {

// How many jobs of a queue (of a share, in a fair-share queue) one pass considers.
inline constexpr size_t kDefaultScheduleDepth = 256;

class SchedulerInput {
 public:
  explicit SchedulerInput(size_t depth = kDefaultScheduleDepth) : depth_(depth) {}

  // Adds the job, or replaces the one with its id; `reason` is its statusReason.
  void PutJob(sched::Job job, std::string reason);
  void EraseJob(const std::string& id);
  // The job with that id (in the window or not), or null.
  const sched::Job* FindJob(const std::string& id) const;
  // How many jobs are kept (in the window or not).
  size_t size() const { return jobs_.size(); }
  // Replaces the compute environments, queues, config and consumable
  // resources with those of `environments` (its jobs are ignored).
  void SetEnvironments(sched::Snapshot environments);
  // Whether a Decide is due at `now` (see the header); MarkDecided(now) after it.
  bool DecideDue(int64_t now) const;
  void MarkDecided(int64_t now);
  // True, and `reason` recorded, when the job's recorded reason differs.
  bool ChangeReason(const std::string& id, const std::string& reason);

  // The snapshot Decide reads (see the header), brought up to date.
  const sched::Snapshot& Window();
  // The environments, queues and config last set (no jobs).
  const std::vector<sched::JobQueue>& queues() const { return window_.queues; }

 private:
  // (-schedulingPriority or 0, submit order, id): ascending is the order tried.
  using OrderKey = std::tuple<int64_t, int64_t, std::string>;
  struct Kept {
    sched::Job job;
    std::string reason;
  };
  void Unlink(const sched::Job& job);
  void TakeHeads(const std::set<OrderKey>& order);

  size_t depth_;
  std::unordered_map<std::string, Kept> jobs_;
  std::map<std::string, std::set<OrderKey>> by_queue_;  // queue name -> FIFO order
  // queue name -> share identifier -> order within the share.
  std::map<std::string, std::map<std::string, std::set<OrderKey>>> by_share_;
  sched::Snapshot window_;
  bool window_stale_ = true;
  bool changed_ = true;
  int64_t decided_at_ms_ = -1;  // -1: never
};

// Whether two snapshots' compute environments, queues and config are the
// same, ignoring the queues' share usage history (history_* of ShareUsage).
bool SameEnvironments(const sched::Snapshot& a, const sched::Snapshot& b);

}  // namespace lote::control
