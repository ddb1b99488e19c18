#include "control/node_ranges.h"

#include <algorithm>
#include <string>

namespace lote::control {

namespace {

constexpr size_t kMaxIndexDigits = 9;  // fits in int32_t

std::string Quoted(std::string_view target, std::string_view field) {
  return std::string(field) + " '" + std::string(target) + "'";
}

// One bound of a range: nullopt when omitted (empty).
Result<std::optional<int32_t>> ParseBound(std::string_view bound, std::string_view target,
                                          std::string_view field) {
  if (bound.empty()) return std::optional<int32_t>();
  if (!std::all_of(bound.begin(), bound.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return Status::InvalidArgument(
        Quoted(target, field) +
        " is not a node range: use \"N:M\", \"N:\", \":M\" or \"N\" with node indexes "
        "from 0 (such as \"0:\" or \"1:3\")");
  }
  if (bound.size() > kMaxIndexDigits) {
    return Status::InvalidArgument(Quoted(target, field) +
                                   " has a node index of more than 9 digits: node indexes run "
                                   "from 0 to numNodes - 1");
  }
  int32_t v = 0;
  for (char c : bound) v = v * 10 + (c - '0');
  return std::optional<int32_t>(v);
}

}  // namespace

Result<NodeRangeBounds> ParseNodeRangeBounds(std::string_view target, std::string_view field) {
  if (target.empty()) {
    return Status::InvalidArgument(std::string(field) +
                                   " is empty: use a node range such as \"0:\" or \"1:3\"");
  }
  size_t colon = target.find(':');
  NodeRangeBounds b;
  if (colon == std::string_view::npos) {
    ASSIGN_OR_RETURN(b.first, ParseBound(target, target, field));
    b.last = b.first;
    return b;
  }
  if (target.find(':', colon + 1) != std::string_view::npos) {
    return Status::InvalidArgument(Quoted(target, field) +
                                   " has more than one ':': write one range, first:last");
  }
  ASSIGN_OR_RETURN(b.first, ParseBound(target.substr(0, colon), target, field));
  ASSIGN_OR_RETURN(b.last, ParseBound(target.substr(colon + 1), target, field));
  return b;
}

Result<NodeIndexRange> ParseNodeRange(std::string_view target, int32_t num_nodes,
                                      std::string_view field) {
  if (num_nodes < 1) {
    return Status::InvalidArgument(Quoted(target, field) + " is for a job of " +
                                   std::to_string(num_nodes) +
                                   " nodes: numNodes must be at least 1");
  }
  ASSIGN_OR_RETURN(NodeRangeBounds b, ParseNodeRangeBounds(target, field));
  if (b.first && b.last && *b.first > *b.last) {
    return Status::InvalidArgument(Quoted(target, field) +
                                   " starts after it ends: write the lower node index first, "
                                   "as first:last");
  }
  const int32_t highest = std::max(b.first.value_or(0), b.last.value_or(0));
  if (highest >= num_nodes) {
    return Status::InvalidArgument(
        Quoted(target, field) + " reaches node " + std::to_string(highest) + " but numNodes is " +
        std::to_string(num_nodes) + " (nodes 0 to " + std::to_string(num_nodes - 1) + ")");
  }
  return NodeIndexRange{b.first.value_or(0), b.last.value_or(num_nodes - 1)};
}

Status CheckNodeRangesCover(const std::vector<NodeIndexRange>& ranges, int32_t num_nodes) {
  std::vector<int> count(static_cast<size_t>(num_nodes), 0);
  for (const NodeIndexRange& r : ranges) {
    for (int32_t i = r.first; i <= r.last; ++i) {
      if (++count[static_cast<size_t>(i)] > 1) {
        return Status::InvalidArgument("node " + std::to_string(i) +
                                       " is in more than one nodeRangeProperties entry; make the "
                                       "targetNodes ranges disjoint");
      }
    }
  }
  for (int32_t i = 0; i < num_nodes; ++i) {
    if (count[static_cast<size_t>(i)] == 0) {
      return Status::InvalidArgument("node " + std::to_string(i) +
                                     " is in no nodeRangeProperties entry; the targetNodes ranges "
                                     "must cover nodes 0 to " +
                                     std::to_string(num_nodes - 1) + " (e.g. \"0:\")");
    }
  }
  return Status::Ok();
}

}  // namespace lote::control
