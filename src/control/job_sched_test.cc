#include "control/job_sched.h"

#include <gtest/gtest.h>

namespace lote::control {
namespace {

ContainerSpec WithResources(const char* vcpu, const char* memory, const char* gpu) {
  ContainerSpec c;
  c.resource_requirements = {{"VCPU", vcpu}, {"MEMORY", memory}, {"GPU", gpu}};
  return c;
}

Job Runnable() {
  Job job;
  job.id = "j";
  job.queue_arn = "arn:aws:batch:us-east-1:123456789012:job-queue/q1";
  job.status = JobStatus::kRunnable;
  job.created_at = 77;
  job.share_identifier = "lab";
  job.scheduling_priority = 3;
  job.container = WithResources("0.5", "1024", "0");
  return job;
}

TEST(SchedulerJob, SingleNode) {
  Result<sched::Job> s = SchedulerJob(Runnable(), 12);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->queue, "q1");
  EXPECT_EQ(s->submit_order, 12);
  EXPECT_EQ(s->submitted_at_ms, 77);
  EXPECT_EQ(s->share_identifier, "lab");
  EXPECT_EQ(s->scheduling_priority, 3);
  ASSERT_EQ(s->nodes.size(), 1u);
  EXPECT_EQ(s->nodes[0].count, 1);
  EXPECT_EQ(s->nodes[0].each, (sched::Resources{500, 1024, 0}));
  EXPECT_FALSE(s->IsGang());
}

TEST(SchedulerJob, MultiNodeRangesMerge) {
  Job job = Runnable();
  job.container.reset();
  ContainerSpec big = WithResources("96", "500000", "16");
  ContainerSpec big_other_command = big;
  big_other_command.command = {"worker"};
  job.node_properties = NodeProperties{6,
                                       0,
                                       {{0, 0, big, {}, {}},
                                        {1, 3, big_other_command, {}, {{"lic", "lic", 2}}},
                                        {4, 5, WithResources("8", "1024", "0"), {}, {}}}};
  job.consumables = {{"lic", "lic", 1}, {"seat", "seat", 1}};
  Result<sched::Job> s = SchedulerJob(job, 1);
  ASSERT_TRUE(s.ok());
  ASSERT_EQ(s->nodes.size(), 2u);
  EXPECT_EQ(s->nodes[0].count, 4);
  EXPECT_EQ(s->nodes[0].each, (sched::Resources{96000, 500000, 16}));
  EXPECT_EQ(s->nodes[1].count, 2);
  EXPECT_EQ(s->NumNodes(), 6);
  // Consumable units: the job's own once, each range's once per node.
  EXPECT_EQ(s->consumables, (std::vector<sched::ConsumableNeed>{{"lic", 7}, {"seat", 1}}));
}

TEST(SchedulerJob, Rejects) {
  Job parent = Runnable();
  parent.array = ArrayInfo{2, -1, {}, 0};
  EXPECT_TRUE(SchedulerJob(parent, 1).status().IsFailedPrecondition());
  Job pending = Runnable();
  pending.status = JobStatus::kPending;
  EXPECT_TRUE(SchedulerJob(pending, 1).status().IsFailedPrecondition());
}

TEST(ScheduledEvent, ResolvesLaunchesAndAddresses) {
  sched::Placement p;
  p.job_id = "j";
  p.compute_environment = "ce";
  p.nodes = {{0, "i-old", -1, {}, {0, 1}}, {1, "", 0, {}, {}}};
  auto ip = [](const std::string& id) { return id == "i-old" ? "127.0.1.1" : "127.0.1.9"; };
  Result<JobEvent> e = ScheduledEvent(p, {"i-new"}, ip, 50);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(e->type, JobEventType::kScheduled);
  EXPECT_EQ(e->compute_environment, "ce");
  ASSERT_EQ(e->nodes.size(), 2u);
  EXPECT_EQ(e->nodes[0].instance_id, "i-old");
  EXPECT_EQ(e->nodes[0].private_ipv4, "127.0.1.1");
  EXPECT_EQ(e->nodes[0].devices, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(e->nodes[1].instance_id, "i-new");
  EXPECT_EQ(e->nodes[1].private_ipv4, "127.0.1.9");
  EXPECT_TRUE(ScheduledEvent(p, {}, ip, 50).status().IsInvalidArgument());
}

}  // namespace
}  // namespace lote::control
