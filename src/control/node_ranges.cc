#include "control/node_ranges.h"

#include <string>

namespace lote::control {

namespace {

Result<int32_t> ParseIndex(std::string_view s, std::string_view whole) {
  if (s.empty() || s.size() > 6) {
    return Status::InvalidArgument("targetNodes '" + std::string(whole) +
                                   "' is not a node range; use N, N:, :M or N:M");
  }
  int32_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') {
      return Status::InvalidArgument("targetNodes '" + std::string(whole) +
                                     "' is not a node range; use N, N:, :M or N:M");
    }
    v = v * 10 + (c - '0');
  }
  return v;
}

}  // namespace

Result<NodeIndexRange> ParseNodeRange(std::string_view target, int32_t num_nodes) {
  NodeIndexRange r;
  size_t colon = target.find(':');
  if (colon == std::string_view::npos) {
    ASSIGN_OR_RETURN(r.first, ParseIndex(target, target));
    r.last = r.first;
  } else {
    std::string_view a = target.substr(0, colon), b = target.substr(colon + 1);
    if (a.empty()) {
      r.first = 0;
    } else {
      ASSIGN_OR_RETURN(r.first, ParseIndex(a, target));
    }
    if (b.empty()) {
      r.last = num_nodes - 1;
    } else {
      ASSIGN_OR_RETURN(r.last, ParseIndex(b, target));
    }
  }
  if (r.first > r.last) {
    return Status::InvalidArgument("targetNodes '" + std::string(target) +
                                   "' starts after it ends; write it as first:last");
  }
  if (r.last >= num_nodes) {
    return Status::InvalidArgument("targetNodes '" + std::string(target) + "' reaches node " +
                                   std::to_string(r.last) + " but numNodes is " +
                                   std::to_string(num_nodes) + " (nodes 0 to " +
                                   std::to_string(num_nodes - 1) + ")");
  }
  return r;
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
