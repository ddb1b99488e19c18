#include "control/job_controller.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>

#include "control/job_index.h"

namespace lote::control {
namespace {

Job RunningJob(const std::string& id, int32_t nodes) {
  Job job;
  job.id = id;
  job.status = JobStatus::kRunning;
  Attempt attempt;
  for (int32_t i = 0; i < nodes; ++i) {
    NodeAttempt n;
    n.node_index = i;
    n.status = JobStatus::kRunning;
    n.log_stream_name = "d/default/" + std::to_string(i);
    attempt.nodes.push_back(n);
  }
  job.attempts.push_back(attempt);
  if (nodes > 1) job.node_properties = NodeProperties{nodes, 0, {}};
  return job;
}

TEST(ProgressTimeout, ParametersFirstThenTagsAndOnlyWholeSeconds) {
  Job job;
  EXPECT_FALSE(ProgressTimeoutSeconds(job));
  job.tags[kProgressTimeoutKey] = "30";
  EXPECT_EQ(ProgressTimeoutSeconds(job), 30);
  job.parameters[kProgressTimeoutKey] = "600";
  EXPECT_EQ(ProgressTimeoutSeconds(job), 600);
  EXPECT_TRUE(ValidateProgressTimeout(job).ok());
  for (const char* bad : {"0", "-1", "1.5", "10s", "", "2592001", "99999999999"}) {
    job.parameters[kProgressTimeoutKey] = bad;
    EXPECT_FALSE(ProgressTimeoutSeconds(job)) << bad;
    Status s = ValidateProgressTimeout(job);
    EXPECT_FALSE(s.ok()) << bad;
    EXPECT_NE(s.message().find(kProgressTimeoutKey), std::string::npos);
  }
  job.parameters[kProgressTimeoutKey] = "2592000";  // 30 days
  EXPECT_EQ(ProgressTimeoutSeconds(job), 2592000);
}

TEST(HangReason, NamesTheStalledNodesAndQuotesTheirLastLines) {
  const Job job = RunningJob("j", 4);
  auto lines = [](const std::string& stream) -> std::vector<std::string> {
    if (stream == "d/default/3") return {};
    return {"step 9 " + stream, std::string("tab\there"), std::string(300, 'x')};
  };
  const std::string reason = HangReason(job, job.attempts[0], {1, 3}, 30, lines);
  EXPECT_EQ(reason.rfind("nodes 1, 3 reported no progress (LOTE_PROGRESS line) for 30 s "
                         "(lote:progressTimeoutSeconds); last lines of node 1: | step 9 "
                         "d/default/1 | tab here | ",
                         0),
            0u)
      << reason;
  EXPECT_NE(reason.find(std::string(200, 'x') + "..."), std::string::npos);  // clipped
  EXPECT_EQ(reason.find(std::string(201, 'x')), std::string::npos);
  EXPECT_NE(reason.find("last lines of node 3: (none)"), std::string::npos) << reason;

  const Job single = RunningJob("s", 1);
  EXPECT_EQ(HangReason(single, single.attempts[0], {0}, 5, lines)
                .rfind("the job reported no progress (LOTE_PROGRESS line) for 5 s", 0),
            0u);
}

TEST(ArrayParentEvent, OnlyWhenTheCountsChangeAndEveryChildExists) {
  JobIndex index;
  Job parent;
  parent.id = "p";
  parent.array = ArrayInfo{2, -1, {}, 0};
  index.Update(nullptr, parent);
  EXPECT_FALSE(ArrayParentEvent(parent, index.ArrayChildCounts("p"), 1));  // children missing
  for (int32_t i = 0; i < 2; ++i) {
    Job child;
    child.id = ArrayChildId("p", i);
    child.status = i == 0 ? JobStatus::kRunnable : JobStatus::kSucceeded;
    child.array = ArrayInfo{2, i, {}, 0};
    index.Update(nullptr, child);
  }
  std::optional<JobEvent> e = ArrayParentEvent(parent, index.ArrayChildCounts("p"), 7);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->type, JobEventType::kArrayChildrenUpdated);
  EXPECT_EQ(e->child_counts.at("RUNNABLE"), 1);
  EXPECT_EQ(e->child_counts.at("SUCCEEDED"), 1);
  parent.array->status_summary = e->child_counts;
  EXPECT_FALSE(ArrayParentEvent(parent, index.ArrayChildCounts("p"), 8));  // unchanged
  Job plain;
  plain.id = "nope";
  EXPECT_FALSE(ArrayParentEvent(plain, index.ArrayChildCounts("nope"), 8));
}

TEST(BuildSchedulerSnapshot, InstancesHoldWhatTheirRunningNodesUse) {
  char tmpl[] = "/tmp/lote_controller_test_XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  {
    FakeClock clock;
    auto store = store::Store::Open(dir + "/lote.db");
    ASSERT_TRUE(store.ok());
    auto cp = ControlPlane::Open(store->get(), &clock, ControlConfig{});
    ASSERT_TRUE(cp.ok());
    ASSERT_TRUE((*cp)
                    ->CreateComputeEnvironment(ParseJson(R"({"computeEnvironmentName": "ce",
      "type": "MANAGED", "computeResources": {"type": "EC2", "minvCpus": 0, "maxvCpus": 8,
      "instanceTypes": ["c5.large"], "subnets": ["s"]}})")
                                                   .value())
                    .ok());
    ASSERT_TRUE((*cp)
                    ->CreateJobQueue(ParseJson(R"({"jobQueueName": "q", "priority": 3,
      "computeEnvironmentOrder": [{"order": 1, "computeEnvironment": "ce"}]})")
                                         .value())
                    .ok());
    ASSERT_TRUE((*cp)->Reconcile().ok());
    const std::string queue_arn = (*cp)->FindJobQueue("q")->arn;

    JobTable jobs;
    Job running = RunningJob("r", 1);
    running.queue_arn = queue_arn;
    running.container = ContainerSpec{};
    running.container->vcpus = 1;
    running.container->memory = 1024;
    running.attempts[0].compute_environment = "ce";
    running.attempts[0].nodes[0].instance_id = "i-1";
    jobs["r"] = running;
    Job waiting;
    waiting.id = "w";
    waiting.status = JobStatus::kRunnable;
    waiting.queue_arn = queue_arn;
    waiting.container = ContainerSpec{};
    waiting.container->vcpus = 2;
    waiting.container->memory = 512;
    jobs["w"] = waiting;
    SubmitOrder order{{"r", 1}, {"w", 2}};
    InstanceTable instances;
    instances["i-1"] = VirtualInstance{"i-1", "ce", sched::Resources{2000, 4096, 0}, "127.0.1.1",
                                       sched::Instance::kBusy};
    instances["i-2"] = VirtualInstance{"i-2", "ce", sched::Resources{2000, 4096, 0}, "127.0.1.2",
                                       sched::Instance::kBusy};

    Result<sched::Snapshot> snap =
        BuildSchedulerSnapshot(jobs, order, &instances, cp->get(), ShareHistory{}, 5000);
    ASSERT_TRUE(snap.ok()) << snap.status().ToString();
    ASSERT_EQ(snap->compute_environments.size(), 1u);
    const sched::ComputeEnvironment& ce = snap->compute_environments[0];
    EXPECT_EQ(ce.instance_type.shape.milli_vcpu, 2000);  // c5.large
    ASSERT_EQ(ce.instances.size(), 2u);
    EXPECT_EQ(ce.instances[0].available.milli_vcpu, 1000);  // i-1 holds the running node
    EXPECT_EQ(ce.instances[0].available.memory_mib, 4096 - 1024);
    EXPECT_EQ(ce.instances[0].idle_since_ms, sched::Instance::kBusy);
    EXPECT_EQ(ce.instances[1].available.milli_vcpu, 2000);
    EXPECT_EQ(instances["i-2"].idle_since_ms, 5000);  // idle from now on
    ASSERT_EQ(snap->queues.size(), 1u);
    EXPECT_EQ(snap->queues[0].priority, 3);
    ASSERT_EQ(snap->jobs.size(), 1u);  // only the RUNNABLE one
    EXPECT_EQ(snap->jobs[0].id, "w");
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace lote::control
