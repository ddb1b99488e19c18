// LocalBackend: the embedded default executor. Runs each node of each attempt as
// processes on this host, under a supervisor shim (`lote exec-shim`, see shim.h)
// that outlives the server, so running jobs survive a server restart (including
// SIGKILL) and are re-adopted by the next LocalBackend instance. The
// supervisors are forked by the home's node agent (node_agent.h), a
// long-lived process started on first use and re-adopted by the next
// instance; without one, each is started as a program of its own.
//
// Per node: $LOTE_HOME/jobs/<job>/<attempt>/<node>/ (layout in node_files.h and
// docs/executor.md). The command runs in its own session and process group;
// Terminate signals that group; every descendant is killed when the command
// ends. Exits are seen through pidfds of the supervisors (no polling delay).
//
// Contract: that of exec::Backend (backend.h): thread-safe, one Wait caller at a
// time; destroying it leaves the nodes running for a later instance to adopt.
// Two LocalBackend instances must not manage the same home at once (the server
// holds one); the per-node lock still guarantees a node never runs twice.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/clock.h"
#include "exec/backend.h"
#include "exec/cgroup.h"
#include "exec/node_agent.h"
#include "exec/node_files.h"
#include "exec/node_resolve.h"

namespace lote::exec {

struct LocalBackendOptions {
  // lote's home folder ($LOTE_HOME); nodes live under <home>/jobs. Required.
  std::string home;
  // How to start the supervisor; "--node-dir DIR" is appended. Empty: the
  // standalone `lote-exec-shim` beside this executable when it is there (the
  // build and installs put it beside `lote`), else this executable's own
  // `exec-shim` subcommand ({/proc/self/exe, "exec-shim"}).
  std::vector<std::string> shim_command;
  // cgroup v2 parent group for node limits; empty: auto-detect (cgroup.h).
  std::string cgroup_parent;
  bool use_cgroups = true;
  // Start supervisors through the home's node agent (node_agent.h): one
  // long-lived process (shim_command + "--agent HOME") that forks each node's
  // supervisor, no exec. false, or an agent that cannot be started or
  // reached: one supervisor program per node, as said in a warning of the
  // server log. Container-mode nodes always take that path. Off by default:
  // measured, it was not faster (docs/benchmarks.md).
  bool use_node_agent = false;
  // Grace period of Terminate when the caller gives none.
  int64_t default_grace_ms = 30'000;
  // Container mode: lote's image registry (container.h), reached over plain
  // HTTP with its login; ECR-form image names resolve to it. Empty: none.
  LocalRegistry registry;
  // Stamps events and records (started/stopped/requested_at); waiting itself
  // always uses real time.
  const Clock* clock = SystemClock::Default();
};

struct LaunchResult {
  std::string node_dir;     // the node's folder (layout in docs/executor.md)
  std::string output_path;  // where its output goes
  // Things that are not as asked (cgroup limits not enforced, emulated fields).
  std::vector<std::string> warnings;
};

class LocalBackend final : public Backend {
 public:
  // InvalidArgument for a missing home or shim; creates <home>/jobs.
  static Result<std::unique_ptr<LocalBackend>> Create(LocalBackendOptions options);
  ~LocalBackend() override;
  LocalBackend(const LocalBackend&) = delete;
  LocalBackend& operator=(const LocalBackend&) = delete;

  std::string Name() const override { return "local"; }
  // image, command, environment, resourceRequirements, vcpus, memory, user,
  // ulimits, instanceType, the role ARNs and Fargate settings (recorded only).
  const Capabilities& capabilities() const override;
  std::optional<Capacity> GetCapacity() override { return std::nullopt; }
  // Launches the nodes in order (LaunchNode); the main node's address on the
  // others is the main node's private_ip. If one fails, the nodes already
  // started are terminated at once (their ends arrive through Wait) and its
  // error is returned. backend_ref: the attempt's folder; events: every node
  // kRunning.
  Result<GangLaunch> LaunchGang(const GangSpec& gang) override;
  Status Terminate(const AttemptKey& attempt, std::optional<int64_t> grace_ms) override;
  Result<std::vector<NodeEvent>> Wait(int64_t timeout_ms) override;
  void Wake() override;
  // The nodes are found by their folders (the reference names the attempt's).
  Result<RecoverReport> Recover(const std::vector<RecoverItem>& expected) override;
  // <node folder>/output.log, or the output_path it was launched with.
  Status RemoveJobFiles(const std::string& job_id) override;
  Result<std::string> OutputPath(const NodeKey& node) const override;
  std::vector<NodeKey> Running() const override;
  // gdb (or eu-stack) on every process of each node's command, nodes in parallel.
  Result<std::map<int32_t, std::string>> CollectStackDumps(const AttemptKey& attempt,
                                                           int64_t timeout_ms) override;
  // inject.json in the node's folder, then SIGUSR1 to its supervisor.
  Status InjectFault(const NodeKey& node, const NodeFault& fault, int32_t main_node_index) override;
  std::string InjectedFault(const AttemptKey& attempt, int32_t num_nodes) override;

  // One node (LaunchGang's steps for one node; tests drive nodes one at a
  // time). No kRunning event is queued for it: it runs when this returns OK.
  Result<LaunchResult> LaunchNode(const NodeSpec& spec);
  // Recover by node keys alone.
  Result<RecoverReport> RecoverNodes(const std::vector<NodeKey>& expected);

  // Whether node memory/vCPU limits are enforced on this host, and why not.
  const CgroupSupport& cgroup_support() const { return cgroups_; }
  const std::string& home() const { return options_.home; }
  // The node agent this instance launches through now (pid 0: none; then
  // node_agent_problem() says why, "" when it was not needed yet).
  ProcessIdentity node_agent() const;
  std::string node_agent_problem() const;

 private:
  // How the end of a node is seen.
  enum class Watch {
    kSupervisor,  // the pidfd of its supervisor, which records the outcome
    kAgent,       // the agent's "end" notice (the command is the agent's child)
    kOrphan,      // the pidfd of its command, once its agent is not watched (gone,
                  // or another): the agent or its keeper records the outcome
  };
  struct Node {
    NodeKey key;
    NodePaths paths;
    Watch watch = Watch::kSupervisor;
    // The process whose end is the node's end: the supervisor (kSupervisor)
    // or the command (kAgent, kOrphan).
    ProcessIdentity watched;
    ProcessIdentity agent;                  // kAgent, kOrphan: the node agent that ran it
    std::optional<ProcessIdentity> keeper;  // and its keeper
    bool agent_gone = false;                // its socket closed: it is exiting
    int pidfd = -1;                         // -1: no pidfd (none needed, or polled)
    uint64_t token = 0;                     // its epoll token (by_token_)
    // kOrphan: its command has ended and its status.json is awaited (steady
    // clock); 0 while it runs.
    int64_t settle_until_ms = 0;
  };
  // What Launch needs of this host and process, looked up once in Create.
  struct HostFacts : RunnerHost {
    std::string boot_id;
  };
  // A node resolved to its spec, its runner not started. Its folder is made
  // by the agent that starts it (a create request), else here (PutOnDisk).
  struct PreparedNode {
    NodeKey key;
    NodePaths paths;
    bool container = false;
    LaunchResult result;
    std::string spec_json;  // the spec.json to write, one line
    bool on_disk = false;   // its folder, spec.json and live entry exist
  };

  LocalBackend(LocalBackendOptions options, CgroupSupport cgroups, HostFacts host, int wake_fd,
               int epoll_fd);

  // Resolves the node's spec (AlreadyExists when its folder was made before:
  // a node is launched once, ever). Nothing is written.
  Result<PreparedNode> PrepareNode(const NodeSpec& spec);
  // Makes the node folder (exactly once) and its spec.json, and lists the
  // node as live (LiveEntry): MakeNodeFolder, for a node no agent starts.
  Status PutOnDisk(PreparedNode& node);
  // A node whose folder an agent lost during this launch made (its spec.json
  // is there): launched as it is, not made again.
  void AdoptFolderOfALostAgent(PreparedNode& node);
  // <home>/nodes-live/<job>.<attempt>.<node>: a hard link to the spec.json of
  // a node that may have no outcome yet (no new inode: a directory entry).
  // Made before its supervisor starts, removed once its status.json is seen,
  // so that recovery looks for unknown running nodes among these alone, not
  // in the folder of every job the home keeps.
  std::string LiveEntry(const NodeKey& key) const;
  void ForgetLive(const NodeKey& key) const;
  // Nodes listed live (Recover): their keys, and the entries that name none.
  std::vector<NodeKey> LiveNodes() const;
  // Starts `nodes` (through the agent, else one supervisor program each): one
  // status per node; a node that failed has a start_failed status.json.
  std::vector<Status> StartNodes(std::vector<PreparedNode>& nodes);
  // Through the agent (which makes the folders not on disk yet): the indexes
  // (of `todo`) it did not take, for the other path.
  std::vector<size_t> StartThroughAgent(std::vector<PreparedNode>& nodes, std::vector<size_t> todo,
                                        std::vector<Status>* out);
  Status SpawnSupervisor(const PreparedNode& node);
  // Records a start failure in status.json; its error.
  Status FailStart(const PreparedNode& node, const std::string& why);
  // A supervisor that was started: watched from now on.
  void WatchStarted(const PreparedNode& node, const ProcessIdentity& shim);
  // A command the agent runs itself: watched through the agent's notices when
  // it is the watched agent, else by the command's pidfd.
  void WatchDirect(const NodeKey& key, const NodePaths& paths, const ProcessIdentity& agent,
                   const std::optional<ProcessIdentity>& keeper, const ProcessIdentity& command);
  // A node the agent answered for without running anything now ("ended",
  // "taken"): its outcome, or whatever its records say runs it.
  void WatchAnswered(const PreparedNode& node);
  // Makes `agent` the watched agent (its "end" notices read by Wait): a
  // connection of its own, in the epoll set. The nodes of the agent watched
  // before are then watched by their commands' pidfds.
  Status WatchAgentLocked(const ProcessIdentity& agent);  // agent_mu_ held
  // The agent watched now (pid 0: none).
  ProcessIdentity WatchedAgent() const;
  // The notices of the watched agent; at its end, its nodes become kOrphan.
  void ReadAgentNotices(std::vector<Node>* ended);
  // kAgent -> kOrphan: the agent is gone or not watched. A node whose command
  // has ended, or that nobody can record the outcome of any more (the agent
  // and its keeper are gone), is settling (Wait collects it).
  void OrphanLocked(Node& node);
  // Every kAgent node of `agent`; `gone`: its connection closed.
  void OrphanNodesOf(const ProcessIdentity& agent, bool gone);
  // Whether the agent or the keeper that runs the node can still record its outcome.
  static bool RecorderAlive(const Node& node);
  // Nodes whose end was seen: their events (an orphan may have to wait for
  // its keeper to record the outcome: it goes back to nodes_, settling).
  void CollectNodes(std::vector<Node> ended, std::vector<NodeEvent>* out);
  // Sends `term`/`inject` to the agent that runs the node; Unavailable when it
  // cannot be reached.
  Status AskAgent(const ProcessIdentity& agent, const std::string& node_dir,
                  std::optional<int64_t> terminate_grace_ms);
  // A connection to the agent to launch through (an idle one, else a new
  // one, the agent started if need be); null when there is none
  // (agent_problem_ says why). Several launches each hold one, so the agent
  // serves their requests together.
  std::unique_ptr<NodeAgentClient> TakeAgent();
  void ReturnAgent(std::unique_ptr<NodeAgentClient> agent);
  // The agent `lost` is gone: its connections are dropped.
  void DropAgent(const ProcessIdentity& lost, const Status& why);
  // A home from before nodes-live/ existed: recovery looks in every job
  // folder once (then every node it launches is listed).
  bool scan_every_folder_ = false;
  // Adds a node just put in nodes_ to the epoll set (or counts it as polled).
  void WatchLocked(Node& node);
  // Removes a node from nodes_ and the epoll set; the caller closes its pidfd.
  Node UnwatchLocked(std::map<NodeKey, Node>::iterator it);

  // The node's supervisor has ended (or was never seen): its event; nullopt
  // when another supervisor holds the node (one that exited 75 because a
  // first one had it): that one is watched instead.
  std::optional<NodeEvent> CollectEnded(const Node& node);
  // With the node lock free: kill an orphaned command, write a lost tombstone.
  NodeEvent DeclareLost(const NodeKey& key, const NodePaths& paths, const std::string& why,
                        bool never_started = false);
  // Recover one node the control plane expects to be running. `watched`: the
  // agent watched now.
  void RecoverExpected(const NodeKey& key, const ProcessIdentity& watched, RecoverReport* report);
  // Its shim.json says the node agent runs the command itself.
  void RecoverDirect(const NodeKey& key, const NodePaths& paths, const ProcessRecord& runner,
                     const ProcessIdentity& watched, RecoverReport* report);
  void RecoverUnknown(const NodeKey& key, const NodePaths& paths, RecoverReport* report);
  // Adopts a live supervisor (lock held by it). False if it cannot be verified.
  bool Adopt(const NodeKey& key, const NodePaths& paths);
  // terminate.json, then SIGTERM to a supervisor (the others: the agent is
  // asked, or SignalCommandLocked).
  void SignalNode(const Node& node, int64_t grace_ms);
  // SIGTERM to the command's group, SIGKILL when the grace ends (kill_at_).
  void SignalCommandLocked(const Node& node, int64_t grace_ms);

  const LocalBackendOptions options_;
  const CgroupSupport cgroups_;
  const HostFacts host_;
  std::pair<std::string, std::string> podman_conf_;  // containers.conf, registries.conf
  const int wake_fd_;   // eventfd: Wake (and Launch without pidfds) interrupt Wait
  const int epoll_fd_;  // wake_fd_ and the pidfd of every watched supervisor
  std::atomic<bool> waiting_{false};
  std::atomic<bool> wake_requested_{false};

  mutable std::mutex mu_;
  std::map<NodeKey, Node> nodes_;                   // protected by mu_
  std::unordered_map<uint64_t, NodeKey> by_token_;  // protected by mu_
  uint64_t next_token_ = 1;                         // protected by mu_
  int64_t unwatched_ = 0;          // nodes without a pidfd, polled; protected by mu_
  std::deque<NodeEvent> pending_;  // protected by mu_
  // kAgent nodes by folder (the agent's notices name folders); protected by mu_
  std::unordered_map<std::string, NodeKey> by_dir_;
  // kOrphan nodes terminated while no agent can: SIGKILL at this steady time.
  std::map<NodeKey, int64_t> kill_at_;  // protected by mu_
  int64_t settling_ = 0;                // nodes with settle_until_ms set; protected by mu_
  int64_t orphans_ = 0;                 // kOrphan nodes watched by pidfd; protected by mu_
  int64_t next_orphan_check_ms_ = 0;    // steady clock; protected by mu_

  // The node agent; agent_mu_ is never held while mu_ is.
  mutable std::mutex agent_mu_;
  ProcessIdentity agent_;  // the agent launched through now (pid 0: none); protected by agent_mu_
  std::vector<std::unique_ptr<NodeAgentClient>> idle_agents_;  // protected by agent_mu_
  std::string agent_problem_;                                  // protected by agent_mu_
  int64_t agent_retry_at_ms_ = 0;  // steady clock; protected by agent_mu_
  // The connection on which the agent's "end" notices arrive (its fd in the
  // epoll set); protected by agent_mu_.
  std::unique_ptr<NodeAgentClient> watch_;
};

}  // namespace lote::exec
