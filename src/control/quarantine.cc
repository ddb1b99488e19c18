#include "control/quarantine.h"

#include <set>

namespace lote::control {
namespace {

std::string Reason(const QuarantineOptions& o, size_t jobs, const NodeFailure& last) {
  return "attempts of " + std::to_string(jobs) + " different jobs ended NODE_LOST or HANG on " +
         "this node within " + std::to_string(o.window_ms / 1000) + " s (last: job " + last.job_id +
         ", " + last.category + ")";
}

}  // namespace

std::optional<QuarantinedNode> Quarantine::Record(const NodeFailure& failure) {
  if (options_.threshold <= 0 || failure.node.empty()) return std::nullopt;
  if (IsQuarantined(failure.node, failure.at_ms)) return std::nullopt;
  std::vector<NodeFailure>& list = failures_[failure.node];
  list.push_back(failure);
  // Only the window counts; older failures are forgotten.
  const int64_t from = failure.at_ms - options_.window_ms;
  std::erase_if(list, [&](const NodeFailure& f) { return f.at_ms <= from; });
  std::set<std::string> jobs;
  for (const NodeFailure& f : list) jobs.insert(f.job_id);
  if (jobs.size() < static_cast<size_t>(options_.threshold)) return std::nullopt;
  QuarantinedNode q{failure.node, failure.at_ms, failure.at_ms + options_.cooldown_ms,
                    Reason(options_, jobs.size(), failure), failure.compute_environment};
  quarantined_[failure.node] = q;
  failures_.erase(failure.node);
  return q;
}

bool Quarantine::Release(const std::string& node, int64_t now_ms) {
  failures_.erase(node);
  auto it = quarantined_.find(node);
  if (it == quarantined_.end() || it->second.until_ms <= now_ms) return false;
  quarantined_.erase(it);
  return true;
}

bool Quarantine::IsQuarantined(const std::string& node, int64_t now_ms) const {
  auto it = quarantined_.find(node);
  return it != quarantined_.end() && it->second.until_ms > now_ms;
}

std::vector<QuarantinedNode> Quarantine::Active(int64_t now_ms) const {
  std::vector<QuarantinedNode> out;
  for (const auto& [node, q] : quarantined_)
    if (q.until_ms > now_ms) out.push_back(q);
  return out;
}

std::vector<QuarantinedNode> Quarantine::TakeExpired(int64_t now_ms) {
  std::vector<QuarantinedNode> out;
  for (auto it = quarantined_.begin(); it != quarantined_.end();) {
    if (it->second.until_ms <= now_ms) {
      out.push_back(it->second);
      it = quarantined_.erase(it);
    } else {
      ++it;
    }
  }
  return out;
}

std::vector<NodeFailure> NodeFailuresOf(const Job& job, size_t attempt) {
  std::vector<NodeFailure> out;
  if (attempt >= job.attempts.size()) return out;
  const Attempt& a = job.attempts[attempt];
  if (a.stopped_at == 0) return out;
  const char* category = a.failure_category == FailureCategory::kNodeLost ? "NODE_LOST"
                         : a.failure_category == FailureCategory::kHang   ? "HANG"
                                                                          : nullptr;
  if (category == nullptr) return out;
  for (const NodeAttempt& n : a.nodes) {
    if (a.failed_node >= 0 && n.node_index != a.failed_node) continue;
    if (!n.instance_id.empty())
      out.push_back({n.instance_id, job.id, a.stopped_at, category, a.compute_environment});
  }
  return out;
}

}  // namespace lote::control
