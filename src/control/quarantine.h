// Bad-node quarantine (issue 24): a node (a local virtual instance, or a
// Slurm node name) on which attempts of N different jobs ended NODE_LOST or
// HANG within a window takes no new placements until a cool-down passes or
// it is released (`lote nodes release`).
//
// Quarantine is the pure policy: the failures are recorded in time order, the
// time is passed in; no clock, no I/O, no locks. Its state is rebuilt from
// the stored attempts at start-up (NodeFailuresOf each job, in time order),
// so it survives a restart. A release ends the quarantine and forgets the
// failures up to it; releases are stored (store table node_releases) and
// given back at rebuild (SetReleased), so failures before a release never
// count again.
//
// RetryAvoidance is the retry's half: the instances (or Slurm nodes) the
// next attempt of a job keeps off, those its failed node ran on.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "control/job_model.h"

namespace lote::control {

struct QuarantineOptions {
  int32_t threshold = 3;            // failures of different jobs; 0 = never quarantine
  int64_t window_ms = 3'600'000;    // within this long
  int64_t cooldown_ms = 3'600'000;  // how long a quarantine lasts
};

struct NodeFailure {
  std::string node;
  std::string job_id;
  int64_t at_ms = 0;
  std::string category;             // "NODE_LOST" or "HANG"
  std::string compute_environment;  // of the attempt
};

struct QuarantinedNode {
  std::string node;
  int64_t since_ms = 0;
  int64_t until_ms = 0;
  std::string reason;
  std::string compute_environment;  // of the failure that started it
  friend bool operator==(const QuarantinedNode&, const QuarantinedNode&) = default;
};

class Quarantine {
 public:
  explicit Quarantine(QuarantineOptions options = {}) : options_(options) {}

  // Records a failure (in time order); the node's quarantine when this
  // failure starts one, else nullopt (also while the node is quarantined).
  std::optional<QuarantinedNode> Record(const NodeFailure& failure);
  // Ends the node's quarantine at now_ms and forgets its failures so far
  // (a failure at or before now_ms is never counted again). False when the
  // node was not quarantined.
  bool Release(const std::string& node, int64_t now_ms);
  // A release stored earlier (at rebuild, before the failures are recorded):
  // the node's failures at or before released_ms do not count.
  void SetReleased(const std::string& node, int64_t released_ms);
  bool IsQuarantined(const std::string& node, int64_t now_ms) const;
  // The quarantines in force at now_ms, by node name.
  std::vector<QuarantinedNode> Active(int64_t now_ms) const;
  // The quarantines whose cool-down ended by now_ms (removed, their failures
  // forgotten), e.g. to resume a drained Slurm node.
  std::vector<QuarantinedNode> TakeExpired(int64_t now_ms);

 private:
  QuarantineOptions options_;
  std::map<std::string, std::vector<NodeFailure>> failures_;  // per node, time order
  std::map<std::string, QuarantinedNode> quarantined_;
  std::map<std::string, int64_t> released_at_;  // per node: its last release
};

// The nodes (node indexes) whose machines an ended attempt blames: the failed
// node's, or every node's when the failed node is not known.
std::vector<int32_t> BlamedNodes(const Attempt& attempt);

// The node failures an ended attempt (index `attempt` of job.attempts) counts
// for: NODE_LOST or HANG, on the machines of BlamedNodes. `hosts`: the
// backend's names of the machines the attempt's nodes ran on, by node index
// (Slurm node names; "" where unknown), or nullopt where the control plane's
// instance ids name them (local virtual instances). Empty for any other outcome.
std::vector<NodeFailure> NodeFailuresOf(
    const Job& job, size_t attempt,
    const std::optional<std::vector<std::string>>& hosts = std::nullopt);

// The ended attempt whose failure the job's next attempt steps around: its
// last attempt, when it ended NODE_LOST or HANG, or by an injected fault (its
// reason starts "Injected fault:"); nullptr otherwise (also for a job whose
// current attempt is open). `before`: the number of attempts to look below
// (job.attempts.size() for a RUNNABLE job; size()-1 while its new attempt is
// being launched).
const Attempt* RetryAvoidanceSource(const Job& job, size_t before);

// The instances the next attempt of `job` keeps off when it can (the
// scheduler's sched::Job::avoid_instances): those of BlamedNodes of
// RetryAvoidanceSource(job, job.attempts.size()). Empty when none.
std::vector<std::string> InstancesToAvoid(const Job& job);

}  // namespace lote::control
