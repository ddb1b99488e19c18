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
    // Ce() names this placement group; CreateComputeEnvironment checks it exists.
    ASSERT_TRUE(cp_->CreatePlacementGroup({{"GroupName", "cluster"}}).ok());
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
    config.host = HostResources{8, 16384, 0, ""};
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
  // An empty list describes every environment, as AWS; a name, that one.
  auto all = cp_->DescribeComputeEnvironments(Json{{"computeEnvironments", Json::array()}});
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_EQ((*all)["computeEnvironments"].size(), 1u);
  auto none = cp_->DescribeComputeEnvironments(Json{{"computeEnvironments", {"other"}}});
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE((*none)["computeEnvironments"].empty());
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

TEST_F(ControlPlaneTest, ComputeEnvironmentNeedsItsPlacementGroupAndLaunchTemplate) {
  Json ce = Ce("ce1");
  ce["computeResources"]["placementGroup"] = "pg-missing";
  auto missing_pg = cp_->CreateComputeEnvironment(ce);
  ASSERT_TRUE(missing_pg.status().IsInvalidArgument()) << missing_pg.status().ToString();
  EXPECT_NE(missing_pg.status().message().find("computeResources.placementGroup 'pg-missing'"),
            std::string::npos)
      << missing_pg.status().message();
  ce["computeResources"]["placementGroup"] = "cluster";
  ce["computeResources"]["launchTemplate"] = {{"launchTemplateName", "lt-a"}};
  auto missing_lt = cp_->CreateComputeEnvironment(ce);
  ASSERT_TRUE(missing_lt.status().IsInvalidArgument());
  EXPECT_NE(missing_lt.status().message().find("launchTemplateName 'lt-a'"), std::string::npos)
      << missing_lt.status().message();
  auto lt = cp_->CreateLaunchTemplate(
      {{"LaunchTemplateName", "lt-a"}, {"LaunchTemplateData", {{"ImageId", "ami-1"}}}});
  ASSERT_TRUE(lt.ok()) << lt.status().ToString();
  ce["computeResources"]["launchTemplate"]["version"] = "2";
  auto missing_version = cp_->CreateComputeEnvironment(ce);
  ASSERT_TRUE(missing_version.status().IsInvalidArgument());
  EXPECT_NE(missing_version.status().message().find("launchTemplate.version"), std::string::npos)
      << missing_version.status().message();
  ce["computeResources"]["launchTemplate"] = {{"launchTemplateName", "lt-a"},
                                              {"launchTemplateId", "lt-0"}};
  EXPECT_TRUE(cp_->CreateComputeEnvironment(ce).status().IsInvalidArgument());
  const std::string id = (*lt)["launchTemplate"]["launchTemplateId"];
  ce["computeResources"]["launchTemplate"] = {{"launchTemplateId", id}, {"version", "$Latest"}};
  ASSERT_TRUE(cp_->CreateComputeEnvironment(ce).ok());
  // An empty version (what envsubst makes of "$Latest") is AWS's default, $Default.
  Json empty_version = Ce("ce-empty-version");
  empty_version["computeResources"]["placementGroup"] = "cluster";
  empty_version["computeResources"]["launchTemplate"] = {{"launchTemplateName", "lt-a"},
                                                         {"version", ""}};
  ASSERT_TRUE(cp_->CreateComputeEnvironment(empty_version).ok());
  auto described = cp_->DescribeComputeEnvironments(
      Json{{"computeEnvironments", Json::array({"ce-empty-version"})}});
  ASSERT_TRUE(described.ok());
  EXPECT_EQ((*described)["computeEnvironments"][0]["computeResources"]["launchTemplate"]["version"],
            "$Default")
      << *described;
  // An update that changes the placement group to one that is not there is refused.
  auto update = cp_->UpdateComputeEnvironment(
      {{"computeEnvironment", "ce1"}, {"computeResources", {{"placementGroup", "pg-other"}}}});
  EXPECT_TRUE(update.status().IsInvalidArgument()) << update.status().ToString();
  // The placement group stays while a compute environment names it.
  EXPECT_TRUE(
      cp_->DeletePlacementGroup({{"GroupName", "cluster"}}).status().IsFailedPrecondition());
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
  // A bare name deregisters the latest ACTIVE revision (here 1), then there is none.
  ASSERT_TRUE(cp_->DeregisterJobDefinition(Json{{"jobDefinition", "llama"}}).ok());
  auto all_inactive = cp_->DescribeJobDefinitions(Json{{"status", "INACTIVE"}});
  EXPECT_EQ((*all_inactive)["jobDefinitions"].size(), 2u);
  auto none_left = cp_->DeregisterJobDefinition(Json{{"jobDefinition", "llama"}});
  EXPECT_TRUE(none_left.status().IsNotFound());
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

// FARGATE / FARGATE_SPOT environments and platformCapabilities FARGATE are
// accepted as AWS accepts them; Fargate's resource pairs are enforced; every
// instanceTypes value AWS accepts resolves (families, optimal, any EC2 type).
TEST_F(ControlPlaneTest, FargateAndEveryAwsInstanceTypeAreAccepted) {
  for (const char* type : {"FARGATE", "FARGATE_SPOT"}) {
    const std::string name = std::string("f-") + type;
    Json ce = {
        {"computeEnvironmentName", name},
        {"type", "MANAGED"},
        {"computeResources",
         {{"type", type}, {"maxvCpus", 64}, {"subnets", {"s-1"}}, {"securityGroupIds", {"sg-1"}}}}};
    auto created = cp_->CreateComputeEnvironment(ce);
    ASSERT_TRUE(created.ok()) << created.status().ToString();
    auto spec = cp_->FindComputeEnvironment(name);
    ASSERT_TRUE(spec.ok());
    EXPECT_TRUE(spec->fargate);
    ASSERT_EQ(spec->instance_types.size(), 1u);
    EXPECT_EQ(spec->instance_types[0].vcpus, 16);
    ce["computeEnvironmentName"] = name + "-x";
    ce["computeResources"]["instanceTypes"] = {"c5.large"};
    auto refused = cp_->CreateComputeEnvironment(ce);
    ASSERT_FALSE(refused.ok());
    EXPECT_NE(refused.status().message().find("does not apply to"), std::string::npos);
  }
  int n = 0;
  for (const char* type : {"optimal", "default_x86_64", "default_arm64", "c5", "p4d", "t2",
                           "t2.micro", "c7g.16xlarge"}) {
    auto created = cp_->CreateComputeEnvironment(Ce("it-" + std::to_string(n++), type));
    EXPECT_TRUE(created.ok()) << type << ": " << created.status().ToString();
  }

  Json def = ParseJson(R"({"jobDefinitionName": "fg", "type": "container",
    "platformCapabilities": ["FARGATE"],
    "containerProperties": {"image": "busybox", "command": ["true"],
      "executionRoleArn": "arn:aws:iam::1:role/x",
      "networkConfiguration": {"assignPublicIp": "ENABLED"},
      "fargatePlatformConfiguration": {"platformVersion": "LATEST"},
      "resourceRequirements": [{"type": "VCPU", "value": "0.25"},
                               {"type": "MEMORY", "value": "512"}]}})")
                 .value();
  auto registered = cp_->RegisterJobDefinition(def);
  ASSERT_TRUE(registered.ok()) << registered.status().ToString();
  auto described = cp_->DescribeJobDefinitions(Json{{"jobDefinitionName", "fg"}});
  ASSERT_TRUE(described.ok());
  const Json& d = (*described)["jobDefinitions"][0];
  EXPECT_EQ(d["platformCapabilities"], Json::array({"FARGATE"}));
  EXPECT_EQ(d["containerProperties"]["networkConfiguration"]["assignPublicIp"], "ENABLED");
  EXPECT_EQ(d["containerProperties"]["fargatePlatformConfiguration"]["platformVersion"], "LATEST");
  struct Bad {
    const char* vcpu;
    const char* memory;
    const char* want;
  };
  for (const Bad& b : std::vector<Bad>{{"0.25", "4096", "does not offer 4096 MiB"},
                                       {"3", "8192", "must be one of 0.25"},
                                       {"16", "32769", "does not offer"},
                                       {"8", "18432", "steps of 4096"}}) {
    Json bad = def;
    bad["containerProperties"]["resourceRequirements"] = {
        {{"type", "VCPU"}, {"value", b.vcpu}}, {{"type", "MEMORY"}, {"value", b.memory}}};
    auto r = cp_->RegisterJobDefinition(bad);
    ASSERT_FALSE(r.ok()) << b.vcpu << "/" << b.memory;
    EXPECT_NE(r.status().message().find(b.want), std::string::npos) << r.status().message();
  }
  for (const auto& [v, m] : std::vector<std::pair<const char*, const char*>>{
           {"0.5", "3072"}, {"1", "8192"}, {"4", "30720"}, {"8", "61440"}, {"16", "122880"}}) {
    Json good = def;
    good["containerProperties"]["resourceRequirements"] = {{{"type", "VCPU"}, {"value", v}},
                                                           {{"type", "MEMORY"}, {"value", m}}};
    EXPECT_TRUE(cp_->RegisterJobDefinition(good).ok()) << v << "/" << m;
  }
  Json gpu = def;
  gpu["containerProperties"]["resourceRequirements"].push_back({{"type", "GPU"}, {"value", "1"}});
  EXPECT_FALSE(cp_->RegisterJobDefinition(gpu).ok());
}

// eksProperties definitions with a single-container pod are accepted (and
// returned as given); multi-container pods are refused with a clear message.
TEST_F(ControlPlaneTest, EksSingleContainerPodsAreAccepted) {
  Json def = ParseJson(R"({"jobDefinitionName": "pod", "type": "container",
    "eksProperties": {"podProperties": {"containers": [{"name": "c", "image": "busybox",
      "command": ["echo", "hi"], "resources": {"limits": {"cpu": "1", "memory": "512Mi"}}}]}}})")
                 .value();
  auto r = cp_->RegisterJobDefinition(def);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto described = cp_->DescribeJobDefinitions(Json{{"jobDefinitionName", "pod"}});
  ASSERT_TRUE(described.ok());
  const Json& d = (*described)["jobDefinitions"][0];
  EXPECT_EQ(d["eksProperties"], def["eksProperties"]);
  EXPECT_EQ(d["containerOrchestrationType"], "EKS");
  Json two = def;
  two["eksProperties"]["podProperties"]["containers"].push_back(
      two["eksProperties"]["podProperties"]["containers"][0]);
  auto refused = cp_->RegisterJobDefinition(two);
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(refused.status().IsInvalidArgument());
  EXPECT_NE(refused.status().message().find("single-container pods"), std::string::npos);
  Json both = def;
  both["containerProperties"] = {{"image", "x"}};
  EXPECT_FALSE(cp_->RegisterJobDefinition(both).ok());
}

}  // namespace
}  // namespace lote::control

namespace lote::control {
namespace {

// Service environments and SAGEMAKER_TRAINING queues (issue 42).
class ServiceEnvironmentTest : public ControlPlaneTest {
 protected:
  static Json Se(const std::string& name, int32_t max = 4) {
    return {{"serviceEnvironmentName", name},
            {"serviceEnvironmentType", "SAGEMAKER_TRAINING"},
            {"capacityLimits", {{{"maxCapacity", max}, {"capacityUnit", "NUM_INSTANCES"}}}},
            {"tags", {{"team", "a"}}}};
  }
  static Json SmQueue(const std::string& name, const std::string& se) {
    return {{"jobQueueName", name},
            {"priority", 1},
            {"jobQueueType", "SAGEMAKER_TRAINING"},
            {"serviceEnvironmentOrder", {{{"order", 1}, {"serviceEnvironment", se}}}}};
  }
};

TEST_F(ServiceEnvironmentTest, LifecycleSurvivesReopen) {
  Result<Json> created = cp_->CreateServiceEnvironment(Se("se"));
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  EXPECT_EQ((*created)["serviceEnvironmentArn"],
            "arn:aws:batch:us-east-1:000000000000:service-environment/se");
  EXPECT_EQ(cp_->CreateServiceEnvironment(Se("se")).status().code(), StatusCode::kAlreadyExists);
  Json d = *cp_->DescribeServiceEnvironments(Json::object());
  ASSERT_EQ(d["serviceEnvironments"].size(), 1u);
  EXPECT_EQ(d["serviceEnvironments"][0]["status"], "CREATING");
  ASSERT_TRUE(cp_->Reconcile().ok());
  Reopen();
  d = *cp_->DescribeServiceEnvironments(Json{{"serviceEnvironments", {"se"}}});
  ASSERT_EQ(d["serviceEnvironments"].size(), 1u);
  const Json& se = d["serviceEnvironments"][0];
  EXPECT_EQ(se["status"], "VALID");
  EXPECT_FALSE(se.contains("statusReason"));
  EXPECT_EQ(se["state"], "ENABLED");
  EXPECT_EQ(se["capacityLimits"][0]["maxCapacity"], 4);
  EXPECT_EQ(se["tags"]["team"], "a");

  ASSERT_TRUE(
      cp_->UpdateServiceEnvironment(
             Json{{"serviceEnvironment", "se"},
                  {"capacityLimits", {{{"maxCapacity", 8}, {"capacityUnit", "NUM_INSTANCES"}}}}})
          .ok());
  d = *cp_->DescribeServiceEnvironments(Json{{"serviceEnvironments", {"se"}}});
  EXPECT_EQ(d["serviceEnvironments"][0]["capacityLimits"][0]["maxCapacity"], 8);
  EXPECT_EQ(d["serviceEnvironments"][0]["status"], "UPDATING");

  // A queue uses it: it cannot be deleted until disabled and detached.
  ASSERT_TRUE(cp_->CreateJobQueue(SmQueue("smq", "se")).ok());
  Json q = (*cp_->DescribeJobQueues(Json{{"jobQueues", {"smq"}}}))["jobQueues"][0];
  EXPECT_EQ(q["jobQueueType"], "SAGEMAKER_TRAINING");
  EXPECT_TRUE(q["computeEnvironmentOrder"].empty());
  EXPECT_EQ(q["serviceEnvironmentOrder"][0]["serviceEnvironment"],
            "arn:aws:batch:us-east-1:000000000000:service-environment/se");
  Result<JobQueueSpec> spec = cp_->FindJobQueue("smq");
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ(spec->type, "SAGEMAKER_TRAINING");
  EXPECT_EQ(spec->service_environment_arns.size(), 1u);
  Result<Json> del = cp_->DeleteServiceEnvironment(Json{{"serviceEnvironment", "se"}});
  EXPECT_NE(del.status().message().find("ENABLED"), std::string::npos);
  ASSERT_TRUE(
      cp_->UpdateServiceEnvironment(Json{{"serviceEnvironment", "se"}, {"state", "DISABLED"}})
          .ok());
  del = cp_->DeleteServiceEnvironment(Json{{"serviceEnvironment", "se"}});
  EXPECT_NE(del.status().message().find("used by job queue smq"), std::string::npos);
  ASSERT_TRUE(cp_->UpdateJobQueue(Json{{"jobQueue", "smq"}, {"state", "DISABLED"}}).ok());
  ASSERT_TRUE(cp_->DeleteJobQueue(Json{{"jobQueue", "smq"}}).ok());
  ASSERT_TRUE(cp_->Reconcile().ok());
  ASSERT_TRUE(cp_->DeleteServiceEnvironment(Json{{"serviceEnvironment", "se"}}).ok());
  ASSERT_TRUE(cp_->Reconcile().ok());
  Reopen();
  EXPECT_TRUE((*cp_->DescribeServiceEnvironments(Json::object()))["serviceEnvironments"].empty());
}

TEST_F(ServiceEnvironmentTest, RefusesMalformedRequestsWithTheField) {
  auto refused = [&](Json req) {
    Result<Json> r = cp_->CreateServiceEnvironment(req);
    EXPECT_FALSE(r.ok()) << req.dump();
    return r.ok() ? std::string() : r.status().message();
  };
  Json bad = Se("x");
  bad["serviceEnvironmentType"] = "ECS";
  EXPECT_NE(refused(bad).find("serviceEnvironmentType"), std::string::npos);
  bad = Se("x");
  bad.erase("capacityLimits");
  EXPECT_NE(refused(bad).find("capacityLimits is required"), std::string::npos);
  bad = Se("x");
  bad["capacityLimits"][0]["maxCapacity"] = 0;
  EXPECT_NE(refused(bad).find("capacityLimits[0].maxCapacity"), std::string::npos);
  bad = Se("x");
  bad["capacityLimits"].push_back({{"maxCapacity", 1}, {"capacityUnit", "ml.m5.large"}});
  EXPECT_NE(refused(bad).find("mixes NUM_INSTANCES"), std::string::npos);
  bad = Se("x");
  bad["capacityLimits"][0]["capacityUnit"] = "c5.large";
  EXPECT_NE(refused(bad).find("SageMaker instance type"), std::string::npos);

  // Queues: the type decides which order is allowed.
  ASSERT_TRUE(cp_->CreateServiceEnvironment(Se("se")).ok());
  Json q = SmQueue("smq", "se");
  q["computeEnvironmentOrder"] = {{{"order", 1}, {"computeEnvironment", "ce"}}};
  EXPECT_NE(cp_->CreateJobQueue(q).status().message().find("not computeEnvironmentOrder"),
            std::string::npos);
  q = SmQueue("smq", "se");
  q.erase("serviceEnvironmentOrder");
  EXPECT_NE(cp_->CreateJobQueue(q).status().message().find("serviceEnvironmentOrder is required"),
            std::string::npos);
  q = SmQueue("smq", "missing");
  EXPECT_EQ(cp_->CreateJobQueue(q).status().code(), StatusCode::kNotFound);
  q = SmQueue("smq", "se");
  q.erase("jobQueueType");
  EXPECT_NE(cp_->CreateJobQueue(q).status().message().find("needs jobQueueType"),
            std::string::npos);
  q = SmQueue("smq", "se");
  q["jobStateTimeLimitActions"] = {{{"reason", "CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY"},
                                    {"state", "RUNNABLE"},
                                    {"maxTimeSeconds", 600},
                                    {"action", "CANCEL"}}};
  EXPECT_FALSE(cp_->CreateJobQueue(q).ok());  // SAGEMAKER_TRAINING: TERMINATE only
  q["jobStateTimeLimitActions"][0]["action"] = "TERMINATE";
  EXPECT_TRUE(cp_->CreateJobQueue(q).ok());
}

}  // namespace
}  // namespace lote::control
