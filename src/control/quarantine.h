// Bad-node quarantine (issue 24): a node (a local virtual instance, or a
// Slurm node name) on which attempts of N different jobs ended NODE_LOST or
// HANG within a window takes no new placements until a cool-down passes or
// it is released (`lote nodes release`).
//
// Quarantine is the pure policy: the failures are recorded in time order, the
// time is passed in; no clock, no I/O, no locks. Its state is rebuilt from
// the stored attempts at start-up (NodeFailuresOf each job, in time order),
// so it survives a restart. A release ends the quarantine and forgets the
// failures up to it (in memory: after a restart the stored failures count
// again, so a node released within its cool-down is quarantined again).
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
  // Ends the node's quarantine at now_ms and forgets its failures so far.
  // False when the node was not quarantined.
  bool Release(const std::string& node, int64_t now_ms);
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
};

// The node failures an ended attempt (index `attempt` of job.attempts) counts
// for: NODE_LOST or HANG, on the failed node's instance (every node's when
// the failed node is not known). Empty for any other outcome.
std::vector<NodeFailure> NodeFailuresOf(const Job& job, size_t attempt);

}  // namespace lote::control
