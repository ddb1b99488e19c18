#include "logs/crc32c.h"

#include <gtest/gtest.h>

#include <string>

namespace lote::logs {
namespace {

TEST(Crc32c, KnownVectors) {
  EXPECT_EQ(Crc32c(""), 0u);
  EXPECT_EQ(Crc32c("123456789"), 0xE3069283u);            // the standard check value
  EXPECT_EQ(Crc32c(std::string(32, '\0')), 0x8A9136AAu);  // RFC 3720 B.4
}

TEST(Crc32c, ExtendEqualsWhole) {
  std::string data;
  for (int i = 0; i < 1000; ++i) data.push_back(static_cast<char>(i * 7));
  uint32_t whole = Crc32c(data);
  for (size_t cut : {0, 1, 7, 8, 9, 500, 999, 1000}) {
    uint32_t c = Crc32cExtend(0, data.data(), cut);
    c = Crc32cExtend(c, data.data() + cut, data.size() - cut);
    EXPECT_EQ(c, whole) << cut;
  }
}

}  // namespace
}  // namespace lote::logs
