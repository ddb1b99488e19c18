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

// An environment without tags, as most are.
ComputeEnvironmentSpec Ce(std::map<std::string, std::string> tags = {}, std::string name = "ce") {
  ComputeEnvironmentSpec ce;
  ce.name = std::move(name);
  ce.lote_tags = std::move(tags);
  return ce;
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
  EXPECT_FALSE(NodeFaultFor(JobWith({}, {}), Ce(), 1, 0).Any());
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
  // A slow node keeps half its CPU time unless told otherwise.
  Result<std::optional<FaultPlan>> slow =
      ParseFaultPlan(JobWith({{"lote:injectSlowNode", "2"}, {"lote:injectSlowAfterSeconds", "0"}},
                             {{"lote:injectSlowPercent", "20"}}));
  ASSERT_TRUE(slow.ok()) << slow.status().ToString();
  EXPECT_EQ(**slow, (FaultPlan{exec::FaultAction::kSlow, 2, 0, 0, 0, 20}));
  EXPECT_EQ(DescribeFaultPlan(**slow), "slow node 2 to 20% CPU after 0 s");
  exec::NodeFault fault = NodeFaultFor(
      JobWith({{"lote:injectSlowNode", "2"}, {"lote:injectSlowAtStep", "3"}}, {}), Ce(), 1, 2);
  EXPECT_EQ(fault.action, exec::FaultAction::kSlow);
  EXPECT_EQ(fault.slow_percent, 50);
  EXPECT_EQ(fault.at_step, 3);
}

TEST(FaultPlan, InjectFaultRequestsASlowNodeWithItsShare) {
  Result<FaultPlan> slow = FaultPlanFromRequest(
      Json{{"action", "slow"}, {"nodeIndex", 1}, {"afterSeconds", 0}, {"cpuPercent", 10}}, 2);
  ASSERT_TRUE(slow.ok()) << slow.status().ToString();
  EXPECT_EQ(slow->slow_percent, 10);
  Result<FaultPlan> half = FaultPlanFromRequest(Json{{"action", "slow"}, {"atStep", 4}}, 2);
  ASSERT_TRUE(half.ok());
  EXPECT_EQ(half->slow_percent, 50);
  Result<FaultPlan> kill =
      FaultPlanFromRequest(Json{{"action", "kill"}, {"atStep", 4}, {"cpuPercent", 10}}, 2);
  ASSERT_FALSE(kill.ok());
  EXPECT_NE(kill.status().message().find("cpuPercent is for action slow only"), std::string::npos);
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
  EXPECT_NE(Error(JobWith({{"lote:injectSlowNode", "1"}}, {})).find("give exactly one of"),
            std::string::npos);
  EXPECT_NE(Error(JobWith({{"lote:injectSlowPercent", "20"}}, {}))
                .find("lote:injectSlowPercent needs lote:injectSlowAtStep or"),
            std::string::npos);
  EXPECT_NE(Error(JobWith({{"lote:injectSlowAtStep", "2"}, {"lote:injectSlowPercent", "100"}}, {}))
                .find("lote:injectSlowPercent is '100': give a whole number from 1 to 99"),
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
    exec::NodeFault f = NodeFaultFor(job, Ce(), 1, node);
    EXPECT_EQ(f.action, exec::FaultAction::kUploadFail);
    EXPECT_EQ(f.upload_fail_ms, 20000);
    EXPECT_EQ(f.upload_from_step, 4);
    EXPECT_EQ(f.at_step, 0);  // nothing for the runner to watch
    EXPECT_EQ(exec::UploadFailEnv(f),
              (std::vector<std::string>{"LOTE_INJECT_UPLOAD_FAIL_SECONDS=20",
                                        "LOTE_INJECT_UPLOAD_FAIL_AT_STEP=4"}));
    EXPECT_EQ(exec::NodeFaultFromJson(exec::ToJson(f)), f);
  }
  EXPECT_FALSE(NodeFaultFor(job, Ce(), 2, 0).Any());
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
  exec::NodeFault f = NodeFaultFor(job, Ce(), 1, 2);
  EXPECT_EQ(f.action, exec::FaultAction::kPreempt);
  EXPECT_EQ(f.at_step, 8);
  EXPECT_EQ(f.after_ms, -1);
  EXPECT_EQ(f.grace_ms, 20000);
  EXPECT_FALSE(NodeFaultFor(job, Ce(), 1, 1).Any());
  EXPECT_FALSE(NodeFaultFor(job, Ce(), 2, 2).Any());  // the retry runs undisturbed
  Job later = JobWith({{"lote:injectKillAfterSeconds", "3"}}, {}, 1);
  EXPECT_EQ(NodeFaultFor(later, Ce(), 1, 0).after_ms, 3000);
  EXPECT_EQ(NodeFaultFor(later, Ce(), 1, 0).grace_ms, 30000);
}

// A compute environment's tags ask for a fault for every job placed on it:
// in the job's first attempt there, said to come from the environment.
TEST(FaultPlan, AnEnvironmentsFaultReachesEachJobsFirstAttemptThere) {
  const ComputeEnvironmentSpec ce = Ce(
      {{"lote:injectKillNode", "1"}, {"lote:injectKillAtStep", "8"}, {"lote:runtime", "process"}},
      "faulty");
  Job job = JobWith({}, {}, 2);
  exec::NodeFault f = NodeFaultFor(job, ce, 1, 1);
  EXPECT_EQ(f.action, exec::FaultAction::kKill);
  EXPECT_EQ(f.at_step, 8);
  EXPECT_FALSE(NodeFaultFor(job, ce, 1, 0).Any());  // only the planned node
  // The sentence the job loop records says where it came from: the tags
  // recorded with the attempt at launch.
  job.attempts.resize(2);
  job.attempts[0].compute_environment = "faulty";
  job.attempts[0].backend = Json{
      {"managed", true}, {"tags", {{"lote:injectKillNode", "1"}, {"lote:injectKillAtStep", "8"}}}};
  EXPECT_EQ(FaultOrigin(job, 1), " (asked by the tags of compute environment faulty)");
  // The retry there runs undisturbed; a first attempt there after one
  // elsewhere gets it.
  job.attempts[1].compute_environment = "faulty";
  job.attempts[1].backend = job.attempts[0].backend;
  EXPECT_FALSE(NodeFaultFor(job, ce, 2, 1).Any());
  EXPECT_EQ(FaultOrigin(job, 2), "");
  job.attempts[0].compute_environment = "other";
  EXPECT_EQ(NodeFaultFor(job, ce, 2, 1).action, exec::FaultAction::kKill);
  EXPECT_EQ(FaultOrigin(job, 2), " (asked by the tags of compute environment faulty)");
  job.attempts[1].backend = Json{{"managed", true}, {"tags", Json::object()}};
  EXPECT_EQ(FaultOrigin(job, 2), "");  // that environment asked for nothing then
  // A job without node 1 is not disturbed.
  EXPECT_FALSE(NodeFaultFor(JobWith({}, {}, 1), ce, 1, 0).Any());
  // Plain environments and jobs: nothing.
  EXPECT_FALSE(NodeFaultFor(JobWith({}, {}, 2), Ce({{"lote:runtime", "process"}}), 1, 1).Any());
}

TEST(FaultPlan, AJobsOwnFaultWinsOverItsEnvironments) {
  const ComputeEnvironmentSpec ce = Ce({{"lote:injectUploadFailSeconds", "20"}}, "store-outage");
  Job own = JobWith({{"lote:injectStopNode", "0"}, {"lote:injectStopAfterSeconds", "5"}}, {}, 2);
  exec::NodeFault f = NodeFaultFor(own, ce, 1, 0);
  EXPECT_EQ(f.action, exec::FaultAction::kStop);
  own.attempts.resize(1);
  own.attempts[0].compute_environment = ce.name;
  own.attempts[0].backend = Json{{"tags", {{"lote:injectUploadFailSeconds", "20"}}}};
  EXPECT_EQ(FaultOrigin(own, 1), "");               // the job's own fault
  EXPECT_FALSE(NodeFaultFor(own, ce, 1, 1).Any());  // not the environment's upload failure either
  EXPECT_FALSE(NodeFaultFor(own, ce, 2, 0).Any());  // nor in the job's retry
  // A job without a fault of its own gets the environment's, on every node.
  Job plain = JobWith({}, {}, 2);
  for (int32_t node = 0; node < 2; ++node) {
    exec::NodeFault u = NodeFaultFor(plain, ce, 1, node);
    EXPECT_EQ(u.action, exec::FaultAction::kUploadFail);
    EXPECT_EQ(u.upload_fail_ms, 20000);
  }
  Result<std::optional<FaultPlan>> plan = ParseEnvironmentFaultPlan(ce.name, ce.lote_tags);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(DescribeFaultPlan(**plan),
            "fail checkpoint writes for 20 s from step 1 (from the tags of compute environment "
            "store-outage)");
}

TEST(FaultPlan, AnEnvironmentsBadFaultTagsAreRefusedNamingTheKey) {
  auto error = [](std::map<std::string, std::string> tags) {
    Status s = ValidateEnvironmentFaultTags("ce", tags);
    EXPECT_FALSE(s.ok());
    return s.message();
  };
  EXPECT_NE(error({{"lote:injectKillAtStep", "x"}}).find("lote:injectKillAtStep is 'x'"),
            std::string::npos);
  EXPECT_NE(error({{"lote:injectStopNode", "1"}}).find("give exactly one of"), std::string::npos);
  EXPECT_NE(error({{"lote:injectKillAtStep", "2"}, {"lote:injectPreemptAtStep", "3"}})
                .find("compute environment ce may ask for one injected fault"),
            std::string::npos);
  EXPECT_NE(error({{"lote:injectKilNode", "1"}}).find("lote:injectKilNode is not a fault"),
            std::string::npos);
  EXPECT_NE(error({{"lote:injectCapacityShortageSeconds", "0"}})
                .find("lote:injectCapacityShortageSeconds is '0'"),
            std::string::npos);
  EXPECT_NE(error({{"lote:injectSlowNode", "1"}}).find("lote:injectSlowAtStep"), std::string::npos);
  // Valid ones, and tags that are not faults, pass; the node is any whole
  // number (checked against each job at placement).
  EXPECT_TRUE(ValidateEnvironmentFaultTags("ce", {{"lote:injectKillNode", "7"},
                                                  {"lote:injectKillAfterSeconds", "30"},
                                                  {"lote:injectCapacityShortageSeconds", "5"},
                                                  {"lote:emulation", "true"},
                                                  {"team", "ml"}})
                  .ok());
}

}  // namespace
}  // namespace lote::control
