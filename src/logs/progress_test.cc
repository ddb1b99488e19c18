#include "logs/progress.h"

#include <gtest/gtest.h>

namespace lote::logs {
namespace {

constexpr int64_t kT0 = 1'700'000'000'000;

TEST(ProgressTracker, MergesValuesAndEstimatesEta) {
  ProgressTracker t;
  EXPECT_EQ(t.ToJson(kT0), Json::object());
  t.NodeStarted(0, kT0);
  t.NodeStarted(1, kT0);
  t.Report(0, {kT0 + 1000, Json{{"step", 10}, {"total_steps", 110}, {"loss", 3.5}}});
  t.Report(0, {kT0 + 11000, Json{{"step", 20}, {"loss", 3.0}}});  // 1 step/s, 90 left
  t.Report(1, {kT0 + 11000, Json{{"step", 15}, {"total_steps", 110}, {"mfu", 0.4}}});
  Json j = t.ToJson(kT0 + 11000);
  ASSERT_EQ(j["nodes"].size(), 2u);
  EXPECT_EQ(j["nodes"][0]["loss"], 3.0);
  EXPECT_EQ(j["nodes"][0]["total_steps"], 110);
  EXPECT_EQ(j["nodes"][1]["mfu"], 0.4);
  EXPECT_EQ(j["step"], 15);
  EXPECT_EQ(j["total_steps"], 110);
  EXPECT_EQ(j["etaSeconds"], 90);
  EXPECT_EQ(j["lastProgressAt"], kT0 + 11000);
}

TEST(ProgressTracker, StalledNodes) {
  ProgressTracker t;
  t.NodeStarted(0, kT0);
  t.NodeStarted(1, kT0);
  t.NodeStarted(2, kT0);
  t.Report(0, {kT0 + 50'000, Json{{"step", 1}}});
  t.Report(2, {kT0 + 90'000, Json{{"step", 1}}});
  EXPECT_EQ(t.StalledNodes(kT0 + 59'000, 60'000), std::vector<int32_t>{});
  EXPECT_EQ(t.StalledNodes(kT0 + 60'000, 60'000), std::vector<int32_t>{1});  // never reported
  EXPECT_EQ(t.StalledNodes(kT0 + 110'000, 60'000), (std::vector<int32_t>{0, 1}));
}

}  // namespace
}  // namespace lote::logs
