// On-disk records of one node run by the local backend, shared by the backend
// (in the server) and the supervisor shim (a separate process). Every record is
// a JSON file replaced atomically (WriteJsonRecord), so a reader sees either
// nothing or a whole record, also after either process is killed.
//
// $LOTE_HOME/jobs/<job id>/<attempt>/<node index>/
//   spec.json       ShimSpec: what to run (mode 0600: it holds the environment),
//                   written by Launch before the shim starts
//   node.lock       flock(2)-held by the one live supervisor of the node
//   shim.json       ProcessRecord of the supervisor (written before it takes the lock)
//   command.json    ProcessRecord of the command (its process group leader), written
//                   before the command is allowed to exec
//   terminate.json  TerminateRequest {grace_ms}; the supervisor is then sent SIGTERM
//   status.json     StatusRecord: the outcome, written once (by the supervisor, or
//                   by a backend that found the node lost: a tombstone that also
//                   stops a late supervisor from starting the command)
//   shim.log        the supervisor's own diagnostics
//   fault.json      an injected fault, once the runner fired it (node_fault.h)
//   inject.json     a fault asked for while the node runs (InjectFault), then SIGUSR1
//   container.id    container mode: the container's id, written by podman once it
//                   created the container (after the pull)
//   output.log      default stdout+stderr of the command (raw, appended)
//   work/           default working directory
// Thread-safe: free functions without shared state.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "exec/backend.h"
#include "exec/container.h"
#include "exec/node_fault.h"
#include "exec/proc_util.h"

namespace lote::exec {

struct NodePaths {
  std::string dir;
  std::string spec() const { return dir + "/spec.json"; }
  std::string lock() const { return dir + "/node.lock"; }
  std::string shim() const { return dir + "/shim.json"; }
  std::string command() const { return dir + "/command.json"; }
  std::string terminate() const { return dir + "/terminate.json"; }
  std::string status() const { return dir + "/status.json"; }
  std::string shim_log() const { return dir + "/shim.log"; }
  std::string container_id() const { return dir + "/container.id"; }
  std::string default_output() const { return dir + "/output.log"; }
  std::string default_work() const { return dir + "/work"; }
  std::string fault() const { return dir + "/fault.json"; }
  std::string inject() const { return dir + "/inject.json"; }
  // Stack dumps asked of the runner itself (SIGUSR2), by a backend whose
  // nodes run on other hosts (Slurm): the request, and the runner's answer.
  std::string dump_request() const { return dir + "/dump.json"; }
  std::string dump_result() const { return dir + "/dump.txt"; }
};

// The folder of `node` under `home`. InvalidArgument for a job id that is not a
// safe single path component (letters, digits, '-', '_', ':', '.'; not "." or "..").
Result<NodePaths> NodePathsFor(const std::string& home, const NodeKey& node);
// Whether a job id can name a folder: one path component of letters, digits
// and - _ : . (not "." or ".."), at most 200 bytes.
bool IsSafeJobId(const std::string& job_id);
// The name of a node in <home>/nodes-live: "<job id>.<attempt>.<node index>",
// and back (read from the right: a job id may hold dots).
std::string LiveEntryName(const NodeKey& node);
std::optional<NodeKey> NodeKeyFromLiveEntry(const std::string& name);
// Inverse of NodePathsFor for a folder found by scanning `home`/jobs.
std::optional<NodeKey> NodeKeyFromRelative(const std::string& job, const std::string& attempt,
                                           const std::string& node);

struct ShimRlimit {
  std::string name;  // for messages
  int resource = 0;  // RLIMIT_*
  int64_t soft = 0;  // -1: unlimited
  int64_t hard = 0;
};

// Everything the supervisor needs, fully resolved by Launch.
struct ShimSpec {
  NodeKey node;
  std::vector<std::string> argv;
  std::vector<std::string> env;  // "KEY=VALUE"
  std::string working_dir;
  std::string output_path;
  // The job's Unix user as its definition names it ("" none): resolved on the
  // host that runs the node (ResolveJobUser, node_resolve.h) into `uid`,
  // `gid`, `groups` (a process) or `container_user` (a container).
  std::string user;
  std::optional<uint32_t> uid;  // set: switch to uid/gid/groups before exec
  uint32_t gid = 0;
  std::vector<uint32_t> groups;
  std::vector<ShimRlimit> rlimits;
  std::vector<std::string> notices;  // written as "lote: ..." lines before the command runs
  std::string cgroup_dir;            // empty: no cgroup
  // Device nodes denied to the command (NodeSpec::fenced_devices) through the
  // cgroup v1 devices group `devices_cgroup_dir` (empty: not fenced).
  std::vector<std::string> fenced_devices;
  std::string devices_cgroup_dir;
  int64_t memory_max_bytes = 0;  // 0: not limited
  int64_t cpu_quota_us = 0;      // per cpu_period_us; 0: not limited
  int64_t cpu_period_us = 100000;
  int64_t default_grace_ms = 30000;
  // Where the node was placed. "" (local): the runner is a detached
  // supervisor and exits 0 once the outcome is recorded. "slurm": the runner
  // is one task of the attempt's Slurm job; it adds the placement's variables
  // (SlurmPlacementEnv), checks the rlimits against the node it runs on
  // (ResolveRlimit, with `emulation`), and exits with the command's status so
  // that srun's --kill-on-bad-exit ends the gang.
  std::string placement;
  // Container mode (container.h): the command runs in this container under
  // podman; argv is then the job's command (empty: the image's), env the
  // job's variables, and user, rlimits and the limits below go to podman.
  std::optional<ContainerRun> container;
  std::optional<UserIds> container_user;  // none: the image's USER
  int64_t container_memory_mib = 0;
  int64_t container_vcpu_milli = 0;
  bool multi_node = false;
  int32_t main_node_index = 0;
  bool emulation = false;
  // A fault the job asked this node's runner to inject (node_fault.h).
  NodeFault fault;
};

struct ProcessRecord {
  ProcessIdentity id;
  int64_t started_at_ms = 0;
  // The node agent's records (node_agent.h): its keeper (the parent that
  // adopts the commands if the agent dies), in agent.json and in the
  // shim.json of a node the agent supervises itself; `agent` marks such a
  // node (its command is the agent's own child, `id` the agent).
  std::optional<ProcessIdentity> keeper{};
  bool agent = false;
  // The accelerator devices the node runs with (LOTE_ACCELERATORS), as the
  // node itself recorded them in command.json: how a backend whose own
  // scheduler chose them (Slurm) learns which.
  std::vector<int32_t> devices{};
};

struct TerminateRequest {
  int64_t grace_ms = 30000;
  int64_t requested_at_ms = 0;
};

// The outcome of a node, as recorded on disk.
struct StatusRecord {
  NodeOutcome outcome = NodeOutcome::kLost;
  int32_t exit_code = -1;
  int32_t signal = 0;
  bool terminated = false;
  bool never_started = false;  // kLost: the command provably never ran (NodeEvent)
  bool bad_command = false;    // kStartFailed: the command itself cannot run (NodeEvent)
  std::string reason;
  int64_t started_at_ms = 0;
  int64_t stopped_at_ms = 0;
  // Container mode: the pull of the node's image (NodeEvent); 0: no pull.
  int64_t pull_started_at_ms = 0;
  int64_t pull_stopped_at_ms = 0;
  // The runner injected a fault the job asked for: what it did (NodeEvent).
  std::string injected;
};

Json ToJson(const ShimSpec& s);
Result<ShimSpec> ShimSpecFromJson(const Json& j);
Json ToJson(const ProcessRecord& r);
Result<ProcessRecord> ProcessRecordFromJson(const Json& j);
Json ToJson(const TerminateRequest& r);
Result<TerminateRequest> TerminateRequestFromJson(const Json& j);
Json ToJson(const StatusRecord& r);
Result<StatusRecord> StatusRecordFromJson(const Json& j);

// Read helpers: NotFound when the file does not exist.
Result<ShimSpec> ReadShimSpec(const std::string& path);
Result<ProcessRecord> ReadProcessRecord(const std::string& path);
Result<StatusRecord> ReadStatusRecord(const std::string& path);
Result<TerminateRequest> ReadTerminateRequest(const std::string& path);
// Creates the record only if `path` does not exist yet (the whole record or
// nothing: written aside, then linked in): AlreadyExists when it does.
Status CreateJsonRecord(const std::string& path, const Json& j, int mode = 0644);
// Atomic replacement of a JSON record (temporary file + rename; not fsynced:
// a power loss ends the processes these records describe anyway).
Status WriteJsonRecord(const std::string& path, const Json& j, int mode = 0644);

// A node's folder and spec.json, made by whoever starts its runner (the local
// backend, or the node agent of a `create` request): <job>/<attempt>/<node>
// under <home>/jobs (the node's folder exclusively: AlreadyExists when it was
// made before, so a node is launched once, ever), `spec_json` written as its
// spec.json (no reader looks inside the folder before it is listed), then
// listed in <home>/nodes-live. A failure after the folder was made leaves it
// for the caller to record (its status.json).
Status MakeNodeFolder(const std::string& home, const NodeKey& key, const NodePaths& paths,
                      const std::string& spec_json);

NodeEvent EventFromStatus(const NodeKey& node, const StatusRecord& s);

}  // namespace lote::exec
