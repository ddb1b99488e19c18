// JobsService: the job layer wired into `lote server` as a ServerExtension.
// Wiring only: it builds the backends (the local executor, and one Slurm
// backend per lote:backend=slurm compute environment), the job output sink
// (JobLogs over the log store) and the control plane's job loop
// (control::JobLoop), registers the job operations on the router, and runs
// the threads that drive the loop: one waiting for each backend's events and
// one running the loop's passes (woken by submissions, cancels and events,
// else every max_sleep_ms for timeouts).
//
// Thread safety: the API handlers may run on any thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "control/job_loop.h"
#include "exec/local_backend.h"
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
  // Creates the backends, the job output and the loop (which loads the jobs
  // and recovers running nodes), registers the operations on
  // context.router and starts the threads.
  static Result<std::unique_ptr<JobsService>> Start(ServerContext& context,
                                                    JobsServiceOptions options = {});
  ~JobsService();  // stops the threads; running nodes keep running (re-attached on restart)

  control::JobLoop& loop() { return *loop_; }
  Result<Json> SubmitJob(const Json& request) { return loop_->SubmitJob(request); }
  Result<Json> DescribeJobs(const Json& request) { return loop_->DescribeJobs(request); }
  Result<Json> ListJobs(const Json& request) { return loop_->ListJobs(request); }
  Result<Json> CancelJob(const Json& request) { return loop_->CancelJob(request); }
  Result<Json> TerminateJob(const Json& request) { return loop_->TerminateJob(request); }
  Result<Json> GetJobQueueSnapshot(const Json& request) {
    return loop_->GetJobQueueSnapshot(request);
  }
  // Returns true once the loop has run a whole pass that began after this
  // call (so every event, and the clock as read before the call, has been
  // acted on: a test asserts "not yet" after it, never after a sleep); false
  // when the service stops first or `timeout_ms` (real time) passes.
  bool WaitForPass(int64_t timeout_ms = 60'000);

 private:
  class Backends;
  JobsService(ServerContext& context, JobsServiceOptions options);
  // `access` (null: none) learns the jobs' owners and filters what each
  // principal is shown (job_access.h).
  void RegisterOperations(api::ApiRouter* router, api::IamAccessControl* access);
  // Starts the thread that waits for `backend`'s events.
  void WatchBackend(exec::Backend* backend);
  void Notify();
  void Loop();

  const JobsServiceOptions options_;
  control::ControlPlane* control_;
  std::unique_ptr<Backends> backends_;
  std::unique_ptr<JobLogs> job_logs_;  // null without a log store
  std::unique_ptr<control::JobLoop> loop_;

  std::mutex mu_;
  std::condition_variable cv_;          // wakes the loop thread
  std::vector<exec::NodeEvent> inbox_;  // events of every backend (under mu_)
  bool wake_ = true;                    // a pass is due (under mu_)
  bool stopping_ = false;               // (under mu_)
  uint64_t passes_begun_ = 0;           // (under mu_)
  uint64_t passes_done_ = 0;            // (under mu_)
  std::condition_variable pass_done_;
  std::vector<std::thread> waiters_;  // one per backend (under mu_)
  std::set<exec::Backend*> watched_;  // (under mu_)
  std::thread loop_thread_;
};

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
