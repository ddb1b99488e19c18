#include "control/capacity_hold.h"

#include <gtest/gtest.h>

namespace lote::control {
namespace {

TEST(CapacityHoldTest, TheKeyIsReadFromParametersFirstThenTags) {
  Job job;
  EXPECT_FALSE(InjectedShortageSeconds(job));
  job.tags[kInjectCapacityShortageKey] = "20";
  EXPECT_EQ(InjectedShortageSeconds(job), 20);
  job.parameters[kInjectCapacityShortageKey] = "5";
  EXPECT_EQ(InjectedShortageSeconds(job), 5);
}

TEST(CapacityHoldTest, OnlyWholeSecondsFromOneTo86400AreValid) {
  const std::vector<std::pair<std::string, bool>> cases = {
      {"1", true},   {"86400", true}, {"0", false},   {"86401", false},  {"", false},
      {"-3", false}, {"2.5", false},  {"10s", false}, {"0000001", false}};
  for (const auto& [value, ok] : cases) {
    Job job;
    job.tags[kInjectCapacityShortageKey] = value;
    EXPECT_EQ(ValidateInjectedShortage(job).ok(), ok) << value;
    if (!ok) {
      EXPECT_NE(ValidateInjectedShortage(job).message().find(kInjectCapacityShortageKey),
                std::string::npos);
    }
  }
}

TEST(CapacityHoldTest, AHoldEndsAtItsSecondsAndIsTakenOnce) {
  CapacityHolds holds;
  holds.Hold("a", InjectedShortage{10, ""}, 1000);
  holds.Hold("b", InjectedShortage{1, "ce"}, 1000);
  EXPECT_TRUE(holds.IsHeld("a"));
  EXPECT_TRUE(holds.TakeEnded(1999).empty());
  auto ended = holds.TakeEnded(2000);
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_EQ(ended[0], (std::pair<std::string, InjectedShortage>{"b", {1, "ce"}}));
  EXPECT_FALSE(holds.IsHeld("b"));
  holds.Release("a");
  EXPECT_TRUE(holds.TakeEnded(100000).empty());
  EXPECT_EQ(InjectedShortageReason({10, ""}), "CAPACITY: injected capacity shortage (10 s)");
  EXPECT_EQ(InjectedShortageEndReason({10, ""}), "injected capacity shortage (10 s) ended");
  EXPECT_EQ(InjectedShortageReason({10, "short"}),
            "CAPACITY: injected capacity shortage (10 s, from the tags of compute environment "
            "short)");
}

ComputeEnvironmentSpec Env(std::string name, std::map<std::string, std::string> tags) {
  ComputeEnvironmentSpec ce;
  ce.name = std::move(name);
  ce.lote_tags = std::move(tags);
  return ce;
}

// An environment's shortage holds a job when no environment of its queue has
// capacity: every one carries the tag; the shortest decides. The job's own
// key wins.
TEST(CapacityHoldTest, TheQueuesEnvironmentsHoldAJobWhenAllOfThemAreShort) {
  const ComputeEnvironmentSpec a = Env("a", {{kInjectCapacityShortageKey, "30"}});
  const ComputeEnvironmentSpec b = Env("b", {{kInjectCapacityShortageKey, "20"}});
  const ComputeEnvironmentSpec plain = Env("plain", {{"lote:runtime", "process"}});
  Job job;
  EXPECT_EQ(InjectedShortageOf(job, {a}), (InjectedShortage{30, "a"}));
  EXPECT_EQ(InjectedShortageOf(job, {a, b}), (InjectedShortage{20, "b"}));
  EXPECT_FALSE(InjectedShortageOf(job, {a, plain}));  // plain has capacity
  EXPECT_FALSE(InjectedShortageOf(job, {}));
  job.tags[kInjectCapacityShortageKey] = "5";
  EXPECT_EQ(InjectedShortageOf(job, {a, b}), (InjectedShortage{5, ""}));
  EXPECT_EQ(InjectedShortageOf(job, {plain}), (InjectedShortage{5, ""}));
  EXPECT_TRUE(ValidateInjectedShortageTag(a.lote_tags).ok());
  Status bad = ValidateInjectedShortageTag({{kInjectCapacityShortageKey, "soon"}});
  EXPECT_NE(bad.message().find("lote:injectCapacityShortageSeconds is 'soon'"), std::string::npos);
}

// After a restart the job's stored events say whether its RUNNABLE period
// already had its hold (and since when) and whether it ended.
TEST(CapacityHoldTest, TheHoldOfTheCurrentRunnablePeriodIsReadFromTheEvents) {
  const InjectedShortage s{30, "a"};
  const std::vector<ScheduledNode> nodes;
  std::vector<JobEvent> events = {JobEvent::StatusReason("waiting for capacity", 100)};
  EXPECT_FALSE(RecordedHoldOf(events, s));
  events.push_back(JobEvent::StatusReason(InjectedShortageReason(s), 200));
  EXPECT_EQ(RecordedHoldOf(events, s), (RecordedHold{200, false}));
  events.push_back(JobEvent::StatusReason(InjectedShortageReason(s), 900));  // said again
  EXPECT_EQ(RecordedHoldOf(events, s), (RecordedHold{200, false}));
  events.push_back(JobEvent::StatusReason(InjectedShortageEndReason(s), 30'200));
  EXPECT_EQ(RecordedHoldOf(events, s), (RecordedHold{200, true}));
  // Placed and back to RUNNABLE (a retry): that hold was another period's.
  events.push_back(JobEvent::Scheduled("a", nodes, 30'300));
  EXPECT_FALSE(RecordedHoldOf(events, s));
  events.push_back(JobEvent::StatusReason(InjectedShortageReason(s), 40'000));
  EXPECT_EQ(RecordedHoldOf(events, s), (RecordedHold{40'000, false}));
  // Another shortage's texts (the tag changed meanwhile) do not count.
  EXPECT_FALSE(RecordedHoldOf(events, InjectedShortage{30, ""}));
}

}  // namespace
}  // namespace lote::control
