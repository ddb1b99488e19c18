// The node agent: one long-lived process per host (per lote home) that starts
// and supervises the command of every node the local backend launches.
//
// Without it the backend starts one supervisor program per node
// (posix_spawn + exec of lote-exec-shim), and that supervisor forks the
// command: three process creations per node. The agent (`lote-exec-shim
// --agent HOME`, or `lote exec-shim --agent HOME`) forks each node's command
// itself, which becomes its direct child (one process creation per node, as
// xargs makes), and supervises it with the supervisor's own steps
// (node_run.h): the records (shim.json, command.json, status.json), the
// command recording itself before its exec, terminate requests with
// their grace period, the job's faults, a slow node's turns, the real start
// (the exec) and stop (the exit) times, the clean-up of the command's process
// group and session when it ends. A container-mode node gets a supervisor of
// its own, forked by the agent (podman needs the per-node steps of shim.cc).
//
// The keeper: the agent runs under a parent of its own, a child subreaper
// that does nothing while the agent lives. If the agent dies (even SIGKILL),
// its commands are reparented to the keeper, which goes on running nothing
// but waits: it records the outcome of each command that was the agent's
// (status.json: matched by command.json's identity) when it exits, and ends
// once it has no child left. So killing the agent loses no outcome and stops
// no node; the backend then watches those nodes' commands by pidfd and reads
// what the keeper wrote. Killing the agent and its keeper together loses the
// outcomes of the commands still running (the backend kills them and reports
// the nodes lost, as for a supervisor killed with its command running).
//
// Files, under $LOTE_HOME/agent/ (mode 0700):
//   agent.lock   flock(2)-held by the one live agent of the home
//   agent.json   ProcessRecord of the agent (pid, start time, boot id; keeper)
//   agent.sock   its Unix stream socket (mode 0600)
//   agent.log    its own diagnostics, created on the first line
//
// Protocol (text lines over the socket, in order; several requests may be
// written before the replies are read):
//   -> "hello <version>"         <- "hello <version> <agent pid>"
//   -> "create <node folder> <spec JSON>"  the node's folder made by the agent
//                                   (MakeNodeFolder: spec.json, nodes-live),
//                                   then as "launch" <- the same answers, or
//                                   "exists": the folder was made before
//   -> "launch <node folder>"    <- "ok <pid> <start time> direct": the command,
//                                   recorded and released, is the agent's
//                                 | "ok <pid> <start time> supervisor": a
//                                   supervisor of its own (container mode)
//                                 | "ended": the node's outcome is in its
//                                   status.json already (it could not start)
//                                 | "taken": the node was launched before
//                                 | "err <why>"
//   -> "watch"                   <- "watching", then "end <node folder>" for
//                                   every node the agent supervised whose
//                                   status.json it has written, until the
//                                   connection closes
//   -> "term <node folder> <grace ms>"   <- "ok" | "err <why>"
//   -> "inject <node folder>"    (inject.json)   <- "ok" | "err <why>"
// A launch is answered once its command is forked and recorded (it then runs
// whatever happens to the agent or the server). The folder must lie under
// <home>/jobs/. Only the agent's own user (or root) may connect (SO_PEERCRED).
// An agent exits by itself when its agent.json is gone (its home was removed)
// or when it has had no node and no backend connected for `idle_exit_ms`; on
// SIGTERM it exits at once, leaving its running commands to the keeper.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "exec/proc_util.h"

namespace lote::exec {

inline constexpr int kNodeAgentProtocol = 3;

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

// One node of a launch: its folder, and the spec to make it with ("": the
// folder and its spec.json exist already).
struct AgentLaunchRequest {
  std::string dir;
  std::string spec_json;  // one line (JSON as dump() writes it)
};

// What the agent did with one node folder of a launch.
struct AgentLaunch {
  enum class Kind {
    kDirect,      // `process` is the node's command, the agent's child
    kSupervisor,  // `process` is the node's own supervisor (shim.cc)
    kEnded,       // nothing runs: status.json holds the node's outcome
    kTaken,       // the node was launched before (by this agent or another)
  };
  Kind kind = Kind::kDirect;
  ProcessIdentity process;
};

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

  // One answer per node, in order: what the agent did, or why it could not
  // start the node (AlreadyExists: a create found its folder made before).
  // The outer error: the agent is gone (the answers read so far are in
  // `answered`, when given).
  Result<std::vector<Result<AgentLaunch>>> Launch(
      const std::vector<AgentLaunchRequest>& nodes,
      std::vector<Result<AgentLaunch>>* answered = nullptr);
  // A terminate request for a node the agent supervises (terminate.json is the
  // caller's): NotFound when it supervises no such node.
  Status Terminate(const std::string& node_dir, int64_t grace_ms);
  // The fault in the node's inject.json, armed now.
  Status Inject(const std::string& node_dir);

  // Makes this connection the caller's watch: from now on the agent writes
  // "end <node folder>" on it for every node whose outcome it recorded. Use
  // fd() in a poll set and ReadEnded when it is readable; no other request
  // may be made on it afterwards.
  Status Watch();
  // The node folders ended since the last call (never blocks). Unavailable
  // once the agent closed the connection (it is gone): the folders read
  // before that are in `ended`.
  Status ReadEnded(std::vector<std::string>* ended);
  int fd() const { return fd_; }

  const ProcessIdentity& agent() const { return agent_; }
  // The agent's keeper (none when agent.json names none).
  const std::optional<ProcessIdentity>& keeper() const { return keeper_; }

 private:
  NodeAgentClient(int fd, ProcessIdentity agent, std::optional<ProcessIdentity> keeper)
      : fd_(fd), agent_(std::move(agent)), keeper_(std::move(keeper)) {}
  Result<std::string> ReadLineLocked();
  // One request line, one answer line ("ok" or "err <why>").
  Status SimpleRequest(const std::string& line);

  std::mutex mu_;
  const int fd_;
  const ProcessIdentity agent_;
  const std::optional<ProcessIdentity> keeper_;
  std::string buffer_;  // bytes read past the last line; protected by mu_
};

}  // namespace lote::exec
