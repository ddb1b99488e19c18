#include "control/job_render.h"

#include <gtest/gtest.h>

#include <set>

#include "control/job_env.h"
#include "control/job_state.h"

namespace lote::control {
namespace {

// Members of botocore's batch shapes (service-2.json), plus lote's extras.
const std::set<std::string> kJobDetailKeys = {"jobArn",
                                              "jobName",
                                              "jobId",
                                              "jobQueue",
                                              "status",
                                              "shareIdentifier",
                                              "schedulingPriority",
                                              "attempts",
                                              "statusReason",
                                              "createdAt",
                                              "retryStrategy",
                                              "startedAt",
                                              "stoppedAt",
                                              "dependsOn",
                                              "jobDefinition",
                                              "parameters",
                                              "container",
                                              "nodeDetails",
                                              "nodeProperties",
                                              "arrayProperties",
                                              "timeout",
                                              "tags",
                                              "propagateTags",
                                              "platformCapabilities",
                                              "eksProperties",
                                              "eksAttempts",
                                              "ecsProperties",
                                              "isCancelled",
                                              "isTerminated",
                                              "consumableResourceProperties",
                                              "progress",
                                              "failureCategory"};  // lote extras
const std::set<std::string> kAttemptDetailKeys = {
    "container",      "startedAt",       "stoppedAt",   "statusReason",
    "taskProperties", "failureCategory", "loteTimeline"};  // lote extras: failureCategory,
                                                           // loteTimeline
const std::set<std::string> kAttemptContainerKeys = {
    "containerInstanceArn", "taskArn",           "exitCode",   "reason",
    "logStreamName",        "networkInterfaces", "loteNotices"};  // lote extra
const std::set<std::string> kContainerDetailKeys = {"image",
                                                    "vcpus",
                                                    "memory",
                                                    "command",
                                                    "jobRoleArn",
                                                    "executionRoleArn",
                                                    "volumes",
                                                    "environment",
                                                    "mountPoints",
                                                    "readonlyRootFilesystem",
                                                    "ulimits",
                                                    "privileged",
                                                    "user",
                                                    "exitCode",
                                                    "reason",
                                                    "containerInstanceArn",
                                                    "taskArn",
                                                    "logStreamName",
                                                    "instanceType",
                                                    "networkInterfaces",
                                                    "resourceRequirements",
                                                    "linuxParameters",
                                                    "logConfiguration",
                                                    "secrets",
                                                    "networkConfiguration",
                                                    "fargatePlatformConfiguration",
                                                    "ephemeralStorage",
                                                    "runtimePlatform",
                                                    "repositoryCredentials",
                                                    "enableExecuteCommand",
                                                    "loteNotices"};  // lote extra
const std::set<std::string> kJobSummaryKeys = {
    "jobArn",          "jobId",          "jobName",         "capacityUsage",
    "createdAt",       "scheduledAt",    "shareIdentifier", "status",
    "statusReason",    "startedAt",      "stoppedAt",       "container",
    "arrayProperties", "nodeProperties", "jobDefinition",   "failureCategory"};

void ExpectKeysIn(const Json& j, const std::set<std::string>& allowed, const std::string& where) {
  ASSERT_TRUE(j.is_object()) << where;
  for (auto it = j.begin(); it != j.end(); ++it) {
    EXPECT_TRUE(allowed.count(it.key()))
        << where << " has key " << it.key() << " outside the AWS shape";
  }
}

void ExpectJobDetailShape(const Json& j) {
  ExpectKeysIn(j, kJobDetailKeys, "JobDetail");
  for (const Json& a : j["attempts"]) {
    ExpectKeysIn(a, kAttemptDetailKeys, "AttemptDetail");
    ExpectKeysIn(a["container"], kAttemptContainerKeys, "AttemptContainerDetail");
  }
  if (j.contains("container"))
    ExpectKeysIn(j["container"], kContainerDetailKeys, "ContainerDetail");
  for (const char* required : {"jobName", "jobId", "jobQueue", "status", "jobDefinition"}) {
    EXPECT_TRUE(j.contains(required)) << required;
  }
}

ContainerSpec Container() {
  ContainerSpec c;
  c.image = "busybox";
  c.command = {"sh", "-c", "exit 0"};
  c.environment = {{"A", "1"}};
  c.resource_requirements = {{"VCPU", "1"}, {"MEMORY", "512"}};
  c.other = Json{{"jobRoleArn", "arn:aws:iam::123456789012:role/r"}};
  return c;
}

Job BaseJob() {
  Job job;
  job.id = "job-1";
  job.arn = "arn:aws:batch:us-east-1:123456789012:job/job-1";
  job.name = "hello";
  job.queue_arn = "arn:aws:batch:us-east-1:123456789012:job-queue/q1";
  job.definition_arn = "arn:aws:batch:us-east-1:123456789012:job-definition/echo:3";
  job.definition_name = "echo";
  job.definition_revision = 3;
  job.created_at = 1000;
  job.container = Container();
  job.platform_capability = "EC2";
  return job;
}

Job Drive(Job job, const std::vector<JobEvent>& events) {
  std::vector<JobEvent> all = {JobEvent::Submitted(job, job.created_at)};
  all.insert(all.end(), events.begin(), events.end());
  Result<Job> r = Replay(all);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : job;
}

std::vector<ScheduledNode> Placement(int32_t nodes) {
  std::vector<ScheduledNode> out;
  for (int32_t i = 0; i < nodes; ++i)
    out.push_back({i, "i-" + std::to_string(i), "127.0.1." + std::to_string(i + 1), {}});
  return out;
}

TEST(DescribeJobJson, SucceededContainerJob) {
  Job job = BaseJob();
  job.retry_strategy = {2, {{"", "", "3", RetryAction::kExit, ""}}, true};
  job.timeout_seconds = 120;
  job.tags = {{"team", "ml"}};
  job.parameters = {{"p", "v"}};
  job.depends_on = {{"dep-1", DependencyType::kNone}};
  job = Drive(
      job, {JobEvent::DependenciesResolved(1100), JobEvent::Scheduled("ce", Placement(1), 1200),
            JobEvent::NodeStarted(1, 0, "arn:aws:ecs:task/1", "echo/default/t1", 1300),
            JobEvent::Progress(Json{{"step", 1}}, 1350), JobEvent::NodeExited(1, 0, 0, 0, 1400)});
  Json j = DescribeJobJson(job);
  ExpectJobDetailShape(j);
  EXPECT_EQ(j["status"], "SUCCEEDED");
  EXPECT_EQ(j["statusReason"], "Essential container in task exited");
  EXPECT_EQ(j["createdAt"], 1000);
  EXPECT_EQ(j["startedAt"], 1300);
  EXPECT_EQ(j["stoppedAt"], 1400);
  EXPECT_EQ(j["jobDefinition"], "arn:aws:batch:us-east-1:123456789012:job-definition/echo:3");
  EXPECT_EQ(j["parameters"]["p"], "v");
  EXPECT_EQ(j["dependsOn"][0]["jobId"], "dep-1");
  EXPECT_FALSE(j["dependsOn"][0].contains("type"));
  EXPECT_EQ(j["retryStrategy"]["attempts"], 2);
  EXPECT_EQ(j["retryStrategy"]["evaluateOnExit"][0]["onExitCode"], "3");
  EXPECT_EQ(j["retryStrategy"]["evaluateOnExit"][0]["action"], "EXIT");
  EXPECT_EQ(j["timeout"]["attemptDurationSeconds"], 120);
  EXPECT_EQ(j["tags"]["team"], "ml");
  EXPECT_EQ(j["platformCapabilities"][0], "EC2");
  EXPECT_EQ(j["container"]["image"], "busybox");
  EXPECT_EQ(j["container"]["command"][2], "exit 0");
  EXPECT_EQ(j["container"]["jobRoleArn"], "arn:aws:iam::123456789012:role/r");
  EXPECT_EQ(j["container"]["exitCode"], 0);
  EXPECT_EQ(j["container"]["logStreamName"], "echo/default/t1");
  EXPECT_EQ(j["container"]["taskArn"], "arn:aws:ecs:task/1");
  EXPECT_EQ(j["container"]["networkInterfaces"][0]["privateIpv4Address"], "127.0.1.1");
  ASSERT_EQ(j["attempts"].size(), 1u);
  EXPECT_EQ(j["attempts"][0]["container"]["exitCode"], 0);
  EXPECT_EQ(j["attempts"][0]["container"]["logStreamName"], "echo/default/t1");
  EXPECT_EQ(j["attempts"][0]["startedAt"], 1300);
  EXPECT_EQ(j["attempts"][0]["stoppedAt"], 1400);
  EXPECT_EQ(j["attempts"][0]["statusReason"], "Essential container in task exited");
  EXPECT_FALSE(j["attempts"][0].contains("failureCategory"));
  EXPECT_EQ(j["progress"]["step"], 1);
  EXPECT_FALSE(j.contains("failureCategory"));
  EXPECT_FALSE(j.contains("nodeProperties"));
  EXPECT_FALSE(j.contains("arrayProperties"));
}

TEST(DescribeJobJson, RunningJobHasNoAttemptsYet) {
  Job job = Drive(BaseJob(), {JobEvent::DependenciesResolved(1100),
                              JobEvent::Scheduled("ce", Placement(1), 1200),
                              JobEvent::NodeStarted(1, 0, "t", "echo/default/t", 1300)});
  Json j = DescribeJobJson(job);
  ExpectJobDetailShape(j);
  EXPECT_EQ(j["status"], "RUNNING");
  EXPECT_TRUE(j["attempts"].empty());
  EXPECT_FALSE(j.contains("stoppedAt"));
  EXPECT_FALSE(j.contains("retryStrategy"));
  EXPECT_EQ(j["container"]["logStreamName"], "echo/default/t");
  EXPECT_FALSE(j["container"].contains("exitCode"));
  Json runnable = DescribeJobJson(Drive(BaseJob(), {JobEvent::DependenciesResolved(1100)}));
  EXPECT_FALSE(runnable.contains("startedAt"));
  EXPECT_FALSE(runnable["container"].contains("logStreamName"));
}

TEST(DescribeJobJson, FailedGangAndNodeViews) {
  Job job = BaseJob();
  job.container.reset();
  ContainerSpec worker = Container();
  worker.command = {"worker"};
  job.node_properties =
      NodeProperties{3, 0, {{0, 0, Container(), {}, {}}, {1, 2, worker, {"trn1.32xlarge"}, {}}}};
  std::vector<JobEvent> events = {JobEvent::DependenciesResolved(1100),
                                  JobEvent::Scheduled("ce", Placement(3), 1200)};
  for (int32_t i = 0; i < 3; ++i)
    events.push_back(
        JobEvent::NodeStarted(1, i, "t" + std::to_string(i), "s" + std::to_string(i), 1300));
  events.push_back(JobEvent::NodeExited(1, 2, 1, 0, 1400));
  job = Drive(job, events);
  ASSERT_EQ(job.status, JobStatus::kFailed);

  Json j = DescribeJobJson(job);
  ExpectJobDetailShape(j);
  EXPECT_FALSE(j.contains("container"));
  EXPECT_FALSE(j.contains("nodeDetails"));
  EXPECT_EQ(j["nodeProperties"]["numNodes"], 3);
  EXPECT_EQ(j["nodeProperties"]["mainNode"], 0);
  EXPECT_EQ(j["nodeProperties"]["nodeRangeProperties"][1]["targetNodes"], "1:2");
  EXPECT_EQ(j["nodeProperties"]["nodeRangeProperties"][1]["container"]["command"][0], "worker");
  EXPECT_EQ(j["nodeProperties"]["nodeRangeProperties"][1]["instanceTypes"][0], "trn1.32xlarge");
  EXPECT_EQ(j["failureCategory"], "USER_ERROR");
  ASSERT_EQ(j["attempts"].size(), 1u);
  EXPECT_EQ(j["attempts"][0]["failureCategory"], "USER_ERROR");
  EXPECT_EQ(j["attempts"][0]["container"]["exitCode"], 1);
  EXPECT_EQ(j["attempts"][0]["container"]["reason"],
            "USER_ERROR: Essential container in task exited");
  EXPECT_EQ(j["attempts"][0]["container"]["logStreamName"], "s2");

  std::vector<Job> nodes = NodeJobs(job);
  ASSERT_EQ(nodes.size(), 3u);
  Json main = DescribeJobJson(nodes[0]);
  ExpectJobDetailShape(main);
  EXPECT_EQ(main["jobId"], "job-1#0");
  EXPECT_EQ(main["nodeDetails"]["nodeIndex"], 0);
  EXPECT_EQ(main["nodeDetails"]["isMainNode"], true);
  EXPECT_EQ(main["status"], "FAILED");
  EXPECT_EQ(main["container"]["command"][0], "sh");
  EXPECT_EQ(main["container"]["logStreamName"], "s0");
  EXPECT_NE(main["container"]["reason"].get<std::string>().find("node 2 failed"),
            std::string::npos);
  Json failed = DescribeJobJson(nodes[2]);
  EXPECT_EQ(failed["nodeDetails"]["isMainNode"], false);
  EXPECT_EQ(failed["container"]["command"][0], "worker");
  EXPECT_EQ(failed["container"]["exitCode"], 1);
  EXPECT_EQ(failed["attempts"][0]["container"]["exitCode"], 1);
}

TEST(DescribeJobJson, ArrayParentAndChild) {
  Job parent = BaseJob();
  parent.array = ArrayInfo{3, -1, {}, 0};
  parent = Drive(
      parent, {JobEvent::ArrayChildrenUpdated(
                  CountStatuses({JobStatus::kRunning, JobStatus::kSucceeded, JobStatus::kRunnable}),
                  2000)});
  Json j = DescribeJobJson(parent);
  ExpectJobDetailShape(j);
  EXPECT_EQ(j["status"], "PENDING");
  EXPECT_EQ(j["arrayProperties"]["size"], 3);
  EXPECT_EQ(j["arrayProperties"]["statusSummary"]["RUNNING"], 1);
  EXPECT_EQ(j["arrayProperties"]["statusSummary"]["SUCCEEDED"], 1);
  EXPECT_EQ(j["arrayProperties"]["statusSummary"]["FAILED"], 0);
  EXPECT_EQ(j["arrayProperties"]["statusSummaryLastUpdatedAt"], 2000);
  EXPECT_FALSE(j["arrayProperties"].contains("index"));

  Job child = BaseJob();
  child.id = "job-1:2";
  child.array = ArrayInfo{3, 2, {}, 0};
  child.array_parent_id = "job-1";
  child.depends_on = {{"job-1:1", DependencyType::kSequential}};
  Json c = DescribeJobJson(child);
  ExpectJobDetailShape(c);
  EXPECT_EQ(c["arrayProperties"]["index"], 2);
  EXPECT_FALSE(c["arrayProperties"].contains("statusSummary"));
  EXPECT_EQ(c["dependsOn"][0]["type"], "SEQUENTIAL");
}

TEST(JobSummaryJson, Shapes) {
  Job job =
      Drive(BaseJob(),
            {JobEvent::DependenciesResolved(1100), JobEvent::Scheduled("ce", Placement(1), 1200),
             JobEvent::NodeStarted(1, 0, "t", "s", 1300), JobEvent::NodeExited(1, 0, 4, 0, 1400)});
  Json s = JobSummaryJson(job);
  ExpectKeysIn(s, kJobSummaryKeys, "JobSummary");
  EXPECT_EQ(s["status"], "FAILED");
  EXPECT_EQ(s["container"]["exitCode"], 4);
  EXPECT_EQ(s["container"]["reason"], "USER_ERROR: Essential container in task exited");
  EXPECT_EQ(s["failureCategory"], "USER_ERROR");
  EXPECT_EQ(s["startedAt"], 1300);
  EXPECT_EQ(s["stoppedAt"], 1400);

  Job gang = BaseJob();
  gang.container.reset();
  gang.node_properties = NodeProperties{2, 1, {{0, 1, Container(), {}, {}}}};
  Json node = JobSummaryJson(NodeJob(gang, 1).value());
  ExpectKeysIn(node, kJobSummaryKeys, "JobSummary");
  EXPECT_EQ(node["nodeProperties"]["nodeIndex"], 1);
  EXPECT_EQ(node["nodeProperties"]["isMainNode"], true);
  EXPECT_EQ(node["nodeProperties"]["numNodes"], 2);
  EXPECT_FALSE(node.contains("container"));
}

TEST(ParseListJobsRequest, DefaultsAndErrors) {
  Result<ListJobsQuery> q = ParseListJobsRequest(Json{{"jobQueue", "q1"}});
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->job_status, JobStatus::kRunning);  // AWS default
  EXPECT_EQ(q->max_results, 100);
  q = ParseListJobsRequest(Json::parse(
      R"({"jobQueue":"q1","jobStatus":"FAILED","filters":[{"name":"JOB_NAME","values":["a*"]}]})"));
  ASSERT_TRUE(q.ok());
  EXPECT_FALSE(q->job_status.has_value());  // a filter makes any status match
  q = ParseListJobsRequest(Json::parse(
      R"({"jobQueue":"q1","jobStatus":"FAILED","filters":[{"name":"SHARE_IDENTIFIER","values":["lab"]}]})"));
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->job_status, JobStatus::kFailed);

  struct Case {
    std::string request;
    std::string want;
  };
  std::vector<Case> cases = {
      {R"({})", "exactly one of jobQueue, arrayJobId or multiNodeJobId"},
      {R"({"jobQueue":"q","arrayJobId":"a"})", "exactly one"},
      {R"({"jobQueue":"q","jobStatus":"DONE"})", "unknown job status"},
      {R"({"jobQueue":"q","maxResults":0})", "1 to 1000"},
      {R"({"jobQueue":"q","filters":[{"name":"JOB_NAME","values":["a"]},{"name":"JOB_NAME","values":["b"]}]})",
       "only one filter"},
      {R"({"jobQueue":"q","filters":[{"name":"COLOR","values":["a"]}]})", "'COLOR' is not valid"},
      {R"({"jobQueue":"q","filters":[{"name":"JOB_NAME","values":[]}]})", "exactly one string"},
      {R"({"jobQueue":"q","filters":[{"name":"AFTER_CREATED_AT","values":["yesterday"]}]})",
       "milliseconds since the epoch"},
      {R"({"jobQueue":3})", "jobQueue must be a string"},
  };
  for (const Case& c : cases) {
    Result<ListJobsQuery> r = ParseListJobsRequest(Json::parse(c.request));
    ASSERT_FALSE(r.ok()) << c.request;
    EXPECT_TRUE(r.status().IsInvalidArgument());
    EXPECT_NE(r.status().message().find(c.want), std::string::npos)
        << c.request << ": " << r.status().message();
  }
}

TEST(MatchesListJobs, Table) {
  Job running = BaseJob();
  running.status = JobStatus::kRunning;
  running.share_identifier = "lab";
  Job child = running;
  child.id = "job-1:0";
  child.array = ArrayInfo{2, 0, {}, 0};
  child.array_parent_id = "job-1";
  Job gang = running;
  gang.container.reset();
  gang.node_properties = NodeProperties{2, 0, {{0, 1, Container(), {}, {}}}};
  Job node = NodeJob(gang, 1).value();
  Job other_queue = running;
  other_queue.queue_arn = "arn:aws:batch:us-east-1:123456789012:job-queue/q2";

  struct Case {
    std::string name;
    std::string request;
    const Job* job;
    bool want;
  };
  std::vector<Case> cases = {
      {"queue by name", R"({"jobQueue":"q1"})", &running, true},
      {"queue by arn", R"({"jobQueue":"arn:aws:batch:us-east-1:123456789012:job-queue/q1"})",
       &running, true},
      {"other queue", R"({"jobQueue":"q1"})", &other_queue, false},
      {"default status RUNNING only", R"({"jobQueue":"q1","jobStatus":"SUCCEEDED"})", &running,
       false},
      {"queue lists no array children", R"({"jobQueue":"q1"})", &child, false},
      {"queue lists no nodes", R"({"jobQueue":"q1"})", &node, false},
      {"array children", R"({"arrayJobId":"job-1"})", &child, true},
      {"other array", R"({"arrayJobId":"job-9"})", &child, false},
      {"nodes", R"({"multiNodeJobId":"job-1"})", &node, true},
      {"nodes not the parent", R"({"multiNodeJobId":"job-1"})", &gang, false},
      {"name exact any case",
       R"({"jobQueue":"q1","filters":[{"name":"JOB_NAME","values":["HELLO"]}]})", &running, true},
      {"name prefix", R"({"jobQueue":"q1","filters":[{"name":"JOB_NAME","values":["he*"]}]})",
       &running, true},
      {"name mismatch", R"({"jobQueue":"q1","filters":[{"name":"JOB_NAME","values":["hell"]}]})",
       &running, false},
      {"definition name",
       R"({"jobQueue":"q1","filters":[{"name":"JOB_DEFINITION","values":["echo"]}]})", &running,
       true},
      {"definition prefix",
       R"({"jobQueue":"q1","filters":[{"name":"JOB_DEFINITION","values":["ec*"]}]})", &running,
       true},
      {"definition case sensitive",
       R"({"jobQueue":"q1","filters":[{"name":"JOB_DEFINITION","values":["ECHO"]}]})", &running,
       false},
      {"definition arn",
       R"({"jobQueue":"q1","filters":[{"name":"JOB_DEFINITION","values":["arn:aws:batch:us-east-1:123456789012:job-definition/echo:3"]}]})",
       &running, true},
      {"definition other revision",
       R"({"jobQueue":"q1","filters":[{"name":"JOB_DEFINITION","values":["arn:aws:batch:us-east-1:123456789012:job-definition/echo:2"]}]})",
       &running, false},
      {"before", R"({"jobQueue":"q1","filters":[{"name":"BEFORE_CREATED_AT","values":["1001"]}]})",
       &running, true},
      {"not before",
       R"({"jobQueue":"q1","filters":[{"name":"BEFORE_CREATED_AT","values":["1000"]}]})", &running,
       false},
      {"after", R"({"jobQueue":"q1","filters":[{"name":"AFTER_CREATED_AT","values":["999"]}]})",
       &running, true},
      {"not after",
       R"({"jobQueue":"q1","filters":[{"name":"AFTER_CREATED_AT","values":["1000"]}]})", &running,
       false},
      {"share", R"({"jobQueue":"q1","filters":[{"name":"SHARE_IDENTIFIER","values":["lab"]}]})",
       &running, true},
      {"share with status",
       R"({"jobQueue":"q1","jobStatus":"FAILED","filters":[{"name":"SHARE_IDENTIFIER","values":["lab"]}]})",
       &running, false},
  };
  for (const Case& c : cases) {
    Result<ListJobsQuery> q = ParseListJobsRequest(Json::parse(c.request));
    ASSERT_TRUE(q.ok()) << c.name << ": " << q.status().ToString();
    EXPECT_EQ(MatchesListJobs(*q, *c.job), c.want) << c.name;
  }
}

TEST(SortForListJobs, Orders) {
  std::vector<Job> jobs(3, BaseJob());
  jobs[0].id = "b";
  jobs[0].created_at = 5;
  jobs[1].id = "a";
  jobs[1].created_at = 9;
  jobs[2].id = "c";
  jobs[2].created_at = 5;
  ListJobsQuery plain = ParseListJobsRequest(Json{{"jobQueue", "q1"}}).value();
  SortForListJobs(plain, jobs);
  EXPECT_EQ(jobs[0].id, "b");
  EXPECT_EQ(jobs[1].id, "c");
  EXPECT_EQ(jobs[2].id, "a");
  ListJobsQuery filtered =
      ParseListJobsRequest(
          Json::parse(R"({"jobQueue":"q1","filters":[{"name":"JOB_NAME","values":["*"]}]})"))
          .value();
  SortForListJobs(filtered, jobs);
  EXPECT_EQ(jobs[0].id, "a");  // newest first
}

// --- Job environment --------------------------------------------------------

std::map<std::string, std::string> AsMap(const std::vector<EnvVar>& env) {
  std::map<std::string, std::string> m;
  for (const EnvVar& e : env) m[e.name] = e.value;
  return m;
}

TEST(JobEnvironment, SingleNodeJob) {
  Job job = Drive(
      BaseJob(), {JobEvent::DependenciesResolved(1), JobEvent::Scheduled("ce-a", Placement(1), 2)});
  Result<std::vector<EnvVar>> env = JobEnvironment(job, 0);
  ASSERT_TRUE(env.ok()) << env.status().ToString();
  EXPECT_EQ(env->front().name, "A");  // the container's own variables come first
  std::map<std::string, std::string> m = AsMap(*env);
  EXPECT_EQ(m["A"], "1");
  EXPECT_EQ(m["AWS_BATCH_JOB_ID"], "job-1");
  EXPECT_EQ(m["AWS_BATCH_JOB_ATTEMPT"], "1");
  EXPECT_EQ(m["AWS_BATCH_JQ_NAME"], "q1");
  EXPECT_EQ(m["AWS_BATCH_CE_NAME"], "ce-a");
  for (const char* absent :
       {"AWS_BATCH_JOB_ARRAY_INDEX", "AWS_BATCH_JOB_NODE_INDEX", "AWS_BATCH_JOB_NUM_NODES",
        "AWS_BATCH_JOB_MAIN_NODE_INDEX", "AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS"}) {
    EXPECT_EQ(m.count(absent), 0u) << absent;
  }
  EXPECT_TRUE(JobEnvironment(job, 1).status().IsNotFound());
  EXPECT_TRUE(JobEnvironment(BaseJob(), 0).status().IsFailedPrecondition());
}

TEST(JobEnvironment, ArrayChildOnSecondAttempt) {
  Job child = BaseJob();
  child.id = "job-1:7";
  child.array = ArrayInfo{10, 7, {}, 0};
  child.array_parent_id = "job-1";
  child.retry_strategy = {2, {}, true};
  child.container->environment.push_back({"AWS_BATCH_SNEAKY", "x"});  // never passed on
  child =
      Drive(child, {JobEvent::DependenciesResolved(1), JobEvent::Scheduled("ce-a", Placement(1), 2),
                    JobEvent::NodeStarted(1, 0, "", "", 3), JobEvent::NodeExited(1, 0, 1, 0, 4),
                    JobEvent::Scheduled("ce-b", Placement(1), 5)});
  std::map<std::string, std::string> m = AsMap(JobEnvironment(child, 0).value());
  EXPECT_EQ(m["AWS_BATCH_JOB_ID"], "job-1:7");
  EXPECT_EQ(m["AWS_BATCH_JOB_ATTEMPT"], "2");
  EXPECT_EQ(m["AWS_BATCH_CE_NAME"], "ce-b");
  EXPECT_EQ(m["AWS_BATCH_JOB_ARRAY_INDEX"], "7");
  EXPECT_EQ(m["AWS_BATCH_JOB_ARRAY_SIZE"], "10");
  EXPECT_EQ(m.count("AWS_BATCH_SNEAKY"), 0u);
}

TEST(JobEnvironment, MultiNodeMainAndChildren) {
  Job job = BaseJob();
  job.container.reset();
  job.node_properties = NodeProperties{4, 1, {{0, 3, Container(), {}, {}}}};
  job =
      Drive(job, {JobEvent::DependenciesResolved(1), JobEvent::Scheduled("ce-a", Placement(4), 2)});
  for (int32_t node = 0; node < 4; ++node) {
    std::map<std::string, std::string> m = AsMap(JobEnvironment(job, node).value());
    EXPECT_EQ(m["AWS_BATCH_JOB_ID"], "job-1#" + std::to_string(node));
    EXPECT_EQ(m["AWS_BATCH_JOB_NODE_INDEX"], std::to_string(node));
    EXPECT_EQ(m["AWS_BATCH_JOB_NUM_NODES"], "4");
    EXPECT_EQ(m["AWS_BATCH_JOB_MAIN_NODE_INDEX"], "1");
    EXPECT_EQ(m.count("AWS_BATCH_JOB_ARRAY_INDEX"), 0u);
    // Filled in by the backend, which alone knows where the main node runs.
    EXPECT_EQ(m.count("AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS"), 0u);
  }
  EXPECT_TRUE(JobEnvironment(job, 4).status().IsNotFound());
  EXPECT_EQ(DefaultLogStreamName("echo", "abc"), "echo/default/abc");
}

TEST(MakeNodeLaunch, MultiNodeChild) {
  Job job = BaseJob();
  job.container.reset();
  ContainerSpec c = Container();
  c.user = "root";
  c.ulimits = Json::parse(R"([{"name":"memlock","softLimit":-1,"hardLimit":-1}])");
  c.linux_parameters =
      Json::parse(R"({"devices":[{"hostPath":"/dev/neuron0"}],"sharedMemorySize":null})");
  c.other["volumes"] = Json::array();
  c.other["privileged"] = false;
  c.other["readonlyRootFilesystem"] = true;
  c.resource_requirements.push_back({"GPU", "2"});
  job.node_properties = NodeProperties{2, 0, {{0, 1, c, {}, {}}}};
  job.timeout_seconds = 90;
  std::vector<ScheduledNode> placement = Placement(2);
  placement[1].devices = {2, 3};
  job = Drive(job, {JobEvent::DependenciesResolved(1), JobEvent::Scheduled("ce-a", placement, 2)});
  Result<NodeLaunch> launch = MakeNodeLaunch(job, 1);
  ASSERT_TRUE(launch.ok()) << launch.status().ToString();
  EXPECT_EQ(launch->job_id, "job-1#1");
  EXPECT_EQ(launch->attempt, 1);
  EXPECT_EQ(launch->instance_id, "i-1");
  EXPECT_EQ(launch->private_ipv4, "127.0.1.2");
  EXPECT_EQ(launch->devices, (std::vector<int32_t>{2, 3}));
  EXPECT_EQ(launch->command, (std::vector<std::string>{"sh", "-c", "exit 0"}));
  EXPECT_EQ(launch->user, "root");
  EXPECT_EQ(launch->milli_vcpu, 1000);
  EXPECT_EQ(launch->memory_mib, 512);
  EXPECT_EQ(launch->gpus, 2);
  EXPECT_EQ(launch->timeout_seconds, 90);
  EXPECT_EQ(AsMap(launch->environment).count("AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS"), 0u);
  EXPECT_EQ(launch->fields_set,
            (std::vector<std::string>{"command", "environment", "image", "jobRoleArn",
                                      "linuxParameters.devices", "readonlyRootFilesystem",
                                      "resourceRequirements", "ulimits", "user"}));
  EXPECT_TRUE(MakeNodeLaunch(job, 2).status().IsNotFound());
  EXPECT_TRUE(MakeNodeLaunch(BaseJob(), 0).status().IsFailedPrecondition());
}

// Unset optional fields render as AWS returns them: empty lists and maps,
// never absent (clients index them without a check).
TEST(DescribeJobJson, UnsetOptionalFieldsAreEmptyNotAbsent) {
  Job job = BaseJob();
  job.tags.clear();
  job.parameters.clear();
  job.depends_on.clear();
  job.container->environment.clear();
  const Json j = DescribeJobJson(job);
  EXPECT_EQ(j["tags"], Json::object());
  EXPECT_EQ(j["parameters"], Json::object());
  EXPECT_EQ(j["dependsOn"], Json::array());
  EXPECT_EQ(j["attempts"], Json::array());
  for (const char* key : {"command", "environment", "volumes", "mountPoints", "ulimits", "secrets",
                          "resourceRequirements"}) {
    ASSERT_TRUE(j["container"].contains(key)) << key;
    EXPECT_TRUE(j["container"][key].is_array()) << key;
  }
  EXPECT_EQ(j["container"]["volumes"], Json::array());
  ExpectJobDetailShape(j);
}

}  // namespace
}  // namespace lote::control
