// SchedulerInput: the scheduler's snapshot (sched::Snapshot) kept from one
// pass to the next, so that a pass converts only what changed and skips the
// policy when nothing it reads did. The jobs are changed one at a time
// (PutJob / EraseJob for the jobs that entered or left RUNNABLE); the
// environments, queues and instances are replaced each pass and compared with
// the previous ones. Decide is due when a job came or went, the environments
// differ (share usage history aside: it follows each Decide), or an idle
// instance reached its idle timeout since the last Decide.
//
// Also the statusReason each job was last given, so that applying a pass's
// Wait decisions finds the changed reasons without the job table.
//
// No I/O, no clock, no locks: owned by the thread that runs the passes.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "sched/snapshot.h"

namespace lote::control {

class SchedulerInput {
 public:
  // Adds the job, or replaces the one with its id; `reason` is its statusReason.
  void PutJob(sched::Job job, std::string reason);
  void EraseJob(const std::string& id);
  // The job with that id, or null.
  const sched::Job* FindJob(const std::string& id) const;
  // Replaces the compute environments, queues and config with those of
  // `environments` (its jobs are ignored).
  void SetEnvironments(sched::Snapshot environments);
  // Whether a Decide is due at `now` (see the header); MarkDecided(now) after it.
  bool DecideDue(int64_t now) const;
  void MarkDecided(int64_t now);
  // True, and `reason` recorded, when the job's recorded reason differs.
  bool ChangeReason(const std::string& id, const std::string& reason);

  const sched::Snapshot& snapshot() const { return snapshot_; }

 private:
  sched::Snapshot snapshot_;
  std::vector<std::string> reasons_;  // parallel to snapshot_.jobs
  std::unordered_map<std::string, size_t> position_;
  bool changed_ = true;
  int64_t decided_at_ms_ = -1;  // -1: never
};

// Whether two snapshots' compute environments, queues and config are the
// same, ignoring the queues' share usage history (history_* of ShareUsage).
bool SameEnvironments(const sched::Snapshot& a, const sched::Snapshot& b);

}  // namespace lote::control
