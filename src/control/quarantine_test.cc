#include "control/quarantine.h"

#include <gtest/gtest.h>

namespace lote::control {
namespace {

constexpr int64_t kS = 1000;

NodeFailure F(std::string node, std::string job, int64_t at, std::string category = "NODE_LOST") {
  return NodeFailure{std::move(node), std::move(job), at, std::move(category), "ce"};
}

struct Case {
  const char* name;
  std::vector<NodeFailure> failures;  // in time order
  int64_t now_ms;
  std::vector<std::string> quarantined;  // Active(now_ms), by node
};

TEST(QuarantineTest, DifferentJobsWithinTheWindowQuarantineANode) {
  const std::vector<Case> cases = {
      {"three jobs on one node",
       {F("i-a", "j1", 0), F("i-a", "j2", 10 * kS), F("i-a", "j3", 20 * kS)},
       30 * kS,
       {"i-a"}},
      {"two jobs are not enough", {F("i-a", "j1", 0), F("i-a", "j2", 10 * kS)}, 30 * kS, {}},
      {"one job failing three times counts once",
       {F("i-a", "j1", 0), F("i-a", "j1", 10 * kS), F("i-a", "j1", 20 * kS)},
       30 * kS,
       {}},
      {"failures on different nodes do not add up",
       {F("i-a", "j1", 0), F("i-b", "j2", 10 * kS), F("i-a", "j3", 20 * kS)},
       30 * kS,
       {}},
      {"outside the window they do not count",
       {F("i-a", "j1", 0), F("i-a", "j2", 10 * kS), F("i-a", "j3", 3600 * kS + 1)},
       3700 * kS,
       {}},
      {"the cool-down ends the quarantine",
       {F("i-a", "j1", 0), F("i-a", "j2", 1), F("i-a", "j3", 2)},
       3600 * kS + 2,
       {}},
      {"just before the cool-down ends it holds",
       {F("i-a", "j1", 0), F("i-a", "j2", 1), F("i-a", "j3", 2)},
       3600 * kS + 1,
       {"i-a"}},
  };
  for (const Case& c : cases) {
    Quarantine q;
    for (const NodeFailure& f : c.failures) q.Record(f);
    std::vector<std::string> got;
    for (const QuarantinedNode& n : q.Active(c.now_ms)) got.push_back(n.node);
    EXPECT_EQ(got, c.quarantined) << c.name;
  }
}

TEST(QuarantineTest, TheThirdFailureStartsItWithItsTimesAndReason) {
  Quarantine q(QuarantineOptions{3, 600 * kS, 60 * kS});
  EXPECT_FALSE(q.Record(F("i-a", "j1", 1 * kS, "NODE_LOST")));
  EXPECT_FALSE(q.Record(F("i-a", "j2", 2 * kS, "HANG")));
  auto started = q.Record(F("i-a", "j3", 3 * kS, "NODE_LOST"));
  ASSERT_TRUE(started);
  EXPECT_EQ(started->since_ms, 3 * kS);
  EXPECT_EQ(started->until_ms, 63 * kS);
  EXPECT_NE(started->reason.find("3 different jobs"), std::string::npos) << started->reason;
  EXPECT_NE(started->reason.find("j3"), std::string::npos);
  EXPECT_TRUE(q.IsQuarantined("i-a", 62 * kS));
  EXPECT_FALSE(q.Record(F("i-a", "j4", 4 * kS, "HANG")));  // already quarantined
  auto expired = q.TakeExpired(63 * kS);
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_EQ(expired[0].node, "i-a");
  EXPECT_TRUE(q.TakeExpired(63 * kS).empty());
  // Its failures were forgotten: two more do not quarantine it again.
  EXPECT_FALSE(q.Record(F("i-a", "j5", 70 * kS)));
  EXPECT_FALSE(q.Record(F("i-a", "j6", 71 * kS)));
}

TEST(QuarantineTest, AReleaseEndsItAndForgetsTheFailures) {
  Quarantine q;
  for (const char* job : {"j1", "j2", "j3"}) q.Record(F("i-a", job, 5 * kS));
  EXPECT_TRUE(q.IsQuarantined("i-a", 6 * kS));
  EXPECT_FALSE(q.Release("i-b", 6 * kS));
  EXPECT_TRUE(q.Release("i-a", 6 * kS));
  EXPECT_FALSE(q.IsQuarantined("i-a", 6 * kS));
  EXPECT_FALSE(q.Release("i-a", 6 * kS));
  EXPECT_FALSE(q.Record(F("i-a", "j4", 7 * kS)));
  EXPECT_FALSE(q.Record(F("i-a", "j5", 8 * kS)));
  EXPECT_TRUE(q.Record(F("i-a", "j6", 9 * kS)));
}

TEST(QuarantineTest, AThresholdOfZeroNeverQuarantines) {
  Quarantine q(QuarantineOptions{0, 3600 * kS, 3600 * kS});
  for (const char* job : {"j1", "j2", "j3", "j4"}) EXPECT_FALSE(q.Record(F("i-a", job, 0)));
}

TEST(QuarantineTest, OnlyNodeLostAndHangAttemptsCountOnTheFailedNode) {
  Job job;
  job.id = "j";
  Attempt a;
  a.stopped_at = 50;
  a.nodes.resize(2);
  a.nodes[1].node_index = 1;
  a.nodes[0].instance_id = "i-0";
  a.nodes[1].instance_id = "i-1";
  const std::vector<std::tuple<FailureCategory, int32_t, std::vector<std::string>>> cases = {
      {FailureCategory::kNodeLost, 1, {"i-1"}},
      {FailureCategory::kHang, -1, {"i-0", "i-1"}},
      {FailureCategory::kUserError, 1, {}},
      {FailureCategory::kNone, -1, {}},
  };
  for (const auto& [category, failed, nodes] : cases) {
    a.failure_category = category;
    a.failed_node = failed;
    job.attempts = {a};
    std::vector<std::string> got;
    for (const NodeFailure& f : NodeFailuresOf(job, 0)) {
      got.push_back(f.node);
      EXPECT_EQ(f.at_ms, 50);
      EXPECT_EQ(f.job_id, "j");
    }
    EXPECT_EQ(got, nodes);
  }
  job.attempts[0].stopped_at = 0;  // still open
  job.attempts[0].failure_category = FailureCategory::kNodeLost;
  EXPECT_TRUE(NodeFailuresOf(job, 0).empty());
  EXPECT_TRUE(NodeFailuresOf(job, 5).empty());
}

TEST(QuarantineTest, AStoredReleaseKeepsEarlierFailuresFromCountingAtRebuild) {
  // The rebuild after a restart: the release (stored at 5 s) is given back
  // before the stored failures are recorded again.
  Quarantine q;
  q.SetReleased("i-a", 5 * kS);
  for (const char* job : {"j1", "j2", "j3"}) EXPECT_FALSE(q.Record(F("i-a", job, 4 * kS)));
  EXPECT_FALSE(q.IsQuarantined("i-a", 6 * kS));
  // Later failures count as usual; another node is not affected.
  EXPECT_FALSE(q.Record(F("i-a", "j4", 6 * kS)));
  EXPECT_FALSE(q.Record(F("i-a", "j5", 7 * kS)));
  EXPECT_TRUE(q.Record(F("i-a", "j6", 8 * kS)));
  for (const char* job : {"j1", "j2"}) EXPECT_FALSE(q.Record(F("i-b", job, 1 * kS)));
  EXPECT_TRUE(q.Record(F("i-b", "j3", 2 * kS)));
  // A release given after its failures were recorded ends the quarantine too.
  q.SetReleased("i-b", 3 * kS);
  EXPECT_FALSE(q.IsQuarantined("i-b", 4 * kS));
  // Release records its time: the same as SetReleased at now.
  EXPECT_TRUE(q.Release("i-a", 9 * kS));
  EXPECT_FALSE(q.Record(F("i-a", "j7", 9 * kS)));  // not after the release
}

TEST(QuarantineTest, ABackendsHostNamesTheFailedNodeInsteadOfTheInstance) {
  Job job;
  job.id = "j";
  Attempt a;
  a.stopped_at = 50;
  a.failure_category = FailureCategory::kNodeLost;
  a.failed_node = 1;
  a.nodes.resize(3);
  for (int32_t k = 0; k < 3; ++k) {
    a.nodes[k].node_index = k;
    a.nodes[k].instance_id = "slurm/node-" + std::to_string(k);
  }
  job.attempts = {a};
  auto nodes = [&](const std::optional<std::vector<std::string>>& hosts) {
    std::vector<std::string> got;
    for (const NodeFailure& f : NodeFailuresOf(job, 0, hosts)) got.push_back(f.node);
    return got;
  };
  EXPECT_EQ(nodes(std::vector<std::string>{"b1", "b3", "b2"}), std::vector<std::string>{"b3"});
  EXPECT_EQ(nodes(std::nullopt), std::vector<std::string>{"slurm/node-1"});
  // A host the backend does not know counts nowhere (not on a virtual id).
  EXPECT_TRUE(nodes(std::vector<std::string>{"b1", "", "b2"}).empty());
  EXPECT_TRUE(nodes(std::vector<std::string>{}).empty());
}

TEST(QuarantineTest, ARetryAvoidsTheFailedNodesInstanceAfterANodeFailure) {
  Attempt a;
  a.stopped_at = 50;
  a.nodes.resize(2);
  a.nodes[0].instance_id = "i-0";
  a.nodes[1].node_index = 1;
  a.nodes[1].instance_id = "i-1";
  struct Case {
    const char* name;
    FailureCategory category;
    int32_t failed;
    std::string status_reason;
    std::vector<std::string> avoid;
  };
  const std::vector<Case> cases = {
      {"node lost", FailureCategory::kNodeLost, 1, "lost", {"i-1"}},
      {"hang of an unknown node", FailureCategory::kHang, -1, "hang", {"i-0", "i-1"}},
      {"an injected kill (USER_ERROR)",
       FailureCategory::kUserError,
       1,
       "Injected fault: node 1 killed (SIGKILL) at step 8",
       {"i-1"}},
      {"the job's own error", FailureCategory::kUserError, 1, "exited with code 3", {}},
      {"preempted", FailureCategory::kPreempted, 0, "preempted", {}},
  };
  for (const Case& c : cases) {
    Job job;
    job.id = "j";
    a.failure_category = c.category;
    a.failed_node = c.failed;
    a.status_reason = c.status_reason;
    job.attempts = {a};
    EXPECT_EQ(InstancesToAvoid(job), c.avoid) << c.name;
    EXPECT_EQ(RetryAvoidanceSource(job, 1) != nullptr, !c.avoid.empty()) << c.name;
    // While the next attempt runs, it is the one below that counts.
    Attempt open;
    open.nodes.resize(1);
    job.attempts.push_back(open);
    EXPECT_TRUE(InstancesToAvoid(job).empty()) << c.name << ": an attempt is open";
    EXPECT_EQ(RetryAvoidanceSource(job, 1) != nullptr, !c.avoid.empty()) << c.name;
  }
  EXPECT_TRUE(InstancesToAvoid(Job{}).empty());
}

}  // namespace
}  // namespace lote::control
