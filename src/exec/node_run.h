// One node's command started and supervised: the steps that both of lote's
// node runners take the same way.
//
//   - the per-node supervisor (shim.cc): a process of its own for one node,
//     started as a program (`lote-exec-shim --node-dir`), as a Slurm task, or
//     forked by the node agent for a container-mode node;
//   - the node agent (node_agent.cc): one process per host that starts and
//     supervises the commands of every other node itself, each command its
//     direct child.
//
// Starting: ForkCommand makes what the command needs (output file, cgroup,
// working directory), finds its executable and starts it (vfork) in a session
// of its own; the child records its identity (command.json) before it execs,
// so no command ever runs unrecorded, and its setup errors come back to the
// runner before ForkCommand returns.
// Supervising: CommandSupervision holds what the runner does to a running
// command: a terminate request (SIGTERM to its group, SIGKILL when the grace
// period ends), the fault the job asked for (node_fault.h), a slow node's
// turns. Ending: CommandOutcome turns the leader's exit into the node's
// StatusRecord.
//
// Not thread-safe: a runner is single-threaded (fork from it is safe).
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>

#include "exec/node_fault.h"
#include "exec/node_files.h"

namespace lote::exec {

// The PATH of the runner's own programs (podman in container mode).
inline constexpr char kHostPath[] = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

// shim.log of a node: what did not go the usual way (a refusal, a failed step,
// a terminate request, a grace period running out). Created on the first
// line, so a node that simply runs costs no file for it.
class NodeLog {
 public:
  NodeLog(std::string path, std::string who) : path_(std::move(path)), who_(std::move(who)) {}
  ~NodeLog();
  NodeLog(const NodeLog&) = delete;
  NodeLog& operator=(const NodeLog&) = delete;
  void operator()(const std::string& msg) const;

 private:
  std::string path_;
  std::string who_;  // e.g. "shim[123]"
  mutable int fd_ = -1;
};

// A node's outcome when its command could not be started.
StatusRecord StartFailure(std::string reason, bool bad_command = false);

// A command started (pid > 0: it has exec'd, or failed before and exited
// with `start_error` saying why; it recorded itself in command.json before
// either), or why it could not be (`failed`: the node's outcome; nothing was
// started).
struct ForkedCommand {
  pid_t pid = -1;
  ProcessIdentity id;
  int64_t forked_at_ms = 0;
  int64_t started_at_ms = 0;       // when the exec was seen (the command's start)
  std::string start_error;         // the child's setup error ("" it exec'd)
  off_t output_start = 0;          // the output file's size before the command
  std::string cgroup_dir;          // the node's cgroup when it was set up ("" none)
  std::string devices_cgroup_dir;  // its devices group when it was fenced ("" none)
  std::optional<StatusRecord> failed;
};

// The steps before the command runs, in order: the output file's folder and
// the file (0600, appended), the spec's notices (to `log`, never into the
// output), the cgroup (a failure is a notice: the limits are not enforced),
// the working directory (0700, the job user's), the executable (`podman` for a
// container spec, else argv[0] in the job's PATH), then vfork. The child: own
// session and process group, signals unblocked and default, stdin /dev/null
// and stdout+stderr to the output, the cgroup joined; it records its own
// identity in command.json (as the runner's user, before anything of the
// job's), then sets the rlimits, groups, gid, uid and working directory and
// execs. The runner waits meanwhile (vfork): when this returns the command has
// exec'd or failed.
ForkedCommand ForkCommand(const NodePaths& p, const ShimSpec& spec, const NodeLog& log);

// The devices a node's environment names in LOTE_ACCELERATORS ("0,1", "2-3"),
// recorded in its command.json (ProcessRecord::devices); empty when there are
// none or the list is malformed.
std::vector<int32_t> RecordedDevices(const std::vector<std::string>& env);

// The node's outcome from its leader's exit (waitid's siginfo), the setup
// error it reported ("" none) and whether a terminate request was carried
// out. Times and `injected` are the caller's.
StatusRecord CommandOutcome(const siginfo_t& leader, const std::string& start_error,
                            bool terminating);

// What a runner does to one running command (its process group): terminate
// requests with their grace period, the job's fault, a slow node's turns.
class CommandSupervision {
 public:
  // `injected`: a sentence already recorded at the start (an upload fault).
  CommandSupervision(const NodePaths& p, const ShimSpec& spec, pid_t group, const NodeLog* log,
                     std::string injected);

  // The command exec'd (its start): the job's fault is armed from now on.
  void Started(int64_t now_mono_ms);
  // SIGTERM to the group (the first time), SIGKILL once `grace_ms` has passed;
  // a later request can only shorten the wait. A slow node is continued first
  // (a stopped process does not act on SIGTERM). Before the command has
  // exec'd (Started) the signals wait: its group may not exist yet.
  void Terminate(int64_t grace_ms, int64_t now_mono_ms);
  // A fault asked for while the node runs (inject.json), replacing the armed one.
  void TakeFaultRequest(int64_t now_mono_ms);
  // Fires what is due at `now_mono_ms`: the fault, a slow node's turn, SIGKILL.
  void Tick(int64_t now_mono_ms);
  // How long the runner may wait before the next Tick (-1: until something happens).
  int TimeoutMs(int64_t now_mono_ms) const;
  // The command has exited: a stopped group is continued for good.
  void End();

  bool terminating() const { return terminating_; }
  const std::string& injected() const { return injected_; }

 private:
  const NodePaths paths_;
  const int32_t node_index_;
  const pid_t group_;
  const NodeLog* log_;
  bool started_ = false;
  bool terminating_ = false;
  std::optional<int64_t> kill_deadline_;  // monotonic ms
  NodeFault fault_;                       // armed at Started
  std::optional<FaultWatch> faults_;
  std::optional<Throttle> throttle_;  // a slow node's turns (kSlow)
  std::string injected_;
};

}  // namespace lote::exec
