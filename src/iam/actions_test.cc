#include "iam/actions.h"

#include <gtest/gtest.h>

#include "iam/authorize.h"

namespace lote::iam {
namespace {

const ArnScope kScope{"us-east-1", "123456789012"};

struct Row {
  const char* service;
  const char* operation;
  std::string request;
  std::vector<std::string> resources;
  bool mutation;
};

// The table, row by row: every service's resource members.
TEST(ActionsTest, OperationsMapToActionsAndArns) {
  const std::string b = "arn:aws:batch:us-east-1:123456789012:";
  const std::string l = "arn:aws:logs:us-east-1:123456789012:log-group:";
  const std::vector<Row> rows = {
      {"batch",
       "SubmitJob",
       R"({"jobQueue":"qa","jobDefinition":"da:3"})",
       {b + "job-queue/qa", b + "job-definition/da:3"},
       true},
      {"batch",
       "SubmitJob",
       R"({"jobQueue":"arn:aws:batch:us-east-1:1:job-queue/x"})",
       {"arn:aws:batch:us-east-1:1:job-queue/x", "*"},
       true},
      {"batch", "CancelJob", R"({"jobId":"j-1"})", {b + "job/j-1"}, true},
      {"batch", "InjectFault", R"({"jobId":"j-1","action":"kill"})", {b + "job/j-1"}, true},
      {"batch", "DumpJob", R"({"jobId":"j-1"})", {b + "job/j-1"}, true},
      {"batch", "CreateJobQueue", R"({"jobQueueName":"q"})", {b + "job-queue/q"}, true},
      {"batch",
       "DeleteComputeEnvironment",
       R"({"computeEnvironment":"ce"})",
       {b + "compute-environment/ce"},
       true},
      {"batch", "DescribeJobQueues", R"({})", {"*"}, false},
      {"batch", "TagResource", R"({"resourceArn":"arn:x"})", {"arn:x"}, true},
      {"logs",
       "GetLogEvents",
       R"({"logGroupName":"/g","logStreamName":"s/1"})",
       {l + "/g:log-stream:s/1"},
       false},
      {"logs", "FilterLogEvents", R"({"logGroupName":"/g"})", {l + "/g"}, false},
      {"logs",
       "FilterLogEvents",
       R"({"logGroupName":"/g","logStreamNames":["a","b"]})",
       {l + "/g:log-stream:a", l + "/g:log-stream:b"},
       false},
      {"logs", "DeleteLogGroup", R"({"logGroupName":"/g"})", {l + "/g"}, true},
      {"logs",
       "DescribeLogStreams",
       R"({"logGroupIdentifier":")" + l + R"(/g:*"})",
       {l + "/g"},
       false},
      {"ecr",
       "CreateRepository",
       R"({"repositoryName":"r"})",
       {"arn:aws:ecr:us-east-1:123456789012:repository/r"},
       true},
      {"ssm",
       "GetParameter",
       R"({"Name":"/a/b"})",
       {"arn:aws:ssm:us-east-1:123456789012:parameter/a/b"},
       false},
      {"ssm",
       "DeleteParameters",
       R"({"Names":["x","/y"]})",
       {"arn:aws:ssm:us-east-1:123456789012:parameter/x",
        "arn:aws:ssm:us-east-1:123456789012:parameter/y"},
       true},
      {"ec2", "CreatePlacementGroup", R"({"GroupName":"pg"})", {"*"}, true},
      {"iam",
       "CreateAccessKey",
       R"({"UserName":"bob"})",
       {"arn:aws:iam::123456789012:user/bob"},
       true},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(std::string(row.service) + ":" + row.operation + " " + row.request);
    RequiredAccess a = Access(row.service, row.operation, *ParseJson(row.request), kScope);
    ASSERT_EQ(a.permissions.size(), row.resources.size());
    for (size_t i = 0; i < row.resources.size(); ++i) {
      EXPECT_EQ(a.permissions[i].action, std::string(row.service) + ":" + row.operation);
      EXPECT_EQ(a.permissions[i].resource, row.resources[i]);
    }
    EXPECT_EQ(a.mutation, row.mutation);
  }
  RequiredAccess sts = Access("sts", "GetCallerIdentity", Json::object(), kScope);
  EXPECT_TRUE(sts.always_allowed);
  EXPECT_FALSE(sts.mutation);
  EXPECT_EQ(Access("iam", "LookupEvents", Json::object(), kScope).permissions[0].action,
            "cloudtrail:LookupEvents");
}

TEST(ActionsTest, RequestTagsFromMapsAndLists) {
  RequiredAccess batch =
      Access("batch", "CreateJobQueue", *ParseJson(R"({"tags":{"team":"a"}})"), kScope);
  EXPECT_EQ(batch.request_tags.at("team"), "a");
  EXPECT_EQ(batch.tag_keys, std::vector<std::string>{"team"});
  RequiredAccess ssm =
      Access("ssm", "PutParameter", *ParseJson(R"({"Tags":[{"Key":"k","Value":"v"}]})"), kScope);
  EXPECT_EQ(ssm.request_tags.at("k"), "v");
  RequiredAccess untag =
      Access("batch", "UntagResource", *ParseJson(R"({"tagKeys":["x"]})"), kScope);
  EXPECT_EQ(untag.tag_keys, std::vector<std::string>{"x"});
}

User UserWith(const std::string& name, const std::string& policy) {
  User u;
  u.name = name;
  u.arn = "arn:aws:iam::123456789012:user/" + name;
  u.policies.push_back(*Policy::Parse("p", policy));
  return u;
}

TEST(AuthorizeTest, QueueScopedPolicyAndAwsMessages) {
  const User alice = UserWith("alice", R"({"Statement":[
      {"Effect":"Allow","Action":"batch:SubmitJob","Resource":[
        "arn:aws:batch:*:*:job-queue/qa","arn:aws:batch:*:*:job-definition/*"]},
      {"Effect":"Deny","Action":"batch:SubmitJob","Resource":"arn:aws:batch:*:*:job-definition/evil*"}]})");
  auto access = [](const char* request) {
    return Access("batch", "SubmitJob", *ParseJson(request), kScope);
  };
  EXPECT_FALSE(Authorize(alice, access(R"({"jobQueue":"qa","jobDefinition":"d"})"), {}, {}));
  auto denied = Authorize(alice, access(R"({"jobQueue":"qb","jobDefinition":"d"})"), {}, {});
  ASSERT_TRUE(denied);
  EXPECT_EQ(denied->message,
            "User: arn:aws:iam::123456789012:user/alice is not authorized to perform: "
            "batch:SubmitJob on resource: arn:aws:batch:us-east-1:123456789012:job-queue/qb "
            "because no identity-based policy allows the batch:SubmitJob action");
  auto explicit_deny =
      Authorize(alice, access(R"({"jobQueue":"qa","jobDefinition":"evil:1"})"), {}, {});
  ASSERT_TRUE(explicit_deny);
  EXPECT_EQ(explicit_deny->decision.outcome, Decision::Outcome::kExplicitDeny);
  EXPECT_NE(explicit_deny->message.find("with an explicit deny in an identity-based policy"),
            std::string::npos);
}

TEST(AuthorizeTest, OwnJobsByQueueOthersByJobArn) {
  const User bob = UserWith("bob", R"({"Statement":[{"Effect":"Allow",
      "Action":["batch:SubmitJob","batch:CancelJob"],"Resource":"arn:aws:batch:*:*:job-queue/qa"}]})");
  const RequiredAccess cancel =
      Access("batch", "CancelJob", *ParseJson(R"({"jobId":"j1"})"), kScope);
  const std::string qa = "arn:aws:batch:us-east-1:123456789012:job-queue/qa";
  EXPECT_FALSE(Authorize(bob, cancel, {}, JobOwner{"bob", qa}));
  EXPECT_TRUE(Authorize(bob, cancel, {}, JobOwner{"alice", qa}));
  EXPECT_TRUE(Authorize(bob, cancel, {}, std::nullopt));
}

// lote's InjectFault and DumpJob act on one job as TerminateJob does.
TEST(AuthorizeTest, InjectAndDumpAreOnTheJobLikeTerminate) {
  const User bob = UserWith("bob", R"({"Statement":[{"Effect":"Allow",
      "Action":["batch:InjectFault","batch:DumpJob"],"Resource":"arn:aws:batch:*:*:job-queue/qa"}]})");
  const std::string qa = "arn:aws:batch:us-east-1:123456789012:job-queue/qa";
  for (const char* op : {"InjectFault", "DumpJob"}) {
    const RequiredAccess access = Access("batch", op, *ParseJson(R"({"jobId":"j1"})"), kScope);
    EXPECT_FALSE(Authorize(bob, access, {}, JobOwner{"bob", qa})) << op;
    EXPECT_TRUE(Authorize(bob, access, {}, JobOwner{"alice", qa})) << op;
  }
}

TEST(AuthorizeTest, MayReadJobByQueueOrJobArnDenyWins) {
  const User dana = UserWith("dana", R"({"Statement":[
      {"Effect":"Allow","Action":"batch:DescribeJobs","Resource":"arn:aws:batch:*:*:job-queue/qa"},
      {"Effect":"Allow","Action":"batch:DescribeJobs","Resource":"arn:aws:batch:*:*:job/shared*"},
      {"Effect":"Deny","Action":"batch:DescribeJobs","Resource":"arn:aws:batch:*:*:job/secret*"}]})");
  const std::string qa = "arn:aws:batch:us-east-1:123456789012:job-queue/qa";
  const std::string qb = "arn:aws:batch:us-east-1:123456789012:job-queue/qb";
  const std::string job = "arn:aws:batch:us-east-1:123456789012:job/";
  EXPECT_TRUE(MayReadJob(dana, "batch:DescribeJobs", job + "j1", qa, {}));
  EXPECT_FALSE(MayReadJob(dana, "batch:DescribeJobs", job + "j1", qb, {}));
  EXPECT_TRUE(MayReadJob(dana, "batch:DescribeJobs", job + "shared-1", qb, {}));
  EXPECT_FALSE(MayReadJob(dana, "batch:DescribeJobs", job + "secret-1", qa, {}));
  EXPECT_FALSE(MayReadJob(dana, "batch:ListJobs", job + "j1", qa, {}));
  EXPECT_TRUE(Access("batch", "DescribeJobs", Json::object(), kScope).always_allowed);
}

TEST(AuthorizeTest, ResourceTagConditionsAskTheLookup) {
  const User carol =
      UserWith("carol", R"({"Statement":[{"Effect":"Allow","Action":"batch:UpdateJobQueue",
      "Resource":"*","Condition":{"StringEquals":{"aws:ResourceTag/team":"${aws:username}"}}}]})");
  const RequiredAccess update =
      Access("batch", "UpdateJobQueue", *ParseJson(R"({"jobQueue":"q"})"), kScope);
  int asked = 0;
  auto tags = [&](const std::string& team) {
    return ResourceTagLookup([&asked, team](const std::string&) {
      ++asked;
      return std::map<std::string, std::string>{{"team", team}};
    });
  };
  EXPECT_FALSE(Authorize(carol, update, tags("carol"), {}));
  EXPECT_TRUE(Authorize(carol, update, tags("dave"), {}));
  EXPECT_EQ(asked, 2);
}

}  // namespace
}  // namespace lote::iam
