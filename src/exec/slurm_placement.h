// What the node runner learns from its Slurm placement: which node of the
// attempt it is (SLURM_NODEID) and the addresses the batch script resolved
// inside the allocation (LOTE_NODE_ADDRS: every node's, in node index order;
// LOTE_MAIN_ADDR: the main node's). The Slurm backend decides placement and
// addresses; the runner (shim.h) turns them into the node's environment.
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace lote::exec {

// The folder of this task's node: <attempt_dir>/node-<SLURM_NODEID>.
// InvalidArgument when `slurm_node_id` is missing or not a number (the runner
// was not started by srun or the batch script).
Result<std::string> SlurmNodeDir(const std::string& attempt_dir, const char* slurm_node_id);

// The variables node `node_index` gets from its placement, from the task's
// own environment `task_env`: LOTE_SLURM_JOB_ID, LOTE_SLURM_NODE, its
// LOTE_PRIVATE_IPV4_ADDRESS (when known) and, on a child node of a multi-node
// gang, AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS.
std::vector<std::string> SlurmPlacementEnv(const std::map<std::string, std::string>& task_env,
                                           int32_t node_index, bool multi_node,
                                           int32_t main_node_index);

// Sets every "KEY=VALUE" of `add` in `env`, replacing an existing KEY.
void MergeEnv(std::vector<std::string>* env, const std::vector<std::string>& add);

// The GPUs of a node's GRES as sinfo's %G prints them ("gpu:2",
// "gpu:a100:4(S:0-1)", "gpu:2,mps:100", "(null)"): the sum of its gpu counts.
int32_t GresGpus(std::string_view gres);

// A node of the partition as `sinfo -h -N -o "%N %t"` lists it.
struct SlurmNodeState {
  std::string name;
  std::string state;  // Slurm's short state: idle, mix, alloc, drain, down*, ...
};
std::vector<SlurmNodeState> ParseSinfoNodeStates(const std::string& sinfo_out);
// Whether a node in `state` can take work (idle, mix, alloc, comp, plnd; not
// drained, down, failed or unresponsive, '*').
bool SlurmNodeUsable(const std::string& state);

// What a retry of `needed` nodes passes to sbatch --exclude: the hosts of
// `avoid` in the partition when enough usable nodes are left without them
// for every node of the gang; else none (Slurm would refuse a job whose
// nodes cannot exist, and a retry never waits for its old nodes). Sorted,
// without repeats.
std::vector<std::string> HostsToExclude(const std::vector<std::string>& avoid,
                                        const std::vector<SlurmNodeState>& partition,
                                        int32_t needed);

// The reason lote gives a node it drains (scontrol ... reason=), and whether
// a node's drain reason is lote's (only those are resumed).
inline constexpr const char* kSlurmQuarantineReasonPrefix = "lote quarantine: ";
bool IsLoteDrainReason(const std::string& reason);

}  // namespace lote::exec
