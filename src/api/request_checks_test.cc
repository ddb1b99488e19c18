#include "api/request_checks.h"

#include <gtest/gtest.h>

namespace lote::api {
namespace {

TEST(RequestChecksTest, Utf8) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("plain"));
  EXPECT_TRUE(IsValidUtf8("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"));
  EXPECT_FALSE(IsValidUtf8("\xff"));
  EXPECT_FALSE(IsValidUtf8("\xc3"));              // truncated
  EXPECT_FALSE(IsValidUtf8("\xe2\x82"));          // truncated
  EXPECT_FALSE(IsValidUtf8("\xc0\xaf"));          // overlong '/'
  EXPECT_FALSE(IsValidUtf8("\xed\xa0\x80"));      // surrogate
  EXPECT_FALSE(IsValidUtf8("\xf4\x90\x80\x80"));  // above U+10FFFF
  EXPECT_FALSE(IsValidUtf8("a\x80z"));            // lone continuation
}

TEST(RequestChecksTest, Depth) {
  EXPECT_TRUE(CheckJsonDepth(R"({"a": [[{"b": 1}]]})", 4).ok());
  EXPECT_FALSE(CheckJsonDepth(R"({"a": [[{"b": 1}]]})", 3).ok());
  EXPECT_TRUE(CheckJsonDepth(R"({"a": "[[[[[[\"[[["})", 1).ok());
  EXPECT_FALSE(CheckJsonDepth(std::string(1'000'000, '['), 64).ok());
}

TEST(RequestChecksTest, Values) {
  const ValueRules& batch = BatchValueRules();
  EXPECT_TRUE(
      CheckRequestValues(Json::parse(R"({"jobName": "j", "n": 1.5, "tags": {"k": "é"}})"), batch)
          .ok());
  Status s = CheckRequestValues(Json::parse(R"({"jobs": ["a", "b\u00e9"]})"), batch);
  EXPECT_NE(s.message().find("jobs[1]"), std::string::npos) << s.message();
  s = CheckRequestValues(Json::parse(R"({"x": {"y": [1, 2e300]}})"), batch);
  EXPECT_NE(s.message().find("x.y[1]"), std::string::npos) << s.message();
  s = CheckRequestValues(Json::parse(R"({"k\u0000": 1})"), batch);
  EXPECT_FALSE(s.ok());
  const ValueRules& logs = LogsValueRules();
  EXPECT_TRUE(
      CheckRequestValues(Json::parse(R"({"logEvents": [{"message": "a\u0000b"}]})"), logs).ok());
  EXPECT_TRUE(CheckRequestValues(Json::parse(R"({"logStreamName": "caf\u00e9"})"), logs).ok());
  EXPECT_FALSE(CheckRequestValues(Json::parse(R"({"logGroupName": "caf\u00e9"})"), logs).ok());
  EXPECT_FALSE(CheckRequestValues(Json::parse(R"({"logStreamName": "a\u0000"})"), logs).ok());
}

}  // namespace
}  // namespace lote::api
