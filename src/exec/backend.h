// exec::Backend: the one interface the control plane uses to run the nodes of a
// job attempt on some compute: local processes (local_backend.h) or a remote
// scheduler such as Slurm (slurm_backend.h). One compute environment is served
// by exactly one backend; a job queue may mix environments of several kinds.
//
// The control plane decides WHAT runs (scheduling, retries, gang teardown); a
// backend only runs what it is told and reports what happened:
//   LaunchGang(gang)      hand every node of one attempt over as one unit; the
//                         answer carries a backend reference (local pids, a
//                         Slurm job id) that the control plane stores with the
//                         attempt
//   Terminate(attempt)    stop every node of the attempt (SIGTERM, then SIGKILL
//                         after the grace period)
//   Wait(timeout)         events of the nodes it runs: pending (with the
//                         backend's reason), running, and the terminal ones
//                         (exited / killed by signal / lost / could not start),
//                         each with the backend's own timestamp
//   Recover(expected)     after a server restart: re-attach to the nodes the
//                         store says are running, by their stored reference, or
//                         report them lost
//   OutputPath(node)      the file that holds the node's stdout+stderr, readable
//                         by the server while the node runs (log streams)
//   capabilities()        which container fields it honours
//   Capacity()            what it can hold, when it is not lote's to launch
//
// Contract shared by every implementation:
// - Thread safety: all methods may be called from any thread concurrently, except
//   that at most one thread may be inside Wait at a time; Wake() may be called
//   from any thread to make that Wait return.
// - Ownership: the backend owns what it starts or adopts; the caller owns the
//   Backend object. Destroying the Backend does NOT stop running nodes: they keep
//   running and a new instance re-attaches to them (the server may stop or crash
//   at any time).
// - Exactly one terminal NodeEvent is delivered per node launched or recovered by
//   this instance; a node is never started twice (a second launch of the same
//   NodeKey fails with AlreadyExists, even across restarts).
// - Environment: the backend sets AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS on
//   every node of a multi-node gang but the main one (kMainNodeAddressVar): only
//   the backend knows where the main node runs (lote's virtual address locally,
//   the allocation's first node under Slurm).
// - Failure: errors are values. LaunchGang fails with InvalidArgument for a bad
//   spec, FailedPrecondition naming the field for something this backend cannot
//   honour (unless the spec is in emulation mode), AlreadyExists for an attempt
//   launched before, Internal/Unavailable for a host fault; nothing of the gang
//   is left running then (nodes already started are terminated and report their
//   end through Wait). Once LaunchGang returns OK every outcome of every node,
//   including a command that cannot be executed, arrives as a NodeEvent.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/status.h"
#include "exec/container.h"
#include "exec/node_fault.h"

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

// The variable a backend fills in on the child nodes of a multi-node gang.
inline constexpr char kMainNodeAddressVar[] = "AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS";

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
// PATH/HOME/USER/LOGNAME when absent, the main node's address (see above) and
// LOTE_PRIVATE_IPV4_ADDRESS where it knows the node's own address.
struct NodeSpec {
  NodeKey node;
  // argv, already Ref::-substituted. argv[0] is looked up in the PATH of
  // `environment` when it has no '/'.
  std::vector<std::string> command;
  // The complete environment of the command (control::JobEnvironment). Nothing
  // is inherited from the server.
  std::map<std::string, std::string> environment;
  // Absolute working directory, created if missing (owned by `user`).
  // Empty: the backend's default (local: <node folder>/work).
  std::string working_dir;
  // User name or numeric uid to run as. Empty: the server's own user. Another
  // user needs a root server (else FailedPrecondition, or skipped in emulation).
  std::string user;
  std::vector<Ulimit> ulimits;
  // What the node asks for (0 = nothing said). Local: limits of the virtual
  // instance share, enforced with cgroup v2 when the host delegates them
  // (otherwise a warning says so). Slurm: --cpus-per-task / --mem.
  int64_t vcpu_milli = 0;
  int64_t memory_mib = 0;
  // Accelerators the backend must find for the node itself (Slurm:
  // --gres=gpu:N, read back from the node's CUDA_VISIBLE_DEVICES). 0 when
  // none, or when the control plane assigned them (the local backend: the
  // devices are in `environment` and `container` already).
  int32_t accelerators = 0;
  // Local backend, process mode: the host's other accelerators' device nodes,
  // which the node is denied with the cgroup v1 devices controller where the
  // host has one (docs/jobs.md, "Accelerators"); a container is fenced by its
  // own device list instead.
  std::vector<std::string> fenced_devices;
  // Local backend: the virtual instance's private IPv4 address (InstancePrivateIp
  // in batch_env.h), exported as LOTE_PRIVATE_IPV4_ADDRESS. Empty under Slurm.
  std::string private_ip;
  // Local backend: where stdout+stderr are appended. Empty: <node folder>/output.log.
  std::string output_path;
  // Fields of the job this backend cannot honour that are set (e.g.
  // "linuxParameters.devices", "privileged"; see Capabilities): the launch fails
  // naming them, unless `emulation` is set, then each is reported as skipped.
  std::vector<std::string> unsupported_fields;
  // Container mode (container.h): run in this image under podman. The backend
  // sets its podman configuration and name. `command` may then be empty (the
  // image's ENTRYPOINT/CMD), `user` is the image's, and environment gets no
  // host defaults (PATH, HOME, ... are the image's).
  std::optional<ContainerRun> container;
  // The compute environment is marked as emulation: approximate what cannot be
  // honoured (unsupported fields, ulimits above the host's hard limit, running
  // as another user without root) and say so in warnings.
  bool emulation = false;
  // A fault the job asked for on this node (control/fault_plan.h); the backend
  // fills in fault.progress_path (the main node's output) and its runner fires it.
  NodeFault fault;
};

// One attempt's nodes, handed over together.
struct GangSpec {
  AttemptKey attempt;
  bool multi_node = false;  // a multi-node parallel job (even with one node)
  int32_t main_node_index = 0;
  // attemptDurationSeconds, for backends that must be told a time limit (Slurm
  // --time); the control plane enforces the timeout itself as well.
  std::optional<int64_t> timeout_seconds;
  std::vector<NodeSpec> nodes;  // node index order, every node of the attempt
  // The backend's machines (NodeHosts names) the failed node of the job's
  // previous attempt ran on: the gang is kept off them when the backend has
  // enough other machines for all its nodes (Slurm: --exclude), else they may
  // be used. Empty for a first attempt or another kind of failure.
  std::vector<std::string> avoid_hosts;
};

enum class NodeEventKind {
  kPending,  // handed over, waiting inside the backend (reason: the backend's)
  kRunning,  // the node's command runs (at_ms: since when)
  kEnded,    // terminal: outcome, exit code or signal
};

enum class NodeOutcome {
  kExited,       // the command exited; exit_code is its status
  kSignaled,     // the command was killed by `signal`
  kLost,         // the node vanished without a recorded outcome (NODE_LOST)
  kStartFailed,  // the command could not be started (bad argv[0], working dir, user...)
};

std::string_view NodeOutcomeName(NodeOutcome outcome);

// An event of one node.
struct NodeEvent {
  NodeKey node;
  NodeEventKind kind = NodeEventKind::kEnded;
  // The backend's timestamp of what happened (kPending: when seen; kRunning:
  // start; kEnded: end).
  int64_t at_ms = 0;
  // kEnded only below.
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
  // "supervisor of node 2 vanished without recording an outcome"; kPending: the
  // backend's reason for waiting (Slurm: "Resources", "Priority", ...).
  std::string reason;
  int64_t started_at_ms = 0;  // 0 when the command never started
  int64_t stopped_at_ms = 0;
  // Container mode: when the node's runner had podman pull its image, from
  // podman's start to the container created (or podman's end when the pull
  // failed); 0 when the image was cached. Within started_at_ms..stopped_at_ms.
  int64_t pull_started_at_ms = 0;
  int64_t pull_stopped_at_ms = 0;
  // kEnded: the node's runner injected a fault the job asked for, e.g.
  // "Injected fault: node 1 killed (SIGKILL) at step 8" (the attempt's reason).
  std::string injected;
  // kRunning, when the backend knows it without a look: the file the node's
  // output goes to ("": ask OutputPath).
  std::string output_path;
  // kRunning: the accelerator devices the backend's own scheduler bound the
  // node to (Slurm: its GRES), as the node recorded them; empty when lote
  // chose them (the local backend) or the node has none.
  std::vector<int32_t> devices;
};

// What LaunchGang did.
struct GangLaunch {
  // Stored with the attempt, given back to Recover after a restart.
  std::string backend_ref;
  // Per node: things that are not as asked (limits not enforced, emulated
  // fields), for the server log and DescribeJobs, never the job's output.
  std::map<int32_t, std::vector<std::string>> warnings;
  // Events the backend already knows of (the local backend: every node runs).
  std::vector<NodeEvent> events;
};

// Which container fields of a job the backend honours; any other field that is
// set is passed as NodeSpec::unsupported_fields.
struct Capabilities {
  std::set<std::string> container_fields;
  bool accelerators = false;  // resourceRequirements GPU handed to the node
};

// What a backend that owns its machines (Slurm) can hold: `nodes` nodes of one
// shape. The scheduler then places on those nodes and launches none.
struct Capacity {
  int32_t nodes = 0;
  int64_t milli_vcpu_per_node = 0;
  int64_t memory_mib_per_node = 0;
  int32_t gpus_per_node = 0;  // Slurm: the partition's GPU GRES (the smallest node's)
  std::string description;    // e.g. "partition train: 4 nodes (b[1-4]) x 2 CPUs, 1000 MiB"
  bool operator==(const Capacity&) const = default;
};

// A node the store says is running, and what LaunchGang answered for its attempt.
struct RecoverItem {
  NodeKey node;
  std::string backend_ref;
};

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

  // "local", "slurm:<partition>", for messages.
  virtual std::string Name() const = 0;
  virtual const Capabilities& capabilities() const = 0;
  // nullopt: lote launches the environment's instances itself (local).
  virtual std::optional<Capacity> GetCapacity() = 0;

  virtual Result<GangLaunch> LaunchGang(const GangSpec& gang) = 0;

  // Stops every running node of `attempt`: SIGTERM, then SIGKILL after
  // `grace_ms` (nullopt: the backend's default). Returns at once; each node's
  // end arrives as a NodeEvent with terminated = true. Calling it again with a
  // shorter grace shortens the wait. NotFound when no node of the attempt runs here.
  virtual Status Terminate(const AttemptKey& attempt, std::optional<int64_t> grace_ms) = 0;

  // Blocks up to timeout_ms (0: poll) for events; returns those ready, possibly
  // none. Only one thread may wait at a time.
  virtual Result<std::vector<NodeEvent>> Wait(int64_t timeout_ms) = 0;

  // Makes a Wait in progress return early (safe from any thread).
  virtual void Wake() = 0;

  // After a restart: `expected` are the nodes the store says are running, with
  // their attempt's stored reference. Each is adopted, or its recorded outcome
  // or loss is queued for Wait. Call once, before LaunchGang.
  virtual Result<RecoverReport> Recover(const std::vector<RecoverItem>& expected) = 0;

  // Removes the files a deleted job left (its record expired: retention):
  // the folders of every attempt and node, with the nodes' records, output
  // files and working directories. Nothing of the job may run here
  // (FailedPrecondition, nothing removed); OK when there is nothing.
  virtual Status RemoveJobFiles(const std::string& job_id) = 0;

  // The file holding the node's stdout+stderr (raw bytes, appended), for the
  // server to store into the node's log stream. NotFound for an unknown node.
  virtual Result<std::string> OutputPath(const NodeKey& node) const = 0;

  // Nodes launched or adopted by this instance whose terminal event has not yet
  // been returned by Wait.
  virtual std::vector<NodeKey> Running() const = 0;

  // Stack dumps of every process of every running node of `attempt`
  // (stack_dump.h), by node index; each process waits at most `timeout_ms`.
  // Blocks while it collects (seconds). Unimplemented for a backend whose
  // nodes it cannot reach (the default); NotFound when no node runs here.
  virtual Result<std::map<int32_t, std::string>> CollectStackDumps(const AttemptKey& attempt,
                                                                   int64_t timeout_ms);

  // Hands `fault` to the runner of a running node (lote's InjectFault): it
  // replaces any fault the node had not fired yet; a time counts from now,
  // a step is the gang's (the main node `main_node_index`'s progress).
  // Unimplemented for a backend that cannot reach its runners (the default);
  // NotFound when the node does not run here.
  virtual Status InjectFault(const NodeKey& node, const NodeFault& fault, int32_t main_node_index);

  // What a runner of the attempt's `num_nodes` nodes injected (the first
  // such sentence, fault.json), "" if none: another node of the gang may end
  // before the faulted one, and the attempt's reason must still say it was
  // injected. Asked only when an attempt fails. The default: "".
  virtual std::string InjectedFault(const AttemptKey& attempt, int32_t num_nodes);

  // The backend's names of the machines the attempt's `num_nodes` nodes ran
  // on, by node index ("" where not known, e.g. it never started), for a
  // backend that owns its machines (Slurm node names); nullopt where the
  // control plane's own instances name them (the default: local).
  virtual std::optional<std::vector<std::string>> NodeHosts(const AttemptKey& attempt,
                                                            int32_t num_nodes) const;

  // Bad-node quarantine of one of the backend's machines (a NodeHosts name):
  // DrainHost takes it out of service with `reason` (Slurm: scontrol update
  // state=drain), ResumeHost puts it back, but only a machine that lote
  // drained (another drain reason is left alone). Both may be repeated.
  // Unimplemented for a backend without machines of its own (the default).
  virtual Status DrainHost(const std::string& host, const std::string& reason);
  virtual Status ResumeHost(const std::string& host);
};

}  // namespace lote::exec
