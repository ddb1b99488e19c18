#include "logs/progress_history.h"

#include <gtest/gtest.h>

#include "logs/test_util.h"

namespace lote::logs {
namespace {

class ProgressHistoryTest : public ::testing::Test {
 protected:
  void SetUp() override { Reopen(); }
  void Reopen() {
    store_.reset();
    LogStoreOptions options;
    options.root = dir_.path();
    Result<std::unique_ptr<LogStore>> opened = LogStore::Open(options);
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    store_ = std::move(*opened);
  }
  static ProgressReport Report(int64_t step, double loss) {
    return {1000 + step, Json{{"step", step}, {"total_steps", 1'000'000}, {"loss", loss}}};
  }
  testing::TempDir dir_;
  std::unique_ptr<LogStore> store_;
};

TEST_F(ProgressHistoryTest, KeepsEveryReportOfAShortRunAndMergesSameStep) {
  ProgressHistory h(store_.get());
  EXPECT_TRUE(h.Points("job", 1).status().IsNotFound());
  for (int64_t step = 10; step <= 50; step += 10)
    ASSERT_TRUE(h.Record("job", 1, 0, Report(step, 1.0 / step)).ok());
  // Validation loss printed after the training line of step 50.
  ASSERT_TRUE(h.Record("job", 1, 0, {2000, Json{{"step", 50}, {"val_loss", 0.5}}}).ok());
  // No step: ignored; a replayed older step: ignored.
  ASSERT_TRUE(h.Record("job", 1, 0, {2000, Json{{"loss", 9.0}}}).ok());
  ASSERT_TRUE(h.Record("job", 1, 0, Report(20, 7.0)).ok());
  Result<std::vector<ProgressPoint>> points = h.Points("job", 1);
  ASSERT_TRUE(points.ok()) << points.status().ToString();
  ASSERT_EQ(points->size(), 5u);
  EXPECT_EQ((*points)[1].step, 20);
  EXPECT_DOUBLE_EQ((*points)[1].values["loss"].get<double>(), 1.0 / 20);
  EXPECT_EQ((*points)[4].values["val_loss"], 0.5);
  EXPECT_DOUBLE_EQ((*points)[4].values["loss"].get<double>(), 1.0 / 50);
  EXPECT_FALSE((*points)[4].values.contains("step"));
}

TEST_F(ProgressHistoryTest, AMillionStepRunStaysSmallAndSpansTheWholeRun) {
  constexpr size_t kMax = 256;
  ProgressHistory h(store_.get(), kMax);
  constexpr int64_t kSteps = 1'000'000;
  for (int64_t step = 1; step <= kSteps; ++step) {
    ASSERT_TRUE(h.Record("big", 1, 0, Report(step, 1.0)).ok());
  }
  Result<std::vector<ProgressPoint>> points = h.Points("big", 1);
  ASSERT_TRUE(points.ok());
  EXPECT_LE(points->size(), kMax);
  EXPECT_GE(points->size(), kMax / 2);
  EXPECT_EQ(points->front().step, 1);
  EXPECT_GT(points->back().step, kSteps - kSteps / 100);
  // Evenly spread: every gap is the same stride.
  const int64_t gap = (*points)[1].step - (*points)[0].step;
  for (size_t i = 1; i < points->size(); ++i)
    EXPECT_EQ((*points)[i].step - (*points)[i - 1].step, gap);
  Result<uint64_t> stored = h.StoredEvents("big", 1);
  ASSERT_TRUE(stored.ok());
  EXPECT_LT(*stored, kMax * 8);  // ~ max * (1 + log2(1e6 / 256) / 2)
}

TEST_F(ProgressHistoryTest, SurvivesARestartAndAReaderSeesTheWritersPoints) {
  {
    ProgressHistory writer(store_.get(), 8);
    ProgressHistory reader(store_.get(), 8);
    for (int64_t step = 1; step <= 5; ++step)
      ASSERT_TRUE(writer.Record("j", 2, 3, Report(step, 2.0)).ok());
    Result<std::vector<ProgressPoint>> seen = reader.Points("j", 2);
    ASSERT_TRUE(seen.ok());
    EXPECT_EQ(seen->size(), 5u);
    EXPECT_EQ(seen->back().node, 3);
    for (int64_t step = 6; step <= 40; ++step)
      ASSERT_TRUE(writer.Record("j", 2, 3, Report(step, 2.0)).ok());
    Result<std::vector<ProgressPoint>> w = writer.Points("j", 2);
    Result<std::vector<ProgressPoint>> r = reader.Points("j", 2);
    ASSERT_TRUE(w.ok() && r.ok());
    ASSERT_EQ(w->size(), r->size());
    for (size_t i = 0; i < w->size(); ++i) EXPECT_EQ((*w)[i].step, (*r)[i].step);
  }
  Reopen();
  ProgressHistory again(store_.get(), 8);
  Result<std::vector<ProgressPoint>> points = again.Points("j", 2);
  ASSERT_TRUE(points.ok()) << points.status().ToString();
  ASSERT_FALSE(points->empty());
  EXPECT_LE(points->size(), 8u);
  const int64_t last = points->back().step;
  // The restarted writer continues the series (a replay of an old step is ignored).
  ASSERT_TRUE(again.Record("j", 2, 3, Report(3, 2.0)).ok());
  ASSERT_TRUE(again.Record("j", 2, 3, Report(1000, 2.0)).ok());
  points = again.Points("j", 2);
  ASSERT_TRUE(points.ok());
  EXPECT_GE(points->back().step, last);
  EXPECT_LE(points->size(), 8u);
  EXPECT_EQ(ProgressHistory::StreamName("abc:7", 2), "abc.7/2");
}

}  // namespace
}  // namespace lote::logs
