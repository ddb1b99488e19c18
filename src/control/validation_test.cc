#include "control/validation.h"

#include <gtest/gtest.h>

namespace lote::control {
namespace {

TEST(ValidateNameTest, AcceptsLettersDigitsHyphensUnderscores) {
  EXPECT_TRUE(ValidateName("jobQueueName", "llama2_q-1").ok());
  EXPECT_TRUE(ValidateName("jobQueueName", std::string(128, 'a')).ok());
}

TEST(ValidateNameTest, RejectsBadNamesWithTheReason) {
  Status empty = ValidateName("jobQueueName", "");
  EXPECT_TRUE(empty.IsInvalidArgument());
  EXPECT_NE(empty.message().find("jobQueueName is empty"), std::string::npos);
  Status long_name = ValidateName("jobQueueName", std::string(129, 'a'));
  EXPECT_NE(long_name.message().find("limit is 128"), std::string::npos);
  Status bad_char = ValidateName("computeEnvironmentName", "my ce");
  EXPECT_NE(bad_char.message().find("contains the character ' '"), std::string::npos);
}

TEST(FieldReadersTest, ReportsTypeAndRangeErrors) {
  Json j = {{"n", "x"}, {"m", 5}, {"l", {"a", 1}}};
  auto n = OptInt(j, "n", "a.n", 0, 10);
  ASSERT_FALSE(n.ok());
  EXPECT_NE(n.status().message().find("a.n must be an integer"), std::string::npos);
  auto m = OptInt(j, "m", "a.m", 0, 4);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("between 0 and 4"), std::string::npos);
  auto l = OptStringList(j, "l", "a.l", 10);
  EXPECT_FALSE(l.ok());
  auto missing = ReqString(j, "zzz", "a.zzz");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("a.zzz is required"), std::string::npos);
}

TEST(TagsTest, EnforcesAwsTagRules) {
  EXPECT_TRUE(ReadTags(Json{{"tags", {{"team", "ml"}}}}, "tags", "tags").ok());
  auto reserved = ReadTags(Json{{"tags", {{"aws:x", "y"}}}}, "tags", "tags");
  ASSERT_FALSE(reserved.ok());
  EXPECT_NE(reserved.status().message().find("reserved prefix"), std::string::npos);
  Json many = Json::object();
  for (int i = 0; i < 51; ++i) many["k" + std::to_string(i)] = "v";
  EXPECT_FALSE(ReadTags(Json{{"tags", many}}, "tags", "tags").ok());
  EXPECT_FALSE(ReadTags(Json{{"tags", {{"k", std::string(257, 'v')}}}}, "tags", "tags").ok());
}

TEST(PaginationTest, TokenResumesAfterLastKey) {
  std::vector<std::string> keys = {"a", "b", "c", "d"};
  auto start = PageStart(keys, MakeNextToken("b"));
  ASSERT_TRUE(start.ok());
  EXPECT_EQ(*start, 2u);
  EXPECT_EQ(*PageStart(keys, std::nullopt), 0u);
  auto bad = PageStart(keys, std::string("garbage!"));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("nextToken is not valid"), std::string::npos);
}

}  // namespace
}  // namespace lote::control
