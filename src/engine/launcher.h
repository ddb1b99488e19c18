// `lote train` as its own launcher (like torchrun). One process per node runs the
// launcher: it finds its place in the job (nodes, node rank, the main node's address)
// from flags or the AWS Batch variables, meets the other nodes' launchers at the
// rendezvous store that the main node's launcher serves, starts --nproc-per-node rank
// processes (this binary again, with LOTE_TRAIN_* variables), and watches them. A rank
// that exits non-zero, or a node that disappears, stops the whole job within seconds:
// the launcher that sees it publishes the reason in the store, every launcher stops its
// ranks and exits non-zero naming the rank or node. A job of one process runs in this
// process without any of it.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "engine/trainer.h"

namespace lote::engine {

inline constexpr int kDefaultMasterPort = 29500;
inline constexpr int kDerivedPorts = 16384;

struct LaunchOptions {
  int nproc_per_node = 1;
  int nnodes = 0;           // 0: AWS_BATCH_JOB_NUM_NODES, else 1
  int node_rank = -1;       // -1: AWS_BATCH_JOB_NODE_INDEX, else 0
  int main_node = -1;       // -1: AWS_BATCH_JOB_MAIN_NODE_INDEX, else 0
  std::string master_addr;  // "": see ResolveLaunch
  // 0: with one node, any free port (only this launcher's ranks connect); with
  // several, 29500, or under AWS Batch 29500 + a hash of the job id and attempt
  // modulo kDerivedPorts, so jobs whose nodes share a host (lote's local executor,
  // or two lote servers on one machine) do not meet at each other's store.
  int master_port = 0;
  std::string node_addr;  // "": LOTE_PRIVATE_IPV4_ADDRESS, else the route to the main node
  int rdzv_timeout_s = 900;
  // The ranks' collectives: "auto" (shared memory for a group on one host, else Gloo),
  // "shm" (shared memory or fail), "gloo".
  std::string comm = "auto";
  std::string
      job_id;  // rendezvous identity; "": AWS_BATCH_JOB_ID without "#node", plus the attempt
};

// Fills the blanks of `o` from the environment (see the fields). The main node's
// address: --master-addr, else AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS (set on
// child nodes), else on the main node its own address (LOTE_PRIVATE_IPV4_ADDRESS),
// else 127.0.0.1.
Result<LaunchOptions> ResolveLaunch(LaunchOptions o);

// Runs `lote train` in whichever role this process has (launcher, rank, or the single
// process); `argv` is this process's command line, reused for the ranks. Returns the
// process exit code.
int RunTrainCommand(const TrainOptions& train, const LaunchOptions& launch,
                    const std::vector<std::string>& argv);

}  // namespace lote::engine
