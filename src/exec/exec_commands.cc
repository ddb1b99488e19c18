// `lote exec-shim --node-dir DIR`: the supervisor of one node, started by every
// executor (see exec/shim.h). Not meant to be run by hand.
#include <dirent.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "common/files.h"
#include "exec/node_agent.h"
#include "exec/shim.h"
#include "lote/registry.h"

namespace {

// The threads of this process (the entries of /proc/self/task).
int ThreadCount() {
  int n = 0;
  if (DIR* d = ::opendir("/proc/self/task")) {
    while (const dirent* e = ::readdir(d))
      if (e->d_name[0] != '.') ++n;
    ::closedir(d);
  }
  return n;
}

// The runners (supervisor, node agent, Slurm task) take their signals from a
// signalfd, blocked in their one thread; a thread that does not block them
// would be handed SIGCHLD (lost), SIGTERM or SIGUSR1 (the process killed).
// OpenBLAS starts its worker threads as the `lote` binary loads, before main,
// so a runner started as `lote exec-shim` runs itself again with OpenBLAS told
// to start none (nothing it runs inherits that: a command's environment is its
// spec's). `lote-exec-shim` links no BLAS and is never re-run.
void RunAsTheOnlyThread() {
  if (ThreadCount() <= 1 || std::getenv("LOTE_RUNNER_REEXEC") != nullptr) {
    ::unsetenv("LOTE_RUNNER_REEXEC");
    return;
  }
  const lote::Result<std::string> read = lote::ReadFile("/proc/self/cmdline");
  if (!read.ok()) return;  // run as is (the runners poll pidfds too)
  const std::string& cmdline = *read;
  std::vector<std::string> args;
  for (size_t at = 0; at < cmdline.size();) {
    const size_t end = cmdline.find('\0', at);
    args.push_back(cmdline.substr(at, end == std::string::npos ? std::string::npos : end - at));
    at = end == std::string::npos ? cmdline.size() : end + 1;
  }
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  ::setenv("OPENBLAS_NUM_THREADS", "1", 1);
  ::setenv("LOTE_RUNNER_REEXEC", "1", 1);
  ::execv("/proc/self/exe", argv.data());
  ::unsetenv("LOTE_RUNNER_REEXEC");  // cannot: run as is (the runners poll pidfds too)
}

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
    RunAsTheOnlyThread();
    if (!agent_home->empty()) {
      lote::SetExitCode(lote::exec::RunNodeAgent(*agent_home));
      return;
    }
    lote::SetExitCode(lote::exec::ExecShimMain(*node_dir, *attempt_dir));
  });
});

}  // namespace
