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

// The one node that is farther from every other node than any two others
// are from each other (a clear outlier, no threshold); none when no node is
// (two nodes, or stacks that merely differ in timing, as a running job's do).
std::vector<int32_t> ClearOutlier(const std::map<int32_t, std::string>& dumps) {
  std::vector<std::pair<int32_t, std::vector<std::string>>> sigs;
  for (const auto& [node, dump] : dumps) sigs.emplace_back(node, exec::StackSignature(dump));
  const size_t n = sigs.size();
  if (n < 3) return {};
  std::vector<int32_t> found;
  for (size_t x = 0; x < n; ++x) {
    double nearest = 1.0, widest = 0.0;
    for (size_t i = 0; i < n; ++i) {
      if (i == x) continue;
      nearest = std::min(nearest, Distance(sigs[x].second, sigs[i].second));
      for (size_t j = i + 1; j < n; ++j)
        if (j != x) widest = std::max(widest, Distance(sigs[i].second, sigs[j].second));
    }
    if (nearest > widest) found.push_back(sigs[x].first);
  }
  if (found.size() != 1) return {};
  return found;
}

}  // namespace

std::string DumpStreamName(const std::string& node_stream) { return node_stream + "/dump"; }

std::vector<int32_t> Stragglers(const std::map<int32_t, std::string>& dumps) {
  if (dumps.size() < 2) return {};
  std::vector<int32_t> stopped;
  for (const auto& [node, dump] : dumps)
    if (HasStoppedProcess(dump)) stopped.push_back(node);
  if (!stopped.empty() && stopped.size() < dumps.size()) return stopped;
  return ClearOutlier(dumps);
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
