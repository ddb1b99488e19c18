#include "sched/fair_share.h"

#include <gtest/gtest.h>

#include <cmath>

namespace lote::sched {
namespace {

TEST(FairShareTest, WeightFactorExactPrefixDefault) {
  FairSharePolicy p;
  p.share_distribution = {{"teamA", 0.5}, {"user*", 0.25}, {"userX*", 2.0}, {"*", 4.0}};
  struct Case {
    const char* id;
    double want;
  };
  for (const Case& c : {Case{"teamA", 0.5}, Case{"user1", 0.25}, Case{"userX9", 2.0},
                        Case{"other", 4.0}, Case{"teamAB", 4.0}}) {
    EXPECT_DOUBLE_EQ(WeightFactor(p, c.id), c.want) << c.id;
  }
  FairSharePolicy none;
  none.share_distribution = {{"a", 0.1}};
  EXPECT_DOUBLE_EQ(WeightFactor(none, "b"), 1.0);
}

TEST(FairShareTest, ReservedFractionFollowsAwsExamples) {
  EXPECT_DOUBLE_EQ(ReservedFraction(50, 1), 0.5);
  EXPECT_DOUBLE_EQ(ReservedFraction(50, 2), 0.25);
  EXPECT_DOUBLE_EQ(ReservedFraction(50, 3), 0.125);
  EXPECT_DOUBLE_EQ(ReservedFraction(25, 3), 0.015625);
  EXPECT_DOUBLE_EQ(ReservedFraction(0, 1), 0.0);
}

TEST(FairShareTest, HistoryHalvesEveryDecayPeriod) {
  ShareUsage u{"a", 0, 800.0, 1'000'000};
  EXPECT_DOUBLE_EQ(DecayedHistory(u, 100, 1'000'000), 800.0);
  EXPECT_DOUBLE_EQ(DecayedHistory(u, 100, 1'000'000 + 100'000), 400.0);
  EXPECT_DOUBLE_EQ(DecayedHistory(u, 100, 1'000'000 + 300'000), 100.0);
  EXPECT_DOUBLE_EQ(DecayedHistory(u, 0, 1'000'000), 0.0);  // decay 0: only current usage
}

TEST(FairShareTest, AccumulatedHistoryIntegratesRunningVcpus) {
  // 2 vCPUs for a short time add about 2 * seconds.
  ShareUsage u{"a", 2000, 0.0, 0};
  EXPECT_NEAR(AccumulatedHistory(u, 3600, 1000), 2.0, 1e-3);
  // Running forever converges to R * H / ln 2, whose rate is R.
  ShareUsage steady{"a", 2000, 0.0, 0};
  double h = AccumulatedHistory(steady, 60, 60'000'000);
  EXPECT_NEAR(h, 2.0 * 60 / std::log(2.0), 1e-6);
  steady.history_vcpu_seconds = h;
  steady.history_as_of_ms = 60'000'000;
  steady.running_milli_vcpu = 0;
  EXPECT_NEAR(UsageVcpus(steady, 0, 60, 60'000'000), 2.0, 1e-9);
  EXPECT_NEAR(UsageVcpus(steady, 1000, 60, 60'000'000), 3.0, 1e-9);
}

}  // namespace
}  // namespace lote::sched
