#include "control/hang_evidence.h"

#include <algorithm>
#include <set>

#include "exec/stack_dump.h"

namespace lote::control {
namespace {

bool HasStoppedProcess(const std::string& dump) {
  return dump.find("(T (stopped))") != std::string::npos;
}

double Distance(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  std::vector<std::string> both, either;
  std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(both));
  std::set_union(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(either));
  return either.empty() ? 0.0 : 1.0 - static_cast<double>(both.size()) / either.size();
}

std::string NodeList(const std::vector<int32_t>& nodes) {
  std::string out;
  for (int32_t n : nodes) out += (out.empty() ? "" : ", ") + std::to_string(n);
  return out;
}

// The node whose stacks are farthest from the others' on average, when it is
// strictly the farthest.
std::vector<int32_t> MostDifferent(const std::map<int32_t, std::string>& dumps) {
  std::vector<std::pair<int32_t, std::vector<std::string>>> sigs;
  for (const auto& [node, dump] : dumps) sigs.emplace_back(node, exec::StackSignature(dump));
  std::vector<double> score(sigs.size(), 0.0);
  for (size_t i = 0; i < sigs.size(); ++i)
    for (size_t j = 0; j < sigs.size(); ++j)
      if (i != j) score[i] += Distance(sigs[i].second, sigs[j].second);
  const size_t best =
      static_cast<size_t>(std::max_element(score.begin(), score.end()) - score.begin());
  for (size_t i = 0; i < score.size(); ++i)
    if (i != best && score[i] >= score[best]) return {};
  if (score[best] <= 0.0) return {};
  return {sigs[best].first};
}

}  // namespace

std::string DumpStreamName(const std::string& node_stream) { return node_stream + "/dump"; }

std::vector<int32_t> Stragglers(const std::map<int32_t, std::string>& dumps) {
  if (dumps.size() < 2) return {};
  std::vector<int32_t> stopped;
  for (const auto& [node, dump] : dumps)
    if (HasStoppedProcess(dump)) stopped.push_back(node);
  if (!stopped.empty() && stopped.size() < dumps.size()) return stopped;
  return MostDifferent(dumps);
}

std::string EvidenceSentence(const std::map<int32_t, std::string>& dumps,
                             const std::string& stored_as, const std::string& error) {
  if (!error.empty()) return "; no stack dumps: " + error;
  if (dumps.empty()) return "; no stack dumps: no node of the attempt was running";
  std::vector<int32_t> nodes;
  bool any_stopped = false;
  for (const auto& [node, dump] : dumps) {
    nodes.push_back(node);
    any_stopped = any_stopped || HasStoppedProcess(dump);
  }
  std::string out = std::string("; stack dumps of ") + (nodes.size() == 1 ? "node " : "nodes ") +
                    NodeList(nodes) + " are in " + stored_as;
  const std::vector<int32_t> slow = Stragglers(dumps);
  if (slow.empty()) return out + "; no straggler: the nodes' stacks are alike";
  const bool stopped = any_stopped && HasStoppedProcess(dumps.at(slow.front()));
  return out + "; straggler: " + (slow.size() == 1 ? "node " : "nodes ") + NodeList(slow) +
         (stopped ? " (its processes are stopped, state T)"
                  : " (its stacks differ from the other nodes')");
}

}  // namespace lote::control
