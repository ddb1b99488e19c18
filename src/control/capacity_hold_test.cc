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
  holds.Hold("a", 10, 1000);
  holds.Hold("b", 1, 1000);
  EXPECT_TRUE(holds.IsHeld("a"));
  EXPECT_TRUE(holds.TakeEnded(1999).empty());
  auto ended = holds.TakeEnded(2000);
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_EQ(ended[0], (std::pair<std::string, int64_t>{"b", 1}));
  EXPECT_FALSE(holds.IsHeld("b"));
  holds.Release("a");
  EXPECT_TRUE(holds.TakeEnded(100000).empty());
  EXPECT_EQ(InjectedShortageReason(10), "CAPACITY: injected capacity shortage (10 s)");
}

}  // namespace
}  // namespace lote::control
