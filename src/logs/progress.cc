#include "logs/progress.h"

#include <algorithm>
#include <cmath>

namespace lote::logs {

void ProgressTracker::NodeStarted(int32_t node, int64_t now_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  nodes_[node].started_ms = now_ms;
}

void ProgressTracker::Report(int32_t node, const ProgressReport& report) {
  std::lock_guard<std::mutex> lock(mu_);
  Node& n = nodes_[node];
  if (!n.last_report_ms && n.started_ms == 0) n.started_ms = report.timestamp_ms;
  n.last_report_ms = report.timestamp_ms;
  if (!report.values.is_object()) return;
  for (const auto& [k, v] : report.values.items()) n.latest[k] = v;
  auto step = report.values.find("step");
  if (step != report.values.end() && step->is_number_integer()) {
    n.step = step->get<int64_t>();
    n.step_ms = report.timestamp_ms;
    if (!n.first_step || *n.step < *n.first_step) {  // first report, or a restart from a checkpoint
      n.first_step = n.step;
      n.first_step_ms = report.timestamp_ms;
    }
  }
  auto total = report.values.find("total_steps");
  if (total != report.values.end() && total->is_number_integer())
    n.total_steps = total->get<int64_t>();
}

std::vector<int32_t> ProgressTracker::StalledNodes(int64_t now_ms, int64_t timeout_ms) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<int32_t> out;
  for (const auto& [id, n] : nodes_) {
    int64_t since = n.last_report_ms.value_or(n.started_ms);
    if (now_ms - since >= timeout_ms) out.push_back(id);
  }
  return out;
}

Json ProgressTracker::ToJson(int64_t now_ms) const {
  std::lock_guard<std::mutex> lock(mu_);
  Json out = Json::object();
  Json nodes = Json::array();
  std::optional<int64_t> min_step, total, last;
  std::optional<double> eta;
  for (const auto& [id, n] : nodes_) {
    if (!n.last_report_ms) continue;
    Json j = n.latest;
    j["node"] = id;
    j["lastProgressAt"] = *n.last_report_ms;
    nodes.push_back(std::move(j));
    last = last ? std::max(*last, *n.last_report_ms) : *n.last_report_ms;
    if (n.step) min_step = min_step ? std::min(*min_step, *n.step) : *n.step;
    if (n.total_steps) total = total ? std::max(*total, *n.total_steps) : *n.total_steps;
    if (n.step && n.total_steps && n.first_step && *n.step > *n.first_step &&
        *n.step_ms > *n.first_step_ms) {
      double rate = static_cast<double>(*n.step - *n.first_step) /
                    static_cast<double>(*n.step_ms - *n.first_step_ms);
      double remaining_ms =
          static_cast<double>(std::max<int64_t>(0, *n.total_steps - *n.step)) / rate;
      // Time already spent since the last report counts against the estimate.
      double left = std::max(0.0, remaining_ms - static_cast<double>(now_ms - *n.step_ms)) / 1000.0;
      eta = eta ? std::max(*eta, left) : left;
    }
  }
  if (nodes.empty()) return out;
  out["nodes"] = std::move(nodes);
  if (min_step) out["step"] = *min_step;
  if (total) out["total_steps"] = *total;
  if (eta) out["etaSeconds"] = std::llround(*eta);
  out["lastProgressAt"] = *last;
  return out;
}

}  // namespace lote::logs
