// JobLoop driven synchronously: a real store and control plane, a fake
// backend that records what it is handed and reports what the test says, and
// a fake clock. No processes, no sleeps: each step is one Pass.
#include "control/job_loop.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <stdlib.h>

#include <chrono>
#include <deque>
#include <filesystem>
#include <future>
#include <set>
#include <thread>

namespace lote::control {
namespace {

// A backend that runs nothing: it records gangs, terminations and recoveries,
// and returns the events the test queues.
class FakeBackend final : public exec::Backend {
 public:
  std::string Name() const override { return "fake"; }
  const exec::Capabilities& capabilities() const override { return caps; }
  std::optional<exec::Capacity> GetCapacity() override { return capacity; }
  Result<exec::GangLaunch> LaunchGang(const exec::GangSpec& gang) override {
    if (!launch_error.ok()) return launch_error;
    gangs.push_back(gang);
    exec::GangLaunch out;
    out.backend_ref = "fake-" + std::to_string(gangs.size());
    return out;
  }
  Status Terminate(const exec::AttemptKey& attempt, std::optional<int64_t> grace_ms) override {
    terminated.push_back(attempt);
    last_grace_ms = grace_ms.value_or(-1);
    return Status();
  }
  Result<std::vector<exec::NodeEvent>> Wait(int64_t) override {
    std::vector<exec::NodeEvent> out(events.begin(), events.end());
    events.clear();
    return out;
  }
  void Wake() override {}
  Result<exec::RecoverReport> Recover(const std::vector<exec::RecoverItem>& expected) override {
    recovered = expected;
    exec::RecoverReport r;
    for (const auto& item : expected) r.adopted.push_back(item.node);
    return r;
  }
  Status RemoveJobFiles(const std::string& job_id) override {
    removed_files.push_back(job_id);
    return Status();
  }
  Result<std::string> OutputPath(const exec::NodeKey& node) const override {
    return "/nonexistent/" + node.ToString();
  }
  std::vector<exec::NodeKey> Running() const override { return {}; }

  // What the test reads and sets.
  exec::Capabilities caps{
      {"image", "command", "environment", "resourceRequirements", "vcpus", "memory", "jobRoleArn"},
      false};
  std::optional<exec::Capacity> capacity;
  Status launch_error;
  std::vector<exec::GangSpec> gangs;
  std::vector<exec::AttemptKey> terminated;
  int64_t last_grace_ms = 0;
  std::vector<exec::RecoverItem> recovered;
  std::vector<std::string> removed_files;  // RemoveJobFiles, in order
  std::deque<exec::NodeEvent> events;

  void Running(const exec::GangSpec& gang, int64_t at) {
    for (const exec::NodeSpec& n : gang.nodes) {
      exec::NodeEvent e;
      e.node = n.node;
      e.kind = exec::NodeEventKind::kRunning;
      e.at_ms = at;
      events.push_back(e);
    }
  }
  void Exit(const exec::NodeKey& node, int32_t code, int64_t at) {
    exec::NodeEvent e;
    e.node = node;
    e.kind = exec::NodeEventKind::kEnded;
    e.outcome = exec::NodeOutcome::kExited;
    e.exit_code = code;
    e.at_ms = at;
    events.push_back(e);
  }
};

class Directory final : public BackendDirectory {
 public:
  explicit Directory(exec::Backend* b) : b_(b) {}
  Result<exec::Backend*> ForEnvironment(const ComputeEnvironmentSpec&) override { return b_; }
  std::vector<exec::Backend*> All() override { return {b_}; }

 private:
  exec::Backend* b_;
};

class JobLoopTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/lote_job_loop_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    store::StoreOptions so;
    so.durable = false;
    auto store = store::Store::Open(dir_ + "/lote.db", so);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(store).value();
    auto control = ControlPlane::Open(store_.get(), &clock_, ControlConfig{});
    ASSERT_TRUE(control.ok()) << control.status().ToString();
    control_ = std::move(control).value();
    ASSERT_TRUE(control_
                    ->CreateComputeEnvironment(Json::parse(R"({
      "computeEnvironmentName": "ce", "type": "MANAGED",
      "computeResources": {"type": "EC2", "minvCpus": 0, "maxvCpus": 64,
                           "instanceTypes": ["c5.large"], "subnets": ["s"]}})"))
                    .ok());
    ASSERT_TRUE(control_
                    ->CreateComputeEnvironment(Json::parse(
                        R"({"computeEnvironmentName": "cluster", "type": "UNMANAGED"})"))
                    .ok());
    ASSERT_TRUE(control_
                    ->CreateJobQueue(Json::parse(R"({"jobQueueName": "q", "priority": 1,
      "computeEnvironmentOrder": [{"order": 1, "computeEnvironment": "ce"}]})"))
                    .ok());
    ASSERT_TRUE(control_
                    ->CreateJobQueue(Json::parse(R"({"jobQueueName": "uq", "priority": 1,
      "computeEnvironmentOrder": [{"order": 1, "computeEnvironment": "cluster"}]})"))
                    .ok());
    ASSERT_TRUE(control_->Reconcile().ok());
    ASSERT_TRUE(control_
                    ->RegisterJobDefinition(Json::parse(R"({"jobDefinitionName": "d",
      "type": "container", "timeout": {"attemptDurationSeconds": 60},
      "containerProperties": {"image": "host", "command": ["true"],
        "resourceRequirements": [{"type": "VCPU", "value": "1"},
                                 {"type": "MEMORY", "value": "128"}]}})"))
                    .ok());
    ASSERT_TRUE(control_
                    ->RegisterJobDefinition(Json::parse(R"({"jobDefinitionName": "mn",
      "type": "multinode", "nodeProperties": {"numNodes": 3, "mainNode": 0,
        "nodeRangeProperties": [{"targetNodes": "0:", "container": {"image": "host",
          "command": ["true"], "resourceRequirements": [{"type": "VCPU", "value": "2"},
                                                        {"type": "MEMORY", "value": "256"}]}}]}})"))
                    .ok());
    Start();
  }

  void Start(size_t schedule_depth = kDefaultScheduleDepth) {
    loop_.reset();
    JobLoopOptions o;
    o.schedule_depth = schedule_depth;
    o.clock = &clock_;
    o.store = store_.get();
    o.control = control_.get();
    o.backends = &directory_;
    o.metrics = &metrics_;
    o.job_retention_ms = retention_ms_;
    o.quarantine = quarantine_;
    auto loop = JobLoop::Create(o);
    ASSERT_TRUE(loop.ok()) << loop.status().ToString();
    loop_ = std::move(loop).value();
  }

  // The gang's node 0 runs, then its supervisor ends without an outcome
  // (NODE_LOST), each applied by a pass.
  void RunThenLoseNode(const exec::GangSpec& gang) {
    backend_.Running(gang, clock_.NowMillis());
    Settle();
    exec::NodeEvent lost;
    lost.node = gang.nodes[0].node;
    lost.kind = exec::NodeEventKind::kEnded;
    lost.outcome = exec::NodeOutcome::kLost;
    lost.reason = "supervisor ended without an outcome";
    lost.at_ms = lost.stopped_at_ms = clock_.NowMillis();
    backend_.events.push_back(lost);
    Settle();
  }

  void TearDown() override {
    loop_.reset();
    control_.reset();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }

  std::string Submit(const std::string& queue, const std::string& definition,
                     Json extra = Json::object()) {
    Json request = {{"jobName", "t"}, {"jobQueue", queue}, {"jobDefinition", definition}};
    for (auto it = extra.begin(); it != extra.end(); ++it) request[it.key()] = it.value();
    auto r = loop_->SubmitJob(request);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? (*r)["jobId"].get<std::string>() : "";
  }

  Json Describe(const std::string& id) {
    auto r = loop_->DescribeJobs(Json{{"jobs", {id}}});
    EXPECT_TRUE(r.ok());
    if (!r.ok() || (*r)["jobs"].empty()) return Json();
    return (*r)["jobs"][0];
  }

  // Passes until nothing changes (a submitted job reaches its backend in a
  // few: dependencies, then placement and launch).
  void Settle() {
    for (int i = 0; i < 5; ++i) loop_->Pass(backend_.Wait(0).value());
  }

  uint64_t Decides() {
    return metrics_.GetHistogram("lote_scheduler_decide_seconds", "", metrics::LatencyBuckets())
        ->count();
  }

  std::string dir_;
  FakeClock clock_;
  FakeBackend backend_;
  Directory directory_{&backend_};
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<ControlPlane> control_;
  std::unique_ptr<JobLoop> loop_;
  metrics::Registry metrics_;
  int64_t retention_ms_ = kDefaultJobRetentionMs;
  QuarantineOptions quarantine_;
};

TEST_F(JobLoopTest, AJobRunsWhenItsBackendSaysSoAndEndsWithItsExit) {
  const std::string id = Submit("q", "d");
  Settle();
  ASSERT_EQ(backend_.gangs.size(), 1u);
  const exec::GangSpec& gang = backend_.gangs[0];
  EXPECT_EQ(gang.attempt, (exec::AttemptKey{id, 1}));
  EXPECT_FALSE(gang.multi_node);
  EXPECT_EQ(gang.timeout_seconds, 60);
  ASSERT_EQ(gang.nodes.size(), 1u);
  EXPECT_EQ(gang.nodes[0].environment.at("AWS_BATCH_JOB_ID"), id);
  EXPECT_EQ(gang.nodes[0].environment.at("AWS_BATCH_CE_NAME"), "ce");
  EXPECT_EQ(gang.nodes[0].vcpu_milli, 1000);
  // Handed over, not running yet: STARTING (no timeout runs).
  EXPECT_EQ(Describe(id)["status"], "STARTING");
  const int64_t started = clock_.NowMillis() - 5;  // the backend's own time
  backend_.Running(gang, started);
  Settle();
  Json job = Describe(id);
  EXPECT_EQ(job["status"], "RUNNING");
  EXPECT_EQ(job["startedAt"], started);
  clock_.AdvanceMillis(1000);
  backend_.Exit(gang.nodes[0].node, 0, clock_.NowMillis());
  Settle();
  EXPECT_EQ(Describe(id)["status"], "SUCCEEDED");
  // The stored reference is with the attempt.
  auto events = store_->JobEvents(id);
  ASSERT_TRUE(events.ok());
  bool launched = false;
  for (const auto& e : *events)
    launched = launched || (e.type == "Launched" && e.payload.find("fake-1") != std::string::npos);
  EXPECT_TRUE(launched);
}

TEST_F(JobLoopTest, AGangIsOneUnitAndOneFailedNodeTearsItDown) {
  const std::string id = Submit("q", "mn");
  Settle();
  ASSERT_EQ(backend_.gangs.size(), 1u);
  const exec::GangSpec gang = backend_.gangs[0];
  EXPECT_TRUE(gang.multi_node);
  EXPECT_EQ(gang.main_node_index, 0);
  ASSERT_EQ(gang.nodes.size(), 3u);
  for (const exec::NodeSpec& n : gang.nodes) {
    EXPECT_EQ(n.environment.at("AWS_BATCH_JOB_NUM_NODES"), "3");
    // The backend fills in the main node's address.
    EXPECT_EQ(n.environment.count(exec::kMainNodeAddressVar), 0u);
  }
  backend_.Running(gang, clock_.NowMillis());
  Settle();
  EXPECT_EQ(Describe(id)["status"], "RUNNING");
  backend_.Exit(gang.nodes[2].node, 3, clock_.NowMillis());
  Settle();
  Json job = Describe(id);
  EXPECT_EQ(job["status"], "FAILED") << job;
  ASSERT_FALSE(backend_.terminated.empty());
  EXPECT_EQ(backend_.terminated[0], gang.attempt);
  EXPECT_EQ(backend_.last_grace_ms, 2000);
}

// A read answers once every change it shows is committed: a job a client
// has seen is there after a crash too. Another connection holds the
// database's write lock, so a submission's commit cannot happen meanwhile.
TEST_F(JobLoopTest, AReadAnswersOnceWhatItShowsIsCommitted) {
  sqlite3* other = nullptr;
  ASSERT_EQ(sqlite3_open((dir_ + "/lote.db").c_str(), &other), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(other, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr), SQLITE_OK);
  std::string id;
  std::thread submitter([&] { id = Submit("q", "d"); });
  // The job is in memory (counted) while its commit waits for the lock.
  const std::string counted = "lote_jobs{queue=\"q\",status=\"SUBMITTED\"} 1\n";
  while (metrics_.Render().find(counted) == std::string::npos)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  auto listed = std::async(std::launch::async, [&] {
    return loop_->ListJobs(Json{{"jobQueue", "q"}, {"jobStatus", "SUBMITTED"}});
  });
  // Not before the commit (the store gives up on the lock after 10 s).
  EXPECT_EQ(listed.wait_for(std::chrono::seconds(2)), std::future_status::timeout);
  ASSERT_EQ(sqlite3_exec(other, "ROLLBACK", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(other);
  submitter.join();
  Result<Json> r = listed.get();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ((*r)["jobSummaryList"].size(), 1u) << *r;
  EXPECT_EQ((*r)["jobSummaryList"][0]["jobId"], id);
  EXPECT_TRUE(store_->FindJob(id).value().has_value());
}

TEST_F(JobLoopTest, TimeoutCountsFromTheBackendsStartAndTerminates) {
  const std::string id = Submit("q", "d");
  Settle();
  ASSERT_EQ(backend_.gangs.size(), 1u);
  // Pending inside the backend for long: no timeout while it waits.
  clock_.AdvanceMillis(120'000);
  Settle();
  EXPECT_EQ(Describe(id)["status"], "STARTING");
  backend_.Running(backend_.gangs[0], clock_.NowMillis());
  Settle();
  clock_.AdvanceMillis(59'000);
  Settle();
  EXPECT_EQ(Describe(id)["status"], "RUNNING");
  clock_.AdvanceMillis(2'000);
  Settle();
  Json job = Describe(id);
  EXPECT_EQ(job["status"], "FAILED");
  EXPECT_EQ(job["statusReason"], "Job attempt duration exceeded timeout");
  ASSERT_EQ(backend_.terminated.size(), 1u);
}

TEST_F(JobLoopTest, PendingInTheBackendShowsRunnableWithItsReasonAndCanBeCancelled) {
  const std::string id = Submit("q", "d");
  Settle();
  ASSERT_EQ(backend_.gangs.size(), 1u);
  exec::NodeEvent pending;
  pending.node = backend_.gangs[0].nodes[0].node;
  pending.kind = exec::NodeEventKind::kPending;
  pending.reason = "Slurm: Resources";
  pending.at_ms = clock_.NowMillis();
  backend_.events.push_back(pending);
  Settle();
  Json job = Describe(id);
  EXPECT_EQ(job["status"], "RUNNABLE");
  EXPECT_EQ(job["statusReason"], "Slurm: Resources");
  auto listed = loop_->ListJobs(Json{{"jobQueue", "q"}, {"jobStatus", "RUNNABLE"}});
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ((*listed)["jobSummaryList"].size(), 1u);
  // CancelJob stops a job that is still waiting.
  ASSERT_TRUE(loop_->CancelJob(Json{{"jobId", id}, {"reason", "no longer needed"}}).ok());
  Settle();
  job = Describe(id);
  EXPECT_EQ(job["status"], "FAILED");
  EXPECT_EQ(job["isCancelled"], true);
  ASSERT_EQ(backend_.terminated.size(), 1u);
  EXPECT_EQ(backend_.gangs.size(), 1u);  // not retried
}

TEST_F(JobLoopTest, ARestartedLoopRecoversByTheStoredReference) {
  const std::string id = Submit("q", "mn");
  Settle();
  ASSERT_EQ(backend_.gangs.size(), 1u);
  backend_.Running(backend_.gangs[0], clock_.NowMillis());
  Settle();
  Start();  // a new server on the same store
  ASSERT_EQ(backend_.recovered.size(), 3u);
  for (const exec::RecoverItem& item : backend_.recovered) {
    EXPECT_EQ(item.backend_ref, "fake-1");
    EXPECT_EQ(item.node.attempt, (exec::AttemptKey{id, 1}));
  }
  EXPECT_EQ(Describe(id)["status"], "RUNNING");
  backend_.Exit(exec::NodeKey{exec::AttemptKey{id, 1}, 0}, 0, clock_.NowMillis());
  Settle();
  EXPECT_EQ(Describe(id)["status"], "SUCCEEDED");
  EXPECT_EQ(backend_.gangs.size(), 1u);
}

TEST_F(JobLoopTest, TheBackendsCapacityPlacesOrFailsWithAClearReason) {
  // Unmanaged with no capacity: the job waits.
  const std::string waiting = Submit("uq", "d");
  Settle();
  EXPECT_EQ(Describe(waiting)["status"], "RUNNABLE");
  EXPECT_TRUE(backend_.gangs.empty());
  // Two nodes of 2 CPUs: a 3-node gang can never fit, a 1-node job runs.
  backend_.capacity = exec::Capacity{2, 2000, 1000, 0, "2 nodes"};
  const std::string big = Submit("uq", "mn");
  Settle();
  Json job = Describe(big);
  EXPECT_EQ(job["status"], "FAILED");
  EXPECT_EQ(job["failureCategory"], "CAPACITY") << job;
  EXPECT_NE(job["statusReason"].get<std::string>().find("3"), std::string::npos) << job;
  ASSERT_EQ(backend_.gangs.size(), 1u);
  EXPECT_EQ(backend_.gangs[0].attempt.job_id, waiting);
  EXPECT_TRUE(backend_.gangs[0].nodes[0].private_ip.empty());  // the backend's to know
}

TEST_F(JobLoopTest, FieldsTheBackendCannotHonourAreNamedAndLaunchErrorsFailTheJob) {
  const std::string id =
      Submit("q", "d", Json{{"containerOverrides", {{"command", {"sh", "-c", "exit 0"}}}}});
  Settle();
  ASSERT_EQ(backend_.gangs.size(), 1u);
  EXPECT_TRUE(backend_.gangs[0].nodes[0].unsupported_fields.empty());
  backend_.caps.container_fields.erase("command");
  const std::string other = Submit("q", "d");
  Settle();
  ASSERT_EQ(backend_.gangs.size(), 2u);
  EXPECT_EQ(backend_.gangs[1].nodes[0].unsupported_fields, std::vector<std::string>{"command"});
  backend_.launch_error = Status::InvalidArgument("node x: no such user 'ghost'");
  const std::string bad = Submit("q", "d");
  Settle();
  Json job = Describe(bad);
  EXPECT_EQ(job["status"], "FAILED");
  EXPECT_EQ(job["failureCategory"], "USER_ERROR") << job;
  EXPECT_NE(job["attempts"][0]["container"]["reason"].get<std::string>().find("ghost"),
            std::string::npos)
      << job;
  (void)id;
  (void)other;
}

// Jobs that wait for capacity are written once (Submitted, then their reason),
// not again on every pass: a pass over an unchanged queue stores nothing.
// A pass hands the policy the first schedule_depth jobs of the queue: no pass
// places more, and the next passes go on until every job is placed, in
// submission order.
TEST_F(JobLoopTest, APassConsidersTheHeadsOfTheQueueAndTheNextPassesTheRest) {
  Start(3);
  std::vector<std::string> ids;
  for (int i = 0; i < 10; ++i) ids.push_back(Submit("q", "d"));
  size_t placed = 0;
  for (int pass = 0; pass < 30 && placed < ids.size(); ++pass) {
    loop_->Pass(backend_.Wait(0).value());
    ASSERT_LE(backend_.gangs.size() - placed, 3u) << "pass " << pass;
    placed = backend_.gangs.size();
  }
  ASSERT_EQ(backend_.gangs.size(), ids.size());
  for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(backend_.gangs[i].attempt.job_id, ids[i]);
}

TEST_F(JobLoopTest, WaitingJobsAreWrittenOnceNotOnEveryPass) {
  ASSERT_TRUE(control_
                  ->CreateComputeEnvironment(Json::parse(R"({
    "computeEnvironmentName": "small", "type": "MANAGED",
    "computeResources": {"type": "EC2", "minvCpus": 0, "maxvCpus": 2,
                         "instanceTypes": ["c5.large"], "subnets": ["s"]}})"))
                  .ok());
  ASSERT_TRUE(control_
                  ->CreateJobQueue(Json::parse(R"({"jobQueueName": "sq", "priority": 1,
    "computeEnvironmentOrder": [{"order": 1, "computeEnvironment": "small"}]})"))
                  .ok());
  ASSERT_TRUE(control_->Reconcile().ok());
  std::vector<std::string> ids;
  for (int i = 0; i < 12; ++i) ids.push_back(Submit("sq", "d"));
  Settle();
  ASSERT_EQ(backend_.gangs.size(), 2u);  // one c5.large holds two 1-vCPU jobs
  for (const exec::GangSpec& g : backend_.gangs) backend_.Running(g, clock_.NowMillis());
  Settle();
  auto stored = [&] {
    size_t n = 0;
    for (const std::string& id : ids) n += store_->JobEvents(id).value().size();
    return n;
  };
  const size_t before = stored();
  for (int i = 0; i < 10; ++i) {
    clock_.AdvanceMillis(1000);
    loop_->Pass(backend_.Wait(0).value());
  }
  EXPECT_EQ(stored(), before);
  // Their place in line is still there, in the scheduler's order.
  auto snap = loop_->GetJobQueueSnapshot(Json{{"jobQueue", "sq"}});
  ASSERT_TRUE(snap.ok()) << snap.status().ToString();
  EXPECT_EQ((*snap)["frontOfQueue"]["jobs"].size(), 10u);
  Json waiting = Describe(ids.back());
  EXPECT_EQ(waiting["status"], "RUNNABLE");
  EXPECT_NE(waiting.value("statusReason", ""), "");
}

}  // namespace
// Deleting a queue terminates its jobs (AWS: "all jobs in the queue are
// terminated"), and ending them needs no compute environment: the backend
// recorded at launch ends them after the environment is deleted.
TEST_F(JobLoopTest, DeletingTheQueueTerminatesItsJobsThroughTheRecordedBackend) {
  const std::string running = Submit("q", "mn");
  Settle();
  ASSERT_EQ(backend_.gangs.size(), 1u);
  backend_.Running(backend_.gangs[0], clock_.NowMillis());
  Settle();
  ASSERT_EQ(Describe(running)["status"], "RUNNING");
  ASSERT_TRUE(control_->UpdateJobQueue(Json{{"jobQueue", "q"}, {"state", "DISABLED"}}).ok());
  ASSERT_TRUE(control_->Reconcile().ok());
  // The environment goes first here (taken out of the queue), then the queue.
  ASSERT_TRUE(
      control_->UpdateComputeEnvironment(Json{{"computeEnvironment", "ce"}, {"state", "DISABLED"}})
          .ok());
  ASSERT_TRUE(control_->Reconcile().ok());
  auto deleted = loop_->DeleteJobQueue(Json{{"jobQueue", "q"}});
  ASSERT_TRUE(deleted.ok()) << deleted.status().ToString();
  ASSERT_TRUE(control_->Reconcile().ok());
  ASSERT_TRUE(control_->DeleteComputeEnvironment(Json{{"computeEnvironment", "ce"}}).ok());
  ASSERT_TRUE(control_->Reconcile().ok());
  ASSERT_FALSE(control_->FindComputeEnvironment("ce").ok());
  Settle();
  Json job = Describe(running);
  EXPECT_EQ(job["status"], "FAILED") << job;
  EXPECT_NE(job.value("statusReason", "").find("Job queue q was deleted"), std::string::npos)
      << job;
  ASSERT_FALSE(backend_.terminated.empty());
  EXPECT_EQ(backend_.terminated[0], backend_.gangs[0].attempt);
}

// A child node stopped with its gang: its start is never after its stop, and
// its own exit (reported after) gives it its exit code.
TEST_F(JobLoopTest, AStoppedChildNodeKeepsItsOrderAndItsLateExitCode) {
  const std::string id = Submit("q", "mn");
  Settle();
  ASSERT_EQ(backend_.gangs.size(), 1u);
  const exec::GangSpec gang = backend_.gangs[0];
  const int64_t t0 = clock_.NowMillis();
  backend_.Running(gang, t0);
  Settle();
  clock_.AdvanceMillis(1000);
  backend_.Exit(gang.nodes[0].node, 0, clock_.NowMillis());  // the main node ends the job
  Settle();
  ASSERT_EQ(Describe(id)["status"], "SUCCEEDED");
  clock_.AdvanceMillis(500);
  backend_.Exit(gang.nodes[1].node, 143, clock_.NowMillis());  // SIGTERM'd by the teardown
  Settle();
  Json child = Describe(id + "#1");
  EXPECT_LE(child["startedAt"].get<int64_t>(), child["stoppedAt"].get<int64_t>()) << child;
  EXPECT_EQ(child["attempts"][0]["container"].value("exitCode", -1), 143) << child;
}

}  // namespace lote::control

namespace lote::control {
namespace {

TEST_F(JobLoopTest, PassesWithNothingChangedRunNoSchedulingPolicy) {
  // uq's only environment is UNMANAGED with no capacity: its jobs wait.
  std::vector<std::string> ids;
  for (int i = 0; i < 50; ++i) ids.push_back(Submit("uq", "d"));
  Settle();
  const Json waiting = Describe(ids[17]);
  EXPECT_EQ(waiting["status"], "RUNNABLE");
  EXPECT_NE(waiting["statusReason"].get<std::string>().find("UNMANAGED"), std::string::npos)
      << waiting;
  const uint64_t decided = Decides();
  EXPECT_GE(decided, 1u);
  for (int i = 0; i < 20; ++i) {
    clock_.AdvanceMillis(1000);
    loop_->Pass({});
  }
  EXPECT_EQ(Decides(), decided);
  // A new job is something new: one policy run, and it gets its reason.
  const std::string late = Submit("uq", "d");
  loop_->Pass({});
  EXPECT_EQ(Decides(), decided + 1);
  EXPECT_EQ(Describe(late)["statusReason"], waiting["statusReason"]);
  // So is a cancelled one (it leaves RUNNABLE).
  ASSERT_TRUE(loop_->CancelJob(Json{{"jobId", ids[0]}, {"reason", "test"}}).ok());
  loop_->Pass({});
  EXPECT_EQ(Decides(), decided + 2);
  loop_->Pass({});
  EXPECT_EQ(Decides(), decided + 2);
}

TEST_F(JobLoopTest, MetricsCountJobsPerQueueAndStatusAndLaunches) {
  for (int i = 0; i < 3; ++i) Submit("uq", "d");
  Submit("q", "d");
  Settle();
  const std::string text = metrics_.Render();
  EXPECT_NE(text.find("lote_jobs{queue=\"uq\",status=\"RUNNABLE\"} 3\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("lote_jobs{queue=\"q\",status=\"STARTING\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("lote_jobs{queue=\"q\",status=\"RUNNABLE\"} 0\n"), std::string::npos);
  EXPECT_NE(text.find("lote_backend_launches_total{backend=\"fake\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("lote_submit_job_seconds_count 4\n"), std::string::npos);
  backend_.launch_error = Status::Unavailable("the backend is down");
  Submit("q", "d");
  Settle();
  EXPECT_NE(metrics_.Render().find("lote_backend_launch_failures_total{backend=\"fake\"} 1\n"),
            std::string::npos);
}

TEST_F(JobLoopTest, AnInjectedCapacityShortageHoldsTheJobRunnableForItsSeconds) {
  const std::string plain = Submit("q", "d");
  const std::string held =
      Submit("q", "d", Json{{"tags", {{"lote:injectCapacityShortageSeconds", "30"}}}});
  Settle();
  ASSERT_EQ(backend_.gangs.size(), 1u);  // the job without the key is unaffected
  EXPECT_EQ(backend_.gangs[0].attempt.job_id, plain);
  Json job = Describe(held);
  EXPECT_EQ(job["status"], "RUNNABLE");
  EXPECT_EQ(job["statusReason"], "CAPACITY: injected capacity shortage (30 s)");
  clock_.AdvanceMillis(29'999);
  Settle();
  EXPECT_EQ(backend_.gangs.size(), 1u);
  EXPECT_EQ(Describe(held)["status"], "RUNNABLE");
  clock_.AdvanceMillis(1);
  Settle();
  ASSERT_EQ(backend_.gangs.size(), 2u);
  EXPECT_EQ(backend_.gangs[1].attempt.job_id, held);
  // The hold and its end are in the job's events.
  auto events = store_->JobEvents(held);
  ASSERT_TRUE(events.ok());
  int recorded = 0;
  for (const auto& e : *events) {
    if (e.payload.find("CAPACITY: injected capacity shortage (30 s)") != std::string::npos)
      ++recorded;
    if (e.payload.find("injected capacity shortage (30 s) ended") != std::string::npos) ++recorded;
  }
  EXPECT_EQ(recorded, 2);
}

TEST_F(JobLoopTest, AnInvalidInjectedShortageIsRefusedNamingTheKey) {
  for (const char* bad : {"0", "86401", "x", "-1", "1.5"}) {
    auto r = loop_->SubmitJob(Json{{"jobName", "t"},
                                   {"jobQueue", "q"},
                                   {"jobDefinition", "d"},
                                   {"parameters", {{"lote:injectCapacityShortageSeconds", bad}}}});
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("lote:injectCapacityShortageSeconds"), std::string::npos);
  }
}

TEST_F(JobLoopTest, ThreeLostNodesOfDifferentJobsQuarantineTheInstanceUntilReleased) {
  auto quarantined = [&] {
    auto ces = control_->DescribeComputeEnvironments(Json{{"computeEnvironments", {"ce"}}});
    EXPECT_TRUE(ces.ok());
    return (*ces)["computeEnvironments"][0].value("loteQuarantinedNodes", Json::array());
  };
  std::string first_ip;
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(quarantined().empty()) << i;
    Submit("q", "d");
    Settle();
    ASSERT_EQ(backend_.gangs.size(), static_cast<size_t>(i + 1));
    const exec::GangSpec& gang = backend_.gangs.back();
    if (i == 0) first_ip = gang.nodes[0].private_ip;
    ASSERT_EQ(gang.nodes[0].private_ip, first_ip);  // the idle instance is reused
    RunThenLoseNode(gang);
    EXPECT_EQ(Describe(gang.attempt.job_id)["status"], "FAILED");
    clock_.AdvanceMillis(1000);
  }
  Json nodes = quarantined();
  ASSERT_EQ(nodes.size(), 1u);
  const std::string node = nodes[0]["node"];
  EXPECT_NE(nodes[0]["reason"].get<std::string>().find("3 different jobs"), std::string::npos);
  // New work goes to another instance (the environment may launch one).
  Submit("q", "d");
  Settle();
  ASSERT_EQ(backend_.gangs.size(), 4u);
  EXPECT_NE(backend_.gangs.back().nodes[0].private_ip, first_ip);
  // Rebuilt from the stored attempts after a restart.
  Start();
  Settle();
  ASSERT_EQ(quarantined().size(), 1u);
  EXPECT_EQ(quarantined()[0]["node"], node);
  EXPECT_FALSE(loop_->ReleaseNode(Json{{"node", "i-nope"}}).ok());
  ASSERT_TRUE(loop_->ReleaseNode(Json{{"node", node}}).ok());
  Settle();
  EXPECT_TRUE(quarantined().empty());
}

// lote server --quarantine-failures reaches the loop's policy (it was once
// ignored: the loop kept the default of 3).
TEST_F(JobLoopTest, TheQuarantineThresholdIsTheLoopsOption) {
  quarantine_.threshold = 1;
  Start();
  Submit("q", "d");
  Settle();
  ASSERT_EQ(backend_.gangs.size(), 1u);
  const exec::GangSpec& gang = backend_.gangs.back();
  RunThenLoseNode(gang);
  auto ces = control_->DescribeComputeEnvironments(Json{{"computeEnvironments", {"ce"}}});
  ASSERT_TRUE(ces.ok());
  Json nodes = (*ces)["computeEnvironments"][0].value("loteQuarantinedNodes", Json::array());
  ASSERT_EQ(nodes.size(), 1u) << nodes.dump();
  EXPECT_NE(nodes[0]["reason"].get<std::string>().find("an attempt of 1 job ended NODE_LOST"),
            std::string::npos)
      << nodes.dump();
}

TEST_F(JobLoopTest, AQuarantineEndsAfterItsCoolDown) {
  for (int i = 0; i < 3; ++i) {
    Submit("q", "d");
    Settle();
    RunThenLoseNode(backend_.gangs.back());
  }
  auto count = [&] {
    auto ces = control_->DescribeComputeEnvironments(Json{{"computeEnvironments", {"ce"}}});
    return (*ces)["computeEnvironments"][0].value("loteQuarantinedNodes", Json::array()).size();
  };
  EXPECT_EQ(count(), 1u);
  clock_.AdvanceMillis(3'600'000);
  Settle();
  EXPECT_EQ(count(), 0u);
}

TEST_F(JobLoopTest, AShortageAndARunnerFaultTogetherKeepBoth) {
  const std::string id =
      Submit("q", "d",
             Json{{"tags", {{"lote:injectCapacityShortageSeconds", "1"}}},
                  {"parameters", {{"lote:injectKillNode", "0"}, {"lote:injectKillAtStep", "5"}}}});
  Settle();
  EXPECT_EQ(Describe(id)["statusReason"], "CAPACITY: injected capacity shortage (1 s)");
  clock_.AdvanceMillis(1000);
  Settle();
  ASSERT_EQ(backend_.gangs.size(), 1u);
  EXPECT_EQ(backend_.gangs[0].nodes[0].fault.action, exec::FaultAction::kKill);
}

// --- Finished jobs out of memory ---------------------------------------------

Json ListPage(JobLoop* loop, Json request) {
  auto r = loop->ListJobs(request);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : Json();
}

TEST_F(JobLoopTest, AFinishedJobLeavesMemoryAndIsDescribedTheSameFromTheStore) {
  const std::string id = Submit("q", "d", Json{{"tags", {{"team", "a"}}}});
  ASSERT_TRUE(loop_->CancelJob(Json{{"jobId", id}, {"reason", "not needed"}}).ok());
  const Json in_memory = Describe(id);
  ASSERT_EQ(in_memory["status"], "FAILED");
  ASSERT_TRUE(loop_->InMemory(id));
  Settle();
  EXPECT_FALSE(loop_->InMemory(id));
  EXPECT_EQ(Describe(id), in_memory);
  // A job that ran: its attempt, exit code and times come back from the store.
  const std::string ran = Submit("q", "mn");
  Settle();
  ASSERT_EQ(backend_.gangs.size(), 1u);
  backend_.Running(backend_.gangs[0], clock_.NowMillis());
  Settle();
  clock_.AdvanceMillis(500);
  for (const exec::NodeSpec& n : backend_.gangs[0].nodes)
    backend_.Exit(n.node, 0, clock_.NowMillis());
  Settle();
  EXPECT_FALSE(loop_->InMemory(ran));
  const Json stored = Describe(ran);
  EXPECT_EQ(stored["status"], "SUCCEEDED");
  ASSERT_EQ(stored["attempts"].size(), 1u);
  EXPECT_EQ(Describe(ran + "#2")["status"], "SUCCEEDED");
  // Tagged after it left: read back into memory, the same job plus the tag.
  const std::string arn = stored["jobArn"];
  ASSERT_TRUE(loop_->ChangeJobTags(Json{{"resourceArn", arn}, {"tags", {{"k", "v"}}}}, false).ok());
  ASSERT_TRUE(loop_->InMemory(ran));
  const Json tagged = Describe(ran);
  Json expected = stored;
  expected["tags"]["k"] = "v";
  EXPECT_EQ(tagged, expected);
  // Twice before it leaves again, and once after: each event has the next seq.
  ASSERT_TRUE(
      loop_->ChangeJobTags(Json{{"resourceArn", arn}, {"tags", {{"k2", "v"}}}}, false).ok());
  Settle();
  EXPECT_FALSE(loop_->InMemory(ran));
  ASSERT_TRUE(
      loop_->ChangeJobTags(Json{{"resourceArn", arn}, {"tagKeys", {"k"}}}, /*untag=*/true).ok());
  auto tags = loop_->ListJobTags(Json{{"resourceArn", arn}});
  ASSERT_TRUE(tags.ok());
  EXPECT_EQ((*tags)["tags"], (Json{{"k2", "v"}}));
  Settle();
  auto events = store_->JobEvents(ran);
  ASSERT_TRUE(events.ok());
  for (size_t i = 0; i < events->size(); ++i) EXPECT_EQ((*events)[i].seq, int64_t(i + 1));
  EXPECT_EQ(events->back().type, "TagsChanged");
  // Cancelling a finished job is a no-op, as AWS.
  EXPECT_TRUE(loop_->CancelJob(Json{{"jobId", id}, {"reason", "again"}}).ok());
  EXPECT_EQ(Describe(id), in_memory);
}

TEST_F(JobLoopTest, ListJobsPagesFinishedJobsByKeyAcrossInsertsAndRestarts) {
  std::vector<std::string> ids;
  auto cancelled = [&] {
    const std::string id = Submit("q", "d");
    EXPECT_TRUE(loop_->CancelJob(Json{{"jobId", id}, {"reason", "r"}}).ok());
    clock_.AdvanceMillis(1);
    ids.push_back(id);
  };
  for (int i = 0; i < 5; ++i) cancelled();
  Settle();  // they leave memory
  const Json request{{"jobQueue", "q"}, {"jobStatus", "FAILED"}, {"maxResults", 2}};
  std::vector<std::string> listed;
  Json page = ListPage(loop_.get(), request);
  for (const Json& j : page["jobSummaryList"]) listed.push_back(j["jobId"]);
  ASSERT_TRUE(page.contains("nextToken"));
  // Inserted meanwhile: one left memory, one still in it.
  cancelled();
  Settle();
  cancelled();
  ASSERT_TRUE(loop_->InMemory(ids.back()));
  while (page.contains("nextToken")) {
    Json next = request;
    next["nextToken"] = page["nextToken"];
    page = ListPage(loop_.get(), next);
    for (const Json& j : page["jobSummaryList"]) listed.push_back(j["jobId"]);
  }
  EXPECT_EQ(listed, ids);  // createdAt order, none twice, none missed
  Json bad = request;
  bad["nextToken"] = "2";
  auto refused = loop_->ListJobs(bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(refused.status().IsInvalidArgument());
  // With a filter: every status, newest first, from memory and the store.
  const std::string waiting = Submit("q", "d", Json{{"jobName", "t-waiting"}});
  Json filtered =
      ListPage(loop_.get(),
               Json{{"jobQueue", "q"}, {"filters", {{{"name", "JOB_NAME"}, {"values", {"t*"}}}}}});
  ASSERT_EQ(filtered["jobSummaryList"].size(), ids.size() + 1);
  EXPECT_EQ(filtered["jobSummaryList"][0]["jobId"], waiting);
  EXPECT_EQ(filtered["jobSummaryList"][1]["jobId"], ids.back());
  EXPECT_EQ(filtered["jobSummaryList"][ids.size()]["jobId"], ids.front());
  // After a restart only the waiting job is loaded; the rest read the same.
  Start();
  EXPECT_TRUE(loop_->InMemory(waiting));
  for (const std::string& id : ids) EXPECT_FALSE(loop_->InMemory(id)) << id;
  Json all = ListPage(loop_.get(), Json{{"jobQueue", "q"}, {"jobStatus", "FAILED"}});
  ASSERT_EQ(all["jobSummaryList"].size(), ids.size());
  EXPECT_EQ(all["jobSummaryList"][0]["jobId"], ids.front());
  EXPECT_NE(metrics_.Render().find("lote_jobs{queue=\"q\",status=\"FAILED\"} 7\n"),
            std::string::npos)
      << metrics_.Render();
  // The other filters, on jobs in the store (read from its indexes) and the
  // waiting one in memory: a definition by name and by ARN, and names that
  // match none.
  auto count = [&](const std::string& filter, const std::string& value) {
    return ListPage(loop_.get(),
                    Json{{"jobQueue", "q"},
                         {"filters", {{{"name", filter}, {"values", {value}}}}}})["jobSummaryList"]
        .size();
  };
  const std::string definition_arn = Describe(ids.front())["jobDefinition"];
  EXPECT_EQ(count("JOB_DEFINITION", "d"), ids.size() + 1);
  EXPECT_EQ(count("JOB_DEFINITION", "d*"), ids.size() + 1);
  EXPECT_EQ(count("JOB_DEFINITION", definition_arn), ids.size() + 1);
  EXPECT_EQ(count("JOB_DEFINITION", definition_arn + "9"), 0u);
  EXPECT_EQ(count("JOB_DEFINITION", "e*"), 0u);
  EXPECT_EQ(count("JOB_NAME", "no-such-job"), 0u);
  EXPECT_EQ(count("JOB_NAME", "T*"), ids.size() + 1);  // any case
}

TEST_F(JobLoopTest, DependenciesAndArraysReadFinishedJobsFromTheStore) {
  const std::string failed = Submit("q", "d");
  ASSERT_TRUE(loop_->CancelJob(Json{{"jobId", failed}, {"reason", "r"}}).ok());
  Settle();
  ASSERT_FALSE(loop_->InMemory(failed));
  const std::string dependent = Submit("q", "d", Json{{"dependsOn", {{{"jobId", failed}}}}});
  Settle();
  EXPECT_EQ(Describe(dependent)["status"], "FAILED");
  // An array cancelled while it waits: parent and children leave memory,
  // and its children are listed from the store in index order.
  const std::string array = Submit("q", "d", Json{{"arrayProperties", {{"size", 3}}}});
  ASSERT_TRUE(loop_->CancelJob(Json{{"jobId", array}, {"reason", "r"}}).ok());
  Settle();
  EXPECT_FALSE(loop_->InMemory(array));
  EXPECT_FALSE(loop_->InMemory(array + ":1"));
  Json children = ListPage(loop_.get(), Json{{"arrayJobId", array}, {"jobStatus", "FAILED"}});
  ASSERT_EQ(children["jobSummaryList"].size(), 3u);
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(children["jobSummaryList"][i]["jobId"], array + ":" + std::to_string(i));
  EXPECT_EQ(Describe(array)["arrayProperties"]["statusSummary"]["FAILED"], 3);
}

TEST_F(JobLoopTest, RetentionDeletesFinishedJobsThatEndedLongerAgo) {
  retention_ms_ = 10'000;
  Start();
  const std::string old_job = Submit("q", "d");
  const std::string array = Submit("q", "d", Json{{"arrayProperties", {{"size", 2}}}});
  ASSERT_TRUE(loop_->CancelJob(Json{{"jobId", old_job}, {"reason", "r"}}).ok());
  ASSERT_TRUE(loop_->CancelJob(Json{{"jobId", array}, {"reason", "r"}}).ok());
  Settle();
  clock_.AdvanceMillis(6'000);
  const std::string recent = Submit("q", "d");
  ASSERT_TRUE(loop_->CancelJob(Json{{"jobId", recent}, {"reason", "r"}}).ok());
  Settle();
  EXPECT_EQ(Describe(old_job)["status"], "FAILED");  // 6 s: kept
  clock_.AdvanceMillis(5'000);                       // 11 s after the first ended
  Settle();
  EXPECT_TRUE(Describe(old_job).is_null());
  EXPECT_TRUE(Describe(array).is_null());
  EXPECT_TRUE(Describe(array + ":1").is_null());
  auto events = store_->JobEvents(array + ":1");
  ASSERT_TRUE(events.ok());
  EXPECT_TRUE(events->empty());
  EXPECT_EQ(Describe(recent)["status"], "FAILED");
  // The deleted jobs' files went with them, the recent one's are kept.
  std::set<std::string> removed(backend_.removed_files.begin(), backend_.removed_files.end());
  EXPECT_EQ(removed, (std::set<std::string>{old_job, array, array + ":0", array + ":1"}));
  EXPECT_NE(metrics_.Render().find("lote_jobs{queue=\"q\",status=\"FAILED\"} 1\n"),
            std::string::npos)
      << metrics_.Render();
}

}  // namespace
}  // namespace lote::control
