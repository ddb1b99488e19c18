// lote-exec-shim: the node runner as a small standalone program, the same
// code as `lote exec-shim` (shim.h). Started by the local backend (beside the
// lote binary) and by every task of a Slurm attempt; with `--agent HOME`, the
// home's node agent (node_agent.h), which forks each node's supervisor.
#include <cstdio>
#include <cstring>
#include <string>

#include "exec/node_agent.h"
#include "exec/shim.h"

int main(int argc, char** argv) {
  std::string node_dir, attempt_dir, agent_home;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--node-dir") == 0) node_dir = argv[i + 1];
    if (std::strcmp(argv[i], "--attempt-dir") == 0) attempt_dir = argv[i + 1];
    if (std::strcmp(argv[i], "--agent") == 0) agent_home = argv[i + 1];
  }
  if (!agent_home.empty() && node_dir.empty() && attempt_dir.empty())
    return lote::exec::RunNodeAgent(agent_home);
  if (node_dir.empty() && attempt_dir.empty()) {
    std::fprintf(stderr, "usage: %s --node-dir DIR | --attempt-dir DIR | --agent HOME\n", argv[0]);
    return 2;
  }
  return lote::exec::ExecShimMain(node_dir, attempt_dir);
}
