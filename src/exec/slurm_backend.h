// SlurmBackend: runs the attempts of one compute environment on a Slurm
// cluster (an UNMANAGED environment tagged lote:backend=slurm,
// lote:slurm-partition=NAME, optionally lote:slurm-conf=PATH).
//
// Each attempt is one Slurm batch job (sbatch) on the partition: one node per
// lote node (--nodes=N --ntasks-per-node=1), whose batch script runs one srun
// step with one task per node (--kill-on-bad-exit: one node's failure ends
// the gang; a single-node job runs it as the batch step itself). Each task runs the node's own
// command with exactly the node's environment (node index from SLURM_NODEID; the main node's
// address resolved inside the allocation from the node list) under the node runner of every
// backend (`lote exec-shim --attempt-dir`, shim.h): it applies the user, ulimits and working
// directory, forwards SIGTERM and records the node's status.json. Single-node jobs ask
// --cpus-per-task/--mem; attemptDurationSeconds becomes
// --time. Array jobs are lote's children, each its own Slurm job.
//
// Files: <state_dir>/<job>/<attempt>/ holds the batch script, per node its
// runner's folder node-<k>/ (node_files.h: spec.json, command.json,
// status.json, terminate.json, shim.log), its output node-<k>.out
// (stdout+stderr, the log stream's source) and its working directory work-<k>. The folder must be
// visible at the same path on the Slurm nodes (a shared filesystem; on a one-machine cluster it
// is).
//
// State comes from squeue (all states; polled with backoff between
// poll_min_ms and poll_max_ms, at once after a launch or terminate) and, for
// a job that ended, its node status files and `scontrol show job`: PENDING ->
// kPending with Slurm's reason, RUNNING -> kRunning (Slurm's start time),
// then one kEnded per node. NODE_FAIL / BOOT_FAIL and a job Slurm no longer
// knows -> kLost. Terminate: scancel --signal=TERM to every step and the
// batch shell, then scancel (SIGKILL) after the grace period. Recover: by the
// stored reference (the Slurm job id).
//
// Capacity: the partition's nodes (sinfo), refreshed every
// capacity_refresh_ms; nullopt while Slurm cannot be reached.
//
// Contract: that of exec::Backend. Thread-safe; one poller thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "exec/backend.h"
#include "exec/node_resolve.h"

namespace lote::exec {

struct SlurmBackendOptions {
  std::string partition;   // required
  std::string slurm_conf;  // SLURM_CONF for every Slurm command; empty: Slurm's default
  // Per-attempt folders (see above). Required; created if missing.
  std::string state_dir;
  int64_t poll_min_ms = 100;
  int64_t poll_max_ms = 1000;
  int64_t capacity_refresh_ms = 30'000;
  int64_t default_grace_ms = 30'000;
  // The node runner each task starts (`lote exec-shim`, shim.h), at the same
  // path on the Slurm nodes. Empty: DefaultShimCommand().
  std::vector<std::string> shim_command;
  // Container mode: lote's image registry (LocalBackendOptions::registry).
  LocalRegistry registry;
  const Clock* clock = SystemClock::Default();
};

class SlurmBackend final : public Backend {
 public:
  // InvalidArgument for missing options. Reads the partition's capacity once
  // (an unreachable Slurm is not an error: capacity stays unknown).
  static Result<std::unique_ptr<SlurmBackend>> Create(SlurmBackendOptions options);
  ~SlurmBackend() override;  // stops polling; Slurm jobs keep running
  SlurmBackend(const SlurmBackend&) = delete;
  SlurmBackend& operator=(const SlurmBackend&) = delete;

  std::string Name() const override { return "slurm:" + options_.partition; }
  const Capabilities& capabilities() const override;
  std::optional<Capacity> GetCapacity() override;
  Result<GangLaunch> LaunchGang(const GangSpec& gang) override;
  Status Terminate(const AttemptKey& attempt, std::optional<int64_t> grace_ms) override;
  Result<std::vector<NodeEvent>> Wait(int64_t timeout_ms) override;
  void Wake() override;
  Result<RecoverReport> Recover(const std::vector<RecoverItem>& expected) override;
  Status RemoveJobFiles(const std::string& job_id) override;
  Result<std::string> OutputPath(const NodeKey& node) const override;
  std::vector<NodeKey> Running() const override;

  // The attempt's folder.
  std::string AttemptDir(const AttemptKey& attempt) const;

 public:
  // fault.json of the attempt's node folders (on the shared state folder).
  std::string InjectedFault(const AttemptKey& attempt, int32_t num_nodes) override;
  // The Slurm node names the batch script recorded (the attempt's hosts file).
  std::optional<std::vector<std::string>> NodeHosts(const AttemptKey& attempt,
                                                    int32_t num_nodes) const override;
  // scontrol update nodename=HOST state=drain reason="lote quarantine: ...";
  // state=resume only while the node's reason is lote's.
  Status DrainHost(const std::string& host, const std::string& reason) override;
  Status ResumeHost(const std::string& host) override;
  // The runners do it on their own hosts: dump.json in each node folder
  // (the runners look for it every 250 ms), then their dump.txt, waited for
  // at most timeout_ms plus 15 s. (Not a signal: scancel --signal reaches
  // every process of a step, the command's too.)
  Result<std::map<int32_t, std::string>> CollectStackDumps(const AttemptKey& attempt,
                                                           int64_t timeout_ms) override;
  // inject.json in the node's folder, which its runner takes.
  Status InjectFault(const NodeKey& node, const NodeFault& fault, int32_t main_node_index) override;

 private:
 private:
  struct Tracked {
    AttemptKey attempt;
    std::string slurm_id;
    int32_t nodes = 0;
    bool running_reported = false;
    std::string pending_reason;  // last reported
    int64_t kill_at_ms = 0;      // Terminate: SIGKILL (scancel) then; 0: none
    bool terminating = false;
    bool direct = false;  // one node run as the batch step itself (no srun)
    // Asked Slurm for GPUs (--gres): RUNNING is reported once the nodes have
    // recorded which devices Slurm bound (NodeEvent::devices), not before.
    bool gpus = false;
    int32_t missing_polls = 0;  // polls in which Slurm did not know the job
  };
  struct JobState {
    std::string state;   // PENDING, RUNNING, COMPLETED, FAILED, CANCELLED, ...
    std::string reason;  // squeue %r
    int64_t start_ms = 0;
    int64_t end_ms = 0;
  };

  explicit SlurmBackend(SlurmBackendOptions options);
  std::map<std::string, std::string> SlurmEnv() const;
  // NotFound unless the attempt runs (reported RUNNING, not terminating).
  Status CheckRunning(const AttemptKey& attempt) const;
  // sbatch --exclude for a gang of `needed` nodes that avoids `avoid` (sinfo
  // now, HostsToExclude); none when Slurm cannot be asked.
  std::vector<std::string> ExcludedHosts(const std::vector<std::string>& avoid,
                                         int32_t needed) const;
  Result<Capacity> ReadCapacity() const;
  void Poll();
  void PollOnce();
  // The node events of an ended Slurm job.
  std::vector<NodeEvent> EndedEvents(const Tracked& t, const JobState& s);
  void Push(std::vector<NodeEvent> events);

  const SlurmBackendOptions options_;
  RunnerHost host_;  // the server's, for ResolveNode (rlimits: on the node)
  std::pair<std::string, std::string>
      podman_conf_;  // container mode: containers.conf, registries.conf

  mutable std::mutex mu_;
  std::condition_variable events_cv_;      // Wait
  std::condition_variable poll_cv_;        // the poller
  std::map<AttemptKey, Tracked> tracked_;  // protected by mu_
  std::deque<NodeEvent> pending_;          // protected by mu_
  std::optional<Capacity> capacity_;       // protected by mu_
  int64_t capacity_at_ms_ = 0;             // protected by mu_ (steady)
  bool wake_ = false;                      // Wait returns early (mu_)
  bool poll_now_ = false;                  // (mu_)
  bool stopping_ = false;                  // (mu_)
  bool waiting_ = false;                   // (mu_)
  int64_t last_squeue_ms_ = 0;             // steady; the poller thread only
  std::thread poller_;
};

// Parses Slurm's "2026-12-01T12:00:01" (local time) to ms since the epoch;
// 0 for "N/A", "Unknown" or anything else.
int64_t ParseSlurmTime(const std::string& text);
// `sbatch --time` minutes for a timeout in seconds (rounded up, at least 1).
int64_t SlurmTimeMinutes(int64_t seconds);

}  // namespace lote::exec
