#include "cli/durations.h"

#include <gtest/gtest.h>

namespace lote::cli {
namespace {

TEST(ParseDuration, AcceptsEveryUnit) {
  EXPECT_EQ(*ParseDuration("30s"), 30'000);
  EXPECT_EQ(*ParseDuration("10m"), 600'000);
  EXPECT_EQ(*ParseDuration("2h"), 7'200'000);
  EXPECT_EQ(*ParseDuration("1d"), 86'400'000);
  EXPECT_EQ(*ParseDuration("36500d"), 36500LL * 86'400'000);
}

TEST(ParseDuration, RejectsWithTheAcceptedForms) {
  for (const char* bad : {"", "s", "10", "10x", "-5m", "0s", "1.5h", "m10", "10 m", "1e3s",
                          "99999999999999999999s"}) {
    Result<int64_t> r = ParseDuration(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(r.status().message().find("30s, 10m, 2h, 1d"), std::string::npos) << bad;
  }
  Result<int64_t> huge = ParseDuration("36501d");
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.status().message().find("too long"), std::string::npos);
}

TEST(FormatDuration, PicksTwoUnits) {
  EXPECT_EQ(FormatDuration(-3), "0s");
  EXPECT_EQ(FormatDuration(0), "0s");
  EXPECT_EQ(FormatDuration(59), "59s");
  EXPECT_EQ(FormatDuration(200), "3m20s");
  EXPECT_EQ(FormatDuration(3600 + 5 * 60 + 9), "1h05m");
  EXPECT_EQ(FormatDuration(2 * 86400 + 3 * 3600 + 59), "2d03h");
}

}  // namespace
}  // namespace lote::cli
