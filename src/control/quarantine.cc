#include "control/quarantine.h"

#include <algorithm>
#include <set>

#include "exec/node_fault.h"

namespace lote::control {
namespace {

using exec::kInjectedFaultPrefix;

// The word of a failure category that counts for quarantine, else nullptr.
const char* CategoryWord(FailureCategory c) {
  return c == FailureCategory::kNodeLost ? "NODE_LOST"
         : c == FailureCategory::kHang   ? "HANG"
                                         : nullptr;
}

std::string Reason(const QuarantineOptions& o, size_t jobs, const NodeFailure& last) {
  const std::string who =
      jobs == 1 ? "an attempt of 1 job" : "attempts of " + std::to_string(jobs) + " different jobs";
  return who + " ended NODE_LOST or HANG on " + "this node within " +
         std::to_string(o.window_ms / 1000) + " s (last: job " + last.job_id + ", " +
         last.category + ")";
}

}  // namespace

std::optional<QuarantinedNode> Quarantine::Record(const NodeFailure& failure) {
  if (options_.threshold <= 0 || failure.node.empty()) return std::nullopt;
  if (IsQuarantined(failure.node, failure.at_ms)) return std::nullopt;
  auto released = released_at_.find(failure.node);
  if (released != released_at_.end() && failure.at_ms <= released->second) return std::nullopt;
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
  auto it = quarantined_.find(node);
  if (it == quarantined_.end() || it->second.until_ms <= now_ms) return false;
  quarantined_.erase(it);
  SetReleased(node, now_ms);
  return true;
}

void Quarantine::SetReleased(const std::string& node, int64_t released_ms) {
  int64_t& at = released_at_[node];
  at = std::max(at, released_ms);
  std::vector<NodeFailure>& list = failures_[node];
  std::erase_if(list, [&](const NodeFailure& f) { return f.at_ms <= at; });
  if (list.empty()) failures_.erase(node);
  auto q = quarantined_.find(node);
  if (q != quarantined_.end() && q->second.since_ms <= at) quarantined_.erase(q);
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

std::vector<int32_t> BlamedNodes(const Attempt& attempt) {
  std::vector<int32_t> out;
  for (const NodeAttempt& n : attempt.nodes)
    if (attempt.failed_node < 0 || n.node_index == attempt.failed_node) out.push_back(n.node_index);
  return out;
}

std::vector<NodeFailure> NodeFailuresOf(const Job& job, size_t attempt,
                                        const std::optional<std::vector<std::string>>& hosts) {
  std::vector<NodeFailure> out;
  if (attempt >= job.attempts.size()) return out;
  const Attempt& a = job.attempts[attempt];
  if (a.stopped_at == 0) return out;
  const char* category = CategoryWord(a.failure_category);
  if (category == nullptr) return out;
  for (int32_t k : BlamedNodes(a)) {
    std::string node;
    if (hosts) {
      if (k >= 0 && static_cast<size_t>(k) < hosts->size()) node = (*hosts)[k];
    } else if (const NodeAttempt* n = a.Node(k)) {
      node = n->instance_id;
    }
    if (!node.empty()) out.push_back({node, job.id, a.stopped_at, category, a.compute_environment});
  }
  return out;
}

const Attempt* RetryAvoidanceSource(const Job& job, size_t before) {
  if (before == 0 || before > job.attempts.size()) return nullptr;
  const Attempt& a = job.attempts[before - 1];
  if (a.stopped_at == 0) return nullptr;
  const bool injected =
      a.status_reason.rfind(kInjectedFaultPrefix, 0) == 0 ||
      a.reason.find(std::string(": ") + kInjectedFaultPrefix) != std::string::npos;
  return CategoryWord(a.failure_category) != nullptr || injected ? &a : nullptr;
}

std::vector<std::string> InstancesToAvoid(const Job& job) {
  std::vector<std::string> out;
  if (job.CurrentAttempt() != nullptr) return out;
  const Attempt* a = RetryAvoidanceSource(job, job.attempts.size());
  if (a == nullptr) return out;
  for (int32_t k : BlamedNodes(*a)) {
    const NodeAttempt* n = a->Node(k);
    if (n != nullptr && !n->instance_id.empty() &&
        std::find(out.begin(), out.end(), n->instance_id) == out.end())
      out.push_back(n->instance_id);
  }
  return out;
}

}  // namespace lote::control
