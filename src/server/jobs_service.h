// JobsService: the AWS Batch job operations (SubmitJob, DescribeJobs,
// ListJobs, CancelJob, TerminateJob) and the job loop that runs jobs as local
// processes, wired into `lote server` as a ServerExtension.
//
// Contract:
// - Every accepted event is applied with control::Apply, appended to the
//   store's job_events and the job row is rewritten in the same batch; an API
//   mutation answers only after that batch is committed.
// - One loop thread owns the executor (exec::LocalBackend): it sleeps in
//   Backend::Wait (woken by submissions, cancels and node exits) and runs one
//   pass per wake-up: node events, timeouts, dependencies, array parents, a
//   scheduling pass (sched::Decide) over the virtual instances of the
//   compute environments, and launches of the placed nodes.
// - Gang teardown: when an attempt ends (success, failure, timeout,
//   termination) every node of it still running is terminated (grace 2 s).
// - On start the nodes the store says are running are recovered (adopted, or
//   their outcome / NODE_LOST reported through Wait).
// - Logs (when the context has a log store): every launched node's output
//   file is stored into its stream of /aws/batch/job (JobLogs), resumed after
//   a restart; DescribeJobs shows the LOTE_PROGRESS values as `progress`, and
//   a RUNNING job with `lote:progressTimeoutSeconds` (parameter or tag) whose
//   node reports no progress for that long fails its attempt as HANG.
// Thread safety: the API handlers may run on any thread; state is guarded by mu_.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "control/job_controller.h"
#include "control/job_model.h"
#include "control/job_state.h"
#include "exec/local_backend.h"
#include "sched/scheduler.h"
#include "server/job_logs.h"
#include "server/server.h"

namespace lote::server {

struct JobsServiceOptions {
  // Grace period between SIGTERM and SIGKILL for gang teardown and TerminateJob.
  int64_t terminate_grace_ms = 2000;
  // Longest sleep of the loop when nothing happens (timeouts are checked then).
  int64_t max_sleep_ms = 500;
  // How to start the node supervisor (exec::LocalBackendOptions::shim_command);
  // empty: this executable's `exec-shim` subcommand.
  std::vector<std::string> shim_command;
};

class JobsService {
 public:
  // Creates the backend, loads the jobs from the store, recovers running
  // nodes, registers the operations on context.router and starts the loop.
  static Result<std::unique_ptr<JobsService>> Start(ServerContext& context,
                                                    JobsServiceOptions options = {});
  ~JobsService();  // stops the loop; running nodes keep running (adopted on restart)

  Result<Json> SubmitJob(const Json& request);
  Result<Json> DescribeJobs(const Json& request);
  Result<Json> ListJobs(const Json& request);
  Result<Json> CancelJob(const Json& request);
  Result<Json> TerminateJob(const Json& request);
  // The first 100 RUNNABLE jobs of a queue, in scheduling order.
  Result<Json> GetJobQueueSnapshot(const Json& request);
  // Returns true once the loop has run a whole pass that began after this
  // call (so every event, and the clock as read before the call, has been
  // acted on: a test asserts "not yet" after it, never after a sleep); false
  // when the service stops first or `timeout_ms` (real time) passes.
  bool WaitForPass(int64_t timeout_ms = 60'000);
  // TagResource / UntagResource / ListTagsForResource on a job ARN.
  Result<Json> ChangeJobTags(const Json& request, bool untag);
  Result<Json> ListJobTags(const Json& request);

 private:
  JobsService(ServerContext& context, JobsServiceOptions options);
  Status Load();
  Status RecoverNodes();
  // Follows the output of nodes still running, and stores what a previous
  // server left unstored of nodes that ended.
  void ResumeLogs();
  // Attempts closed since the last pass: their progress is persisted and
  // their trackers released.
  void PersistClosedAttemptsLocked(int64_t now);
  // HANG failures of RUNNING jobs whose nodes report no progress.
  std::vector<std::pair<std::string, control::JobEvent>> HangEventsLocked(int64_t now);
  void RegisterOperations(api::ApiRouter* router);
  void Loop();
  void Pass(std::vector<exec::NodeEvent> node_events);
  // Starts every node of the open attempt of each job (after the Scheduled
  // events are committed); records NodeStarted or the launch failure.
  void LaunchPlaced(const std::vector<std::string>& job_ids);
  Result<Json> TerminateOrCancel(const Json& request, bool terminate);
  bool IsJobArn(const Json& request) const;
  Result<std::string> JobIdOfArnLocked(const std::string& arn) const;

  // Applies `event` to job `id` and queues the event and the new row into
  // batch_. Returns the new job (or the error for an event that does not apply).
  Result<control::Job> ApplyLocked(const std::string& id, const control::JobEvent& event);
  // Enqueues batch_ (under mu_); returns the ticket to wait for, or 0.
  Result<uint64_t> FlushLocked();
  Status WaitTicket(Result<uint64_t> ticket);
  void AfterChangeLocked(const control::Job& before, const control::Job& after);
  void UpdateArrayParentLocked(const std::string& parent_id, int64_t now);
  std::string NewInstanceIdLocked();
  Result<control::Job> RequestStopLocked(const std::string& job_id, bool terminate,
                                         const std::string& reason, int64_t now);
  void Wake();

  const std::string home_;
  const Clock* clock_;
  store::Store* store_;
  control::ControlPlane* control_;
  const JobsServiceOptions options_;
  std::unique_ptr<exec::LocalBackend> backend_;
  std::unique_ptr<JobLogs> job_logs_;  // null without a log store

  std::mutex mu_;
  std::map<std::string, control::Job> jobs_;     // every job incl. array children
  std::map<std::string, int64_t> last_seq_;      // per job: last event seq stored
  std::map<std::string, int64_t> submit_order_;  // per job
  int64_t next_submit_order_ = 1;
  control::InstanceTable instances_;
  int32_t next_instance_index_ = 0;
  std::map<std::string, sched::ShareUsageUpdate> share_history_;  // queue + "/" + share
  std::vector<exec::AttemptKey> to_terminate_;  // attempts to tear down (loop thread)
  // The job's lote:terminationGraceSeconds, else options_.terminate_grace_ms (locks mu_).
  int64_t GraceMs(const exec::AttemptKey& key);
  std::vector<exec::AttemptKey> closed_attempts_;  // for PersistClosedAttemptsLocked
  // Attempts found at recovery of which no node ever ran (RecoverNodes).
  std::set<exec::AttemptKey> unstarted_attempts_;
  // GetJobQueueSnapshot: job -> (position, since when) at the last snapshot.
  std::map<std::string, std::pair<size_t, int64_t>> queue_positions_;
  store::WriteBatch batch_;  // pending rows (under mu_)
  bool dirty_ = true;
  bool stopping_ = false;
  uint64_t passes_begun_ = 0;  // passes that have read the clock (under mu_)
  uint64_t passes_done_ = 0;   // passes that have finished (under mu_)
  std::condition_variable pass_done_;
  std::thread loop_;
};

// The failure category of a node's end, by the table in docs/executor.md
// ("Failure categories"): kNone for a clean exit (kExited 0). `unstarted`
// says the node's whole attempt provably never ran (recovery), which makes a
// never-started loss NOT_STARTED rather than NODE_LOST.
control::FailureCategory FailureCategoryOf(const exec::NodeEvent& event, bool unstarted = false);
// The category of a Launch that failed: USER_ERROR when the job's own spec is
// wrong (InvalidArgument: unknown user, bad ulimit, no command), else
// INFRASTRUCTURE (the host cannot honour it, or a host fault).
control::FailureCategory LaunchFailureCategory(const Status& status);

// Makes the server's own entries in `home` private: the log store folder
// `logs` 0700; lote.db (-wal, -shm, -journal), credentials, server.json 0600.
// The jobs of a root server run as other users and pass through the home
// (0711) to their working directories; they must reach nothing else there.
// Other entries of the home are left as they are.
Status MakeHomePrivate(const std::string& home);

// The ServerExtension that starts a JobsService. $LOTE_EXEC_SHIM, when set and
// options.shim_command is empty, names the supervisor binary to use.
ServerExtension JobsExtension(JobsServiceOptions options = {});

}  // namespace lote::server
