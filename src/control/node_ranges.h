// Multi-node node ranges: the `targetNodes` of nodeRangeProperties (job
// definitions) and of nodePropertyOverrides (SubmitJob), as AWS Batch defines
// them. Indexes start at 0; "N:M" is nodes N to M, an omitted start (":M") is
// node 0, an omitted end ("N:") is the last node, and "N" is node N alone.
// A bare ":" omits both, so it is every node: AWS documents each omission on
// its own and this is the two applied together (the same as "0:").
// Pure functions, the one parser of these ranges in lote: registration checks
// definitions with them and SubmitJob expands a multi-node job with them.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace lote::control {

// The bounds a targetNodes value writes, before numNodes fills in the omitted
// ones: "2:" is {2, nullopt}, ":4" is {nullopt, 4}, "5" is {5, 5}.
struct NodeRangeBounds {
  std::optional<int32_t> first;  // nullopt: starts at node 0
  std::optional<int32_t> last;   // nullopt: ends at the last node (an open upper bound)
};

struct NodeIndexRange {
  int32_t first = 0;  // inclusive
  int32_t last = 0;   // inclusive
};

// Parses the syntax only (no numNodes yet). InvalidArgument naming `field`
// and the accepted forms when `target_nodes` is empty, has more than one ':',
// or has a bound that is not a node index of at most 9 digits.
Result<NodeRangeBounds> ParseNodeRangeBounds(std::string_view target_nodes,
                                             std::string_view field = "targetNodes");

// Parses `target_nodes` for a job of `num_nodes` (>= 1) nodes into inclusive
// node indexes. InvalidArgument naming `field` for bad syntax (as above), a
// start after the end ("3:1"), or a node index >= num_nodes.
Result<NodeIndexRange> ParseNodeRange(std::string_view target_nodes, int32_t num_nodes,
                                      std::string_view field = "targetNodes");

// Every node 0..num_nodes-1 covered exactly once.
Status CheckNodeRangesCover(const std::vector<NodeIndexRange>& ranges, int32_t num_nodes);

}  // namespace lote::control
