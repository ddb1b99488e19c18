// JobIndex: the job loop's index sets, so that a pass visits the jobs that
// changed or are due rather than every job ever kept: RUNNING attempts by
// deadline (timeouts), RUNNING jobs watched for hangs, dependency waiters
// keyed by the job they wait on, array children's status counts per parent,
// the RUNNABLE jobs per queue and the jobs that hold an attempt (what the
// scheduler's snapshot reads), and each queue's jobs per status in ListJobs'
// order (a ListJobs page without a filter reads only that page).
//
// Maintained in one place: Update(before, after) on every change of a job
// (before null for a new one); Rebuild from the whole table.
// Invariant: after the same changes, the index equals Rebuild(jobs).
//
// Finished jobs leave memory (the job loop reads them from the store): Evict
// drops a SUCCEEDED / FAILED job's own entries and keeps what it counts (its
// queue's count per status, its array parent's child counts), Restore puts
// them back for a job read back from the store, AddCount / AddChildCount
// seed the counts of the jobs only the store holds.
// No I/O, no clock, no locks: the job loop guards it with its own mutex.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "control/job_controller.h"
#include "control/job_model.h"

namespace lote::control {

class JobIndex {
 public:
  void Update(const Job* before, const Job& after);
  void Rebuild(const JobTable& jobs);
  // A finished job leaves memory: its entries go, its counts stay.
  void Evict(const Job& job);
  // A finished job read back from the store: its entries, not its counts.
  void Restore(const Job& job);
  // A job that never was (a refused write): entries and counts.
  void Forget(const Job& job);
  // Counts of jobs the store holds and memory does not.
  void AddCount(const std::string& queue_arn, JobStatus status, int64_t delta);
  void AddChildCount(const std::string& parent, JobStatus status, int32_t delta);
  // The parent left memory: its children's counts go.
  void ForgetChildCounts(const std::string& parent);

  // RUNNING jobs whose attempt deadline is at or before `now`.
  std::vector<std::string> DueTimeouts(int64_t now) const;
  // RUNNING jobs with lote:progressTimeoutSeconds.
  const std::set<std::string>& HangWatched() const { return hang_watched_; }
  // Jobs waiting on dependencies whose evaluation may have changed (new, or a
  // job they wait on changed status), in id order; cleared by the call.
  std::vector<std::string> TakeDependencyCandidates();
  // Array parents one of whose children changed status; cleared by the call.
  std::vector<std::string> TakeChangedArrayParents();
  // Per status name, how many children of `parent` have it (every status
  // present, 0 when none); the total is the children known.
  std::map<std::string, int32_t> ArrayChildCounts(const std::string& parent) const;
  // RUNNABLE jobs (array parents excluded) per queue ARN.
  const std::map<std::string, std::set<std::string>>& RunnableByQueue() const { return runnable_; }
  // Jobs that entered or left RunnableByQueue since the last call (what the
  // scheduler's kept input converts again), in id order; cleared by the call.
  std::vector<std::string> TakeRunnableChanges();
  // Jobs with an open attempt (what instances hold).
  const std::set<std::string>& Holding() const { return holding_; }
  // How many jobs (array parents and children included) each queue ARN has
  // per status (those with none left out).
  const std::map<std::pair<std::string, JobStatus>, int64_t>& CountsByQueue() const {
    return counts_;
  }
  // Per (queue ARN, shown status: ShownStatus): its top-level jobs (array
  // children left out) by (createdAt, id), the order of an unfiltered
  // ListJobs; null when there are none.
  using Listed = std::set<std::pair<int64_t, std::string>>;
  const Listed* ListedJobs(const std::string& queue_arn, JobStatus shown) const;
  // Jobs that wait on `id` (tests).
  std::set<std::string> WaitersOf(const std::string& id) const;

  bool operator==(const JobIndex& o) const;

 private:
  void Remove(const Job& job, bool counted = true);
  void Add(const Job& job, bool counted = true);

  std::set<std::pair<int64_t, std::string>> deadlines_;
  std::map<std::string, int64_t> deadline_of_;
  std::set<std::string> hang_watched_;
  std::map<std::string, std::set<std::string>> waiters_;  // job waited on -> waiters
  std::set<std::string> dependency_candidates_;
  std::map<std::string, std::map<JobStatus, int32_t>> child_counts_;  // parent -> counts
  std::set<std::string> changed_parents_;
  std::map<std::string, std::set<std::string>> runnable_;  // queue ARN -> jobs
  std::set<std::string> runnable_changes_;
  std::map<std::pair<std::string, JobStatus>, int64_t> counts_;  // (queue ARN, status)
  std::set<std::string> holding_;
  std::map<std::pair<std::string, JobStatus>, Listed> listed_;
};

}  // namespace lote::control
