#include "control/fault_plan.h"

#include <gtest/gtest.h>

namespace lote::control {
namespace {

Job JobWith(std::map<std::string, std::string> parameters, std::map<std::string, std::string> tags,
            int32_t nodes = 4) {
  Job job;
  job.id = "j";
  job.parameters = std::move(parameters);
  job.tags = std::move(tags);
  if (nodes > 1) job.node_properties = NodeProperties{nodes, 0, {}};
  return job;
}

std::string Error(const Job& job) {
  Result<std::optional<FaultPlan>> r = ParseFaultPlan(job);
  EXPECT_FALSE(r.ok());
  return r.ok() ? "" : r.status().message();
}

TEST(FaultPlan, NoKeysNoPlan) {
  Result<std::optional<FaultPlan>> r = ParseFaultPlan(JobWith({{"x", "1"}}, {{"lote:other", "2"}}));
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->has_value());
  EXPECT_FALSE(NodeFaultFor(JobWith({}, {}), 1, 0).Any());
}

// The scheduler's injected fault (capacity_hold.h) is a known key: no node
// fault of its own, and it goes with one of the runner's.
TEST(FaultPlan, ACapacityShortageIsTheSchedulersAndGoesWithARunnerFault) {
  Result<std::optional<FaultPlan>> alone =
      ParseFaultPlan(JobWith({{"lote:injectCapacityShortageSeconds", "5"}}, {}));
  ASSERT_TRUE(alone.ok()) << alone.status().ToString();
  EXPECT_FALSE(alone->has_value());
  Result<std::optional<FaultPlan>> both =
      ParseFaultPlan(JobWith({{"lote:injectKillNode", "1"}, {"lote:injectKillAtStep", "8"}},
                             {{"lote:injectCapacityShortageSeconds", "5"}}));
  ASSERT_TRUE(both.ok()) << both.status().ToString();
  EXPECT_EQ(**both, (FaultPlan{exec::FaultAction::kKill, 1, 8, -1}));
}

TEST(FaultPlan, ReadsEachKindFromParametersOrTags) {
  Result<std::optional<FaultPlan>> kill =
      ParseFaultPlan(JobWith({{"lote:injectKillNode", "1"}, {"lote:injectKillAtStep", "8"}}, {}));
  ASSERT_TRUE(kill.ok()) << kill.status().ToString();
  EXPECT_EQ(**kill, (FaultPlan{exec::FaultAction::kKill, 1, 8, -1}));
  EXPECT_EQ(DescribeFaultPlan(**kill), "kill node 1 at step 8");
  Result<std::optional<FaultPlan>> preempt = ParseFaultPlan(
      JobWith({}, {{"lote:injectPreemptNode", "3"}, {"lote:injectPreemptAfterSeconds", "30"}}));
  ASSERT_TRUE(preempt.ok());
  EXPECT_EQ(**preempt, (FaultPlan{exec::FaultAction::kPreempt, 3, 0, 30}));
  // The node defaults to 0; a parameter wins over a tag.
  Result<std::optional<FaultPlan>> stop = ParseFaultPlan(
      JobWith({{"lote:injectStopAtStep", "5"}}, {{"lote:injectStopAtStep", "9"}}, 1));
  ASSERT_TRUE(stop.ok());
  EXPECT_EQ(**stop, (FaultPlan{exec::FaultAction::kStop, 0, 5, -1}));
}

TEST(FaultPlan, RefusesWhatItCannotDoWithTheKeyNamed) {
  EXPECT_NE(Error(JobWith({{"lote:injectKillNode", "4"}, {"lote:injectKillAtStep", "1"}}, {}))
                .find("lote:injectKillNode is '4': give a whole number from 0 to 3"),
            std::string::npos);
  EXPECT_NE(Error(JobWith({{"lote:injectKillNode", "1"}}, {})).find("give exactly one of"),
            std::string::npos);
  EXPECT_NE(
      Error(JobWith({{"lote:injectKillAtStep", "1"}, {"lote:injectKillAfterSeconds", "1"}}, {}))
          .find("give exactly one of"),
      std::string::npos);
  EXPECT_NE(Error(JobWith({{"lote:injectKillAtStep", "0"}}, {})).find("from 1 to"),
            std::string::npos);
  EXPECT_NE(Error(JobWith({{"lote:injectKillAtStep", "x"}}, {})).find("lote:injectKillAtStep"),
            std::string::npos);
  EXPECT_NE(Error(JobWith({{"lote:injectKillAtStep", "2"}, {"lote:injectStopAtStep", "3"}}, {}))
                .find("one injected fault"),
            std::string::npos);
  EXPECT_NE(Error(JobWith({}, {{"lote:injectKillAtSteps", "2"}})).find("not a fault lote can"),
            std::string::npos);
  EXPECT_NE(Error(JobWith({{"lote:injectSlowNode", "1"}}, {})).find("not available"),
            std::string::npos);
  EXPECT_NE(Error(JobWith({{"lote:injectUploadFailAtStep", "4"}}, {}))
                .find("lote:injectUploadFailAtStep needs lote:injectUploadFailSeconds"),
            std::string::npos);
  EXPECT_NE(Error(JobWith({{"lote:injectUploadFailSeconds", "0"}}, {}))
                .find("lote:injectUploadFailSeconds is '0': give a whole number from 1"),
            std::string::npos);
  EXPECT_NE(
      Error(JobWith({{"lote:injectUploadFailSeconds", "5"}, {"lote:injectKillAtStep", "2"}}, {}))
          .find("one injected fault"),
      std::string::npos);
}

// A failed upload is the store's: every node of the first attempt gets it.
TEST(FaultPlan, AnUploadFailureReachesEveryNodeOfTheFirstAttempt) {
  Job job =
      JobWith({{"lote:injectUploadFailSeconds", "20"}, {"lote:injectUploadFailAtStep", "4"}}, {});
  Result<std::optional<FaultPlan>> plan = ParseFaultPlan(job);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(DescribeFaultPlan(**plan), "fail checkpoint writes for 20 s from step 4");
  for (int32_t node = 0; node < 4; ++node) {
    exec::NodeFault f = NodeFaultFor(job, 1, node);
    EXPECT_EQ(f.action, exec::FaultAction::kUploadFail);
    EXPECT_EQ(f.upload_fail_ms, 20000);
    EXPECT_EQ(f.upload_from_step, 4);
    EXPECT_EQ(f.at_step, 0);  // nothing for the runner to watch
    EXPECT_EQ(exec::UploadFailEnv(f),
              (std::vector<std::string>{"LOTE_INJECT_UPLOAD_FAIL_SECONDS=20",
                                        "LOTE_INJECT_UPLOAD_FAIL_AT_STEP=4"}));
    EXPECT_EQ(exec::NodeFaultFromJson(exec::ToJson(f)), f);
  }
  EXPECT_FALSE(NodeFaultFor(job, 2, 0).Any());
  Result<std::optional<FaultPlan>> from_start =
      ParseFaultPlan(JobWith({}, {{"lote:injectUploadFailSeconds", "7"}}, 1));
  ASSERT_TRUE(from_start.ok());
  EXPECT_EQ(DescribeFaultPlan(**from_start), "fail checkpoint writes for 7 s from step 1");
}

TEST(FaultPlan, OnlyThePlannedNodeOfTheFirstAttemptInjects) {
  Job job = JobWith({{"lote:injectPreemptNode", "2"},
                     {"lote:injectPreemptAtStep", "8"},
                     {"lote:terminationGraceSeconds", "20"}},
                    {});
  exec::NodeFault f = NodeFaultFor(job, 1, 2);
  EXPECT_EQ(f.action, exec::FaultAction::kPreempt);
  EXPECT_EQ(f.at_step, 8);
  EXPECT_EQ(f.after_ms, -1);
  EXPECT_EQ(f.grace_ms, 20000);
  EXPECT_FALSE(NodeFaultFor(job, 1, 1).Any());
  EXPECT_FALSE(NodeFaultFor(job, 2, 2).Any());  // the retry runs undisturbed
  Job later = JobWith({{"lote:injectKillAfterSeconds", "3"}}, {}, 1);
  EXPECT_EQ(NodeFaultFor(later, 1, 0).after_ms, 3000);
  EXPECT_EQ(NodeFaultFor(later, 1, 0).grace_ms, 30000);
}

}  // namespace
}  // namespace lote::control
