#include "common/clock.h"

#include <gtest/gtest.h>

#include "common/sigv4.h"

namespace lote {
namespace {

TEST(FormatUtcTest, WholeSecondsRoundedDownAlsoBefore1970) {
  EXPECT_EQ(Iso8601Utc(0), "1970-01-01T00:00:00Z");
  EXPECT_EQ(Iso8601Utc(1'796'034'600'999), "2026-11-30T10:30:00Z");
  EXPECT_EQ(Iso8601Utc(-1), "1969-12-31T23:59:59Z");
  EXPECT_EQ(FormatUtc(1'796'034'600'999, "%Y%m%d"), "20261130");
  EXPECT_EQ(sigv4::FormatAmzDate(1'796'034'600'999), "20261130T103000Z");
}

}  // namespace
}  // namespace lote
