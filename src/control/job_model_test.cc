#include "control/job_model.h"

#include <gtest/gtest.h>

#include <vector>

namespace lote::control {
namespace {

Job SampleMultiNodeJob() {
  Job job;
  job.id = "0a1b";
  job.arn = "arn:aws:batch:us-east-1:123456789012:job/0a1b";
  job.name = "train";
  job.queue_arn = "arn:aws:batch:us-east-1:123456789012:job-queue/q";
  job.definition_arn = "arn:aws:batch:us-east-1:123456789012:job-definition/llama:3";
  job.definition_name = "llama";
  job.definition_revision = 3;
  job.status = JobStatus::kRunning;
  job.created_at = 1000;
  job.started_at = 2000;
  job.parameters = {{"steps", "10"}};
  NodeProperties np;
  np.num_nodes = 4;
  np.main_node = 0;
  ContainerSpec main;
  main.image = "img";
  main.command = {"train", "--main"};
  main.environment = {{"A", "1"}};
  main.resource_requirements = {{"VCPU", "96"}, {"MEMORY", "500000"}, {"GPU", "16"}};
  main.user = "root";
  main.ulimits = Json::parse(R"([{"name":"memlock","softLimit":-1,"hardLimit":-1}])");
  main.linux_parameters = Json::parse(R"({"devices":[{"hostPath":"/dev/neuron0"}]})");
  main.other = Json::parse(R"({"jobRoleArn":"arn:aws:iam::1:role/r"})");
  ContainerSpec worker = main;
  worker.command = {"train"};
  np.ranges = {{0, 0, main, {}, {}}, {1, 3, worker, {"trn1.32xlarge"}, {{"lic", "lic", 2}}}};
  job.node_properties = np;
  job.consumables = {{"arn:aws:batch:us-east-1:1:consumable-resource/seat", "seat", 1}};
  job.depends_on = {{"dep-1", DependencyType::kNone}};
  job.wait_for = {"dep-1"};
  job.retry_strategy = {3, {{"", "USER_ERROR*", "", RetryAction::kRetry, "retry"}}, true};
  job.timeout_seconds = 3600;
  job.tags = {{"team", "ml"}};
  job.share_identifier = "lab";
  job.scheduling_priority = 5;
  job.progress = Json::parse(R"({"step": 5, "loss": 2.5})");
  Attempt a;
  a.compute_environment = "ce";
  a.scheduled_at = 1500;
  a.started_at = 2000;
  for (int32_t i = 0; i < 4; ++i) {
    NodeAttempt n;
    n.node_index = i;
    n.status = JobStatus::kRunning;
    n.instance_id = "i-" + std::to_string(i);
    n.private_ipv4 = "127.0.1." + std::to_string(i + 1);
    n.devices = {0, 1};
    n.started_at = 2000;
    a.nodes.push_back(n);
  }
  a.nodes[2].status = JobStatus::kSucceeded;
  a.nodes[2].exit_code = 0;
  a.nodes[2].stopped_at = 2500;
  job.attempts = {a};
  return job;
}

TEST(JobModel, StatusNamesRoundTrip) {
  for (JobStatus s : kAllJobStatuses) {
    Result<JobStatus> parsed = ParseJobStatus(JobStatusName(s));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, s);
  }
  Result<JobStatus> bad = ParseJobStatus("DONE");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("SUCCEEDED"), std::string::npos);
  EXPECT_TRUE(IsFinal(JobStatus::kFailed));
  EXPECT_FALSE(IsFinal(JobStatus::kRunning));
}

TEST(JobModel, FailureCategoryNamesRoundTrip) {
  for (FailureCategory c :
       {FailureCategory::kUserError, FailureCategory::kTimeout, FailureCategory::kNodeLost,
        FailureCategory::kTerminated, FailureCategory::kInfrastructure, FailureCategory::kCapacity,
        FailureCategory::kHang, FailureCategory::kPreempted}) {
    Result<FailureCategory> parsed = ParseFailureCategory(FailureCategoryName(c));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, c);
  }
  EXPECT_EQ(FailureCategoryName(FailureCategory::kUserError), "USER_ERROR");
  EXPECT_FALSE(ParseFailureCategory("OOPS").ok());
}

TEST(JobModel, JsonRoundTripIsLossless) {
  Job job = SampleMultiNodeJob();
  Result<Job> back = JobFromJson(JobToJson(job));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, job);

  Job array_child;
  array_child.id = "p:7";
  array_child.array_parent_id = "p";
  array_child.array = ArrayInfo{10, 7, {}, 0};
  array_child.container = ContainerSpec{};
  array_child.container->vcpus = 2;
  array_child.container->memory = 1024;
  array_child.failure_category = FailureCategory::kTimeout;
  Result<Job> child_back = JobFromJson(JobToJson(array_child));
  ASSERT_TRUE(child_back.ok()) << child_back.status().ToString();
  EXPECT_EQ(*child_back, array_child);
}

TEST(JobModel, JobFromJsonRejectsBadInput) {
  EXPECT_FALSE(JobFromJson(Json::array()).ok());
  EXPECT_FALSE(JobFromJson(Json::parse(R"({"status":"RUNNING"})")).ok());  // no jobId
  EXPECT_FALSE(JobFromJson(Json::parse(R"({"jobId":"x","status":"LOST"})")).ok());
  EXPECT_FALSE(
      JobFromJson(Json::parse(R"({"jobId":"x","status":"RUNNING","createdAt":"soon"})")).ok());
  EXPECT_FALSE(
      JobFromJson(
          Json::parse(
              R"({"jobId":"x","status":"RUNNING","arrayProperties":{"size":2,"statusSummary":{"RUNNING":"two"}}})"))
          .ok());
  EXPECT_FALSE(
      JobFromJson(
          Json::parse(
              R"({"jobId":"x","status":"RUNNING","nodeProperties":{"numNodes":1,"ranges":[{"instanceTypes":[1]}]}})"))
          .ok());
}

TEST(JobModel, EffectiveResources) {
  ContainerSpec c;
  c.vcpus = 4;
  c.memory = 2048;
  EXPECT_EQ(c.MilliVcpu(), 4000);
  EXPECT_EQ(c.MemoryMib(), 2048);
  EXPECT_EQ(c.Gpus(), 0);
  c.resource_requirements = {{"VCPU", "0.25"}, {"MEMORY", "512"}, {"GPU", "2"}};
  EXPECT_EQ(c.MilliVcpu(), 250);
  EXPECT_EQ(c.MemoryMib(), 512);
  EXPECT_EQ(c.Gpus(), 2);
}

TEST(JobModel, ChildIds) {
  EXPECT_EQ(ArrayChildId("abc", 3), "abc:3");
  EXPECT_EQ(NodeJobId("abc", 2), "abc#2");
  auto node = ParseNodeJobId("abc#12");
  ASSERT_TRUE(node.has_value());
  EXPECT_EQ(node->first, "abc");
  EXPECT_EQ(node->second, 12);
  auto child = ParseArrayChildId("abc:4");
  ASSERT_TRUE(child.has_value());
  EXPECT_EQ(child->first, "abc");
  EXPECT_EQ(child->second, 4);
  EXPECT_FALSE(ParseNodeJobId("abc").has_value());
  EXPECT_FALSE(ParseNodeJobId("abc#x").has_value());
  EXPECT_FALSE(ParseArrayChildId("abc:").has_value());
  EXPECT_FALSE(ParseArrayChildId("abc:-1").has_value());
}

TEST(JobModel, NodeJobViews) {
  Job job = SampleMultiNodeJob();
  Result<Job> main = NodeJob(job, 0);
  ASSERT_TRUE(main.ok());
  EXPECT_EQ(main->id, "0a1b#0");
  EXPECT_EQ(main->arn, job.arn + "#0");
  EXPECT_EQ(main->node_index, 0);
  EXPECT_EQ(main->container->command, (std::vector<std::string>{"train", "--main"}));
  EXPECT_EQ(main->status, JobStatus::kRunning);
  ASSERT_EQ(main->attempts.size(), 1u);
  ASSERT_EQ(main->attempts[0].nodes.size(), 1u);
  EXPECT_EQ(main->attempts[0].nodes[0].private_ipv4, "127.0.1.1");

  Result<Job> done = NodeJob(job, 2);
  ASSERT_TRUE(done.ok());
  EXPECT_EQ(done->status, JobStatus::kSucceeded);
  EXPECT_EQ(done->container->command, (std::vector<std::string>{"train"}));
  EXPECT_EQ(done->stopped_at, 2500);

  EXPECT_TRUE(NodeJob(job, 4).status().IsNotFound());
  EXPECT_TRUE(NodeJob(job, -1).status().IsNotFound());
  Job plain;
  plain.id = "p";
  EXPECT_TRUE(NodeJob(plain, 0).status().IsNotFound());

  // Before any attempt the nodes share the job's status.
  job.attempts.clear();
  job.status = JobStatus::kRunnable;
  EXPECT_EQ(NodeJob(job, 3)->status, JobStatus::kRunnable);
}

TEST(ResourceValue, AcceptsWhatAwsAcceptsAndNamesTheRuleOtherwise) {
  for (const char* v : {"1", "0.25", "96", "2147483647", "0002", "1.000"})
    EXPECT_TRUE(ValidateResourceValue("VCPU", v, "f").ok()) << v;
  for (const char* v : {"4", "500000", "2147483647"})
    EXPECT_TRUE(ValidateResourceValue("MEMORY", v, "f").ok()) << v;
  for (const char* v : {"0", "1", "8", "2147483647"})
    EXPECT_TRUE(ValidateResourceValue("GPU", v, "f").ok()) << v;
  struct Bad {
    const char* type;
    const char* value;
    const char* want;
  };
  for (const Bad& b : std::vector<Bad>{
           {"GPU", "2147483648", "is above 2147483647"},
           {"GPU", "4294967296", "is above 2147483647"},
           {"GPU", "9223372036854775808", "is above 2147483647"},
           {"MEMORY", "1e30", "is not a non-negative number"},
           {"VCPU", "1e30", "is not a non-negative number"},
           {"VCPU", "2147483648", "is above"},
           {"VCPU", "2147483647.5", "is above"},
           {"VCPU", "00000000000000000000003", ""},
           {"VCPU", "0", "must be greater than 0"},
           {"VCPU", "0.000", "must be greater than 0"},
           {"MEMORY", "0", "must be greater than 0"},
           {"MEMORY", "1.5", "must be a whole number"},
           {"GPU", "-1", "is not a non-negative number"},
           {"VCPU", "-1", "is not a non-negative number"},
           {"VCPU", "nan", "is not a non-negative number"},
           {"VCPU", "inf", "is not a non-negative number"},
           {"VCPU", " 1", "is not a non-negative number"},
           {"VCPU", "1.", "is not a non-negative number"},
           {"VCPU", ".5", "is not a non-negative number"},
           {"VCPU", "1.2.3", "is not a non-negative number"},
           {"VCPU", "", "is not a non-negative number"},
           {"GPU", "0x10", "is not a non-negative number"},
           {"DISK", "1", "unknown type 'DISK'"},
       }) {
    Status s = ValidateResourceValue(b.type, b.value, "containerOverrides.resourceRequirements");
    if (std::string(b.want).empty()) {  // leading zeros are fine
      EXPECT_TRUE(s.ok()) << b.value;
      continue;
    }
    ASSERT_FALSE(s.ok()) << b.type << " " << b.value;
    EXPECT_TRUE(s.IsInvalidArgument());
    EXPECT_NE(s.message().find(b.want), std::string::npos) << s.message();
    EXPECT_EQ(s.message().rfind("containerOverrides.resourceRequirements", 0), 0u) << s.message();
  }
}

// A job stored before submit checked its values never overflows: its amounts
// are clamped, so that it simply never fits.
TEST(ResourceValue, StoredOutOfRangeValuesAreClamped) {
  ContainerSpec c;
  c.resource_requirements = {{"VCPU", "1e30"}, {"MEMORY", "1e300"}, {"GPU", "2147483648"}};
  EXPECT_EQ(c.MilliVcpu(), kMaxResourceValue * 1000);
  EXPECT_EQ(c.MemoryMib(), kMaxResourceValue);
  EXPECT_EQ(c.Gpus(), kMaxResourceValue);
  c.resource_requirements = {{"GPU", "-5"}, {"MEMORY", "nan"}};
  c.vcpus = int64_t{1} << 62;
  EXPECT_EQ(c.Gpus(), 0);
  EXPECT_EQ(c.MemoryMib(), 0);
  EXPECT_EQ(c.MilliVcpu(), kMaxResourceValue * 1000);
}

TEST(JobModel, LoteSettingIsTheParameterFirstThenTheTag) {
  Job job;
  EXPECT_EQ(job.LoteSetting("lote:k"), nullptr);
  job.tags["lote:k"] = "from-tag";
  ASSERT_NE(job.LoteSetting("lote:k"), nullptr);
  EXPECT_EQ(*job.LoteSetting("lote:k"), "from-tag");
  job.parameters["lote:k"] = "from-parameter";
  EXPECT_EQ(*job.LoteSetting("lote:k"), "from-parameter");
}

}  // namespace
}  // namespace lote::control
