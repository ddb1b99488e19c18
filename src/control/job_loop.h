// JobLoop: the AWS Batch job operations (SubmitJob, DescribeJobs, ListJobs,
// CancelJob, TerminateJob, GetJobQueueSnapshot, job tags) and the job loop
// that runs jobs on the compute backends of their compute environments.
//
// Everything it touches is injected: the clock, the store, the control plane
// (resources), a directory of backends (one per compute environment) and the
// job output sink (log streams). It owns no thread: the driver (lote server,
// or a test) calls Pass(events) with what the backends reported, whenever
// Wake()'s callback says there is work, or periodically (timeouts); tests
// drive it synchronously with a fake backend and a fake clock.
//
// Contract:
// - Every accepted event is applied with control::Apply, appended to the
//   store's job_events and the job row is rewritten in the same batch; an API
//   mutation answers only after that batch is committed, and a read
//   (DescribeJobs, ListJobs) only once every change it shows is (ReadCommitted). When the store
//   refuses a write (the disk full), the jobs of every batch not committed are
//   read back from it (ReconcileLocked): nothing acknowledged is lost, nothing
//   refused stays, and reads go on meanwhile.
// - A pass: node events, timeouts (the due deadlines), hangs (the watched
//   jobs), dependencies (of the jobs whose dependencies changed), array
//   parents (whose children changed), all from JobIndex; a scheduling pass
//   (sched::Decide) over the compute environments (virtual instances, or the
//   capacity a backend reports) when something it reads changed (a job
//   entered or left RUNNABLE, capacity was taken or freed, an environment or
//   queue changed, an idle instance timed out: SchedulerInput), over the
//   first options.schedule_depth jobs of each queue (each share) in the
//   scheduler's order, run without the lock; then the placed attempts are handed to their backends,
//   each gang as one unit (after the placements are committed); the backend's reference is stored
//   with the attempt.
// - Gang teardown: when an attempt ends (success, failure, timeout,
//   termination) every node of it still running is terminated (grace:
//   lote:terminationGraceSeconds, else options.terminate_grace_ms).
// - Finished jobs leave memory: once a SUCCEEDED or FAILED job's row is
//   committed (its last progress stored; an array parent once none of its
//   children is in memory), it is dropped from the table and the index; the
//   counts it adds to stay as numbers. Reads of such a job (DescribeJobs,
//   ListJobs of SUCCEEDED / FAILED, tags, dependencies, owners) go to the
//   store; a change (tags) reads it back first.
// - Start-up reads only the jobs not finished (and the counts of the rest).
// - Retention (options.job_retention_ms): finished jobs that ended longer ago
//   are deleted from the store in batches of about
//   options.retention_batch_rows jobs, from Pass, an array with its children.
// - On Create the nodes the store says are running are recovered from their
//   backends by the stored references (adopted, or their outcome / NODE_LOST
//   reported through the backends' events).
// - Logs (when an output sink is given): every running node's output (the
//   file its backend names) is stored into its stream; DescribeJobs shows the
//   LOTE_PROGRESS values as `progress`, and a RUNNING job with
//   `lote:progressTimeoutSeconds` whose node reports no progress for that long
//   fails its attempt as HANG.
// Thread safety: every method may be called from any thread; Pass from one
// thread at a time. State is guarded by mu_.
//
// Files: job_operations.cc (the API operations), job_loop.cc (the pass),
// job_schedule.cc (its scheduling step), job_launch.cc (gangs handed to backends, teardown),
// job_journal.cc (events applied and stored), job_recovery.cc (start-up),
// job_quarantine.cc (bad-node quarantine).
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/json.h"
#include "common/metrics.h"
#include "common/status.h"
#include "control/accelerators.h"
#include "control/capacity_hold.h"
#include "control/consumables.h"
#include "control/control_plane.h"
#include "control/job_controller.h"
#include "control/job_env.h"
#include "control/job_index.h"
#include "control/job_metrics.h"
#include "control/job_model.h"
#include "control/job_output.h"
#include "control/job_render.h"
#include "control/job_state.h"
#include "control/quarantine.h"
#include "control/scheduler_input.h"
#include "exec/backend.h"
#include "sched/scheduler.h"
#include "store/store.h"

namespace lote::control {

// Which backend serves a compute environment. The server's implementation
// creates backends on first use (the local one for every environment without
// lote:backend, a Slurm one per lote:backend=slurm environment).
class BackendDirectory {
 public:
  virtual ~BackendDirectory() = default;
  // Error: the environment names a backend that cannot be set up (the reason).
  virtual Result<exec::Backend*> ForEnvironment(const ComputeEnvironmentSpec& ce) = 0;
  // Every backend made so far.
  virtual std::vector<exec::Backend*> All() = 0;
};

// How long finished jobs are kept by default: 7 days, as AWS keeps them.
inline constexpr int64_t kDefaultJobRetentionMs = 7LL * 24 * 3600 * 1000;

struct JobLoopOptions {
  const Clock* clock = nullptr;
  store::Store* store = nullptr;
  ControlPlane* control = nullptr;
  BackendDirectory* backends = nullptr;
  JobOutput* output = nullptr;  // may be null: no log streams, no progress
  // Grace period between SIGTERM and SIGKILL for gang teardown and TerminateJob.
  int64_t terminate_grace_ms = 2000;
  // How nodes run in a compute environment without the tag lote:runtime:
  // "process" (host processes) or "container" (their image under podman).
  std::string default_runtime = "process";
  // Called (from any thread, with no lock held) when a pass is due soon.
  std::function<void()> wake;
  // This host's accelerators (control/accelerators.h), handed to the nodes of
  // the local backend's environments; null: none (every device is virtual).
  HostDevices* host_devices = nullptr;
  // Variables a node of the job gets beside its own (the job's credentials
  // and lote's endpoint: docs/api.md, "Job credentials"), given the node's
  // environment so far; a name that environment has keeps its value. Null: none.
  std::function<std::vector<EnvVar>(const Job& job,
                                    const std::map<std::string, std::string>& environment)>
      node_environment;
  // Where the loop's metrics go (JobLoopMetrics); null: a registry of its own.
  metrics::Registry* metrics = nullptr;
  // How many RUNNABLE jobs of a queue (of each share of a fair-share queue)
  // one scheduling pass considers, in the scheduler's order (SchedulerInput).
  size_t schedule_depth = kDefaultScheduleDepth;
  // Where a hang's stack dumps are collected (gdb takes seconds per node):
  // false, on the thread that runs Pass, before it returns (tests drive it
  // so); true, on a thread of the loop's own, so that one hanging job never
  // holds up the passes of the others (lote server).
  bool collect_evidence_in_background = false;
  // Bad-node quarantine (quarantine.h): how many different jobs' NODE_LOST or
  // HANG attempts on one node within how long quarantine it, for how long.
  QuarantineOptions quarantine;
  // Finished jobs are deleted from the store this long after they ended
  // (AWS keeps them at least 7 days); 0: kept for ever.
  int64_t job_retention_ms = kDefaultJobRetentionMs;
  // About how many jobs (array children included) one retention batch deletes.
  int64_t retention_batch_rows = 1000;
};

class JobLoop {
 public:
  // Loads the jobs from the store, recovers their running nodes from the
  // backends (every backend the directory has by then, and those of the
  // environments with running attempts), resumes their log streams.
  static Result<std::unique_ptr<JobLoop>> Create(JobLoopOptions options);
  ~JobLoop();  // JoinEvidenceCollector()
  // Waits for a hang's evidence being collected in the background, if any
  // (its end stores dumps in the output sink and calls options.wake).
  void JoinEvidenceCollector();

  Result<Json> SubmitJob(const Json& request);
  Result<Json> DescribeJobs(const Json& request);
  Result<Json> ListJobs(const Json& request);
  Result<Json> CancelJob(const Json& request);
  Result<Json> TerminateJob(const Json& request);
  // ControlPlane::DeleteJobQueue, then every job of that queue not yet ended
  // is terminated (as TerminateJob, reason "Job queue <name> was deleted").
  Result<Json> DeleteJobQueue(const Json& request);
  // The first 100 RUNNABLE jobs of a queue, in the order the scheduler
  // considers them (sched::RunnableOrder).
  Result<Json> GetJobQueueSnapshot(const Json& request);
  // TagResource / UntagResource / ListTagsForResource on a job ARN.
  bool IsJobArn(const Json& request) const;
  Result<Json> ChangeJobTags(const Json& request, bool untag);
  Result<Json> ListJobTags(const Json& request);
  // Consumable resources (job_consumables.cc, consumables.h): the AWS
  // operations, and tags on their ARNs (IsConsumableResourceArn).
  Result<Json> CreateConsumableResource(const Json& request);
  Result<Json> DescribeConsumableResource(const Json& request);
  Result<Json> UpdateConsumableResource(const Json& request);
  Result<Json> DeleteConsumableResource(const Json& request);
  Result<Json> ListConsumableResources(const Json& request);
  Result<Json> ListJobsByConsumableResource(const Json& request);
  static bool IsConsumableResourceArn(const Json& request);
  Result<Json> ChangeConsumableResourceTags(const Json& request, bool untag);
  Result<Json> ListConsumableResourceTags(const Json& request);
  // lote's own ReleaseNode: {"node": NAME} ends that node's quarantine
  // (InvalidArgument when it is not quarantined).
  Result<Json> ReleaseNode(const Json& request);
  // This host's accelerators (lote's own operations; docs/jobs.md,
  // "Accelerators"): {"hosts": [{host, source, notes, devices: [...]}]}; the
  // inventory read again; a device taken out of service ({"index", "reason"})
  // or put back ({"index"}). Each answers as DescribeAccelerators.
  Result<Json> DescribeAccelerators(const Json& request);
  Result<Json> RescanAccelerators(const Json& request);
  Result<Json> DrainAccelerator(const Json& request);
  Result<Json> ReleaseAccelerator(const Json& request);
  // lote's own DumpJob ({"jobId"}): the stack dumps of every node of a
  // RUNNING job, stored as "<node's stream>/dump" (job_hang.cc); blocks while
  // they are collected.
  Result<Json> DumpJob(const Json& request);
  // lote's own InjectFault (job_faults.cc, control/fault_plan.h): a fault for
  // a node of a RUNNING job, handed to its runner.
  Result<Json> InjectFault(const Json& request);

  // One pass over `events` (what the backends reported since the last pass)
  // and the clock. Synchronous: when it returns, its events are committed and
  // its launches and terminations handed to the backends.
  void Pass(std::vector<exec::NodeEvent> events);
  // Marks a pass as due and calls options.wake.
  void Wake();
  // True (and cleared) when something changed since the last call: the
  // driver runs a pass at once instead of sleeping.
  bool TakeDirty();
  // Nothing new is placed or launched any more (the server is stopping).
  void Stop();
  // Whether the job is held in memory (finished jobs leave it once their end
  // is committed): what tests and the restart benchmark observe.
  bool InMemory(const std::string& job_id);

 private:
  explicit JobLoop(JobLoopOptions options);
  Status Load();
  Result<Json> SubmitJobTimed(const Json& request);  // SubmitJob without its latency metric
  // A read of jobs answers only once every change it may show is committed
  // (a job seen RUNNING is RUNNING after a crash too): `read` sets the ticket
  // of the last batch handed to the store while it looked at memory
  // (LastHandedTicketLocked); when that batch failed, memory was set back to
  // the store and `read` runs again (at most three reads).
  Result<Json> ReadCommitted(const std::function<Result<Json>(uint64_t*)>& read);
  uint64_t LastHandedTicketLocked() const;
  Result<Json> DescribeJobsOnce(const Json& request, uint64_t* shown);
  Result<Json> ListJobsOnce(const Json& request, uint64_t* shown);
  Status RecoverNodes();
  void ResumeLogs();
  void PersistClosedAttemptsLocked(int64_t now);
  std::vector<std::pair<std::string, JobEvent>> HangEventsLocked(int64_t now);
  // Hang evidence (job_hang.cc).
  struct EvidenceTarget {
    exec::AttemptKey key;
    exec::Backend* backend = nullptr;
    std::map<int32_t, std::string> streams;  // node index -> its log stream
    int32_t num_nodes = 1;
  };
  // What a hang's attempt fails with, after its dumps: the injected fault
  // that caused it, if any ("Injected fault: ...; " first), and the
  // evidence sentence (last).
  struct HangEvidence {
    std::string injected;
    std::string sentence;
  };
  Result<EvidenceTarget> EvidenceTargetLocked(const std::string& job_id);
  HangEvidence CollectEvidence(const EvidenceTarget& target, Json* nodes);
  void CollectHangEvidence();    // no lock held: here or on evidence_thread_
  void CollectWantedEvidence();  // what evidence_wanted_ names, no lock held
  // Injected faults (job_faults.cc): the sentence of a fault a runner of the
  // node's attempt injected, when the node's end fails the attempt or it ran
  // with an upload failure ("" else), with where the fault came from
  // (FaultOrigin); the runner's sentence alone.
  std::string InjectedFaultLocked(const Job& job, const exec::NodeEvent& event);
  std::string RunnersInjectedFaultLocked(const Job& job, const exec::NodeEvent& event);
  // Hands the open attempt of each job to its backend (after the Scheduled
  // events are committed); records Launched and NodeStarted, or the failure.
  void LaunchPlaced(const std::vector<std::string>& job_ids);
  // The gang of the job's open attempt for `backend` (InvalidArgument when
  // the job's spec cannot run there), and one node of it.
  Result<exec::GangSpec> MakeGang(const Job& job, const ComputeEnvironmentSpec& ce,
                                  const exec::Backend& backend) const;
  Result<exec::NodeSpec> MakeNodeSpec(const Job& job, const exec::AttemptKey& attempt,
                                      int32_t node_index, const ComputeEnvironmentSpec& ce,
                                      const exec::Capabilities& caps, bool in_container) const;
  void ApplyNodeEventsLocked(const std::vector<exec::NodeEvent>& events, int64_t now);
  // The scheduling step (job_schedule.cc): the kept input brought up to
  // date; true when sched::Decide is due (something it reads changed).
  bool PrepareScheduleLocked(int64_t now);
  // True when the RUNNABLE job is held by an injected capacity shortage
  // (held now, or its attempt starts a hold, recorded as its statusReason).
  bool HoldForInjectedShortageLocked(const Job& job, int64_t now);
  // The holds that ended by `now`, their end recorded in the jobs' events.
  void EndCapacityHoldsLocked(int64_t now);
  // The injected shortage that holds `job` (its own key, else its queue's
  // environments' tags; capacity_hold.h), and the holds rebuilt from the
  // stored events at start-up (job_faults.cc).
  std::optional<InjectedShortage> InjectedShortageLocked(const Job& job);
  void RestoreCapacityHoldsLocked();
  // Quarantine (job_quarantine.cc): the failures of a closed attempt recorded;
  // the state rebuilt from every stored attempt (Load); the quarantined
  // instances of `environments` made unavailable, and what is quarantined
  // shown to the control plane (PrepareScheduleLocked).
  void NoteClosedAttemptLocked(const Job& job, size_t attempt);
  // The node failures attempt `attempt` of the job counts for, on the
  // backend's machines when it names them (Slurm), else on lote's instances.
  std::vector<NodeFailure> NodeFailuresLocked(const Job& job, size_t attempt);
  // A quarantined machine of a backend that owns its machines (Slurm) drained
  // or resumed; nothing for lote's own instances.
  exec::Backend* QuarantineBackendLocked(const QuarantinedNode& q);
  void DrainQuarantinedHostLocked(const QuarantinedNode& q);
  void ResumeQuarantinedHostLocked(const QuarantinedNode& q);
  // GangSpec::avoid_hosts of the job's attempt being launched: the machines
  // its previous attempt's failed node ran on (RetryAvoidanceSource).
  std::vector<std::string> AvoidedHosts(const Job& job, const exec::Backend& backend) const;
  void RebuildQuarantineLocked();
  void RestoreQuarantinedInstancesLocked(const std::vector<const Job*>& jobs);
  void MaskQuarantinedLocked(sched::Snapshot* environments, int64_t now);
  // Per device position of this host: the job (node) holding it.
  std::map<int32_t, std::string> DeviceHoldersLocked() const;
  // This host's devices into the local backend's environments (accelerators.h).
  void BindHostDevicesLocked(const std::vector<const Job*>& holding, sched::Snapshot* environments);
  // What is quarantined at `now`, given to the control plane when it changed
  // (DescribeComputeEnvironments' loteQuarantinedNodes).
  void ShowQuarantineLocked(int64_t now);
  // Consumable resources: the units the jobs with an open attempt hold; the
  // stored documents read again (Load, ReconcileLocked); a change of one
  // stored with the next flush, then committed and waited for (the API).
  UnitsInUse UnitsInUseLocked() const;
  Status LoadConsumablesLocked();
  void StoreConsumableLocked(const ConsumableResources::Change& change);
  Result<Json> ChangeConsumables(
      const std::function<Result<Json>(ConsumableResources::Change*)>& change);
  // The waiting jobs whose statusReason the decisions change (pass thread).
  std::vector<std::pair<std::string, std::string>> ChangedReasons(
      const sched::Decisions& decisions);
  // The decisions applied to the jobs that are still RUNNABLE; the placed
  // jobs are added to `launches`.
  void ApplyDecisionsLocked(sched::Decisions decisions,
                            const std::vector<std::pair<std::string, std::string>>& reasons,
                            int64_t now, std::vector<std::string>* launches);
  bool StillRunnableLocked(const std::string& id) const;
  // Whether the queue of a job in the scheduler's input is known to it.
  bool KnownQueue(const std::string& job_id) const;
  Result<Json> TerminateOrCancel(const Json& request, bool terminate);
  // ListJobs' page from memory (what it holds after `after`, at most
  // `limit`) and from the store (finished jobs not in that part).
  std::vector<Job> ListedInMemoryLocked(const ListJobsQuery& query, const std::string& queue_arn,
                                        const std::optional<ListPosition>& after, size_t limit);
  Result<std::vector<Job>> ListedInStore(const ListJobsQuery& query, const std::string& queue_arn,
                                         const std::optional<ListPosition>& after, size_t limit,
                                         const std::set<std::string>& in_memory);
  Result<std::string> JobIdOfArnLocked(const std::string& arn);
  // DescribeJobs' JobDetail of a job (with its live progress and logsComplete).
  Json DescribedLocked(const Job& job);
  // A job as the store holds it (nullopt: no row, or being deleted by retention).
  Result<std::optional<Job>> StoredJob(const std::string& id);
  // The job a stored row stands for: its document, with the events after the
  // row's row_seq applied when the row lags (last_seq, when known, the job's
  // last stored event: none to apply when the row holds it). `later`: those
  // events when already read (else they are read here).
  Result<Job> JobFromRow(const store::JobRow& row, std::optional<int64_t> last_seq,
                         const std::vector<store::JobEvent>* later = nullptr);
  // The seq of the last event a stored row holds, given the job's last
  // stored event: its row_seq; a row written before schema 8 holds them all.
  static int64_t SeqHeldByRow(const store::JobRow& row, int64_t last_seq) {
    return row.row_seq > 0 ? row.row_seq : last_seq;
  }
  // The job in memory, else the store's (what a read of a finished job sees).
  Result<std::optional<Job>> FindJobLocked(const std::string& id);
  // A finished job the store holds read back into memory for a change
  // (false: the store has no such finished job).
  Result<bool> RestoreLocked(const std::string& id);
  // Finished jobs whose last change is committed leave memory.
  void EvictFinishedLocked();
  // One retention batch when one is due (no lock held).
  void RetireExpiredJobs(int64_t now);
  // The backend of an attempt: the one recorded at its launch, else its
  // compute environment's (null when neither can be had).
  exec::Backend* BackendOf(const Attempt& attempt);
  // The NodeStarted event of a running node, and its log stream followed.
  JobEvent NodeStartedLocked(const Job& job, const exec::NodeEvent& event,
                             std::vector<std::string> notices);

  // The event applied to the job (read back first when it left memory),
  // stored with the next flush; the job is in jobs_ afterwards.
  Status ApplyLocked(const std::string& id, const JobEvent& event);
  // The pending rows to the store, unless a write failed since memory last
  // matched it: then memory is set back to what is stored and the error
  // returned (as WaitTicket does when the batch itself fails).
  Result<uint64_t> FlushLocked();
  Status WaitTicket(Result<uint64_t> ticket);
  // Every job touched by a batch not known committed read back from the store
  // (gone if it has no row), the index rebuilt.
  void ReconcileLocked();
  // ReconcileLocked when a write failed since memory last matched the store
  // (first thing of every change, so that it is not refused for an old failure).
  void SyncWithStoreLocked();
  Status ReloadJobLocked(const std::string& id);
  void AfterChangeLocked(const Job& before, const Job& after);
  // lote_jobs for the queue and status from the index.
  void CountJobsLocked(const std::string& queue_arn, JobStatus status);
  void UpdateArrayParentLocked(const std::string& parent_id, int64_t now);
  std::string NewInstanceIdLocked();
  Result<Job> RequestStopLocked(const std::string& job_id, bool terminate,
                                const std::string& reason, int64_t now);
  int64_t GraceMs(const exec::AttemptKey& key);
  // The container's secrets (valueFrom: SSM parameter names or ARNs) resolved
  // into the launch's environment; InvalidArgument naming the secret (never
  // its value) when one cannot be had.
  Status AddSecrets(const ContainerSpec& container, NodeLaunch* launch) const;
  void TerminateAttempts(const std::vector<exec::AttemptKey>& keys);

  const JobLoopOptions options_;
  const Clock* clock_;
  store::Store* store_;
  ControlPlane* control_;
  JobOutput* output_;
  metrics::Registry own_metrics_;  // when options.metrics is null
  JobLoopMetrics metrics_;

  std::mutex mu_;
  std::set<exec::AttemptKey> evidence_wanted_;              // hangs to dump; protected by mu_
  std::map<exec::AttemptKey, HangEvidence> hang_evidence_;  // protected by mu_
  std::set<exec::AttemptKey> evidence_collecting_;          // taken by a collector; mu_
  std::atomic<bool> evidence_due_{false};    // set with evidence_wanted_, cleared by its collector
  JobTable jobs_;                            // the unfinished jobs incl. array children,
                                             // and finished ones until they leave (finishing_)
  JobIndex index_;                           // over jobs_ (ApplyLocked keeps it)
  std::map<std::string, int64_t> last_seq_;  // per job: last event seq stored
  SubmitOrder submit_order_;                 // per job
  // Finished jobs in memory -> the ticket of the batch with their last
  // change (kUnflushed until it is handed to the store): EvictFinishedLocked.
  static constexpr uint64_t kUnflushed = ~uint64_t{0};
  std::map<std::string, uint64_t> finishing_;
  // Jobs a retention batch deletes that is not known committed yet.
  std::set<std::string> retiring_;
  int64_t next_retention_ms_ = 0;  // pass thread
  int64_t next_submit_order_ = 1;
  InstanceTable instances_;
  int32_t next_instance_index_ = 0;
  ShareHistory share_history_;                     // queue + "/" + share
  std::vector<exec::AttemptKey> to_terminate_;     // attempts to tear down
  std::vector<exec::AttemptKey> closed_attempts_;  // for PersistClosedAttemptsLocked
  // Attempts found at recovery of which no node ever ran (RecoverNodes).
  std::set<exec::AttemptKey> unstarted_attempts_;
  // Per attempt handed to a backend in this process: the backend's warnings
  // per node, until the node's NodeStarted records them.
  std::map<exec::AttemptKey, std::map<int32_t, std::vector<std::string>>> launch_warnings_;
  // Per queue name: its RUNNABLE jobs in the order the last scheduling pass
  // considered them (GetJobQueueSnapshot).
  std::map<std::string, std::vector<std::string>> queue_order_;
  // GetJobQueueSnapshot: job -> (position, since when) at the last snapshot.
  std::map<std::string, std::pair<size_t, int64_t>> queue_positions_;
  store::WriteBatch batch_;  // pending rows (under mu_)
  // The jobs batch_ writes: their rows are made once, at the flush, from
  // their state then (a job that changed twice before a flush, e.g. Launched
  // and NodeStarted, is one row written).
  struct PendingRow {
    int64_t updated_ms = 0;  // the time of its last change
    // Written whatever the job's state: an event that is not one an
    // unfinished job's row may lag behind (RowMayLag) changed it.
    bool due = false;
    // Its Submitted event's job document while no later event changed it:
    // the row's document (the job in memory is that document read back).
    std::string submitted_doc;
  };
  std::map<std::string, PendingRow> batch_jobs_;
  // Per unfinished job: the seq of the last event its stored row holds (the
  // row of an unfinished job is written now and then: FlushLocked).
  std::map<std::string, int64_t> row_seq_;
  // The jobs of each batch handed to the store and not known committed.
  std::deque<std::pair<store::Store::Ticket, std::vector<std::string>>> unstored_;
  uint64_t failures_seen_ = 0;        // store failure_count() when memory matched it
  bool rebuild_sched_input_ = false;  // ReconcileLocked: sched_input_ starts over
  // Node events of a pass whose commit failed, applied again by the next.
  std::vector<exec::NodeEvent> unstored_events_;
  // The scheduler's input kept across passes, and what the backends that own
  // their machines reported: owned by the thread that runs Pass (read and
  // changed by it alone, with or without mu_).
  SchedulerInput sched_input_;
  std::map<std::string, exec::Capacity> backend_capacity_;
  // Injected capacity shortages (capacity_hold.h): the jobs held now, and per
  // RUNNABLE job the attempt count whose hold was served.
  CapacityHolds capacity_holds_;
  std::map<std::string, size_t> shortage_served_;
  // Per queue ARN, its environments' injected shortage, read once per pass
  // (cleared by EndCapacityHoldsLocked).
  std::map<std::string, std::optional<InjectedShortage>> queue_shortages_;
  Quarantine quarantine_;                   // under mu_
  ConsumableResources consumables_;         // under mu_; stored through batch_
  Json shown_quarantine_ = Json::object();  // CE name -> what the control plane shows
  bool dirty_ = true;
  bool stopping_ = false;
  // The background collector (options.collect_evidence_in_background): one
  // at a time, started by the pass thread, joined by the next start or ~JobLoop.
  std::thread evidence_thread_;
  std::atomic<bool> evidence_running_{false};
};

// The failure category of a node's end, by the table in docs/executor.md
// ("Failure categories"): kNone for a clean exit (kExited 0). `unstarted`
// says the node's whole attempt provably never ran (recovery), which makes a
// never-started loss NOT_STARTED rather than NODE_LOST.
FailureCategory FailureCategoryOf(const exec::NodeEvent& event, bool unstarted = false);
// The category of a launch that failed: USER_ERROR when the job's own spec is
// wrong (InvalidArgument: unknown user, bad ulimit, no command), else
// INFRASTRUCTURE (the backend cannot honour it, or a host fault).
FailureCategory LaunchFailureCategory(const Status& status);

}  // namespace lote::control
