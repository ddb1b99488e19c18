// The supervisor shim of one node (`lote exec-shim --node-dir DIR`).
//
// The local backend starts one shim per node, in a session of its own, and the
// shim outlives the server (even SIGKILL of the server). It:
//   1. takes the node's lock (exits 75 if another supervisor holds it) and stops
//      at once if the node already has an outcome (status.json: e.g. a
//      tombstone written by a backend that declared the node lost);
//   2. records its own identity (shim.json: pid + start time + boot id);
//   3. starts the command in a new session/process group (setsid), stdout and
//      stderr appended to the output file, stdin /dev/null, with the spec's
//      environment, working directory, rlimits, user and cgroup; the command
//      records its identity (command.json) itself before its exec (node_run.h);
//   4. on SIGTERM reads terminate.json {grace_ms}, sends SIGTERM to the
//      command's process group, and SIGKILL once the grace period ends;
//   5. when the command ends, SIGKILLs what is left of its process group and
//      every other descendant (the shim is a child subreaper, so orphans come
//      back to it), then writes status.json atomically and exits 0.
//
// It is every backend's node runner. Locally it is a detached supervisor
// (ShimMode::kSupervisor). Under Slurm each task of the attempt's Slurm job
// is a runner (`lote exec-shim --attempt-dir DIR`: the node is SLURM_NODEID,
// its folder DIR/node-<k>), in ShimMode::kTask: it adds the placement's
// variables and checks the rlimits on the node (ShimSpec::placement), and it
// exits with the command's status.
// Not thread-safe: it is a process's main function.
#pragma once

#include <string>
#include <vector>

namespace lote::exec {

enum class ShimMode {
  kSupervisor,  // exit 0 once the outcome is recorded
  kTask,        // exit with the command's status (128 + signal; 127 bad command; 1 start failed)
};

// Returns the shim's process exit status (by `mode` when an outcome was
// recorded or already present, 75 when another supervisor holds the node, 1
// on a fault that left no outcome).
int RunExecShim(const std::string& node_dir, ShimMode mode = ShimMode::kSupervisor);

// The command line's entry: exactly one of `node_dir` (a supervisor) and
// `attempt_dir` (a Slurm task); 2 for a usage error.
int ExecShimMain(const std::string& node_dir, const std::string& attempt_dir);

// The runner to start: the standalone `lote-exec-shim` installed beside this
// executable (a small static program that starts several times faster than
// the whole lote binary), else this executable's own `exec-shim`
// subcommand. Empty if /proc/self/exe is unreadable.
std::vector<std::string> DefaultShimCommand();

}  // namespace lote::exec
