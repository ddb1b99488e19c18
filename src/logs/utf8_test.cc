#include "logs/utf8.h"

#include <gtest/gtest.h>

namespace lote::logs {
namespace {

std::string Sanitized(std::string_view s) {
  std::string out;
  AppendSanitizedUtf8(s, &out);
  return out;
}

TEST(Utf8, ValidTextIsUnchanged) {
  for (std::string s :
       {"", "hello", "caf\xC3\xA9", "\xE2\x82\xAC 100", "\xF0\x9F\x98\x80!", "tab\tnul\0x"}) {
    EXPECT_TRUE(IsValidUtf8(s)) << s;
    EXPECT_EQ(Sanitized(s), s);
  }
}

TEST(Utf8, InvalidBytesBecomeReplacementCharacters) {
  const std::string r = "\xEF\xBF\xBD";
  struct Case {
    std::string in, out;
  } cases[] = {
      {"a\xFF"
       "b",
       "a" + r + "b"},
      {"\xC0\xAF", r + r},                  // overlong '/'
      {"\xED\xA0\x80", r + r + r},          // surrogate
      {"\xF4\x90\x80\x80", r + r + r + r},  // above U+10FFFF
      {"\xE2\x82", r + r},                  // truncated
      {"x\x80y", "x" + r + "y"},            // stray continuation
      {"\xC3\xA9\xC3", "\xC3\xA9" + r},
  };
  for (const Case& c : cases) {
    EXPECT_FALSE(IsValidUtf8(c.in));
    std::string got = Sanitized(c.in);
    EXPECT_EQ(got, c.out);
    EXPECT_TRUE(IsValidUtf8(got));
  }
}

TEST(Utf8, SplitKeepsCharactersWhole) {
  std::string s;
  for (int i = 0; i < 1000; ++i) s += "\xE2\x82\xAC";  // 3-byte euro signs
  auto pieces = SplitUtf8(s, 100);
  std::string joined;
  for (auto p : pieces) {
    EXPECT_LE(p.size(), 100u);
    EXPECT_TRUE(IsValidUtf8(p));
    joined += p;
  }
  EXPECT_EQ(joined, s);
  EXPECT_EQ(pieces.size(), 31u);  // 99 bytes (33 signs) per piece
  ASSERT_EQ(SplitUtf8("", 10).size(), 1u);
}

}  // namespace
}  // namespace lote::logs
