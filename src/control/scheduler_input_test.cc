#include "control/scheduler_input.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <tuple>

namespace lote::control {
namespace {

sched::Job Single(const std::string& id) {
  sched::Job j;
  j.id = id;
  j.queue = "q";
  j.nodes = {{1, sched::Resources{1000, 512, 0}, ""}};
  return j;
}

sched::Snapshot Environments(int64_t idle_since_ms) {
  sched::Snapshot s;
  sched::ComputeEnvironment ce;
  ce.name = "ce";
  ce.instance_type = {"local", {4000, 4096, 0}, ""};
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
  ASSERT_EQ(in.size(), 2u);
  ASSERT_NE(in.FindJob("b"), nullptr);
  ASSERT_NE(in.FindJob("c"), nullptr);
  EXPECT_EQ(in.FindJob("a"), nullptr);
  EXPECT_EQ(in.FindJob("c")->id, "c");
  sched::Job bigger = Single("b");
  bigger.nodes[0].each.milli_vcpu = 2000;
  in.PutJob(bigger, "");
  EXPECT_EQ(in.size(), 2u);
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

// The window Decide reads, from scratch: per queue of `s` its jobs sorted in
// the scheduler's order, cut at `depth` (per share in a fair-share queue).
std::vector<std::string> WindowFromScratch(const std::vector<sched::Job>& jobs,
                                           const sched::Snapshot& s, size_t depth) {
  std::vector<std::string> out;
  for (const sched::JobQueue& q : s.queues) {
    std::map<std::string, std::vector<const sched::Job*>> groups;
    for (const sched::Job& j : jobs)
      if (j.queue == q.name) groups[q.fair_share ? j.share_identifier : ""].push_back(&j);
    for (auto& [share, group] : groups) {
      std::sort(group.begin(), group.end(), [&](const sched::Job* a, const sched::Job* b) {
        const int32_t pa = q.fair_share ? a->scheduling_priority : 0;
        const int32_t pb = q.fair_share ? b->scheduling_priority : 0;
        return std::make_tuple(-pa, a->submit_order, a->id) <
               std::make_tuple(-pb, b->submit_order, b->id);
      });
      for (size_t i = 0; i < group.size() && i < depth; ++i) out.push_back(group[i]->id);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> WindowIds(SchedulerInput* in) {
  std::vector<std::string> out;
  for (const sched::Job& j : in->Window().jobs) out.push_back(j.id);
  std::sort(out.begin(), out.end());
  return out;
}

sched::Snapshot TwoQueues() {
  sched::Snapshot s = Environments(1000);  // "q": fair share
  sched::JobQueue fifo;
  fifo.name = "fifo";
  fifo.compute_environments = {"ce"};
  s.queues.push_back(fifo);
  return s;
}

struct WindowCase {
  std::string name;
  size_t depth;
  int operations;
};

class SchedulerInputWindowTest : public ::testing::TestWithParam<WindowCase> {};

// Random puts (new jobs, and jobs replaced with another priority or share)
// and erases: after each, the window equals one built from scratch from the
// jobs kept, and a SchedulerInput fed only the final jobs gives the same.
TEST_P(SchedulerInputWindowTest, EqualsARebuildFromScratch) {
  const WindowCase& c = GetParam();
  std::mt19937 rng(7);
  SchedulerInput in(c.depth);
  in.SetEnvironments(TwoQueues());
  std::map<std::string, sched::Job> kept;
  for (int op = 0; op < c.operations; ++op) {
    const std::string id = "j" + std::to_string(rng() % 60);
    if (rng() % 4 == 0) {
      in.EraseJob(id);
      kept.erase(id);
    } else {
      sched::Job j = Single(id);
      j.queue = rng() % 2 == 0 ? "q" : "fifo";
      j.share_identifier = std::string(1, static_cast<char>('a' + rng() % 3));
      j.scheduling_priority = static_cast<int32_t>(rng() % 3);
      j.submit_order = static_cast<int64_t>(rng() % 20);  // ties broken by id
      in.PutJob(j, "");
      kept[id] = j;
    }
    std::vector<sched::Job> jobs;
    for (const auto& [id2, j] : kept) jobs.push_back(j);
    ASSERT_EQ(WindowIds(&in), WindowFromScratch(jobs, TwoQueues(), c.depth)) << "op " << op;
    ASSERT_EQ(in.size(), kept.size());
  }
  SchedulerInput fresh(c.depth);
  fresh.SetEnvironments(TwoQueues());
  for (const auto& [id, j] : kept) fresh.PutJob(j, "");
  EXPECT_EQ(WindowIds(&in), WindowIds(&fresh));
}

INSTANTIATE_TEST_SUITE_P(Depths, SchedulerInputWindowTest,
                         ::testing::Values(WindowCase{"depth1", 1, 400},
                                           WindowCase{"depth3", 3, 400},
                                           WindowCase{"depth10", 10, 400},
                                           WindowCase{"deeperThanAll", 1000, 200}),
                         [](const auto& info) { return info.param.name; });

TEST(SchedulerInputTest, TheWindowFollowsAQueueThatBecomesFairShare) {
  SchedulerInput in(1);
  sched::Snapshot env = TwoQueues();
  in.SetEnvironments(env);
  sched::Job a = Single("a");
  a.queue = "fifo";
  a.share_identifier = "x";
  sched::Job b = a;
  b.id = "b";
  b.share_identifier = "y";
  b.submit_order = 1;
  in.PutJob(a, "");
  in.PutJob(b, "");
  EXPECT_EQ(WindowIds(&in), std::vector<std::string>{"a"});
  env.queues[1].fair_share = sched::FairSharePolicy{};  // one head per share now
  in.SetEnvironments(env);
  EXPECT_TRUE(in.DecideDue(2000));
  EXPECT_EQ(WindowIds(&in), (std::vector<std::string>{"a", "b"}));
}

TEST(SchedulerInputTest, JobsOfAQueueNotInTheEnvironmentsAreLeftOut) {
  SchedulerInput in;
  in.SetEnvironments(TwoQueues());
  sched::Job gone = Single("g");
  gone.queue = "deleted";
  in.PutJob(gone, "");
  in.PutJob(Single("a"), "");
  EXPECT_EQ(WindowIds(&in), std::vector<std::string>{"a"});
  EXPECT_NE(in.FindJob("g"), nullptr);
}

}  // namespace
}  // namespace lote::control
