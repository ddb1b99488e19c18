#include "iam/policy.h"

#include <gtest/gtest.h>

namespace lote::iam {
namespace {

constexpr char kQueueA[] = "arn:aws:batch:us-east-1:123456789012:job-queue/team-a";
constexpr char kQueueB[] = "arn:aws:batch:us-east-1:123456789012:job-queue/team-b";

Policy MustParse(std::string_view doc, std::string name = "p") {
  auto p = Policy::Parse(std::move(name), doc);
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return p.ok() ? *p : Policy{};
}

Request Req(std::string action, std::string resource,
            std::map<std::string, std::vector<std::string>> context = {}) {
  return Request{std::move(action), std::move(resource), std::move(context)};
}

TEST(WildcardMatchTest, Table) {
  struct Case {
    const char* pattern;
    const char* text;
    bool ignore_case;
    bool match;
  } cases[] = {
      {"*", "", false, true},
      {"*", "anything:at/all", false, true},
      {"batch:*", "batch:SubmitJob", true, true},
      {"batch:Describe*", "batch:DescribeJobs", true, true},
      {"batch:describe*", "batch:DescribeJobs", true, true},
      {"batch:describe*", "batch:DescribeJobs", false, false},
      {"batch:Describe*", "logs:DescribeLogStreams", true, false},
      {"arn:aws:batch:*:*:job-queue/team-?", "arn:aws:batch:us-east-1:1:job-queue/team-a", false,
       true},
      {"arn:aws:batch:*:*:job-queue/team-?", "arn:aws:batch:us-east-1:1:job-queue/team-ab", false,
       false},
      {"a*b*c", "aXXbYYc", false, true},
      {"a*b*c", "aXXbYY", false, false},
      {"a**", "a", false, true},
      {"*team-a", "arn:x:job-queue/team-a", false, true},
      {"", "", false, true},
      {"", "x", false, false},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(WildcardMatch(c.pattern, c.text, c.ignore_case), c.match)
        << c.pattern << " vs " << c.text;
  }
}

TEST(PolicyParseTest, RejectsWhatIamRejects) {
  struct Case {
    const char* doc;
    const char* where;  // the message starts with it
  } cases[] = {
      {"not json", "policy"},
      {R"([1])", "policy"},
      {R"({"Version":"2012-10-17"})", "Statement"},
      {R"({"Version":"2020-01-01","Statement":[]})", "Version"},
      {R"({"Statement":[]})", "Statement"},
      {R"({"Statement":[{"Action":"*","Resource":"*"}]})", "Statement[0].Effect"},
      {R"({"Statement":[{"Effect":"Maybe","Action":"*","Resource":"*"}]})", "Statement[0].Effect"},
      {R"({"Statement":[{"Effect":"Allow","Resource":"*"}]})", "Statement[0]"},
      {R"({"Statement":[{"Effect":"Allow","Action":"*","NotAction":"x:y","Resource":"*"}]})",
       "Statement[0]"},
      {R"({"Statement":[{"Effect":"Allow","Action":"SubmitJob","Resource":"*"}]})",
       "Statement[0].Action"},
      {R"({"Statement":[{"Effect":"Allow","Action":"*","Resource":"job-queue/x"}]})",
       "Statement[0].Resource"},
      {R"({"Statement":[{"Effect":"Allow","Action":"*","Resource":"*","Principal":"*"}]})",
       "Statement[0].Principal"},
      {R"({"Statement":[{"Effect":"Allow","Action":"*","Resource":"*","Frobnicate":1}]})",
       "Statement[0].Frobnicate"},
      {R"({"Statement":{"Effect":"Allow","Action":"*","Resource":"*",
           "Condition":{"DateGreaterThan":{"aws:CurrentTime":"2020"}}}})",
       "Statement.Condition.DateGreaterThan"},
      {R"({"Statement":{"Effect":"Allow","Action":[],"Resource":"*"}})", "Statement.Action"},
  };
  for (const Case& c : cases) {
    auto p = Policy::Parse("p", c.doc);
    ASSERT_FALSE(p.ok()) << c.doc;
    EXPECT_TRUE(p.status().IsInvalidArgument());
    EXPECT_TRUE(p.status().message().starts_with(c.where))
        << c.doc << " -> " << p.status().message();
  }
}

TEST(PolicyParseTest, AcceptsSingleStatementAndStrings) {
  Policy p = MustParse(R"({"Version":"2012-10-17","Statement":
      {"Sid":"One","Effect":"Allow","Action":"batch:SubmitJob","Resource":"*"}})");
  ASSERT_EQ(p.statements.size(), 1u);
  EXPECT_EQ(p.statements[0].sid, "One");
  EXPECT_EQ(p.statements[0].actions, std::vector<std::string>{"batch:SubmitJob"});
}

TEST(EvaluateTest, ImplicitDenyWithoutPolicies) {
  Decision d = Evaluate(Req("batch:SubmitJob", kQueueA), {});
  EXPECT_EQ(d.outcome, Decision::Outcome::kImplicitDeny);
  EXPECT_FALSE(d.allowed());
}

TEST(EvaluateTest, QueueScopedAllow) {
  Policy p = MustParse(R"({"Statement":[
      {"Sid":"SubmitToA","Effect":"Allow","Action":["batch:SubmitJob","batch:Describe*"],
       "Resource":"arn:aws:batch:*:*:job-queue/team-a"}]})",
                       "team-a");
  Decision yes = Evaluate(Req("batch:SubmitJob", kQueueA), {p});
  EXPECT_TRUE(yes.allowed());
  EXPECT_EQ(yes.policy, "team-a");
  EXPECT_EQ(yes.statement, "SubmitToA");
  EXPECT_TRUE(Evaluate(Req("batch:describejobqueues", kQueueA), {p}).allowed());
  EXPECT_FALSE(Evaluate(Req("batch:SubmitJob", kQueueB), {p}).allowed());
  EXPECT_FALSE(Evaluate(Req("batch:DeleteJobQueue", kQueueA), {p}).allowed());
}

TEST(EvaluateTest, ExplicitDenyBeatsAllowInAnyOrder) {
  Policy allow =
      MustParse(R"({"Statement":[{"Effect":"Allow","Action":"*","Resource":"*"}]})", "admin");
  Policy deny = MustParse(R"({"Statement":[{"Sid":"NoDelete","Effect":"Deny",
      "Action":"batch:Delete*","Resource":"*"}]})",
                          "guard");
  for (const auto& order : {std::vector<Policy>{allow, deny}, std::vector<Policy>{deny, allow}}) {
    Decision d = Evaluate(Req("batch:DeleteJobQueue", kQueueA), order);
    EXPECT_EQ(d.outcome, Decision::Outcome::kExplicitDeny);
    EXPECT_EQ(d.policy, "guard");
    EXPECT_EQ(d.statement, "NoDelete");
    EXPECT_TRUE(Evaluate(Req("batch:SubmitJob", kQueueA), order).allowed());
  }
}

TEST(EvaluateTest, NotActionAndNotResource) {
  Policy p = MustParse(R"({"Statement":[
      {"Effect":"Allow","NotAction":"batch:Delete*","NotResource":"arn:aws:batch:*:*:job-queue/team-b"}]})");
  EXPECT_TRUE(Evaluate(Req("batch:SubmitJob", kQueueA), {p}).allowed());
  EXPECT_FALSE(Evaluate(Req("batch:DeleteJobQueue", kQueueA), {p}).allowed());
  EXPECT_FALSE(Evaluate(Req("batch:SubmitJob", kQueueB), {p}).allowed());
}

TEST(EvaluateTest, PolicyVariables) {
  Policy p = MustParse(R"({"Statement":[{"Effect":"Allow","Action":"logs:GetLogEvents",
      "Resource":"arn:aws:logs:*:*:log-group:/aws/batch/job:log-stream:${aws:username}/*"}]})");
  const std::string stream = "arn:aws:logs:us-east-1:1:log-group:/aws/batch/job:log-stream:alice/x";
  EXPECT_TRUE(
      Evaluate(Req("logs:GetLogEvents", stream, {{"aws:username", {"alice"}}}), {p}).allowed());
  EXPECT_FALSE(
      Evaluate(Req("logs:GetLogEvents", stream, {{"aws:username", {"bob"}}}), {p}).allowed());
  // No value for the variable: the pattern matches nothing.
  EXPECT_FALSE(Evaluate(Req("logs:GetLogEvents", stream), {p}).allowed());
  // ${*} is a literal star, not a wildcard.
  Policy lit = MustParse(R"({"Statement":[{"Effect":"Allow","Action":"ssm:GetParameter",
      "Resource":"arn:aws:ssm:*:*:parameter/a${*}b"}]})");
  EXPECT_TRUE(Evaluate(Req("ssm:GetParameter", "arn:aws:ssm:r:1:parameter/a*b"), {lit}).allowed());
  EXPECT_FALSE(Evaluate(Req("ssm:GetParameter", "arn:aws:ssm:r:1:parameter/aXb"), {lit}).allowed());
}

struct ConditionCase {
  const char* condition;  // the Condition block
  std::map<std::string, std::vector<std::string>> context;
  bool allowed;
};

class ConditionTest : public ::testing::TestWithParam<ConditionCase> {};

TEST_P(ConditionTest, Holds) {
  const ConditionCase& c = GetParam();
  Policy p = MustParse(std::string(R"({"Statement":[{"Effect":"Allow","Action":"batch:SubmitJob",
      "Resource":"*","Condition":)") +
                       c.condition + "}]}");
  EXPECT_EQ(Evaluate(Req("batch:SubmitJob", kQueueA, c.context), {p}).allowed(), c.allowed)
      << c.condition;
}

INSTANTIATE_TEST_SUITE_P(
    Table, ConditionTest,
    ::testing::Values(
        // Single-valued keys; key names compare without case.
        ConditionCase{R"({"StringEquals":{"aws:RequestTag/team":"a"}})",
                      {{"aws:requesttag/team", {"a"}}},
                      true},
        ConditionCase{R"({"StringEquals":{"aws:RequestTag/team":"a"}})",
                      {{"aws:RequestTag/team", {"A"}}},
                      false},
        ConditionCase{R"({"StringEquals":{"aws:RequestTag/team":["b","a"]}})",
                      {{"aws:RequestTag/team", {"a"}}},
                      true},
        ConditionCase{R"({"StringEquals":{"aws:RequestTag/team":"a"}})", {}, false},
        ConditionCase{R"({"StringEqualsIgnoreCase":{"aws:RequestTag/team":"a"}})",
                      {{"aws:RequestTag/team", {"A"}}},
                      true},
        ConditionCase{R"({"StringNotEquals":{"aws:ResourceTag/team":"b"}})",
                      {{"aws:ResourceTag/team", {"a"}}},
                      true},
        ConditionCase{R"({"StringNotEquals":{"aws:ResourceTag/team":"b"}})",
                      {{"aws:ResourceTag/team", {"b"}}},
                      false},
        // A missing key: positive operators fail, negated ones hold, IfExists holds.
        ConditionCase{R"({"StringNotEquals":{"aws:ResourceTag/team":"b"}})", {}, true},
        ConditionCase{R"({"StringEqualsIfExists":{"aws:ResourceTag/team":"a"}})", {}, true},
        ConditionCase{R"({"StringEqualsIfExists":{"aws:ResourceTag/team":"a"}})",
                      {{"aws:ResourceTag/team", {"b"}}},
                      false},
        ConditionCase{R"({"StringLike":{"aws:ResourceTag/project":"llama-*"}})",
                      {{"aws:ResourceTag/project", {"llama-7b"}}},
                      true},
        ConditionCase{R"({"StringNotLike":{"aws:ResourceTag/project":"llama-*"}})",
                      {{"aws:ResourceTag/project", {"llama-7b"}}},
                      false},
        ConditionCase{R"({"ArnLike":{"aws:SourceArn":"arn:aws:batch:*:*:job-queue/*"}})",
                      {{"aws:SourceArn", {kQueueA}}},
                      true},
        ConditionCase{R"({"Bool":{"aws:SecureTransport":"true"}})",
                      {{"aws:SecureTransport", {"false"}}},
                      false},
        ConditionCase{
            R"({"Bool":{"aws:SecureTransport":true}})", {{"aws:SecureTransport", {"true"}}}, true},
        ConditionCase{
            R"({"NumericLessThanEquals":{"lote:NumNodes":"4"}})", {{"lote:NumNodes", {"4"}}}, true},
        ConditionCase{
            R"({"NumericLessThan":{"lote:NumNodes":4}})", {{"lote:NumNodes", {"4"}}}, false},
        ConditionCase{
            R"({"NumericGreaterThan":{"lote:NumNodes":"x"}})", {{"lote:NumNodes", {"4"}}}, false},
        // Null: true = the key is absent.
        ConditionCase{R"({"Null":{"aws:RequestTag/team":"true"}})", {}, true},
        ConditionCase{R"({"Null":{"aws:RequestTag/team":"false"}})", {}, false},
        ConditionCase{
            R"({"Null":{"aws:RequestTag/team":"false"}})", {{"aws:RequestTag/team", {"a"}}}, true},
        // Multi-valued keys with set qualifiers.
        ConditionCase{R"({"ForAllValues:StringEquals":{"aws:TagKeys":["team","project"]}})",
                      {{"aws:TagKeys", {"team"}}},
                      true},
        ConditionCase{R"({"ForAllValues:StringEquals":{"aws:TagKeys":["team","project"]}})",
                      {{"aws:TagKeys", {"team", "owner"}}},
                      false},
        ConditionCase{R"({"ForAllValues:StringEquals":{"aws:TagKeys":["team"]}})", {}, true},
        ConditionCase{R"({"ForAnyValue:StringEquals":{"aws:TagKeys":["team"]}})",
                      {{"aws:TagKeys", {"owner", "team"}}},
                      true},
        ConditionCase{R"({"ForAnyValue:StringEquals":{"aws:TagKeys":["team"]}})", {}, false},
        // Several keys and operators: all must hold.
        ConditionCase{R"({"StringEquals":{"aws:RequestTag/team":"a","aws:RequestTag/env":"dev"}})",
                      {{"aws:RequestTag/team", {"a"}}, {"aws:RequestTag/env", {"dev"}}},
                      true},
        ConditionCase{
            R"({"StringEquals":{"aws:RequestTag/team":"a"},"Null":{"aws:RequestTag/env":"true"}})",
            {{"aws:RequestTag/team", {"a"}}, {"aws:RequestTag/env", {"dev"}}},
            false},
        // Variables in condition values.
        ConditionCase{R"({"StringEquals":{"aws:ResourceTag/owner":"${aws:username}"}})",
                      {{"aws:ResourceTag/owner", {"alice"}}, {"aws:username", {"alice"}}},
                      true},
        ConditionCase{R"({"StringEquals":{"aws:ResourceTag/owner":"${aws:username}"}})",
                      {{"aws:ResourceTag/owner", {"alice"}}, {"aws:username", {"bob"}}},
                      false}));

TEST(EvaluateTest, FirstMatchingAllowIsReported) {
  Policy a = MustParse(R"({"Statement":[{"Sid":"Narrow","Effect":"Allow","Action":"batch:SubmitJob",
      "Resource":"arn:aws:batch:*:*:job-queue/team-b"},
      {"Sid":"Wide","Effect":"Allow","Action":"batch:*","Resource":"*"}]})",
                       "pa");
  Decision d = Evaluate(Req("batch:SubmitJob", kQueueA), {a});
  ASSERT_TRUE(d.allowed());
  EXPECT_EQ(d.statement, "Wide");
  Policy unnamed =
      MustParse(R"({"Statement":[{"Effect":"Deny","Action":"*","Resource":"*"}]})", "pu");
  EXPECT_EQ(Evaluate(Req("batch:SubmitJob", kQueueA), {a, unnamed}).statement, "Statement[0]");
}

}  // namespace
}  // namespace lote::iam
