// Multi-node `targetNodes` ranges ("0:", "1:3", ":2", "4"), as AWS Batch
// defines them: indexes start at 0, an omitted start is 0, an omitted end is
// the last node. Pure functions; the job layer uses them to expand a
// multi-node job into one container spec per node.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace lote::control {

struct NodeIndexRange {
  int32_t first = 0;  // inclusive
  int32_t last = 0;   // inclusive
};

// InvalidArgument naming the problem for bad syntax or indexes >= num_nodes.
Result<NodeIndexRange> ParseNodeRange(std::string_view target_nodes, int32_t num_nodes);

// Every node 0..num_nodes-1 covered exactly once.
Status CheckNodeRangesCover(const std::vector<NodeIndexRange>& ranges, int32_t num_nodes);

}  // namespace lote::control
