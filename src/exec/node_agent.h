// The node agent: one long-lived process per host (per lote home) that starts
// the supervisor of each node the local backend launches, by fork alone.
//
// Without it the backend starts every node's supervisor as a new program
// (posix_spawn + exec of lote-exec-shim), and the supervisor forks the
// command. The agent (`lote-exec-shim --agent HOME`, or `lote exec-shim
// --agent HOME`) is that same program, started once: for each node it forks a
// child that runs the supervisor's code (RunExecShim, shim.h) directly, and
// that child forks and execs only the user's command. One exec per node is
// saved; every guarantee of the supervisor is kept, since it is the same code
// in a process of its own (own session, own node lock, own records).
//
// Files, under $LOTE_HOME/agent/ (mode 0700):
//   agent.lock   flock(2)-held by the one live agent of the home
//   agent.json   ProcessRecord of the agent (pid, start time, boot id)
//   agent.sock   its Unix stream socket (mode 0600)
//   agent.log    its own diagnostics, created on the first line
//
// Protocol (text lines over the socket, in order; several requests may be
// written before the replies are read):
//   -> "hello <version>"         <- "hello <version> <agent pid>"
//   -> "launch <node folder>"    <- "ok <supervisor pid> <start time>" | "err <why>"
// A launch is answered once the supervisor exists (forked): it then holds the
// node whatever happens to the agent or the server. The folder must lie under
// <home>/jobs/. Only the agent's own user may connect (SO_PEERCRED).
//
// The agent never waits on its supervisors: they report through their node
// folders (status.json), as when started one by one. Killing the agent (even
// with SIGKILL) leaves every supervisor running; the next backend starts a new
// agent. An agent exits by itself when its agent.json is gone (its home was
// removed) or when no backend has been connected for `idle_exit_ms`.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/status.h"
#include "exec/proc_util.h"

namespace lote::exec {

inline constexpr int kNodeAgentProtocol = 1;

struct AgentPaths {
  std::string dir;  // <home>/agent
  std::string lock() const { return dir + "/agent.lock"; }
  std::string record() const { return dir + "/agent.json"; }
  std::string socket() const { return dir + "/agent.sock"; }
  std::string log() const { return dir + "/agent.log"; }
};
AgentPaths AgentPathsFor(const std::string& home);

// The agent's main function (a process of its own; not thread-safe). Returns
// its exit status: 0 after a clean stop (SIGTERM, idle, home removed), 75 when
// another agent holds the home, 1 on a fault before it served. On success the
// process that was started returns 0 at once and a forked child serves; the
// line "ready" (or "busy", "error: ...") is written to stdout first.
int RunNodeAgent(const std::string& home, int64_t idle_exit_ms = 600'000);

// A connection of the local backend to its home's agent. Thread-safe (calls
// are serialised); errors as values: Unavailable when the agent is gone (the
// caller may start another).
class NodeAgentClient {
 public:
  // Connects to the live agent of `home`, verified like a node's supervisor:
  // its lock is held, agent.json names a live process (pid, start time, boot)
  // and that process is the socket's peer. NotFound when none runs.
  static Result<std::unique_ptr<NodeAgentClient>> Connect(const std::string& home);
  // Connect, else start one: `runner` + {"--agent", home}, in a session of its
  // own, and connect once it said it is ready.
  static Result<std::unique_ptr<NodeAgentClient>> ConnectOrStart(
      const std::string& home, const std::vector<std::string>& runner);
  ~NodeAgentClient();
  NodeAgentClient(const NodeAgentClient&) = delete;
  NodeAgentClient& operator=(const NodeAgentClient&) = delete;

  // One answer per node folder, in order: the supervisor's identity, or why
  // the agent could not start it. The outer error: the agent is gone (the
  // answers read so far are in `answered`, when given).
  Result<std::vector<Result<ProcessIdentity>>> Launch(
      const std::vector<std::string>& node_dirs,
      std::vector<Result<ProcessIdentity>>* answered = nullptr);

  const ProcessIdentity& agent() const { return agent_; }

 private:
  NodeAgentClient(int fd, ProcessIdentity agent) : fd_(fd), agent_(std::move(agent)) {}
  Result<std::string> ReadLineLocked();

  std::mutex mu_;
  const int fd_;
  const ProcessIdentity agent_;
  std::string buffer_;  // bytes read past the last line; protected by mu_
};

}  // namespace lote::exec
