#include "control/control_plane.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>

namespace lote::control {
namespace {

class ControlPlaneTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/lote_control_test_XXXXXX";
    dir_ = mkdtemp(tmpl);
    Reopen();
  }
  void TearDown() override {
    cp_.reset();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }
  void Reopen() {
    cp_.reset();
    store_.reset();
    auto store = store::Store::Open(dir_ + "/lote.db");
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(*store);
    ControlConfig config;
    config.host = HostResources{8, 16384};
    auto cp = ControlPlane::Open(store_.get(), &clock_, config);
    ASSERT_TRUE(cp.ok()) << cp.status().ToString();
    cp_ = std::move(*cp);
  }
  static Json Ce(const std::string& name, const std::string& type = "trn1.32xlarge") {
    return {{"computeEnvironmentName", name},
            {"type", "MANAGED"},
            {"computeResources",
             {{"type", "EC2"},
              {"minvCpus", 0},
              {"maxvCpus", 2088},
              {"instanceTypes", {type}},
              {"subnets", {"subnet-1"}},
              {"placementGroup", "cluster"}}}};
  }
  static Json Queue(const std::string& name, std::vector<std::string> ces) {
    Json order = Json::array();
    int i = 1;
    for (auto& c : ces) order.push_back({{"order", i++}, {"computeEnvironment", c}});
    return {{"jobQueueName", name}, {"priority", 1}, {"computeEnvironmentOrder", order}};
  }
  static Json MultinodeDef(const std::string& name) {
    return ParseJson(R"({"jobDefinitionName": ")" + name + R"(", "type": "multinode",
      "nodeProperties": {"numNodes": 4, "mainNode": 0, "nodeRangeProperties": [
        {"targetNodes": "0:", "container": {"image": "train:latest", "vcpus": 96,
         "memory": 500000, "user": "root", "command": ["./train.sh"],
         "ulimits": [{"name": "memlock", "softLimit": -1, "hardLimit": -1}],
         "linuxParameters": {"devices": [{"hostPath": "/dev/neuron0",
           "containerPath": "/dev/neuron0", "permissions": ["READ", "WRITE"]}]}}}]}})")
        .value();
  }

  std::string dir_;
  FakeClock clock_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<ControlPlane> cp_;
};

TEST_F(ControlPlaneTest, ComputeEnvironmentGoesFromCreatingToValid) {
  auto created = cp_->CreateComputeEnvironment(Ce("ce1"));
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  EXPECT_EQ((*created)["computeEnvironmentArn"],
            "arn:aws:batch:us-east-1:000000000000:compute-environment/ce1");
  auto d = cp_->DescribeComputeEnvironments(Json::object());
  ASSERT_TRUE(d.ok());
  const Json& ce = (*d)["computeEnvironments"][0];
  EXPECT_EQ(ce["status"], "CREATING");
  EXPECT_EQ(ce["state"], "ENABLED");
  EXPECT_EQ(ce["computeResources"]["desiredvCpus"], 0);
  ASSERT_EQ(*cp_->Reconcile(), 1);
  auto spec = cp_->FindComputeEnvironment("ce1");
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ(spec->status, "VALID");
  EXPECT_EQ(spec->max_vcpus, 2088);
  ASSERT_EQ(spec->instance_types.size(), 1u);
  EXPECT_EQ(spec->instance_types[0].accelerators, 16);
  EXPECT_EQ(spec->placement_group, "cluster");
  EXPECT_FALSE(spec->emulation);
}

TEST_F(ControlPlaneTest, ComputeEnvironmentErrors) {
  ASSERT_TRUE(cp_->CreateComputeEnvironment(Ce("ce1")).ok());
  auto dup = cp_->CreateComputeEnvironment(Ce("ce1"));
  EXPECT_TRUE(dup.status().IsAlreadyExists());
  auto unknown = cp_->CreateComputeEnvironment(Ce("ce2", "z9.huge"));
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("z9.huge"), std::string::npos);
  Json bad = Ce("ce3");
  bad["computeResources"]["minvCpus"] = 5000;
  auto min_max = cp_->CreateComputeEnvironment(bad);
  ASSERT_FALSE(min_max.ok());
  EXPECT_NE(min_max.status().message().find("minvCpus"), std::string::npos);
  auto enabled = cp_->DeleteComputeEnvironment(Json{{"computeEnvironment", "ce1"}});
  ASSERT_FALSE(enabled.ok());
  EXPECT_NE(enabled.status().message().find("disable it first"), std::string::npos);
  auto missing = cp_->DeleteComputeEnvironment(Json{{"computeEnvironment", "nope"}});
  EXPECT_TRUE(missing.status().IsNotFound());
}

TEST_F(ControlPlaneTest, LimitOfFiftyComputeEnvironments) {
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE(cp_->CreateComputeEnvironment(Ce("ce" + std::to_string(i), "local")).ok());
  }
  auto over = cp_->CreateComputeEnvironment(Ce("ce50", "local"));
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().code(), StatusCode::kResourceExhausted);
}

TEST_F(ControlPlaneTest, QueueLifecycleAndDeleteRules) {
  ASSERT_TRUE(cp_->CreateComputeEnvironment(Ce("ce1")).ok());
  auto q = cp_->CreateJobQueue(Queue("q1", {"ce1"}));
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  // The CE is used by the queue: cannot be deleted even when disabled.
  ASSERT_TRUE(
      cp_->UpdateComputeEnvironment(Json{{"computeEnvironment", "ce1"}, {"state", "DISABLED"}})
          .ok());
  auto used = cp_->DeleteComputeEnvironment(Json{{"computeEnvironment", "ce1"}});
  ASSERT_FALSE(used.ok());
  EXPECT_NE(used.status().message().find("used by job queue q1"), std::string::npos);
  auto enabled = cp_->DeleteJobQueue(Json{{"jobQueue", "q1"}});
  ASSERT_FALSE(enabled.ok());
  EXPECT_NE(enabled.status().message().find("disable it first"), std::string::npos);
  ASSERT_TRUE(
      cp_->UpdateJobQueue(Json{{"jobQueue", (*q)["jobQueueArn"]}, {"state", "DISABLED"}}).ok());
  ASSERT_TRUE(cp_->DeleteJobQueue(Json{{"jobQueue", "q1"}}).ok());
  auto d = cp_->DescribeJobQueues(Json::object());
  EXPECT_EQ((*d)["jobQueues"][0]["status"], "DELETING");
  ASSERT_TRUE(cp_->Reconcile().ok());
  d = cp_->DescribeJobQueues(Json::object());
  EXPECT_TRUE((*d)["jobQueues"].empty());
  ASSERT_TRUE(cp_->DeleteComputeEnvironment(Json{{"computeEnvironment", "ce1"}}).ok());
  ASSERT_TRUE(cp_->Reconcile().ok());
  EXPECT_TRUE(cp_->FindComputeEnvironment("ce1").status().IsNotFound());
}

TEST_F(ControlPlaneTest, QueueAcceptsAtMostThreeComputeEnvironments) {
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(cp_->CreateComputeEnvironment(Ce("ce" + std::to_string(i), "local")).ok());
  }
  auto q = cp_->CreateJobQueue(Queue("q", {"ce0", "ce1", "ce2", "ce3"}));
  ASSERT_FALSE(q.ok());
  EXPECT_NE(q.status().message().find("at most 3"), std::string::npos);
  auto missing = cp_->CreateJobQueue(Queue("q", {"nope"}));
  EXPECT_TRUE(missing.status().IsNotFound());
}

TEST_F(ControlPlaneTest, JobDefinitionRevisionsAndReferences) {
  auto r1 = cp_->RegisterJobDefinition(MultinodeDef("llama"));
  ASSERT_TRUE(r1.ok()) << r1.status().ToString();
  auto r2 = cp_->RegisterJobDefinition(MultinodeDef("llama"));
  ASSERT_TRUE(r2.ok());
  EXPECT_EQ((*r1)["revision"], 1);
  EXPECT_EQ((*r2)["revision"], 2);
  EXPECT_EQ((*r2)["jobDefinitionArn"],
            "arn:aws:batch:us-east-1:000000000000:job-definition/llama:2");
  EXPECT_EQ((*cp_->FindJobDefinition("llama"))["revision"], 2);
  EXPECT_EQ((*cp_->FindJobDefinition("llama:1"))["revision"], 1);
  EXPECT_EQ((*cp_->FindJobDefinition((*r1)["jobDefinitionArn"]))["revision"], 1);
  ASSERT_TRUE(cp_->DeregisterJobDefinition(Json{{"jobDefinition", "llama:2"}}).ok());
  EXPECT_EQ((*cp_->FindJobDefinition("llama"))["revision"], 1);
  auto inactive = cp_->DescribeJobDefinitions(Json{{"status", "INACTIVE"}});
  ASSERT_EQ((*inactive)["jobDefinitions"].size(), 1u);
  EXPECT_EQ((*inactive)["jobDefinitions"][0]["revision"], 2);
  auto no_rev = cp_->DeregisterJobDefinition(Json{{"jobDefinition", "llama"}});
  EXPECT_TRUE(no_rev.status().IsInvalidArgument());
  auto missing = cp_->FindJobDefinition("llama:9");
  EXPECT_TRUE(missing.status().IsNotFound());
}

TEST_F(ControlPlaneTest, JobDefinitionValidation) {
  Json bad_range = MultinodeDef("x");
  bad_range["nodeProperties"]["nodeRangeProperties"][0]["targetNodes"] = "1:";
  auto gap = cp_->RegisterJobDefinition(bad_range);
  ASSERT_FALSE(gap.ok());
  EXPECT_NE(gap.status().message().find("node 0 is in no"), std::string::npos);
  Json big = {{"jobDefinitionName", "big"},
              {"type", "container"},
              {"containerProperties", {{"image", "x"}, {"command", {std::string(25000, 'a')}}}}};
  auto too_big = cp_->RegisterJobDefinition(big);
  ASSERT_FALSE(too_big.ok());
  EXPECT_NE(too_big.status().message().find("24 KiB"), std::string::npos);
  Json both = MultinodeDef("y");
  both["containerProperties"] = {{"image", "x"}};
  EXPECT_FALSE(cp_->RegisterJobDefinition(both).ok());
  Json main_node = MultinodeDef("z");
  main_node["nodeProperties"]["mainNode"] = 4;
  EXPECT_FALSE(cp_->RegisterJobDefinition(main_node).ok());
}

TEST_F(ControlPlaneTest, PaginationOverJobDefinitions) {
  for (int i = 0; i < 25; ++i) {
    Json def = {{"jobDefinitionName", "d" + std::to_string(i % 7)},
                {"type", "container"},
                {"containerProperties", {{"image", "x"}}}};
    ASSERT_TRUE(cp_->RegisterJobDefinition(def).ok());
  }
  std::set<std::string> seen;
  Json req = {{"maxResults", 4}};
  int pages = 0;
  for (;;) {
    auto page = cp_->DescribeJobDefinitions(req);
    ASSERT_TRUE(page.ok());
    for (const Json& d : (*page)["jobDefinitions"]) seen.insert(d["jobDefinitionArn"]);
    ++pages;
    if (!page->contains("nextToken")) break;
    req["nextToken"] = (*page)["nextToken"];
  }
  EXPECT_EQ(seen.size(), 25u);
  EXPECT_EQ(pages, 7);
}

TEST_F(ControlPlaneTest, TagsAndEmulationFlag) {
  Json ce = Ce("emu");
  ce["tags"] = {{kEmulationTag, "true"}};
  auto created = cp_->CreateComputeEnvironment(ce);
  ASSERT_TRUE(created.ok());
  const std::string arn = (*created)["computeEnvironmentArn"];
  EXPECT_TRUE(cp_->FindComputeEnvironment("emu")->emulation);
  ASSERT_TRUE(cp_->TagResource(Json{{"resourceArn", arn}, {"tags", {{"team", "ml"}}}}).ok());
  auto listed = cp_->ListTagsForResource(Json{{"resourceArn", arn}});
  EXPECT_EQ((*listed)["tags"]["team"], "ml");
  ASSERT_TRUE(cp_->UntagResource(Json{{"resourceArn", arn}, {"tagKeys", {kEmulationTag}}}).ok());
  EXPECT_FALSE(cp_->FindComputeEnvironment("emu")->emulation);
  auto unknown =
      cp_->TagResource(Json{{"resourceArn", "arn:aws:batch:us-east-1:000000000000:job-queue/none"},
                            {"tags", {{"a", "b"}}}});
  EXPECT_TRUE(unknown.status().IsNotFound());
}

TEST_F(ControlPlaneTest, SchedulingPolicyInUseCannotBeDeleted) {
  auto p = cp_->CreateSchedulingPolicy(ParseJson(R"({"name": "fair", "fairsharePolicy":
      {"shareDecaySeconds": 3600, "computeReservation": 10,
       "shareDistribution": [{"shareIdentifier": "teamA", "weightFactor": 0.5},
                             {"shareIdentifier": "team*"}]}})")
                                           .value());
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_TRUE(cp_->CreateComputeEnvironment(Ce("ce1")).ok());
  Json q = Queue("fq", {"ce1"});
  q["schedulingPolicyArn"] = (*p)["arn"];
  ASSERT_TRUE(cp_->CreateJobQueue(q).ok());
  auto del = cp_->DeleteSchedulingPolicy(Json{{"arn", (*p)["arn"]}});
  ASSERT_FALSE(del.ok());
  EXPECT_NE(del.status().message().find("used by job queue fq"), std::string::npos);
  auto bad = cp_->CreateSchedulingPolicy(Json{
      {"name", "b"}, {"fairsharePolicy", {{"shareDistribution", {{{"shareIdentifier", "a*b"}}}}}}});
  EXPECT_FALSE(bad.ok());
  auto listed = cp_->ListSchedulingPolicies(Json::object());
  EXPECT_EQ((*listed)["schedulingPolicies"].size(), 1u);
}

TEST_F(ControlPlaneTest, StateSurvivesRestart) {
  ASSERT_TRUE(cp_->CreateComputeEnvironment(Ce("ce1")).ok());
  ASSERT_TRUE(cp_->CreateJobQueue(Queue("q1", {"ce1"})).ok());
  ASSERT_TRUE(cp_->RegisterJobDefinition(MultinodeDef("llama")).ok());
  ASSERT_TRUE(cp_->Reconcile().ok());
  Reopen();
  auto q = cp_->FindJobQueue("q1");
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->status, "VALID");
  ASSERT_EQ(q->compute_environment_arns.size(), 1u);
  // Revisions continue after a restart.
  auto r2 = cp_->RegisterJobDefinition(MultinodeDef("llama"));
  ASSERT_TRUE(r2.ok());
  EXPECT_EQ((*r2)["revision"], 2);
}

}  // namespace
}  // namespace lote::control
