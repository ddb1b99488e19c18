// exec::Backend: the one interface the control plane uses to run the nodes of a
// job attempt on some compute (local processes today, Slurm later).
//
// The control plane decides WHAT runs (scheduling, retries, gang teardown); a
// backend only runs what it is told and reports what happened:
//   Launch(spec)          start one node of one attempt
//   Terminate(attempt)    SIGTERM every process group of the attempt, then SIGKILL
//                         after the grace period
//   Wait(timeout)         the terminal events (exited / killed by signal / lost /
//                         could not start) of the nodes it runs
//   Recover(expected)     after a server restart: re-adopt the nodes the store says
//                         are running, or report them lost
//
// Contract shared by every implementation:
// - Thread safety: all methods may be called from any thread concurrently, except
//   that at most one thread may be inside Wait at a time (the control plane's
//   event loop); Wake() may be called from any thread to make that Wait return.
// - Ownership: the backend owns the processes it starts or adopts and every file
//   under the node's folder except the command's own output, which it only
//   creates; the caller owns the Backend object. Destroying the Backend does NOT
//   stop running nodes: they keep running and a new instance adopts them (the
//   server may stop or crash at any time).
// - Exactly one terminal NodeEvent is delivered per node launched or recovered by
//   this instance; a node is never started twice (a second Launch of the same
//   NodeKey fails with AlreadyExists, even across restarts).
// - Failure: errors are values. Launch fails with InvalidArgument for a bad spec,
//   FailedPrecondition naming the field for something this backend cannot honour
//   (unless the spec is in emulation mode), AlreadyExists for a node that was
//   launched before, Internal/Unavailable for a host fault (nothing is left
//   running in that case). Once Launch returns OK every outcome of the node,
//   including a command that cannot be executed, arrives as a NodeEvent.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace lote::exec {

// One attempt of one job. `job_id` is the id the attempts are counted on: a
// plain job id, or an array child "<id>:<index>"; never a "#<node>" form (the
// nodes of a multi-node attempt are told apart by NodeKey::node_index).
struct AttemptKey {
  std::string job_id;
  int32_t attempt = 1;  // 1-based, as AWS_BATCH_JOB_ATTEMPT

  bool operator==(const AttemptKey&) const = default;
  auto operator<=>(const AttemptKey&) const = default;
};

// One node of one attempt; node_index is 0 for single-node jobs.
struct NodeKey {
  AttemptKey attempt;
  int32_t node_index = 0;

  bool operator==(const NodeKey&) const = default;
  auto operator<=>(const NodeKey&) const = default;
  // "job/attempt/node", for messages.
  std::string ToString() const;
};

// The NodeKey of an AWS job id: "<id>#<node>" (a node of a multi-node job) ->
// {id, attempt, node}; "<id>:<index>" (array child) and "<id>" -> node 0.
// InvalidArgument for an empty id or a bad node number.
Result<NodeKey> NodeKeyFromJobId(const std::string& job_id, int32_t attempt);
// The AWS job id of a node: "<id>#<node>" for multi-node jobs, else the id.
std::string JobIdOfNode(const NodeKey& key, bool multi_node);

// A resource limit as AWS's `ulimits` entries: name is one of core, cpu, data,
// fsize, locks, memlock, msgqueue, nice, nofile, nproc, rss, rtprio, rttime,
// sigpending, stack; values in setrlimit units (bytes for memlock/stack/...,
// counts for nofile/nproc), -1 meaning unlimited.
struct Ulimit {
  std::string name;
  int64_t soft_limit = 0;
  int64_t hard_limit = 0;
};

// Everything needed to start one node. The control plane fills it from the job,
// its definition and overrides; the backend adds nothing to `environment` except
// PATH/HOME/USER/LOGNAME when absent and LOTE_PRIVATE_IPV4_ADDRESS (see below).
struct NodeLaunchSpec {
  NodeKey node;
  // argv, already Ref::-substituted. argv[0] is looked up in the PATH of
  // `environment` when it has no '/'.
  std::vector<std::string> command;
  // The complete environment of the command; build the AWS_BATCH_* part with
  // BuildBatchEnvironment (batch_env.h). Nothing is inherited from the server.
  std::map<std::string, std::string> environment;
  // Absolute working directory, created if missing (owned by `user`).
  // Empty: <node folder>/work.
  std::string working_dir;
  // User name or numeric uid to run as. Empty: the server's own user. Another
  // user needs a root server (else FailedPrecondition, or skipped in emulation).
  std::string user;
  std::vector<Ulimit> ulimits;
  // Limits of the virtual instance share this node has (0 = none). Enforced with
  // cgroup v2 when the host delegates the memory and cpu controllers; otherwise
  // the node runs unlimited and a warning says so (in LaunchResult::warnings and
  // once at the top of the node's output).
  int64_t vcpu_milli = 0;
  int64_t memory_mib = 0;
  // The virtual instance's private IPv4 address (InstancePrivateIp in
  // batch_env.h); exported to the command as LOTE_PRIVATE_IPV4_ADDRESS.
  std::string private_ip;
  // Where stdout+stderr are appended (raw bytes, in order). Empty:
  // <node folder>/output.log.
  std::string output_path;
  // Fields of the job this backend cannot honour that are set (e.g.
  // "linuxParameters.devices", "privileged"): Launch fails naming them, unless
  // `emulation` is set, then each is logged as skipped into the node's output.
  std::vector<std::string> unsupported_fields;
  // The compute environment is marked as emulation: approximate what cannot be
  // honoured (unsupported fields, ulimits above the host's hard limit, running
  // as another user without root) and say so in the output and in warnings.
  bool emulation = false;
};

struct LaunchResult {
  std::string node_dir;     // the node's folder (layout in docs/executor.md)
  std::string output_path;  // where its output goes
  // Things that are not as asked (cgroup limits not enforced, emulated fields),
  // each also written once at the top of the node's output.
  std::vector<std::string> warnings;
};

enum class NodeOutcome {
  kExited,       // the command exited; exit_code is its status
  kSignaled,     // the command was killed by `signal`
  kLost,         // the node vanished without a recorded outcome (NODE_LOST)
  kStartFailed,  // the command could not be started (bad argv[0], working dir, user...)
};

std::string_view NodeOutcomeName(NodeOutcome outcome);

// The terminal event of one node.
struct NodeEvent {
  NodeKey node;
  NodeOutcome outcome = NodeOutcome::kLost;
  int32_t exit_code = -1;  // kExited only
  int32_t signal = 0;      // kSignaled only
  // A Terminate request for this node's attempt was being carried out when it ended.
  bool terminated = false;
  // kLost only: the node provably never ran its command (Recover found no
  // folder for it, or a free lock and no supervisor record: the tombstone it
  // leaves stops a late supervisor from starting). The control plane may run
  // the attempt again without counting it.
  bool never_started = false;
  // kStartFailed only: the command itself cannot run (argv[0] is not found in
  // the job's PATH, or exec refused it: not executable, not a program). The
  // job's own error (USER_ERROR), unlike a working directory, user or limit
  // the host could not set up (INFRASTRUCTURE). See docs/executor.md.
  bool bad_command = false;
  // Human-readable, e.g. "exited with code 3", "killed by signal 9 (SIGKILL)",
  // "supervisor of node 2 vanished without recording an outcome".
  std::string reason;
  int64_t started_at_ms = 0;  // 0 when the command never started
  int64_t stopped_at_ms = 0;
};

// The exit code AWS would report for the node's container: the exit status,
// 128 + signal when killed by a signal (as Docker does), -1 when lost or never
// started.
int32_t ContainerExitCode(const NodeEvent& event);

// What Recover found.
struct RecoverReport {
  std::vector<NodeKey> adopted;  // still running, now watched by this instance
  // Nodes that ended while no server watched them, and nodes lost: their
  // NodeEvents are returned by the next Wait.
  std::vector<NodeKey> finished;
  std::vector<NodeKey> lost;
  std::vector<NodeKey> never_started;  // the lost nodes whose command provably never ran
  // Running nodes the caller did not list: a node must never run unknown to the
  // control plane, so they were terminated (no event is delivered for them).
  std::vector<NodeKey> orphans_terminated;
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual Result<LaunchResult> Launch(const NodeLaunchSpec& spec) = 0;

  // Sends SIGTERM to every process group of every running node of `attempt`,
  // then SIGKILL after `grace_ms` (nullopt: the backend's default, 30 s). Returns
  // at once; each node's end arrives as a NodeEvent with terminated = true.
  // Calling it again with a shorter grace shortens the wait. NotFound when no
  // node of the attempt is running here.
  virtual Status Terminate(const AttemptKey& attempt, std::optional<int64_t> grace_ms) = 0;

  // Blocks up to timeout_ms (0: poll) for terminal events; returns those ready,
  // possibly none. Only one thread may wait at a time.
  virtual Result<std::vector<NodeEvent>> Wait(int64_t timeout_ms) = 0;

  // Makes a Wait in progress return early (safe from any thread).
  virtual void Wake() = 0;

  // After a restart: `expected` are the nodes the store says are running. Each is
  // adopted (its supervisor verified by pid + process start time), or its
  // recorded outcome or loss is queued for Wait. Call once, before Launch.
  virtual Result<RecoverReport> Recover(const std::vector<NodeKey>& expected) = 0;

  // Nodes launched or adopted by this instance whose terminal event has not yet
  // been returned by Wait.
  virtual std::vector<NodeKey> Running() const = 0;
};

}  // namespace lote::exec
