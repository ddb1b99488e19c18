#include "control/job_submit.h"

#include <gtest/gtest.h>

#include <functional>
#include <map>

#include "control/job_render.h"

namespace lote::control {
namespace {

const char* kQueueArn = "arn:aws:batch:us-east-1:123456789012:job-queue/q";

Json ContainerDefinition() {
  return Json::parse(R"({
    "jobDefinitionName": "echo", "revision": 2, "status": "ACTIVE", "type": "container",
    "jobDefinitionArn": "arn:aws:batch:us-east-1:123456789012:job-definition/echo:2",
    "parameters": {"msg": "default", "codec": "mp4"},
    "containerProperties": {
      "image": "busybox", "command": ["echo", "Ref::msg", "Ref::codec", "Ref::missing", "xRef::msg"],
      "environment": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
      "resourceRequirements": [{"type": "VCPU", "value": "2"}, {"type": "MEMORY", "value": "2048"}],
      "user": "nobody", "jobRoleArn": "arn:aws:iam::123456789012:role/r"
    },
    "retryStrategy": {"attempts": 2},
    "timeout": {"attemptDurationSeconds": 600},
    "schedulingPriority": 7,
    "propagateTags": true
  })");
}

Json MultiNodeDefinition() {
  return Json::parse(R"({
    "jobDefinitionName": "llama", "revision": 1, "status": "ACTIVE", "type": "multinode",
    "jobDefinitionArn": "arn:aws:batch:us-east-1:123456789012:job-definition/llama:1",
    "nodeProperties": {
      "numNodes": 4, "mainNode": 0,
      "nodeRangeProperties": [{
        "targetNodes": "0:",
        "container": {
          "image": "trainer", "command": ["train", "Ref::steps"], "vcpus": 96, "memory": 500000, "user": "root",
          "ulimits": [{"name": "memlock", "softLimit": -1, "hardLimit": -1}],
          "linuxParameters": {"devices": [{"hostPath": "/dev/neuron0"}]}
        }
      }]
    },
    "parameters": {"steps": "100"}
  })");
}

Json BaseRequest() {
  return Json::parse(R"({"jobName": "job-1", "jobQueue": "q", "jobDefinition": "echo"})");
}

struct Fixture {
  std::map<std::string, Job> jobs;
  SubmitContext Context(Json definition, bool fair_share = false) {
    SubmitContext ctx;
    ctx.job_id = "11111111-2222-3333-4444-555555555555";
    ctx.queue_arn = kQueueArn;
    ctx.queue_has_fair_share = fair_share;
    ctx.job_definition = std::move(definition);
    ctx.now_ms = 1700000000000;
    ctx.find_job = [this](const std::string& id) -> std::optional<Job> {
      auto it = jobs.find(id);
      if (it == jobs.end()) return std::nullopt;
      return it->second;
    };
    return ctx;
  }
  void AddArray(const std::string& id, int32_t size) {
    Job j;
    j.id = id;
    j.array = ArrayInfo{size, -1, {}, 0};
    jobs[id] = j;
  }
  void AddPlain(const std::string& id) {
    Job j;
    j.id = id;
    jobs[id] = j;
  }
};

TEST(PrepareSubmit, ContainerJobIsNormalised) {
  Fixture f;
  Json req = BaseRequest();
  req["parameters"] = {{"msg", "hello"}};
  req["containerOverrides"] = Json::parse(R"({
    "environment": [{"name": "B", "value": "two"}, {"name": "C", "value": "3"}],
    "resourceRequirements": [{"type": "MEMORY", "value": "4096"}, {"type": "GPU", "value": "1"}]
  })");
  req["tags"] = {{"team", "ml"}};
  Result<SubmittedJobs> r = PrepareSubmit(req, f.Context(ContainerDefinition()));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Job& job = r->job;
  EXPECT_EQ(job.id, "11111111-2222-3333-4444-555555555555");
  EXPECT_EQ(job.arn,
            "arn:aws:batch:us-east-1:123456789012:job/11111111-2222-3333-4444-555555555555");
  EXPECT_EQ(job.status, JobStatus::kSubmitted);
  EXPECT_EQ(job.created_at, 1700000000000);
  EXPECT_EQ(job.definition_arn, "arn:aws:batch:us-east-1:123456789012:job-definition/echo:2");
  EXPECT_EQ(job.definition_revision, 2);
  ASSERT_TRUE(job.container.has_value());
  EXPECT_EQ(job.container->command,
            (std::vector<std::string>{"echo", "hello", "mp4", "Ref::missing", "xRef::msg"}));
  EXPECT_EQ(job.container->environment,
            (std::vector<EnvVar>{{"A", "1"}, {"B", "two"}, {"C", "3"}}));
  EXPECT_EQ(job.container->MilliVcpu(), 2000);
  EXPECT_EQ(job.container->MemoryMib(), 4096);
  EXPECT_EQ(job.container->Gpus(), 1);
  EXPECT_EQ(job.container->user, "nobody");
  EXPECT_EQ(job.container->other["jobRoleArn"], "arn:aws:iam::123456789012:role/r");
  EXPECT_EQ(job.parameters.at("msg"), "hello");
  EXPECT_EQ(job.parameters.at("codec"), "mp4");
  EXPECT_EQ(job.retry_strategy.attempts, 2);  // from the definition
  EXPECT_EQ(job.timeout_seconds, 600);
  EXPECT_EQ(job.scheduling_priority, 7);
  EXPECT_TRUE(job.propagate_tags);
  EXPECT_EQ(job.tags.at("team"), "ml");
  EXPECT_TRUE(r->array_children.empty());
}

TEST(PrepareSubmit, RequestOverridesDefinitionRetryTimeoutPriority) {
  Fixture f;
  Json req = BaseRequest();
  req["retryStrategy"] = Json::parse(
      R"({"attempts": 5, "evaluateOnExit": [{"onExitCode": "13*", "action": "exit"}, {"onReason": "USER_ERROR:*", "action": "RETRY"}]})");
  req["timeout"] = {{"attemptDurationSeconds", 60}};
  req["schedulingPriorityOverride"] = 9999;
  req["propagateTags"] = false;
  Result<SubmittedJobs> r = PrepareSubmit(req, f.Context(ContainerDefinition()));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->job.retry_strategy.attempts, 5);
  ASSERT_EQ(r->job.retry_strategy.evaluate_on_exit.size(), 2u);
  EXPECT_EQ(r->job.retry_strategy.evaluate_on_exit[0].action, RetryAction::kExit);
  EXPECT_EQ(r->job.retry_strategy.evaluate_on_exit[0].on_exit_code, "13*");
  // The action is taken in any case and returned as given (AWS), also after
  // the store's round trip.
  EXPECT_EQ(r->job.retry_strategy.evaluate_on_exit[0].ActionText(), "exit");
  EXPECT_EQ(r->job.retry_strategy.evaluate_on_exit[1].ActionText(), "RETRY");
  Result<Job> stored = JobFromJson(JobToJson(r->job));
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(stored->retry_strategy.evaluate_on_exit[0].action, RetryAction::kExit);
  EXPECT_EQ(*stored, r->job);
  const Json described = DescribeJobJson(r->job);
  EXPECT_EQ(described["retryStrategy"]["evaluateOnExit"][0]["action"], "exit");
  EXPECT_EQ(described["retryStrategy"]["evaluateOnExit"][1]["action"], "RETRY");
  EXPECT_EQ(r->job.timeout_seconds, 60);
  EXPECT_EQ(r->job.scheduling_priority, 9999);
  EXPECT_FALSE(r->job.propagate_tags);
}

TEST(PrepareSubmit, LegacyVcpusMemoryOverride) {
  Fixture f;
  Json def = ContainerDefinition();
  def["containerProperties"].erase("resourceRequirements");
  def["containerProperties"]["vcpus"] = 1;
  def["containerProperties"]["memory"] = 512;
  Json req = BaseRequest();
  req["containerOverrides"] = {{"vcpus", 4}, {"memory", 8192}, {"command", {"true"}}};
  Result<SubmittedJobs> r = PrepareSubmit(req, f.Context(def));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->job.container->MilliVcpu(), 4000);
  EXPECT_EQ(r->job.container->MemoryMib(), 8192);
  EXPECT_EQ(r->job.container->command, std::vector<std::string>{"true"});
}

// The server's owner key becomes the job's owner, its array children's too,
// and survives the job's stored form.
TEST(PrepareSubmit, OwnerKeyIsRecordedInTheJobAndItsChildren) {
  Fixture f;
  Json req = BaseRequest();
  req[kSubmitOwnerKey] = "alice";
  req["arrayProperties"] = {{"size", 2}};
  Result<SubmittedJobs> r = PrepareSubmit(req, f.Context(ContainerDefinition()));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->job.owner, "alice");
  ASSERT_EQ(r->array_children.size(), 2u);
  EXPECT_EQ(r->array_children[1].owner, "alice");
  Result<Job> stored = JobFromJson(JobToJson(r->job));
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  EXPECT_EQ(stored->owner, "alice");
  Result<SubmittedJobs> none = PrepareSubmit(BaseRequest(), f.Context(ContainerDefinition()));
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->job.owner, "");
}

TEST(PrepareSubmit, ArrayChildrenWithSequentialAndNToN) {
  Fixture f;
  f.AddArray("other", 3);
  f.AddPlain("setup");
  Json req = BaseRequest();
  req["arrayProperties"] = {{"size", 3}};
  req["dependsOn"] = Json::parse(
      R"([{"jobId": "other", "type": "N_TO_N"}, {"type": "SEQUENTIAL"}, {"jobId": "setup"}])");
  Result<SubmittedJobs> r = PrepareSubmit(req, f.Context(ContainerDefinition()));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Job& parent = r->job;
  ASSERT_TRUE(parent.IsArrayParent());
  EXPECT_EQ(parent.array->size, 3);
  EXPECT_EQ(parent.array->status_summary.at("SUBMITTED"), 3);
  EXPECT_EQ(parent.array->status_summary.at("RUNNING"), 0);
  EXPECT_EQ(parent.array->status_summary.size(), 7u);
  EXPECT_EQ(parent.depends_on.size(), 3u);
  ASSERT_EQ(r->array_children.size(), 3u);
  const std::string id = parent.id;
  struct Want {
    std::vector<std::string> wait_for;
  };
  std::vector<Want> want = {
      {{"setup", "other:0"}},
      {{"setup", "other:1", id + ":0"}},
      {{"setup", "other:2", id + ":1"}},
  };
  for (int32_t i = 0; i < 3; ++i) {
    const Job& c = r->array_children[static_cast<size_t>(i)];
    EXPECT_EQ(c.id, id + ":" + std::to_string(i));
    EXPECT_EQ(c.arn, parent.arn + ":" + std::to_string(i));
    EXPECT_TRUE(c.IsArrayChild());
    EXPECT_EQ(c.array->index, i);
    EXPECT_EQ(c.array->size, 3);
    EXPECT_EQ(c.array_parent_id, id);
    EXPECT_EQ(c.status, JobStatus::kSubmitted);
    EXPECT_EQ(c.wait_for, want[static_cast<size_t>(i)].wait_for) << "child " << i;
    EXPECT_EQ(c.depends_on.size(), c.wait_for.size());
  }
  EXPECT_EQ(r->array_children[1].depends_on.back().type, DependencyType::kSequential);
  EXPECT_EQ(r->array_children[1].depends_on[1].type, DependencyType::kNToN);
}

// An eksProperties definition's single-container pod runs as that container:
// command then args, env, resources (limits, else requests) in Batch terms;
// eksPropertiesOverride replaces fields of the container (env merged by name).
TEST(PrepareSubmit, EksPodRunsAsItsSingleContainer) {
  Fixture f;
  Json def = Json::parse(R"({
    "jobDefinitionName": "pod", "revision": 1, "status": "ACTIVE", "type": "container",
    "jobDefinitionArn": "arn:aws:batch:us-east-1:123456789012:job-definition/pod:1",
    "eksProperties": {"podProperties": {"hostNetwork": true, "containers": [{
      "name": "main", "image": "busybox", "command": ["sh", "-c"], "args": ["echo $A"],
      "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
      "resources": {"limits": {"cpu": "500m", "memory": "1Gi"},
                    "requests": {"cpu": "2", "memory": "100Mi"}},
      "securityContext": {"runAsUser": 65534}}]}}})");
  Result<SubmittedJobs> r = PrepareSubmit(BaseRequest(), f.Context(def));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const ContainerSpec& c = *r->job.container;
  EXPECT_EQ(c.image, "busybox");
  EXPECT_EQ(c.command, (std::vector<std::string>{"sh", "-c", "echo $A"}));
  EXPECT_EQ(c.MilliVcpu(), 500);  // limits win over requests
  EXPECT_EQ(c.MemoryMib(), 1024);
  EXPECT_EQ(c.user, "65534");
  ASSERT_EQ(c.environment.size(), 2u);

  Json req = BaseRequest();
  req["eksPropertiesOverride"] = Json::parse(R"({"podProperties": {"containers": [{
      "command": ["printenv"], "args": [],
      "env": [{"name": "A", "value": "9"}, {"name": "C", "value": "3"}],
      "resources": {"limits": {"cpu": "1", "memory": "2048Mi"}}}]}})");
  r = PrepareSubmit(req, f.Context(def));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->job.container->command, std::vector<std::string>{"printenv"});
  EXPECT_EQ(r->job.container->MilliVcpu(), 1000);
  EXPECT_EQ(r->job.container->MemoryMib(), 2048);
  ASSERT_EQ(r->job.container->environment.size(), 3u);
  EXPECT_EQ(r->job.container->environment[0].value, "9");

  for (const char* bad : {R"({"cpu": "lots"})", R"({"memory": "1Qi"})", R"({"cpu": "-1"})"}) {
    Json d = def;
    d["eksProperties"]["podProperties"]["containers"][0]["resources"] = {
        {"limits", Json::parse(bad)}};
    EXPECT_FALSE(PrepareSubmit(BaseRequest(), f.Context(d)).ok()) << bad;
  }
  Json two = def;
  two["eksProperties"]["podProperties"]["containers"].push_back(
      two["eksProperties"]["podProperties"]["containers"][0]);
  Result<SubmittedJobs> refused = PrepareSubmit(BaseRequest(), f.Context(two));
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("single-container pods"), std::string::npos)
      << refused.status().message();
  Json plain = BaseRequest();
  plain["eksPropertiesOverride"] = Json::object();
  EXPECT_FALSE(PrepareSubmit(plain, f.Context(ContainerDefinition())).ok());
}

// An EKS pod that requests nothing runs in lote's smallest slot, and the job
// is shown with its pod (eksProperties), as AWS shows EKS jobs.
TEST(PrepareSubmit, AnEksPodWithoutResourcesGetsTheSmallestSlotAndShowsItsPod) {
  Fixture f;
  Json def = Json::parse(
      R"({"jobDefinitionName": "eks", "revision": 1, "status": "ACTIVE", "type": "container",
    "jobDefinitionArn": "arn:aws:batch:us-east-1:000000000000:job-definition/eks:1",
    "eksProperties": {"podProperties": {"containers": [
      {"name": "main", "image": "busybox", "command": ["true"]}]}}})");
  Result<SubmittedJobs> r = PrepareSubmit(BaseRequest(), f.Context(def));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->job.container->MilliVcpu(), 1000);
  EXPECT_EQ(r->job.container->MemoryMib(), 1024);
  Json shown = DescribeJobJson(r->job);
  EXPECT_EQ(shown["eksProperties"]["podProperties"]["containers"][0]["image"], "busybox");
  EXPECT_EQ(shown["eksAttempts"], Json::array());
}

// A Fargate job's resources after overrides follow Fargate's pairs.
TEST(PrepareSubmit, FargateJobsKeepFargatePairsThroughOverrides) {
  Fixture f;
  Json def = ContainerDefinition();
  def["platformCapabilities"] = {"FARGATE"};  // VCPU 2, MEMORY 2048: not a Fargate pair
  Result<SubmittedJobs> bad = PrepareSubmit(BaseRequest(), f.Context(def));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("Fargate does not offer 2048 MiB with 2 vCPU"),
            std::string::npos)
      << bad.status().message();
  Json req = BaseRequest();
  req["containerOverrides"] = Json::parse(R"({"resourceRequirements": [
      {"type": "MEMORY", "value": "4096"}]})");
  Result<SubmittedJobs> good = PrepareSubmit(req, f.Context(def));
  ASSERT_TRUE(good.ok()) << good.status().ToString();
  EXPECT_EQ(good->job.platform_capability, "FARGATE");
  EXPECT_EQ(DescribeJobJson(good->job)["platformCapabilities"], Json::array({"FARGATE"}));
}

// AWS accepts SEQUENTIAL or N_TO_N with a jobId on a job that is not an
// array job; the type then has no effect: the job waits for the whole job.
TEST(PrepareSubmit, TypedDependencyOfAPlainJobWaitsForTheWholeJob) {
  Fixture f;
  f.AddArray("arr3", 3);
  f.AddPlain("setup");
  Json req = BaseRequest();
  req["dependsOn"] = Json::parse(
      R"([{"jobId": "arr3", "type": "N_TO_N"}, {"jobId": "setup", "type": "SEQUENTIAL"}])");
  Result<SubmittedJobs> r = PrepareSubmit(req, f.Context(ContainerDefinition()));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->job.wait_for, (std::vector<std::string>{"arr3", "setup"}));
  ASSERT_EQ(r->job.depends_on.size(), 2u);
  EXPECT_EQ(r->job.depends_on[0].type, DependencyType::kNToN);  // rendered as given
  EXPECT_EQ(r->job.depends_on[1].type, DependencyType::kSequential);
  EXPECT_TRUE(r->array_children.empty());
}

TEST(PrepareSubmit, MultiNodeWithNumNodesAndRangeOverrides) {
  Fixture f;
  Json req = BaseRequest();
  req["jobDefinition"] = "llama";
  req["parameters"] = {{"steps", "7"}};
  req["nodeOverrides"] = Json::parse(R"({
    "numNodes": 6,
    "nodePropertyOverrides": [
      {"targetNodes": "0:", "containerOverrides": {"environment": [{"name": "X", "value": "all"}]}},
      {"targetNodes": "2:3", "containerOverrides": {"command": ["worker", "Ref::steps"]}},
      {"targetNodes": "5", "instanceTypes": ["p5.48xlarge"]}
    ]})");
  Result<SubmittedJobs> r = PrepareSubmit(req, f.Context(MultiNodeDefinition()));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Job& job = r->job;
  ASSERT_TRUE(job.IsMultiNode());
  EXPECT_FALSE(job.container.has_value());
  EXPECT_EQ(job.NumNodes(), 6);
  EXPECT_EQ(job.MainNode(), 0);
  const auto& ranges = job.node_properties->ranges;
  ASSERT_EQ(ranges.size(), 4u);
  EXPECT_EQ(ranges[0].TargetNodes(), "0:1");
  EXPECT_EQ(ranges[1].TargetNodes(), "2:3");
  EXPECT_EQ(ranges[2].TargetNodes(), "4:4");
  EXPECT_EQ(ranges[3].TargetNodes(), "5:5");
  EXPECT_EQ(ranges[0].container.command, (std::vector<std::string>{"train", "7"}));
  EXPECT_EQ(ranges[1].container.command, (std::vector<std::string>{"worker", "7"}));
  EXPECT_EQ(ranges[3].instance_types, std::vector<std::string>{"p5.48xlarge"});
  for (const NodeRange& range : ranges) {
    EXPECT_EQ(range.container.environment, (std::vector<EnvVar>{{"X", "all"}}));
    EXPECT_EQ(range.container.MilliVcpu(), 96000);
    EXPECT_EQ(range.container.MemoryMib(), 500000);
    EXPECT_EQ(range.container.user, "root");
    EXPECT_EQ(range.container.ulimits[0]["name"], "memlock");
  }
  EXPECT_TRUE(r->array_children.empty());
}

TEST(PrepareSubmit, NestedDefinitionRangesPreferTheNarrowest) {
  Fixture f;
  Json def = MultiNodeDefinition();
  Json narrow = def["nodeProperties"]["nodeRangeProperties"][0];
  narrow["targetNodes"] = "1:2";
  narrow["container"]["command"] = {"special"};
  def["nodeProperties"]["nodeRangeProperties"].push_back(narrow);
  Json req = BaseRequest();
  Result<SubmittedJobs> r = PrepareSubmit(req, f.Context(def));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->job.node_properties->ContainerFor(0)->command[0], "train");
  EXPECT_EQ(r->job.node_properties->ContainerFor(1)->command[0], "special");
  EXPECT_EQ(r->job.node_properties->ContainerFor(2)->command[0], "special");
  EXPECT_EQ(r->job.node_properties->ContainerFor(3)->command[0], "train");
}

TEST(PrepareSubmit, FairShare) {
  Fixture f;
  Json req = BaseRequest();
  req["shareIdentifier"] = "lab-a";
  Result<SubmittedJobs> r =
      PrepareSubmit(req, f.Context(ContainerDefinition(), /*fair_share=*/true));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->job.share_identifier, "lab-a");
}

// Node ranges are parsed by control/node_ranges (tested there); these check
// that SubmitJob reads every AWS form through it, in definitions and overrides.
TEST(PrepareSubmit, NodeRangeFormsInDefinitionAndOverrides) {
  Fixture f;
  Json def = MultiNodeDefinition();
  Json head = def["nodeProperties"]["nodeRangeProperties"][0];
  def["nodeProperties"]["nodeRangeProperties"][0]["targetNodes"] = ":";  // every node
  head["targetNodes"] = ":1";
  head["container"]["command"] = {"head"};
  def["nodeProperties"]["nodeRangeProperties"].push_back(head);
  Json req = BaseRequest();
  req["nodeOverrides"] = Json::parse(R"({
    "nodePropertyOverrides": [
      {"targetNodes": "2:", "instanceTypes": ["a"]},
      {"targetNodes": "3", "instanceTypes": ["b"]},
      {"targetNodes": "1:2", "containerOverrides": {"command": ["mid"]}}
    ]})");
  Result<SubmittedJobs> r = PrepareSubmit(req, f.Context(def));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const NodeProperties& np = *r->job.node_properties;
  EXPECT_EQ(np.ContainerFor(0)->command[0], "head");
  EXPECT_EQ(np.ContainerFor(1)->command[0], "mid");
  EXPECT_EQ(np.ContainerFor(2)->command[0], "mid");
  EXPECT_EQ(np.ContainerFor(3)->command[0], "train");
  ASSERT_EQ(np.ranges.size(), 4u);
  EXPECT_EQ(np.ranges[2].instance_types, std::vector<std::string>{"a"});
  EXPECT_EQ(np.ranges[3].instance_types, std::vector<std::string>{"b"});
}

TEST(PrepareSubmit, BareColonIsAnOpenRangeForNumNodes) {
  Fixture f;
  Json def = MultiNodeDefinition();
  def["nodeProperties"]["nodeRangeProperties"][0]["targetNodes"] = ":";
  Json req = BaseRequest();
  req["nodeOverrides"] = {{"numNodes", 6}};
  Result<SubmittedJobs> r = PrepareSubmit(req, f.Context(def));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->job.NumNodes(), 6);
  ASSERT_EQ(r->job.node_properties->ranges.size(), 1u);
  EXPECT_EQ(r->job.node_properties->ranges[0].TargetNodes(), "0:5");
}

TEST(SubstituteParameters, WholeArgumentsOnly) {
  EXPECT_EQ(SubstituteParameters({"a", "Ref::x", "Ref::y", "pre-Ref::x"}, {{"x", "1"}}),
            (std::vector<std::string>{"a", "1", "Ref::y", "pre-Ref::x"}));
}

// Every validation error: a mutation of a valid request (or definition) and a
// substring the message must contain (naming the field and the fix).
struct ErrorCase {
  std::string name;
  std::function<void(Json& request, Json& definition, bool& fair_share)> mutate;
  std::string want;
};

TEST(PrepareSubmit, ValidationErrors) {
  using J = Json;
  std::vector<ErrorCase> cases = {
      {"no name", [](J& r, J&, bool&) { r.erase("jobName"); }, "jobName is required"},
      {"long name", [](J& r, J&, bool&) { r["jobName"] = std::string(129, 'a'); }, "1 to 128"},
      {"bad first char", [](J& r, J&, bool&) { r["jobName"] = "-x"; },
       "must start with a letter or digit"},
      {"bad char", [](J& r, J&, bool&) { r["jobName"] = "a b"; },
       "only letters, digits, hyphens and underscores"},
      {"no queue", [](J& r, J&, bool&) { r.erase("jobQueue"); }, "jobQueue is required"},
      {"no definition", [](J& r, J&, bool&) { r.erase("jobDefinition"); },
       "jobDefinition is required"},
      {"inactive definition", [](J&, J& d, bool&) { d["status"] = "INACTIVE"; }, "is INACTIVE"},
      {"eks override", [](J& r, J&, bool&) { r["eksPropertiesOverride"] = J::object(); },
       "eksPropertiesOverride applies only to job definitions with eksProperties"},
      {"parameters not strings",
       [](J& r, J&, bool&) {
         r["parameters"] = {{"n", 3}};
       },
       "parameters.n must be a string"},
      {"array too small",
       [](J& r, J&, bool&) {
         r["arrayProperties"] = {{"size", 1}};
       },
       "2 to 10,000"},
      {"array too large",
       [](J& r, J&, bool&) {
         r["arrayProperties"] = {{"size", 10001}};
       },
       "2 to 10,000"},
      {"array not object", [](J& r, J&, bool&) { r["arrayProperties"] = 3; },
       "arrayProperties must be an object"},
      {"nodeOverrides on container",
       [](J& r, J&, bool&) {
         r["nodeOverrides"] = {{"numNodes", 2}};
       },
       "use containerOverrides"},
      {"unknown override field",
       [](J& r, J&, bool&) {
         r["containerOverrides"] = {{"image", "x"}};
       },
       "containerOverrides.image is not a ContainerOverrides field"},
      {"command not strings",
       [](J& r, J&, bool&) {
         r["containerOverrides"] = {{"command", {1}}};
       },
       "containerOverrides.command must be a list of strings"},
      {"reserved env",
       [](J& r, J&, bool&) {
         r["containerOverrides"] =
             J::parse(R"({"environment":[{"name":"AWS_BATCH_JOB_ID","value":"x"}]})");
       },
       "AWS_BATCH_JOB_ID is reserved"},
      {"reserved env in definition",
       [](J&, J& d, bool&) {
         d["containerProperties"]["environment"] =
             J::parse(R"([{"name":"AWS_BATCHY","value":"x"}])");
       },
       "job definition echo:2 containerProperties.environment: environment variable AWS_BATCHY is "
       "reserved"},
      {"legacy vcpus over requirements",
       [](J& r, J&, bool&) {
         r["containerOverrides"] = {{"vcpus", 4}};
       },
       "cannot override the VCPU resourceRequirement"},
      {"legacy memory not positive",
       [](J& r, J&, bool&) {
         r["containerOverrides"] = {{"memory", 0}};
       },
       "must be a positive integer"},
      {"bad resource type",
       [](J& r, J&, bool&) {
         r["containerOverrides"] =
             J::parse(R"({"resourceRequirements":[{"type":"DISK","value":"1"}]})");
       },
       "unknown type 'DISK'"},
      {"bad resource value",
       [](J& r, J&, bool&) {
         r["containerOverrides"] =
             J::parse(R"({"resourceRequirements":[{"type":"VCPU","value":"lots"}]})");
       },
       "is not a non-negative number"},
      {"fractional memory",
       [](J& r, J&, bool&) {
         r["containerOverrides"] =
             J::parse(R"({"resourceRequirements":[{"type":"MEMORY","value":"1.5"}]})");
       },
       "must be a whole number"},
      {"no vcpus", [](J&, J& d, bool&) { d["containerProperties"].erase("resourceRequirements"); },
       "no vCPUs"},
      {"tiny memory",
       [](J& r, J&, bool&) {
         r["containerOverrides"] =
             J::parse(R"({"resourceRequirements":[{"type":"MEMORY","value":"2"}]})");
       },
       "at least 4 MiB"},
      {"attempts zero",
       [](J& r, J&, bool&) {
         r["retryStrategy"] = {{"attempts", 0}};
       },
       "retryStrategy.attempts is 0: use 1 to 10"},
      {"attempts eleven",
       [](J& r, J&, bool&) {
         r["retryStrategy"] = {{"attempts", 11}};
       },
       "use 1 to 10"},
      {"rules without attempts",
       [](J& r, J&, bool&) {
         r["retryStrategy"] =
             J::parse(R"({"evaluateOnExit":[{"onExitCode":"1","action":"EXIT"}]})");
       },
       "needs retryStrategy.attempts"},
      {"six rules",
       [](J& r, J&, bool&) {
         r["retryStrategy"] = {{"attempts", 2}, {"evaluateOnExit", J::array()}};
         for (int i = 0; i < 6; ++i)
           r["retryStrategy"]["evaluateOnExit"].push_back(
               {{"onExitCode", "1"}, {"action", "EXIT"}});
       },
       "at most 5"},
      {"bad action",
       [](J& r, J&, bool&) {
         r["retryStrategy"] =
             J::parse(R"({"attempts":2,"evaluateOnExit":[{"onExitCode":"1","action":"STOP"}]})");
       },
       "use RETRY or EXIT"},
      {"missing action",
       [](J& r, J&, bool&) {
         r["retryStrategy"] = J::parse(R"({"attempts":2,"evaluateOnExit":[{"onExitCode":"1"}]})");
       },
       "action is missing"},
      {"rule without condition",
       [](J& r, J&, bool&) {
         r["retryStrategy"] = J::parse(R"({"attempts":2,"evaluateOnExit":[{"action":"EXIT"}]})");
       },
       "has no condition"},
      {"star in middle",
       [](J& r, J&, bool&) {
         r["retryStrategy"] =
             J::parse(R"({"attempts":2,"evaluateOnExit":[{"onReason":"a*b","action":"EXIT"}]})");
       },
       "'*' may only appear as the last character"},
      {"exit code letters",
       [](J& r, J&, bool&) {
         r["retryStrategy"] =
             J::parse(R"({"attempts":2,"evaluateOnExit":[{"onExitCode":"1a","action":"EXIT"}]})");
       },
       "onExitCode '1a'"},
      {"bad reason char",
       [](J& r, J&, bool&) {
         r["retryStrategy"] = J::parse(
             R"({"attempts":2,"evaluateOnExit":[{"onStatusReason":"a;b","action":"EXIT"}]})");
       },
       "character ';' is not allowed"},
      {"long pattern",
       [](J& r, J&, bool&) {
         r["retryStrategy"] = {
             {"attempts", 2},
             {"evaluateOnExit", {{{"onReason", std::string(513, 'a')}, {"action", "EXIT"}}}}};
       },
       "at most 512"},
      {"definition retry bad",
       [](J&, J& d, bool&) {
         d["retryStrategy"] = {{"attempts", 20}};
       },
       "job definition echo:2 retryStrategy.attempts"},
      {"short timeout",
       [](J& r, J&, bool&) {
         r["timeout"] = {{"attemptDurationSeconds", 59}};
       },
       "minimum is 60 seconds"},
      {"timeout not object", [](J& r, J&, bool&) { r["timeout"] = 100; },
       "timeout must be an object"},
      {"too many tags",
       [](J& r, J&, bool&) {
         for (int i = 0; i < 51; ++i) r["tags"]["k" + std::to_string(i)] = "v";
       },
       "at most 50"},
      {"aws tag",
       [](J& r, J&, bool&) {
         r["tags"] = {{"aws:x", "v"}};
       },
       "reserved prefix aws:"},
      {"share required", [](J&, J&, bool& fs) { fs = true; }, "shareIdentifier is required"},
      {"share forbidden", [](J& r, J&, bool&) { r["shareIdentifier"] = "a"; },
       "has no fair-share scheduling policy"},
      {"share chars",
       [](J& r, J&, bool& fs) {
         fs = true;
         r["shareIdentifier"] = "a b";
       },
       "may contain only letters"},
      {"priority high", [](J& r, J&, bool&) { r["schedulingPriorityOverride"] = 10000; },
       "use 0 to 9999"},
      {"priority negative", [](J& r, J&, bool&) { r["schedulingPriorityOverride"] = -1; },
       "use 0 to 9999"},
      {"too many deps",
       [](J& r, J&, bool&) {
         for (int i = 0; i < 21; ++i) r["dependsOn"].push_back({{"jobId", "setup"}});
       },
       "at most 20"},
      {"dep missing", [](J& r, J&, bool&) { r["dependsOn"] = J::parse(R"([{"jobId":"nope"}])"); },
       "job nope does not exist"},
      {"dep without id", [](J& r, J&, bool&) { r["dependsOn"] = J::parse(R"([{}])"); },
       "dependsOn[0].jobId is required"},
      {"dep bad type",
       [](J& r, J&, bool&) {
         r["arrayProperties"] = {{"size", 3}};
         r["dependsOn"] = J::parse(R"([{"jobId":"arr3","type":"ALL"}])");
       },
       "use N_TO_N or SEQUENTIAL"},
      {"n_to_n on plain job without id",
       [](J& r, J&, bool&) { r["dependsOn"] = J::parse(R"([{"type":"N_TO_N"}])"); },
       "applies only to array jobs"},
      {"typed dependency on plain job, unknown id",
       [](J& r, J&, bool&) { r["dependsOn"] = J::parse(R"([{"jobId":"nope","type":"N_TO_N"}])"); },
       "job nope does not exist"},
      {"n_to_n on non-array dep",
       [](J& r, J&, bool&) {
         r["arrayProperties"] = {{"size", 3}};
         r["dependsOn"] = J::parse(R"([{"jobId":"setup","type":"N_TO_N"}])");
       },
       "is not one"},
      {"n_to_n size mismatch",
       [](J& r, J&, bool&) {
         r["arrayProperties"] = {{"size", 4}};
         r["dependsOn"] = J::parse(R"([{"jobId":"arr3","type":"N_TO_N"}])");
       },
       "same size"},
      {"sequential with id",
       [](J& r, J&, bool&) {
         r["arrayProperties"] = {{"size", 3}};
         r["dependsOn"] = J::parse(R"([{"jobId":"arr3","type":"SEQUENTIAL"}])");
       },
       "takes no jobId"},
      {"sequential on plain job",
       [](J& r, J&, bool&) { r["dependsOn"] = J::parse(R"([{"type":"SEQUENTIAL"}])"); },
       "applies only to array jobs"},
      {"unknown definition type", [](J&, J& d, bool&) { d["type"] = "eks"; },
       "lote runs container and multinode jobs"},
  };
  std::vector<ErrorCase> multinode_cases = {
      {"container overrides on multinode",
       [](J& r, J&, bool&) {
         r["containerOverrides"] = {{"command", {"x"}}};
       },
       "use nodeOverrides.nodePropertyOverrides"},
      {"array of multinode",
       [](J& r, J&, bool&) {
         r["arrayProperties"] = {{"size", 2}};
       },
       "cannot be used with multi-node"},
      {"numNodes zero",
       [](J& r, J&, bool&) {
         r["nodeOverrides"] = {{"numNodes", 0}};
       },
       "nodeOverrides.numNodes must be at least 1"},
      {"numNodes without open range",
       [](J& r, J& d, bool&) {
         d["nodeProperties"]["nodeRangeProperties"][0]["targetNodes"] = "0:3";
         r["nodeOverrides"] = {{"numNodes", 8}};
       },
       "open upper bound"},
      {"numNodes below open lower bound",
       [](J& r, J& d, bool&) {
         d["nodeProperties"]["nodeRangeProperties"][0]["targetNodes"] = "0:1";
         J second = d["nodeProperties"]["nodeRangeProperties"][0];
         second["targetNodes"] = "2:";
         d["nodeProperties"]["nodeRangeProperties"].push_back(second);
         r["nodeOverrides"] = {{"numNodes", 2}};
       },
       "open upper bound"},
      {"numNodes not above main",
       [](J& r, J& d, bool&) {
         d["nodeProperties"]["mainNode"] = 2;
         r["nodeOverrides"] = {{"numNodes", 2}};
       },
       "greater than mainNode"},
      {"uncovered node",
       [](J&, J& d, bool&) { d["nodeProperties"]["nodeRangeProperties"][0]["targetNodes"] = "1:"; },
       "do not cover node 0"},
      {"override range out of bounds",
       [](J& r, J&, bool&) {
         r["nodeOverrides"] = J::parse(R"({"nodePropertyOverrides":[{"targetNodes":"2:9"}]})");
       },
       "reaches node 9"},
      {"override range of two colons",
       [](J& r, J&, bool&) {
         r["nodeOverrides"] = J::parse(R"({"nodePropertyOverrides":[{"targetNodes":"1:2:3"}]})");
       },
       "nodeOverrides.nodePropertyOverrides[0].targetNodes '1:2:3' has more than one ':'"},
      {"override range empty",
       [](J& r, J&, bool&) {
         r["nodeOverrides"] = J::parse(R"({"nodePropertyOverrides":[{"targetNodes":""}]})");
       },
       "nodeOverrides.nodePropertyOverrides[0].targetNodes is empty"},
      {"override range not numbers",
       [](J& r, J&, bool&) {
         r["nodeOverrides"] = J::parse(R"({"nodePropertyOverrides":[{"targetNodes":"-1:"}]})");
       },
       "'-1:' is not a node range"},
      {"override range backwards",
       [](J& r, J&, bool&) {
         r["nodeOverrides"] = J::parse(R"({"nodePropertyOverrides":[{"targetNodes":"3:1"}]})");
       },
       "'3:1' starts after it ends"},
      {"override open range past the last node",
       [](J& r, J&, bool&) {
         r["nodeOverrides"] = J::parse(R"({"nodePropertyOverrides":[{"targetNodes":"4:"}]})");
       },
       "'4:' reaches node 4 but numNodes is 4"},
      {"definition range malformed",
       [](J&, J& d, bool&) {
         d["nodeProperties"]["nodeRangeProperties"][0]["targetNodes"] = "0-3";
       },
       "nodeRangeProperties[0].targetNodes '0-3' is not a node range"},
      {"definition range malformed with numNodes override",
       [](J& r, J& d, bool&) {
         d["nodeProperties"]["nodeRangeProperties"][0]["targetNodes"] = "x:";
         r["nodeOverrides"] = {{"numNodes", 8}};
       },
       "nodeRangeProperties[0].targetNodes 'x:' is not a node range"},
      {"override without targetNodes",
       [](J& r, J&, bool&) { r["nodeOverrides"] = J::parse(R"({"nodePropertyOverrides":[{}]})"); },
       "targetNodes is required"},
      {"override unsupported field",
       [](J& r, J&, bool&) {
         r["nodeOverrides"] = J::parse(
             R"({"nodePropertyOverrides":[{"targetNodes":"0:","eksPropertiesOverride":{}}]})");
       },
       "eksPropertiesOverride is not supported"},
      {"override reserved env",
       [](J& r, J&, bool&) {
         r["nodeOverrides"] = J::parse(
             R"({"nodePropertyOverrides":[{"targetNodes":"1:","containerOverrides":{"environment":[{"name":"AWS_BATCH_X","value":"1"}]}}]})");
       },
       "AWS_BATCH_X is reserved"},
      {"main node out of range", [](J&, J& d, bool&) { d["nodeProperties"]["mainNode"] = 4; },
       "must be less than numNodes 4"},
      {"no node ranges",
       [](J&, J& d, bool&) { d["nodeProperties"]["nodeRangeProperties"] = J::array(); },
       "at least one node range"},
  };
  auto run = [](const std::vector<ErrorCase>& list, const Json& definition, const char* def_name) {
    for (const ErrorCase& c : list) {
      Fixture f;
      f.AddArray("arr3", 3);
      f.AddPlain("setup");
      Json request = BaseRequest();
      request["jobDefinition"] = def_name;
      Json def = definition;
      bool fair_share = false;
      c.mutate(request, def, fair_share);
      Result<SubmittedJobs> r = PrepareSubmit(request, f.Context(def, fair_share));
      ASSERT_FALSE(r.ok()) << c.name;
      EXPECT_TRUE(r.status().IsInvalidArgument()) << c.name;
      EXPECT_NE(r.status().message().find(c.want), std::string::npos)
          << c.name << ": got '" << r.status().message() << "', want it to contain '" << c.want
          << "'";
    }
  };
  run(cases, ContainerDefinition(), "echo");
  run(multinode_cases, MultiNodeDefinition(), "llama");
}

}  // namespace
}  // namespace lote::control
