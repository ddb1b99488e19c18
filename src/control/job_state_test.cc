#include "control/job_state.h"

#include <gtest/gtest.h>

#include <functional>
#include <optional>
#include <random>

#include "control/job_render.h"

namespace lote::control {
namespace {

ContainerSpec SmallContainer() {
  ContainerSpec c;
  c.image = "busybox";
  c.command = {"true"};
  c.resource_requirements = {{"VCPU", "1"}, {"MEMORY", "512"}};
  return c;
}

Job PlainJob(int32_t attempts = 1, std::vector<EvaluateOnExit> rules = {}) {
  Job job;
  job.id = "job-1";
  job.arn = "arn:aws:batch:us-east-1:123456789012:job/job-1";
  job.name = "j";
  job.queue_arn = "arn:aws:batch:us-east-1:123456789012:job-queue/q";
  job.definition_arn = "arn:aws:batch:us-east-1:123456789012:job-definition/d:1";
  job.definition_name = "d";
  job.definition_revision = 1;
  job.created_at = 100;
  job.container = SmallContainer();
  job.retry_strategy = {attempts, std::move(rules), attempts > 1};
  return job;
}

Job GangJob(int32_t nodes, int32_t attempts = 1) {
  Job job = PlainJob(attempts);
  job.container.reset();
  NodeProperties np;
  np.num_nodes = nodes;
  np.main_node = 0;
  np.ranges = {{0, nodes - 1, SmallContainer(), {}, {}}};
  job.node_properties = np;
  return job;
}

std::vector<ScheduledNode> Placement(int32_t nodes) {
  std::vector<ScheduledNode> out;
  for (int32_t i = 0; i < nodes; ++i) {
    out.push_back({i, "i-" + std::to_string(i), "127.0.1." + std::to_string(i + 1), {}});
  }
  return out;
}

// Applies events one by one (each must be accepted), checks that Replay and
// the events' Json round trip rebuild the same job, and returns it.
class History {
 public:
  explicit History(const Job& job) { Add(JobEvent::Submitted(job, job.created_at)); }
  const Job& Add(const JobEvent& e) {
    Result<Job> next = Apply(job_, e);
    EXPECT_TRUE(next.ok()) << JobEventTypeName(e.type) << ": " << next.status().ToString();
    if (next.ok()) {
      job_ = std::move(next).value();
      events_.push_back(e);
    }
    return job_;
  }
  const Job& job() const { return job_; }
  const std::vector<JobEvent>& events() const { return events_; }
  void ExpectReplayEqual() const {
    Result<Job> replayed = Replay(events_);
    ASSERT_TRUE(replayed.ok()) << replayed.status().ToString();
    EXPECT_EQ(*replayed, job_);
    std::vector<JobEvent> decoded;
    for (const JobEvent& e : events_) {
      Result<JobEvent> back = EventFromJson(ParseJson(EventToJson(e).dump()).value());
      ASSERT_TRUE(back.ok()) << EventToJson(e).dump() << ": " << back.status().ToString();
      EXPECT_EQ(*back, e) << JobEventTypeName(e.type);
      // What the journal stores is that Json, byte for byte.
      EXPECT_EQ(EventPayload(e), EventToJson(e).dump()) << JobEventTypeName(e.type);
      if (e.type == JobEventType::kSubmitted) {
        // A job's row holds its Submitted document while nothing else changed
        // it (JobLoop::FlushLocked): the same bytes as the job it makes.
        Result<Job> submitted = JobFromJson(e.job);
        ASSERT_TRUE(submitted.ok()) << submitted.status().ToString();
        EXPECT_EQ(JobToJson(*submitted).dump(), e.job.dump());
      }
      decoded.push_back(*back);
    }
    Result<Job> from_json = Replay(decoded);
    ASSERT_TRUE(from_json.ok());
    EXPECT_EQ(*from_json, job_);
    Result<Job> stored = JobFromJson(JobToJson(job_));
    ASSERT_TRUE(stored.ok());
    EXPECT_EQ(*stored, job_);
  }

 private:
  Job job_;
  std::vector<JobEvent> events_;
};

// A job driven to `status` by the usual events.
History JobIn(JobStatus status, Job job = PlainJob()) {
  History h(job);
  if (status == JobStatus::kSubmitted) return h;
  h.Add(JobEvent::DependenciesPending(110));
  if (status == JobStatus::kPending) return h;
  h.Add(JobEvent::DependenciesResolved(120));
  if (status == JobStatus::kRunnable) return h;
  h.Add(JobEvent::Scheduled("ce", Placement(job.NumNodes()), 130));
  if (status == JobStatus::kStarting) return h;
  for (int32_t i = 0; i < job.NumNodes(); ++i)
    h.Add(JobEvent::NodeStarted(1, i, "task-" + std::to_string(i), "d/default/t", 140));
  if (status == JobStatus::kRunning) return h;
  h.Add(JobEvent::NodeExited(1, 0, status == JobStatus::kSucceeded ? 0 : 3, 0, 150));
  return h;
}

enum class Outcome { kStatus, kUnchanged, kError };

struct TransitionCase {
  JobStatus from;
  JobEvent event;
  Outcome outcome;
  JobStatus want = JobStatus::kSubmitted;
};

TEST(JobState, TransitionTable) {
  using S = JobStatus;
  const auto status = [](S from, JobEvent e, S want) {
    return TransitionCase{from, std::move(e), Outcome::kStatus, want};
  };
  const auto same = [](S from, JobEvent e) {
    return TransitionCase{from, std::move(e), Outcome::kUnchanged};
  };
  const auto error = [](S from, JobEvent e) {
    return TransitionCase{from, std::move(e), Outcome::kError};
  };
  const int64_t t = 1000;
  std::vector<TransitionCase> cases = {
      status(S::kSubmitted, JobEvent::DependenciesPending(t), S::kPending),
      status(S::kSubmitted, JobEvent::DependenciesResolved(t), S::kRunnable),
      status(S::kSubmitted, JobEvent::DependencyFailed("dep", t), S::kFailed),
      status(S::kSubmitted, JobEvent::CancelRequested("user", t), S::kFailed),
      status(S::kSubmitted, JobEvent::TerminateRequested("user", t), S::kFailed),
      status(S::kSubmitted,
             JobEvent::AttemptFailed(0, FailureCategory::kCapacity, "never fits", -1, t),
             S::kFailed),
      status(S::kSubmitted, JobEvent::StatusReason("waiting", t), S::kSubmitted),
      status(S::kSubmitted, JobEvent::Progress(Json::object(), t), S::kSubmitted),
      error(S::kSubmitted, JobEvent::Scheduled("ce", Placement(1), t)),
      error(S::kSubmitted, JobEvent::ArrayChildrenUpdated({}, t)),
      error(S::kSubmitted, JobEvent::Submitted(PlainJob(), t)),
      same(S::kSubmitted, JobEvent::NodeStarted(1, 0, "", "", t)),
      same(S::kSubmitted, JobEvent::NodeExited(1, 0, 0, 0, t)),
      same(S::kSubmitted, JobEvent::TimedOut(1, t)),

      status(S::kPending, JobEvent::DependenciesPending(t), S::kPending),
      status(S::kPending, JobEvent::DependenciesResolved(t), S::kRunnable),
      status(S::kPending, JobEvent::DependencyFailed("dep", t), S::kFailed),
      status(S::kPending, JobEvent::CancelRequested("user", t), S::kFailed),
      status(S::kPending, JobEvent::TerminateRequested("user", t), S::kFailed),
      error(S::kPending, JobEvent::Scheduled("ce", Placement(1), t)),

      error(S::kRunnable, JobEvent::DependenciesPending(t)),
      same(S::kRunnable, JobEvent::DependenciesResolved(t)),
      error(S::kRunnable, JobEvent::DependencyFailed("dep", t)),
      status(S::kRunnable, JobEvent::Scheduled("ce", Placement(1), t), S::kStarting),
      error(S::kRunnable, JobEvent::Scheduled("ce", Placement(2), t)),
      status(S::kRunnable, JobEvent::StatusReason("waiting for 1 node", t), S::kRunnable),
      status(S::kRunnable, JobEvent::CancelRequested("user", t), S::kFailed),
      status(S::kRunnable, JobEvent::TerminateRequested("user", t), S::kFailed),
      status(S::kRunnable,
             JobEvent::AttemptFailed(0, FailureCategory::kCapacity, "never fits", -1, t),
             S::kFailed),
      same(S::kRunnable, JobEvent::NodeExited(1, 0, 0, 0, t)),
      same(S::kRunnable, JobEvent::AttemptFailed(1, FailureCategory::kNodeLost, "gone", 0, t)),

      status(S::kStarting, JobEvent::NodeStarted(1, 0, "task", "stream", t), S::kRunning),
      same(S::kStarting, JobEvent::NodeStarted(2, 0, "task", "stream", t)),
      status(S::kStarting, JobEvent::NodeExited(1, 0, 0, 0, t), S::kSucceeded),
      status(S::kStarting, JobEvent::NodeExited(1, 0, 1, 0, t), S::kFailed),
      error(S::kStarting, JobEvent::NodeExited(1, 5, 1, 0, t)),
      same(S::kStarting, JobEvent::CancelRequested("user", t)),
      status(S::kStarting, JobEvent::TerminateRequested("user", t), S::kFailed),
      status(S::kStarting, JobEvent::TimedOut(1, t), S::kFailed),
      status(S::kStarting,
             JobEvent::AttemptFailed(1, FailureCategory::kInfrastructure, "linuxParameters.devices",
                                     -1, t),
             S::kFailed),
      status(S::kStarting,
             JobEvent::AttemptFailed(0, FailureCategory::kInfrastructure, "launch failed", -1, t),
             S::kFailed),
      error(S::kStarting, JobEvent::Scheduled("ce", Placement(1), t)),
      error(S::kStarting, JobEvent::DependenciesResolved(t)),
      same(S::kStarting, JobEvent::StatusReason("late scheduler note", t)),

      status(S::kRunning, JobEvent::NodeExited(1, 0, 0, 0, t), S::kSucceeded),
      status(S::kRunning, JobEvent::NodeExited(1, 0, 2, 0, t), S::kFailed),
      status(S::kRunning, JobEvent::NodeExited(1, 0, 0, 9, t), S::kFailed),
      same(S::kRunning, JobEvent::NodeExited(2, 0, 0, 0, t)),
      same(S::kRunning, JobEvent::NodeStarted(1, 0, "again", "again", t)),
      same(S::kRunning, JobEvent::CancelRequested("user", t)),
      status(S::kRunning, JobEvent::TerminateRequested("user", t), S::kFailed),
      status(S::kRunning, JobEvent::TimedOut(1, t), S::kFailed),
      same(S::kRunning, JobEvent::TimedOut(2, t)),
      status(S::kRunning,
             JobEvent::AttemptFailed(1, FailureCategory::kNodeLost, "process vanished", 0, t),
             S::kFailed),
      error(S::kRunning, JobEvent::AttemptFailed(1, FailureCategory::kNone, "no category", 0, t)),
      status(S::kRunning, JobEvent::Progress(Json{{"step", 3}}, t), S::kRunning),
      error(S::kRunning, JobEvent::Progress(Json(3), t)),
      error(S::kRunning, JobEvent::DependenciesPending(t)),

      same(S::kSucceeded, JobEvent::CancelRequested("user", t)),
      same(S::kSucceeded, JobEvent::TerminateRequested("user", t)),
      same(S::kSucceeded, JobEvent::NodeExited(1, 0, 1, 0, t)),
      same(S::kSucceeded, JobEvent::TimedOut(1, t)),
      same(S::kSucceeded, JobEvent::DependencyFailed("dep", t)),
      error(S::kSucceeded, JobEvent::DependenciesResolved(t)),
      error(S::kSucceeded, JobEvent::Scheduled("ce", Placement(1), t)),

      same(S::kFailed, JobEvent::TerminateRequested("user", t)),
      same(S::kFailed, JobEvent::CancelRequested("user", t)),
      same(S::kFailed, JobEvent::AttemptFailed(1, FailureCategory::kNodeLost, "late", 0, t)),
      error(S::kFailed, JobEvent::Scheduled("ce", Placement(1), t)),
  };
  for (const TransitionCase& c : cases) {
    History h = JobIn(c.from);
    const Job before = h.job();
    ASSERT_EQ(before.status, c.from);
    Result<Job> after = Apply(before, c.event);
    const std::string label =
        std::string(JobStatusName(c.from)) + " + " + std::string(JobEventTypeName(c.event.type));
    switch (c.outcome) {
      case Outcome::kError:
        ASSERT_FALSE(after.ok()) << label;
        EXPECT_TRUE(after.status().IsFailedPrecondition() || after.status().IsInvalidArgument())
            << label;
        break;
      case Outcome::kUnchanged:
        ASSERT_TRUE(after.ok()) << label << ": " << after.status().ToString();
        EXPECT_EQ(*after, before) << label;
        break;
      case Outcome::kStatus:
        ASSERT_TRUE(after.ok()) << label << ": " << after.status().ToString();
        EXPECT_EQ(after->status, c.want) << label;
        if (IsFinal(c.want)) {
          EXPECT_EQ(after->stopped_at, c.event.at_ms) << label;
        } else {
          EXPECT_EQ(after->stopped_at, 0) << label;
        }
        h.Add(c.event);
        h.ExpectReplayEqual();
        break;
    }
  }
}

TEST(JobState, SuccessfulRunRecordsAttempt) {
  History h(PlainJob());
  h.Add(JobEvent::DependenciesResolved(110));
  h.Add(JobEvent::StatusReason(
      "waiting for 1 node (1 vCPU, 512 MiB): compute environment ce has 0 free of 1", 115));
  EXPECT_NE(h.job().status_reason.find("waiting"), std::string::npos);
  h.Add(JobEvent::Scheduled("ce", Placement(1), 120));
  EXPECT_EQ(h.job().status_reason, "");
  EXPECT_EQ(h.job().started_at, 0);
  h.Add(JobEvent::NodeStarted(1, 0, "arn:task/1", "d/default/abc", 130));
  EXPECT_EQ(h.job().started_at, 130);
  h.Add(JobEvent::Progress(Json{{"step", 10}, {"loss", 1.5}}, 135));
  const Job& job = h.Add(JobEvent::NodeExited(1, 0, 0, 0, 140));
  EXPECT_EQ(job.status, JobStatus::kSucceeded);
  EXPECT_EQ(job.status_reason, kEssentialContainerExited);
  EXPECT_EQ(job.stopped_at, 140);
  EXPECT_EQ(job.progress["step"], 10);
  ASSERT_EQ(job.attempts.size(), 1u);
  const Attempt& a = job.attempts[0];
  EXPECT_EQ(a.compute_environment, "ce");
  EXPECT_EQ(a.started_at, 130);
  EXPECT_EQ(a.stopped_at, 140);
  EXPECT_EQ(a.failure_category, FailureCategory::kNone);
  ASSERT_EQ(a.nodes.size(), 1u);
  EXPECT_EQ(a.nodes[0].exit_code, 0);
  EXPECT_EQ(a.nodes[0].log_stream_name, "d/default/abc");
  EXPECT_EQ(a.nodes[0].task_arn, "arn:task/1");
  EXPECT_EQ(a.nodes[0].private_ipv4, "127.0.1.1");
  h.ExpectReplayEqual();
}

TEST(JobState, AnImagePullIsKeptWithItsNodeAndShownInTheTimeline) {
  History h(GangJob(2));
  h.Add(JobEvent::DependenciesResolved(110));
  h.Add(JobEvent::Scheduled("ce", Placement(2), 120));
  h.Add(JobEvent::NodeStarted(1, 0, "task-0", "d/default/t0", 130));
  h.Add(JobEvent::NodeStarted(1, 1, "task-1", "d/default/t1", 131));
  h.Add(JobEvent::NodePulled(1, 1, 124, 129, 150));  // node 1 pulled; node 0 found it cached
  h.Add(JobEvent::NodePulled(7, 0, 1, 2, 150));      // an attempt that does not exist: stale
  const Job& job = h.Add(JobEvent::NodeExited(1, 0, 0, 0, 150));
  EXPECT_EQ(job.status, JobStatus::kSucceeded);
  const NodeAttempt& pulled = job.attempts[0].nodes[1];
  EXPECT_EQ(pulled.pull_started_at, 124);
  EXPECT_EQ(pulled.pull_stopped_at, 129);
  EXPECT_EQ(job.attempts[0].nodes[0].pull_started_at, 0);
  h.ExpectReplayEqual();
  const Json timeline = DescribeJobJson(job)["attempts"][0]["loteTimeline"]["nodes"];
  ASSERT_EQ(timeline.size(), 2u);
  EXPECT_FALSE(timeline[0].contains("pullStartedAt")) << timeline.dump();
  EXPECT_EQ(timeline[1]["pullStartedAt"], 124) << timeline.dump();
  EXPECT_EQ(timeline[1]["pullStoppedAt"], 129) << timeline.dump();
  EXPECT_FALSE(Apply(job, JobEvent::NodePulled(1, 5, 1, 2, 160)).ok()) << "node 5 does not exist";
}

// A node that survived an injected fault (a checkpoint upload failure) and
// exited 0: the job succeeds as usual, and the fault's sentence stays with
// the node as a notice, so DescribeJobs shows it was injected.
TEST(JobState, ASurvivedInjectedFaultIsShownWithTheSucceededAttempt) {
  History h = JobIn(JobStatus::kRunning, GangJob(2));
  const std::string node1 = "Injected fault: checkpoint writes of node 1 fail for 20 s from step 4";
  const std::string node0 = "Injected fault: checkpoint writes of node 0 fail for 20 s from step 4";
  h.Add(JobEvent::NodeExited(1, 1, 0, 0, 150, node1));
  const Job& job = h.Add(JobEvent::NodeExited(1, 0, 0, 0, 160, node0));
  EXPECT_EQ(job.status, JobStatus::kSucceeded);
  EXPECT_EQ(job.status_reason, kEssentialContainerExited);
  EXPECT_EQ(job.attempts[0].status_reason, kEssentialContainerExited);
  EXPECT_EQ(job.attempts[0].nodes[0].notices, std::vector<std::string>{node0});
  EXPECT_EQ(job.attempts[0].nodes[1].notices, std::vector<std::string>{node1});
  h.ExpectReplayEqual();
  const Json attempt = DescribeJobJson(job)["attempts"][0];
  EXPECT_EQ(attempt["statusReason"], kEssentialContainerExited);
  EXPECT_EQ(attempt["container"]["reason"],
            std::string(kEssentialContainerExited) + " (lote: " + node0 + ")")
      << attempt.dump();
  EXPECT_EQ(attempt["container"]["loteNotices"], Json::array({node0}));
  // A plain success says nothing more.
  const Job plain = JobIn(JobStatus::kSucceeded).job();
  EXPECT_TRUE(plain.attempts[0].nodes[0].notices.empty());
}

// A slowed node stopped with its gang (its main node finished first): the
// sentence of its late end stays with it.
TEST(JobState, AnInjectedFaultOfANodeStoppedWithItsGangIsKept) {
  History h = JobIn(JobStatus::kRunning, GangJob(2));
  const std::string slowed = "Injected fault: node 1 slowed to 25% of its CPU time";
  h.Add(JobEvent::NodeExited(1, 0, 0, 0, 150));
  const Job& job = h.Add(JobEvent::NodeExited(1, 1, 0, 15, 160, slowed));
  EXPECT_EQ(job.status, JobStatus::kSucceeded);
  EXPECT_EQ(job.attempts[0].nodes[1].notices, std::vector<std::string>{slowed});
  EXPECT_TRUE(job.attempts[0].nodes[0].notices.empty());
  h.ExpectReplayEqual();
}

TEST(JobState, UserErrorRetriedThenSucceeds) {
  History h = JobIn(JobStatus::kRunning, PlainJob(3));
  const Job& failed_once = h.Add(JobEvent::NodeExited(1, 0, 3, 0, 200));
  EXPECT_EQ(failed_once.status, JobStatus::kRunnable);
  EXPECT_EQ(failed_once.stopped_at, 0);
  EXPECT_EQ(failed_once.failure_category, FailureCategory::kUserError);
  EXPECT_NE(failed_once.status_reason.find(
                "attempt 1 of 3 failed (USER_ERROR: Essential container in task exited)"),
            std::string::npos);
  ASSERT_EQ(failed_once.attempts.size(), 1u);
  EXPECT_EQ(failed_once.attempts[0].reason, "USER_ERROR: Essential container in task exited");
  EXPECT_EQ(failed_once.attempts[0].status_reason, kEssentialContainerExited);
  EXPECT_EQ(failed_once.attempts[0].nodes[0].exit_code, 3);
  EXPECT_EQ(failed_once.attempts[0].nodes[0].status, JobStatus::kFailed);
  EXPECT_EQ(failed_once.attempts[0].stopped_at, 200);
  // A late event of attempt 1 is ignored.
  h.Add(JobEvent::NodeExited(1, 0, 0, 0, 205));
  EXPECT_EQ(h.job().status, JobStatus::kRunnable);
  h.Add(JobEvent::Scheduled("ce", Placement(1), 210));
  h.Add(JobEvent::NodeStarted(2, 0, "t2", "s2", 220));
  EXPECT_EQ(h.job().started_at, 220);
  const Job& done = h.Add(JobEvent::NodeExited(2, 0, 0, 0, 230));
  EXPECT_EQ(done.status, JobStatus::kSucceeded);
  EXPECT_EQ(done.attempts.size(), 2u);
  h.ExpectReplayEqual();
}

TEST(JobState, PreemptedExitIsRetriedWithoutConsumingAnAttempt) {
  // attempts=1: a user error would end the job; a preemption (exit 75) does not.
  History h = JobIn(JobStatus::kRunning, PlainJob(1));
  const Job& preempted = h.Add(JobEvent::NodeExited(1, 0, kPreemptedExitCode, 0, 200));
  EXPECT_EQ(preempted.status, JobStatus::kRunnable);
  EXPECT_EQ(preempted.attempts[0].failure_category, FailureCategory::kPreempted);
  EXPECT_EQ(preempted.attempts[0].nodes[0].exit_code, kPreemptedExitCode);
  h.Add(JobEvent::Scheduled("ce", Placement(1), 210));
  h.Add(JobEvent::NodeStarted(2, 0, "", "", 220));
  const Job& done = h.Add(JobEvent::NodeExited(2, 0, 0, 0, 230));
  EXPECT_EQ(done.status, JobStatus::kSucceeded);
  // The same job with an ordinary failure (exit 3) ends at once.
  History u = JobIn(JobStatus::kRunning, PlainJob(1));
  EXPECT_EQ(u.Add(JobEvent::NodeExited(1, 0, 3, 0, 200)).status, JobStatus::kFailed);
  h.ExpectReplayEqual();
}

TEST(JobState, RetriesExhausted) {
  History h = JobIn(JobStatus::kRunning, PlainJob(2));
  h.Add(JobEvent::NodeExited(1, 0, 1, 0, 200));
  h.Add(JobEvent::Scheduled("ce", Placement(1), 210));
  h.Add(JobEvent::NodeStarted(2, 0, "", "", 220));
  const Job& job = h.Add(JobEvent::NodeExited(2, 0, 0, 9, 230));
  EXPECT_EQ(job.status, JobStatus::kFailed);
  EXPECT_EQ(job.status_reason, kEssentialContainerExited);
  EXPECT_EQ(job.attempts.size(), 2u);
  EXPECT_EQ(job.attempts[1].nodes[0].exit_code, 137);  // SIGKILL
  EXPECT_EQ(job.stopped_at, 230);
  h.ExpectReplayEqual();
}

TEST(JobState, EvaluateOnExitDecidesRetry) {
  struct Case {
    std::string name;
    std::vector<EvaluateOnExit> rules;
    int32_t exit_code;
    JobStatus want;
  };
  std::vector<Case> cases = {
      {"no rules: retry", {}, 3, JobStatus::kRunnable},
      {"exit on code", {{"", "", "3", RetryAction::kExit, ""}}, 3, JobStatus::kFailed},
      {"exit on other code: none matches, retry",
       {{"", "", "4", RetryAction::kExit, ""}},
       3,
       JobStatus::kRunnable},
      {"exit on code prefix", {{"", "", "1*", RetryAction::kExit, ""}}, 137, JobStatus::kFailed},
      {"retry on category then exit all",
       {{"", "USER_ERROR:*", "", RetryAction::kRetry, ""}, {"", "*", "", RetryAction::kExit, ""}},
       3,
       JobStatus::kRunnable},
      {"retry on node lost only",
       {{"", "NODE_LOST*", "", RetryAction::kRetry, ""}, {"", "*", "", RetryAction::kExit, ""}},
       3,
       JobStatus::kFailed},
      {"status reason exact",
       {{kEssentialContainerExited, "", "", RetryAction::kExit, ""}},
       3,
       JobStatus::kFailed},
      {"all conditions must match",
       {{kEssentialContainerExited, "", "4", RetryAction::kExit, ""}},
       3,
       JobStatus::kRunnable},
  };
  for (const Case& c : cases) {
    History h = JobIn(JobStatus::kRunning, PlainJob(3, c.rules));
    const Job& job = h.Add(JobEvent::NodeExited(1, 0, c.exit_code, 0, 200));
    EXPECT_EQ(job.status, c.want) << c.name;
    h.ExpectReplayEqual();
  }
}

TEST(JobState, TimeoutTerminateAndCapacityAreNotRetried) {
  {
    History h = JobIn(JobStatus::kRunning, PlainJob(5));
    const Job& job = h.Add(JobEvent::TimedOut(1, 999));
    EXPECT_EQ(job.status, JobStatus::kFailed);
    EXPECT_EQ(job.status_reason, kTimeoutReason);
    EXPECT_EQ(job.failure_category, FailureCategory::kTimeout);
    EXPECT_EQ(job.attempts[0].reason, std::string("TIMEOUT: ") + kTimeoutReason);
    h.ExpectReplayEqual();
  }
  {
    History h = JobIn(JobStatus::kRunning, PlainJob(5));
    const Job& job = h.Add(JobEvent::TerminateRequested("stop it", 999));
    EXPECT_EQ(job.status, JobStatus::kFailed);
    EXPECT_EQ(job.status_reason, "stop it");
    EXPECT_TRUE(job.is_terminated);
    EXPECT_FALSE(job.is_cancelled);
    EXPECT_EQ(job.failure_category, FailureCategory::kTerminated);
    EXPECT_EQ(job.attempts[0].reason, "TERMINATED: stop it");
    // The node's exit after the kill changes nothing.
    h.Add(JobEvent::NodeExited(1, 0, 0, 15, 1000));
    EXPECT_EQ(h.job().status, JobStatus::kFailed);
    h.ExpectReplayEqual();
  }
  {
    History h = JobIn(JobStatus::kRunnable, PlainJob(5));
    const Job& job = h.Add(
        JobEvent::AttemptFailed(0, FailureCategory::kCapacity, "can never run: too big", -1, 999));
    EXPECT_EQ(job.status, JobStatus::kFailed);
    EXPECT_EQ(job.status_reason, "CAPACITY: can never run: too big");
    EXPECT_EQ(job.failure_category, FailureCategory::kCapacity);
    EXPECT_TRUE(job.attempts.empty());
    h.ExpectReplayEqual();
  }
  {
    History h = JobIn(JobStatus::kRunning, PlainJob(2));
    const Job& job = h.Add(
        JobEvent::AttemptFailed(1, FailureCategory::kNodeLost, "process 42 vanished", 0, 999));
    EXPECT_EQ(job.status, JobStatus::kRunnable);
    EXPECT_EQ(job.attempts[0].reason, "NODE_LOST: process 42 vanished");
    EXPECT_FALSE(job.attempts[0].nodes[0].exit_code.has_value());
    h.ExpectReplayEqual();
  }
}

TEST(JobState, CancelBeforeStartingOnly) {
  History pending = JobIn(JobStatus::kPending);
  const Job& cancelled = pending.Add(JobEvent::CancelRequested("no longer needed", 500));
  EXPECT_EQ(cancelled.status, JobStatus::kFailed);
  EXPECT_EQ(cancelled.status_reason, "no longer needed");
  EXPECT_TRUE(cancelled.is_cancelled);
  EXPECT_TRUE(cancelled.attempts.empty());
  pending.ExpectReplayEqual();

  History running = JobIn(JobStatus::kRunning);
  const Job before = running.job();
  const Job& after = running.Add(JobEvent::CancelRequested("too late", 500));
  EXPECT_EQ(after, before);
}

TEST(JobState, DependencyFailureUsesAwsReason) {
  History h = JobIn(JobStatus::kPending);
  const Job& job = h.Add(JobEvent::DependencyFailed("other", 300));
  EXPECT_EQ(job.status, JobStatus::kFailed);
  EXPECT_EQ(job.status_reason, "Dependent Job failed");
  EXPECT_EQ(job.stopped_at, 300);
  h.ExpectReplayEqual();
}

// A gang whose launch failed (no node ever ran): every node has the
// attempt's one reason, whichever node's start failed.
TEST(JobState, AFailedLaunchGivesEveryNodeOneReason) {
  History h = JobIn(JobStatus::kStarting, GangJob(4, 2));
  const Job& failed =
      h.Add(JobEvent::AttemptFailed(1, FailureCategory::kUserError, "exec: no such file", 2, 150));
  const Attempt& a = failed.attempts[0];
  EXPECT_EQ(a.reason, "USER_ERROR: exec: no such file");
  for (const NodeAttempt& n : a.nodes) {
    EXPECT_EQ(n.reason, a.reason) << n.node_index;
    EXPECT_EQ(n.status, JobStatus::kFailed);
  }
}

TEST(JobState, GangAttemptFailsAsAWholeAndRetries) {
  History h = JobIn(JobStatus::kStarting, GangJob(4, 2));
  // Children first: the job is RUNNING only once the main node runs.
  h.Add(JobEvent::NodeStarted(1, 1, "t1", "s1", 140));
  h.Add(JobEvent::NodeStarted(1, 2, "t2", "s2", 141));
  h.Add(JobEvent::NodeStarted(1, 3, "t3", "s3", 141));
  EXPECT_EQ(h.job().status, JobStatus::kStarting);
  h.Add(JobEvent::NodeStarted(1, 0, "t0", "s0", 142));
  EXPECT_EQ(h.job().status, JobStatus::kRunning);
  EXPECT_EQ(h.job().started_at, 142);
  // A child that finishes cleanly does not end the gang.
  h.Add(JobEvent::NodeExited(1, 2, 0, 0, 150));
  EXPECT_EQ(h.job().status, JobStatus::kRunning);
  // A child that fails fails the attempt and every node.
  const Job& failed = h.Add(JobEvent::NodeExited(1, 3, 1, 0, 160));
  EXPECT_EQ(failed.status, JobStatus::kRunnable);
  const Attempt& a = failed.attempts[0];
  EXPECT_EQ(a.failed_node, 3);
  EXPECT_EQ(a.failure_category, FailureCategory::kUserError);
  EXPECT_EQ(a.nodes[3].exit_code, 1);
  EXPECT_EQ(a.nodes[3].status, JobStatus::kFailed);
  EXPECT_EQ(a.nodes[2].status, JobStatus::kSucceeded);
  EXPECT_EQ(a.nodes[0].status, JobStatus::kFailed);
  EXPECT_EQ(a.nodes[1].status, JobStatus::kFailed);
  EXPECT_NE(a.nodes[0].reason.find("node 3 failed the attempt"), std::string::npos);
  EXPECT_EQ(a.nodes[0].stopped_at, 160);
  // A torn-down node's own exit, reported later, gives it its exit code and
  // changes nothing else.
  const Job before_late = h.job();
  h.Add(JobEvent::NodeExited(1, 0, 143, 0, 161));
  EXPECT_EQ(h.job().attempts[0].nodes[0].exit_code, 143);
  EXPECT_EQ(h.job().attempts[0].nodes[0].stopped_at, 160);
  EXPECT_EQ(h.job().status, before_late.status);
  EXPECT_EQ(h.job().attempts[0].reason, before_late.attempts[0].reason);
  // Attempt 2: the main node's exit decides; running children are stopped.
  h.Add(JobEvent::Scheduled("ce", Placement(4), 170));
  for (int32_t i = 0; i < 4; ++i) h.Add(JobEvent::NodeStarted(2, i, "", "", 180));
  const Job& done = h.Add(JobEvent::NodeExited(2, 0, 0, 0, 190));
  EXPECT_EQ(done.status, JobStatus::kSucceeded);
  EXPECT_EQ(done.attempts.size(), 2u);
  for (const NodeAttempt& n : done.attempts[1].nodes) EXPECT_EQ(n.status, JobStatus::kSucceeded);
  h.ExpectReplayEqual();

  Result<Job> node3 = NodeJob(done, 3);
  ASSERT_TRUE(node3.ok());
  EXPECT_EQ(node3->attempts.size(), 2u);
  EXPECT_EQ(node3->attempts[0].nodes[0].exit_code, 1);
}

TEST(JobState, GangNodeLostFailsTheJobWithoutRetries) {
  History h = JobIn(JobStatus::kRunning, GangJob(2, 1));
  const Job& job =
      h.Add(JobEvent::AttemptFailed(1, FailureCategory::kNodeLost, "node 1 disappeared", 1, 300));
  EXPECT_EQ(job.status, JobStatus::kFailed);
  EXPECT_EQ(job.status_reason, "node 1 disappeared");
  EXPECT_EQ(job.failure_category, FailureCategory::kNodeLost);
  EXPECT_EQ(job.attempts[0].nodes[1].reason, "NODE_LOST: node 1 disappeared");
  h.ExpectReplayEqual();
}

Job ArrayParent(int32_t size) {
  Job job = PlainJob();
  job.array = ArrayInfo{size, -1, {}, 0};
  return job;
}

TEST(JobState, ArrayParentFollowsChildren) {
  struct Case {
    std::vector<JobStatus> children;
    JobStatus want;
  };
  using S = JobStatus;
  std::vector<Case> cases = {
      {{S::kSubmitted, S::kSubmitted, S::kSubmitted}, S::kSubmitted},
      {{S::kSubmitted, S::kRunnable, S::kSubmitted}, S::kPending},
      {{S::kPending, S::kPending, S::kPending}, S::kPending},
      {{S::kRunning, S::kSucceeded, S::kStarting}, S::kPending},
      {{S::kSucceeded, S::kFailed, S::kRunning}, S::kPending},
      {{S::kSucceeded, S::kSucceeded, S::kSucceeded}, S::kSucceeded},
      {{S::kSucceeded, S::kFailed, S::kSucceeded}, S::kFailed},
  };
  for (const Case& c : cases) {
    History h(ArrayParent(3));
    const Job& job = h.Add(JobEvent::ArrayChildrenUpdated(CountStatuses(c.children), 700));
    EXPECT_EQ(job.status, c.want);
    EXPECT_EQ(job.array->status_summary.size(), 7u);
    EXPECT_EQ(job.array->status_summary_updated_at, 700);
    int32_t total = 0;
    for (const auto& [k, v] : job.array->status_summary) total += v;
    EXPECT_EQ(total, 3);
    if (c.want == S::kFailed) {
      EXPECT_EQ(job.status_reason, "1 of 3 child jobs failed");
    }
    h.ExpectReplayEqual();
  }
  History h(ArrayParent(3));
  EXPECT_FALSE(
      Apply(h.job(), JobEvent::ArrayChildrenUpdated(CountStatuses({S::kRunning}), 1)).ok());
  EXPECT_FALSE(Apply(h.job(), JobEvent::ArrayChildrenUpdated({{"DONE", 3}}, 1)).ok());
  EXPECT_FALSE(Apply(h.job(), JobEvent::Scheduled("ce", Placement(1), 1)).ok());
}

TEST(JobState, ArrayParentCancelWaitsForChildren) {
  History h(ArrayParent(2));
  h.Add(JobEvent::ArrayChildrenUpdated(CountStatuses({JobStatus::kRunnable, JobStatus::kPending}),
                                       10));
  const Job& marked = h.Add(JobEvent::CancelRequested("stop the sweep", 20));
  EXPECT_EQ(marked.status, JobStatus::kPending);
  EXPECT_TRUE(marked.is_cancelled);
  const Job& done = h.Add(
      JobEvent::ArrayChildrenUpdated(CountStatuses({JobStatus::kFailed, JobStatus::kFailed}), 30));
  EXPECT_EQ(done.status, JobStatus::kFailed);
  EXPECT_EQ(done.status_reason, "stop the sweep");
  EXPECT_EQ(done.stopped_at, 30);
  h.ExpectReplayEqual();
}

TEST(JobState, ReplayErrors) {
  EXPECT_FALSE(Replay({}).ok());
  EXPECT_FALSE(Replay({JobEvent::DependenciesResolved(1)}).ok());
  EXPECT_FALSE(
      Replay({JobEvent::Submitted(PlainJob(), 1), JobEvent::Submitted(PlainJob(), 2)}).ok());
  Job running = PlainJob();
  running.status = JobStatus::kRunning;
  EXPECT_FALSE(Replay({JobEvent::Submitted(running, 1)}).ok());
  EXPECT_FALSE(EventFromJson(Json::parse(R"({"type":"Exploded","at":1})")).ok());
  EXPECT_FALSE(EventFromJson(Json::parse(R"({"type":"Submitted"})")).ok());
}

TEST(GlobMatches, Table) {
  struct Case {
    std::string pattern, text;
    bool want;
  };
  std::vector<Case> cases = {
      {"*", "", true},
      {"*", "anything", true},
      {"137", "137", true},
      {"137", "1370", false},
      {"13*", "137", true},
      {"13*", "13", true},
      {"13*", "1", false},
      {"USER_ERROR:*", "USER_ERROR: Essential container in task exited", true},
      {"USER_ERROR", "USER_ERROR: Essential container in task exited", false},
      {"Host EC2*", "Host EC2 (instance i-1) terminated.", true},
      {"host ec2*", "Host EC2 (instance i-1) terminated.", false},
      {"", "", true},
  };
  for (const Case& c : cases)
    EXPECT_EQ(GlobMatches(c.pattern, c.text), c.want) << c.pattern << " vs " << c.text;
}

TEST(ShouldRetry, Table) {
  AttemptOutcome user{kEssentialContainerExited, "USER_ERROR: Essential container in task exited",
                      1};
  AttemptOutcome lost{"gone", "NODE_LOST: gone", std::nullopt};
  RetryStrategy three{3, {}, true};
  RetryStrategy exit_on_code{3, {{"", "", "*", RetryAction::kExit, ""}}, true};
  struct Case {
    std::string name;
    RetryStrategy strategy;
    int32_t made;
    FailureCategory category;
    AttemptOutcome outcome;
    bool want;
  };
  std::vector<Case> cases = {
      {"default one attempt", RetryStrategy{}, 1, FailureCategory::kUserError, user, false},
      {"attempts remain", three, 1, FailureCategory::kUserError, user, true},
      {"last attempt", three, 3, FailureCategory::kUserError, user, false},
      {"timeout never", three, 1, FailureCategory::kTimeout, user, false},
      {"terminated never", three, 1, FailureCategory::kTerminated, user, false},
      {"capacity never", three, 1, FailureCategory::kCapacity, user, false},
      {"infrastructure retried", three, 1, FailureCategory::kInfrastructure, lost, true},
      {"exit on any code", exit_on_code, 1, FailureCategory::kUserError, user, false},
      {"code rule skips outcome without code", exit_on_code, 1, FailureCategory::kNodeLost, lost,
       true},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(ShouldRetry(c.strategy, c.made, c.category, c.outcome), c.want) << c.name;
  }
}

TEST(JobState, AttemptDeadline) {
  Job job = PlainJob();
  job.timeout_seconds = 60;
  History h = JobIn(JobStatus::kStarting, job);
  EXPECT_FALSE(AttemptDeadlineMs(h.job()).has_value());  // measured from RUNNING
  h.Add(JobEvent::NodeStarted(1, 0, "", "", 5000));
  EXPECT_EQ(AttemptDeadlineMs(h.job()), 65000);
  EXPECT_FALSE(AttemptDeadlineMs(JobIn(JobStatus::kRunning).job()).has_value());  // no timeout
}

TEST(JobState, DependencyEventTable) {
  using S = JobStatus;
  struct Case {
    std::string name;
    JobStatus job_status;
    std::map<std::string, S> deps;  // missing = does not exist
    std::vector<std::string> wait_for;
    std::optional<JobEventType> want;
  };
  std::vector<Case> cases = {
      {"no deps: runnable", S::kSubmitted, {}, {}, JobEventType::kDependenciesResolved},
      {"waiting: pending",
       S::kSubmitted,
       {{"a", S::kRunning}},
       {"a"},
       JobEventType::kDependenciesPending},
      {"still waiting in pending", S::kPending, {{"a", S::kRunnable}}, {"a"}, std::nullopt},
      {"all succeeded",
       S::kPending,
       {{"a", S::kSucceeded}, {"b", S::kSucceeded}},
       {"a", "b"},
       JobEventType::kDependenciesResolved},
      {"one failed",
       S::kPending,
       {{"a", S::kSucceeded}, {"b", S::kFailed}},
       {"a", "b"},
       JobEventType::kDependencyFailed},
      {"missing dependency", S::kSubmitted, {}, {"ghost"}, JobEventType::kDependencyFailed},
      {"not waiting anymore", S::kRunnable, {}, {}, std::nullopt},
  };
  for (const Case& c : cases) {
    Job job = PlainJob();
    job.id = "x";
    job.status = c.job_status;
    job.wait_for = c.wait_for;
    auto status_of = [&](const std::string& id) -> std::optional<S> {
      auto it = c.deps.find(id);
      if (it == c.deps.end()) return std::nullopt;
      return it->second;
    };
    std::optional<JobEvent> e = DependencyEvent(job, status_of, 42);
    ASSERT_EQ(e.has_value(), c.want.has_value()) << c.name;
    if (e) {
      EXPECT_EQ(e->type, *c.want) << c.name;
      EXPECT_EQ(e->at_ms, 42);
      EXPECT_TRUE(Apply(job, *e).ok()) << c.name;
    }
  }
  EXPECT_FALSE(DependencyEvent(
      ArrayParent(2), [](const std::string&) { return std::optional<S>(); }, 1));
}

TEST(JobState, SequentialArrayChildrenRunInOrder) {
  // Three SEQUENTIAL children: child i may run only when child i-1 SUCCEEDED.
  std::vector<History> children;
  for (int32_t i = 0; i < 3; ++i) {
    Job c = PlainJob();
    c.id = "arr:" + std::to_string(i);
    c.array = ArrayInfo{3, i, {}, 0};
    c.array_parent_id = "arr";
    if (i > 0) c.wait_for = {"arr:" + std::to_string(i - 1)};
    children.emplace_back(c);
  }
  auto status_of = [&](const std::string& id) -> std::optional<JobStatus> {
    for (const History& h : children) {
      if (h.job().id == id) return h.job().status;
    }
    return std::nullopt;
  };
  auto evaluate = [&](int64_t at) {
    for (History& h : children) {
      if (std::optional<JobEvent> e = DependencyEvent(h.job(), status_of, at)) h.Add(*e);
    }
  };
  evaluate(10);
  EXPECT_EQ(children[0].job().status, JobStatus::kRunnable);
  EXPECT_EQ(children[1].job().status, JobStatus::kPending);
  EXPECT_EQ(children[2].job().status, JobStatus::kPending);
  children[0].Add(JobEvent::Scheduled("ce", Placement(1), 20));
  children[0].Add(JobEvent::NodeStarted(1, 0, "", "", 21));
  children[0].Add(JobEvent::NodeExited(1, 0, 0, 0, 22));
  evaluate(30);
  EXPECT_EQ(children[1].job().status, JobStatus::kRunnable);
  EXPECT_EQ(children[2].job().status, JobStatus::kPending);
  children[1].Add(JobEvent::Scheduled("ce", Placement(1), 40));
  children[1].Add(JobEvent::NodeStarted(1, 0, "", "", 41));
  children[1].Add(JobEvent::NodeExited(1, 0, 1, 0, 42));
  evaluate(50);
  EXPECT_EQ(children[2].job().status, JobStatus::kFailed);
  EXPECT_EQ(children[2].job().status_reason, kDependentJobFailed);
  for (const History& h : children) h.ExpectReplayEqual();
}

// Property: whatever the order of events the control plane throws at a job
// (stale, duplicate, out of order), the accepted ones replay to the same job.
TEST(JobState, RandomEventSequencesReplayToTheSameJob) {
  std::mt19937 rng(20261130);
  auto pick = [&](int32_t n) { return static_cast<int32_t>(rng() % static_cast<uint32_t>(n)); };
  const std::vector<FailureCategory> categories = {
      FailureCategory::kUserError, FailureCategory::kNodeLost, FailureCategory::kInfrastructure,
      FailureCategory::kCapacity, FailureCategory::kHang};
  int32_t finals = 0;
  int32_t retried = 0;
  for (int32_t run = 0; run < 300; ++run) {
    const int32_t nodes = 1 + pick(3);
    Job job = nodes == 1 ? PlainJob(1 + pick(3)) : GangJob(nodes, 1 + pick(3));
    if (pick(2) == 0)
      job.retry_strategy.evaluate_on_exit = {{"", "", "4*", RetryAction::kExit, ""}};
    job.timeout_seconds = 60;
    History h(job);
    for (int32_t step = 0; step < 40; ++step) {
      const int64_t t = 1000 + step;
      const int32_t attempt = static_cast<int32_t>(h.job().attempts.size()) - pick(2);
      const int32_t node = pick(nodes);
      JobEvent e;
      switch (pick(18)) {
        case 0:
          e = JobEvent::DependenciesPending(t);
          break;
        case 1:
          e = JobEvent::DependenciesResolved(t);
          break;
        case 2:
          e = pick(3) == 0 ? JobEvent::DependencyFailed("dep", t)
                           : JobEvent::DependenciesResolved(t);
          break;
        case 3:
          e = JobEvent::StatusReason("waiting", t);
          break;
        case 4:
        case 5:
        case 12:
        case 13:
          e = JobEvent::Scheduled("ce", Placement(nodes), t);
          break;
        case 6:
        case 7:
        case 14:
        case 15:
          e = JobEvent::NodeStarted(attempt, node, "task", "stream", t);
          break;
        case 8:
        case 16:
          e = JobEvent::NodeExited(attempt, node, pick(3) == 0 ? 0 : 40 + pick(3),
                                   pick(4) == 0 ? 9 : 0, t);
          break;
        case 9:
          e = JobEvent::AttemptFailed(pick(3) == 0 ? 0 : attempt,
                                      categories[static_cast<size_t>(pick(5))], "something broke",
                                      node, t);
          break;
        case 10:
          e = JobEvent::TimedOut(attempt, t);
          break;
        case 11:
          e = pick(3) != 0 ? JobEvent::Progress(Json{{"step", step}}, t)
              : pick(2)    ? JobEvent::CancelRequested("user", t)
                           : JobEvent::TerminateRequested("user", t);
          break;
        default:
          e = JobEvent::Progress(Json{{"step", step}}, t);
          break;
      }
      Result<Job> next = Apply(h.job(), e);
      if (!next.ok()) {
        EXPECT_TRUE(next.status().IsFailedPrecondition() || next.status().IsInvalidArgument());
        continue;
      }
      h.Add(e);
      const Job& j = h.job();
      // Invariants of every reachable state.
      EXPECT_LE(static_cast<int32_t>(j.attempts.size()), j.retry_strategy.attempts);
      EXPECT_EQ(IsFinal(j.status), j.stopped_at > 0);
      if (j.status == JobStatus::kStarting || j.status == JobStatus::kRunning) {
        ASSERT_FALSE(j.attempts.empty());
        EXPECT_EQ(j.attempts.back().stopped_at, 0);
        EXPECT_EQ(static_cast<int32_t>(j.attempts.back().nodes.size()), nodes);
      } else {
        for (const Attempt& a : j.attempts) {
          EXPECT_GT(a.stopped_at, 0);
          for (const NodeAttempt& n : a.nodes) EXPECT_TRUE(IsFinal(n.status));
        }
      }
      if (j.status == JobStatus::kSucceeded) {
        EXPECT_EQ(j.attempts.back().nodes[0].exit_code, 0);
      }
    }
    if (IsFinal(h.job().status)) ++finals;
    if (h.job().attempts.size() > 1) ++retried;
    h.ExpectReplayEqual();
  }
  // The generator reaches the interesting states.
  EXPECT_GT(finals, 100);
  EXPECT_GT(retried, 10);
}

}  // namespace
}  // namespace lote::control
