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

}  // namespace
}  // namespace lote::control
