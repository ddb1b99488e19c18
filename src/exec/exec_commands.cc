// `lote exec-shim --node-dir DIR`: the supervisor of one node, started by every
// executor (see exec/shim.h). Not meant to be run by hand.
#include <memory>
#include <string>

#include "exec/node_agent.h"
#include "exec/shim.h"
#include "lote/registry.h"

namespace {

lote::CommandRegistrar reg([](CLI::App& app) {
  auto node_dir = std::make_shared<std::string>();
  auto attempt_dir = std::make_shared<std::string>();
  auto agent_home = std::make_shared<std::string>();
  CLI::App* sub = app.add_subcommand(
      "exec-shim", "(internal) supervise one node of a job; started by the local executor");
  sub->group("");  // hidden from `lote --help`
  auto* by_node =
      sub->add_option("--node-dir", *node_dir, "the node's folder under $LOTE_HOME/jobs");
  auto* by_attempt =
      sub->add_option("--attempt-dir", *attempt_dir,
                      "a Slurm task: the attempt's folder (the node is SLURM_NODEID)");
  auto* as_agent = sub->add_option(
      "--agent", *agent_home, "the node agent of this lote home (forks each node's supervisor)");
  by_node->excludes(by_attempt);
  as_agent->excludes(by_node);
  as_agent->excludes(by_attempt);
  sub->require_option(1);
  sub->callback([node_dir, attempt_dir, agent_home] {
    if (!agent_home->empty()) {
      lote::SetExitCode(lote::exec::RunNodeAgent(*agent_home));
      return;
    }
    lote::SetExitCode(lote::exec::ExecShimMain(*node_dir, *attempt_dir));
  });
});

}  // namespace
