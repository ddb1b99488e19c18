// ProgressTracker: the latest LOTE_PROGRESS values of each node of one job
// attempt, an ETA from the step rate, and hang detection.
//
// Pure bookkeeping with times passed in (no clock, no I/O), so the control
// plane drives it from LogIngestor::on_progress and its own loop, and tests
// are table-driven. Thread safety: all methods are safe for concurrent use.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

#include "common/json.h"
#include "logs/ingestor.h"

namespace lote::logs {

class ProgressTracker {
 public:
  // A node began running at `now_ms`; its silence is measured from here
  // until its first report.
  void NodeStarted(int32_t node, int64_t now_ms);
  // Merges a report's keys into the node's latest values. Keys `step` and
  // `total_steps` (integers) drive the ETA.
  void Report(int32_t node, const ProgressReport& report);
  // Nodes started or reporting whose last report (or start) is at least
  // `timeout_ms` old at `now_ms`, ascending.
  std::vector<int32_t> StalledNodes(int64_t now_ms, int64_t timeout_ms) const;
  // For DescribeJobs' extra key `progress`:
  //   {"nodes": [{"node": 0, "lastProgressAt": ms, ...latest values}],
  //    "step": slowest node's step, "total_steps": n, "etaSeconds": s,
  //    "lastProgressAt": ms}
  // Keys without data are omitted; {} when nothing was reported.
  Json ToJson(int64_t now_ms) const;

 private:
  struct Node {
    int64_t started_ms = 0;
    std::optional<int64_t> last_report_ms;
    Json latest = Json::object();
    std::optional<int64_t> first_step, first_step_ms;  // first report with a step
    std::optional<int64_t> step, step_ms, total_steps;
  };
  mutable std::mutex mu_;
  std::map<int32_t, Node> nodes_;  // guarded by mu_
};

}  // namespace lote::logs
