#include "control/scheduler_input.h"

#include <gtest/gtest.h>

namespace lote::control {
namespace {

sched::Job Single(const std::string& id) {
  sched::Job j;
  j.id = id;
  j.queue = "q";
  j.nodes = {{1, sched::Resources{1000, 512, 0}}};
  return j;
}

sched::Snapshot Environments(int64_t idle_since_ms) {
  sched::Snapshot s;
  sched::ComputeEnvironment ce;
  ce.name = "ce";
  ce.instance_type = {"local", {4000, 4096, 0}};
  ce.max_vcpus = 4;
  ce.instances.push_back(sched::MakeIdleInstance("i-1", ce.instance_type.shape, idle_since_ms));
  s.compute_environments.push_back(ce);
  sched::JobQueue q;
  q.name = "q";
  q.compute_environments = {"ce"};
  q.fair_share = sched::FairSharePolicy{};
  q.share_usage.push_back(sched::ShareUsage{"a", 0, 1.5, 100});
  s.queues.push_back(q);
  return s;
}

TEST(SchedulerInputTest, JobsArePutAndErasedInPlace) {
  SchedulerInput in;
  in.PutJob(Single("a"), "");
  in.PutJob(Single("b"), "");
  in.PutJob(Single("c"), "");
  in.EraseJob("a");
  in.EraseJob("missing");
  ASSERT_EQ(in.snapshot().jobs.size(), 2u);
  ASSERT_NE(in.FindJob("b"), nullptr);
  ASSERT_NE(in.FindJob("c"), nullptr);
  EXPECT_EQ(in.FindJob("a"), nullptr);
  EXPECT_EQ(in.FindJob("c")->id, "c");
  sched::Job bigger = Single("b");
  bigger.nodes[0].each.milli_vcpu = 2000;
  in.PutJob(bigger, "");
  EXPECT_EQ(in.snapshot().jobs.size(), 2u);
  EXPECT_EQ(in.FindJob("b")->nodes[0].each.milli_vcpu, 2000);
}

TEST(SchedulerInputTest, DecideIsDueOnlyWhenWhatItReadsChanged) {
  SchedulerInput in;
  in.SetEnvironments(Environments(1000));
  in.PutJob(Single("a"), "");
  EXPECT_TRUE(in.DecideDue(2000));
  in.MarkDecided(2000);
  EXPECT_FALSE(in.DecideDue(2000));
  // The same environments, only the share history moved on (every Decide does that).
  sched::Snapshot later = Environments(1000);
  later.queues[0].share_usage[0].history_vcpu_seconds = 7;
  later.queues[0].share_usage[0].history_as_of_ms = 2000;
  in.SetEnvironments(later);
  EXPECT_FALSE(in.DecideDue(3000));
  // A new job.
  in.PutJob(Single("b"), "");
  EXPECT_TRUE(in.DecideDue(3000));
  in.MarkDecided(3000);
  // Capacity taken.
  sched::Snapshot busy = Environments(1000);
  busy.compute_environments[0].instances[0].available = {};
  busy.compute_environments[0].instances[0].idle_since_ms = sched::Instance::kBusy;
  in.SetEnvironments(busy);
  EXPECT_TRUE(in.DecideDue(3000));
  in.MarkDecided(3000);
  // A job gone.
  in.EraseJob("a");
  EXPECT_TRUE(in.DecideDue(3000));
}

TEST(SchedulerInputTest, AnIdleTimeoutMakesDecideDueOnce) {
  SchedulerInput in;
  sched::Snapshot env = Environments(1000);
  const int64_t timeout = env.config.idle_timeout_ms;
  in.SetEnvironments(env);
  in.PutJob(Single("a"), "");
  in.MarkDecided(2000);
  EXPECT_FALSE(in.DecideDue(1000 + timeout - 1));
  EXPECT_TRUE(in.DecideDue(1000 + timeout));
  in.MarkDecided(1000 + timeout);
  // Kept (minvCpus): not due again for the same idle time.
  in.SetEnvironments(env);
  EXPECT_FALSE(in.DecideDue(1000 + 2 * timeout));
}

TEST(SchedulerInputTest, ReasonsAreComparedWithTheLastOneGiven) {
  SchedulerInput in;
  in.PutJob(Single("a"), "waiting for 1 node");
  EXPECT_FALSE(in.ChangeReason("a", "waiting for 1 node"));
  EXPECT_TRUE(in.ChangeReason("a", "job queue q is DISABLED"));
  EXPECT_FALSE(in.ChangeReason("a", "job queue q is DISABLED"));
  EXPECT_FALSE(in.ChangeReason("gone", "anything"));
}

}  // namespace
}  // namespace lote::control
