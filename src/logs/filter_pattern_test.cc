#include "logs/filter_pattern.h"

#include <gtest/gtest.h>

namespace lote::logs {
namespace {

bool M(std::string_view pattern, std::string_view message) {
  auto p = FilterPattern::Parse(pattern);
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return p.ok() && p->Matches(message);
}

TEST(FilterPattern, TermsPhrasesAnyAndExclude) {
  EXPECT_TRUE(M("", "anything"));
  EXPECT_TRUE(M("ERROR", "an ERROR here"));
  EXPECT_FALSE(M("ERROR", "an error here"));  // case-sensitive
  EXPECT_TRUE(M("ERROR disk", "disk ERROR"));
  EXPECT_FALSE(M("ERROR disk", "ERROR net"));
  EXPECT_TRUE(M("\"out of memory\"", "CUDA out of memory at step 3"));
  EXPECT_FALSE(M("\"out of memory\"", "out of the memory"));
  EXPECT_TRUE(M("?ERROR ?WARN", "WARN low disk"));
  EXPECT_FALSE(M("?ERROR ?WARN", "INFO fine"));
  EXPECT_TRUE(M("step -NaN", "step 5 loss 2.1"));
  EXPECT_FALSE(M("step -NaN", "step 5 loss NaN"));
  EXPECT_TRUE(M("\"say \\\"hi\\\"\"", "they say \"hi\" twice"));
}

TEST(FilterPattern, RejectsUnsupportedSyntax) {
  EXPECT_TRUE(FilterPattern::Parse("{ $.level = \"error\" }").status().IsInvalidArgument());
  EXPECT_TRUE(FilterPattern::Parse("[ip, user]").status().IsInvalidArgument());
  EXPECT_TRUE(FilterPattern::Parse("\"unterminated").status().IsInvalidArgument());
}

}  // namespace
}  // namespace lote::logs
