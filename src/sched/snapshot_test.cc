#include "sched/snapshot.h"

#include <gtest/gtest.h>

#include <functional>

namespace lote::sched {
namespace {

Snapshot Good() {
  Snapshot s;
  ComputeEnvironment ce;
  ce.name = "ce-a";
  ce.instance_type = {"m", Resources{4000, 8192, 2}, ""};
  ce.max_vcpus = 16;
  ce.instances.push_back(MakeIdleInstance("i-1", ce.instance_type.shape, 0));
  s.compute_environments.push_back(ce);
  JobQueue q;
  q.name = "q";
  q.compute_environments = {"ce-a"};
  s.queues.push_back(q);
  Job j;
  j.id = "j1";
  j.queue = "q";
  j.nodes = {NodeRange{1, Resources{1000, 1024, 0}, ""}};
  s.jobs.push_back(j);
  return s;
}

TEST(SnapshotTest, ValidSnapshotPasses) { EXPECT_TRUE(Validate(Good()).ok()); }

TEST(SnapshotTest, MakeIdleInstanceFreesEveryDevice) {
  Instance i = MakeIdleInstance("x", Resources{1000, 1, 3}, 42);
  EXPECT_EQ(i.free_devices, 0b111u);
  EXPECT_EQ(i.idle_since_ms, 42);
  EXPECT_EQ(i.available, i.total);
}

TEST(SnapshotTest, RejectsMalformedInputNamingTheProblem) {
  struct Case {
    const char* name;
    std::function<void(Snapshot&)> mutate;
    const char* want;
  };
  std::vector<Case> cases = {
      {"unknown ce", [](Snapshot& s) { s.queues[0].compute_environments.push_back("ce-x"); },
       "lists compute environment \"ce-x\", which is not in the snapshot"},
      {"duplicate job", [](Snapshot& s) { s.jobs.push_back(s.jobs[0]); },
       "job \"j1\" appears twice"},
      {"unknown queue", [](Snapshot& s) { s.jobs[0].queue = "nope"; },
       "is in job queue \"nope\", which is not in the snapshot"},
      {"device mask", [](Snapshot& s) { s.compute_environments[0].instances[0].free_devices = 1; },
       "2 available accelerators but 1 bits set"},
      {"min > max", [](Snapshot& s) { s.compute_environments[0].min_vcpus = 32; },
       "0 <= minvCpus <= maxvCpus"},
      {"no nodes", [](Snapshot& s) { s.jobs[0].nodes.clear(); }, "has no node ranges"},
      {"reservation",
       [](Snapshot& s) {
         s.queues[0].fair_share = FairSharePolicy{100, 0, {}};
       },
       "computeReservation 100; it must be 0..99"},
      {"weight",
       [](Snapshot& s) {
         s.queues[0].fair_share = FairSharePolicy{0, 0, {{"a", 0}}};
       },
       "weightFactor"},
      {"duplicate share usage",
       [](Snapshot& s) {
         s.queues[0].share_usage = {ShareUsage{"a", 0, 0, 0}, ShareUsage{"a", 1000, 0, 0}};
       },
       "two usage entries for share \"a\""},
      {"over total",
       [](Snapshot& s) { s.compute_environments[0].instances[0].available.milli_vcpu = 5000; },
       "outside 0..total"},
  };
  for (const Case& c : cases) {
    Snapshot s = Good();
    c.mutate(s);
    Status st = Validate(s);
    ASSERT_FALSE(st.ok()) << c.name;
    EXPECT_TRUE(st.IsInvalidArgument()) << c.name;
    EXPECT_NE(st.message().find(c.want), std::string::npos) << c.name << ": " << st.message();
  }
}

}  // namespace
}  // namespace lote::sched
