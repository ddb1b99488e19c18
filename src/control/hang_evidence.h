// What a hang leaves behind (docs/faults.md): the stack dumps of every node
// (exec::Backend::CollectStackDumps), stored as the log stream
// "<node's stream>/dump", and the sentence the HANG reason ends with, naming
// the straggler: the node(s) whose processes were found stopped (state T),
// else the one node that is farther (by the function names of its stacks)
// from every other node than any two others are from each other.
//
// Pure: no I/O.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace lote::control {

// The stream a node's dump is stored in.
std::string DumpStreamName(const std::string& node_stream);

// The straggler node(s) of a set of dumps by node index, ascending; empty
// when no node stands out (or there are fewer than two nodes).
std::vector<int32_t> Stragglers(const std::map<int32_t, std::string>& dumps);

// "; stack dumps of nodes 0, 1, 2, 3 are in <stream>/dump; straggler: node 1
// (its processes are stopped)", or why there are none (`error`, non-empty
// when the backend could not collect them).
std::string EvidenceSentence(const std::map<int32_t, std::string>& dumps,
                             const std::string& stored_as, const std::string& error);

}  // namespace lote::control
