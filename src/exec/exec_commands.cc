// `lote exec-shim --node-dir DIR`: the supervisor of one node, started by the
// local executor (see exec/shim.h). Not meant to be run by hand.
#include <memory>
#include <string>

#include "exec/shim.h"
#include "lote/registry.h"

namespace {

lote::CommandRegistrar reg([](CLI::App& app) {
  auto node_dir = std::make_shared<std::string>();
  CLI::App* sub = app.add_subcommand(
      "exec-shim", "(internal) supervise one node of a job; started by the local executor");
  sub->group("");  // hidden from `lote --help`
  sub->add_option("--node-dir", *node_dir, "the node's folder under $LOTE_HOME/jobs")->required();
  sub->callback([node_dir] { lote::SetExitCode(lote::exec::RunExecShim(*node_dir)); });
});

}  // namespace
