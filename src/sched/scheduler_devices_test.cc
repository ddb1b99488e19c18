// The scheduler and accelerators: whole devices, packing, islands, hosts
// shared by instances, and the reasons a job waits for them.
#include <gtest/gtest.h>

#include <set>

#include "sched/scheduler.h"

namespace lote::sched {
namespace {

constexpr int64_t kT0 = 1'700'000'000'000;

Resources Gpu(int32_t n) { return Resources{1000, 1024, n}; }

// A compute environment of 8-GPU instances, one per host, with `free[i]` free
// devices on host i (the lowest positions taken).
Snapshot Hosts(const std::vector<int32_t>& free, const std::vector<int32_t>& island = {}) {
  Snapshot s;
  ComputeEnvironment ce;
  ce.name = "gpus";
  ce.instance_type = {"p4d.24xlarge", Resources{96000, 1179648, 8}, "gpu"};
  ce.max_vcpus = 96 * static_cast<int64_t>(free.size());
  for (size_t i = 0; i < free.size(); ++i) {
    Host h;
    h.name = "host-" + std::to_string(i);
    h.devices = 8;
    h.free_devices = ((uint64_t{1} << 8) - 1) & ~((uint64_t{1} << (8 - free[i])) - 1);
    h.island = island;
    s.hosts.push_back(h);
    Instance inst;
    inst.id = "i-" + std::to_string(i);
    inst.total = ce.instance_type.shape;
    inst.available = inst.total;
    inst.available.accelerators = free[i];
    inst.available.milli_vcpu -= (8 - free[i]) * 1000;
    inst.host = h.name;
    inst.idle_since_ms = free[i] == 8 ? kT0 : Instance::kBusy;
    ce.instances.push_back(inst);
  }
  s.compute_environments.push_back(ce);
  JobQueue q;
  q.name = "q";
  q.compute_environments = {"gpus"};
  s.queues.push_back(q);
  return s;
}

Job GpuJob(const std::string& id, int64_t order, int32_t gpus, int32_t nodes = 1,
           const std::string& kind = "gpu") {
  Job j;
  j.id = id;
  j.queue = "q";
  j.submit_order = order;
  j.submitted_at_ms = kT0 + order;
  j.nodes = {NodeRange{nodes, Gpu(gpus), kind}};
  return j;
}

Decisions MustDecide(const Snapshot& s) {
  Result<Decisions> d = Decide(s, kT0);
  EXPECT_TRUE(d.ok()) << d.status().ToString();
  return d.ok() ? *d : Decisions{};
}

const Placement* Placed(const Decisions& d, const std::string& id) {
  for (const Placement& p : d.placements)
    if (p.job_id == id) return &p;
  return nullptr;
}

const Wait* Waiting(const Decisions& d, const std::string& id) {
  for (const Wait& w : d.waiting)
    if (w.job_id == id) return &w;
  return nullptr;
}

TEST(SchedulerDevicesTest, PacksBestFitTheHostWithTheFewestFreeDevicesThatFit) {
  struct Case {
    std::vector<int32_t> free;
    int32_t gpus;
    std::string want;
  };
  for (const Case& c :
       {Case{{8, 3, 1}, 1, "i-2"}, Case{{8, 3, 1}, 2, "i-1"}, Case{{8, 3, 1}, 4, "i-0"},
        Case{{1, 8, 1}, 1, "i-0"}, Case{{8, 8, 2}, 2, "i-2"}}) {
    Snapshot s = Hosts(c.free);
    s.jobs.push_back(GpuJob("j", 1, c.gpus));
    Decisions d = MustDecide(s);
    const Placement* p = Placed(d, "j");
    ASSERT_NE(p, nullptr) << c.gpus;
    EXPECT_EQ(p->nodes[0].instance_id, c.want) << c.gpus << " GPUs";
    EXPECT_EQ(p->nodes[0].devices.size(), static_cast<size_t>(c.gpus));
  }
}

TEST(SchedulerDevicesTest, OneGpuJobsFillOneHostSoAnEightGpuJobStillFits) {
  Snapshot s = Hosts({8, 8});
  for (int i = 0; i < 6; ++i) s.jobs.push_back(GpuJob("small-" + std::to_string(i), i, 1));
  s.jobs.push_back(GpuJob("big", 10, 8));
  Decisions d = MustDecide(s);
  ASSERT_EQ(d.placements.size(), 7u);
  std::set<std::string> small_hosts;
  std::set<int32_t> devices;
  for (int i = 0; i < 6; ++i) {
    const Placement* p = Placed(d, "small-" + std::to_string(i));
    small_hosts.insert(p->nodes[0].instance_id);
    EXPECT_TRUE(devices.insert(p->nodes[0].devices[0]).second) << "a device given twice";
  }
  EXPECT_EQ(small_hosts.size(), 1u);
  EXPECT_NE(Placed(d, "big")->nodes[0].instance_id, *small_hosts.begin());
}

TEST(SchedulerDevicesTest, KeepsANodesDevicesOnOneIsland) {
  // Islands {0-3}, {4-7}: positions 1-3 free on island 0, 4-7 on island 1.
  Snapshot s = Hosts({7}, {0, 0, 0, 0, 1, 1, 1, 1});
  s.hosts[0].free_devices = 0b11111110;
  s.jobs.push_back(GpuJob("four", 1, 4));
  s.jobs.push_back(GpuJob("two", 2, 2));
  Decisions d = MustDecide(s);
  ASSERT_EQ(d.placements.size(), 2u);
  EXPECT_EQ(Placed(d, "four")->nodes[0].devices, (std::vector<int32_t>{4, 5, 6, 7}));
  EXPECT_EQ(Placed(d, "two")->nodes[0].devices, (std::vector<int32_t>{1, 2}));
}

TEST(SchedulerDevicesTest, SpansTheFewestIslandsWhenNoneHoldsTheNode) {
  Snapshot s = Hosts({8}, {0, 0, 1, 1, 1, 2, 2, 2});
  s.hosts[0].free_devices = 0b11111101;  // island 0 has 1 free, islands 1 and 2 have 3
  s.jobs.push_back(GpuJob("five", 1, 5));
  Decisions d = MustDecide(s);
  ASSERT_EQ(d.placements.size(), 1u);
  EXPECT_EQ(Placed(d, "five")->nodes[0].devices, (std::vector<int32_t>{2, 3, 4, 5, 6}));
}

TEST(SchedulerDevicesTest, InstancesOnOneHostNeverShareADevice) {
  // Two instances (each typed for 2 GPUs) on a host that has 2.
  Snapshot s = Hosts({2});
  s.hosts[0].devices = 2;
  s.hosts[0].free_devices = 0b11;
  ComputeEnvironment& ce = s.compute_environments[0];
  ce.instance_type.shape = Resources{8000, 16384, 2};
  ce.host = "host-0";
  ce.max_vcpus = 16;
  ce.instances[0].total = ce.instance_type.shape;
  ce.instances[0].available = ce.instance_type.shape;
  Instance second = ce.instances[0];
  second.id = "i-1";
  ce.instances.push_back(second);
  s.jobs.push_back(GpuJob("a", 1, 2));
  s.jobs.push_back(GpuJob("b", 2, 2));
  s.jobs.push_back(GpuJob("gang", 3, 1, 2));
  Decisions d = MustDecide(s);
  ASSERT_EQ(d.placements.size(), 1u);
  EXPECT_EQ(Placed(d, "a")->nodes[0].devices, (std::vector<int32_t>{0, 1}));
  ASSERT_NE(Waiting(d, "b"), nullptr);
  EXPECT_NE(Waiting(d, "b")->message.find("needs 2 GPUs on one node: none free"), std::string::npos)
      << Waiting(d, "b")->message;
  EXPECT_TRUE(d.launches.empty()) << "a launch on the same host has no devices either";
}

TEST(SchedulerDevicesTest, AGangOnOneHostGetsDistinctDevicesOrWaits) {
  Snapshot s = Hosts({3});
  ComputeEnvironment& ce = s.compute_environments[0];
  ce.instance_type.shape = Resources{8000, 16384, 2};
  ce.host = "host-0";
  ce.max_vcpus = 32;
  ce.instances.clear();  // instances are launched on host-0 as needed
  s.jobs.push_back(GpuJob("gang2", 1, 1, 2));
  s.jobs.push_back(GpuJob("gang2b", 2, 1, 2));
  Decisions d = MustDecide(s);
  ASSERT_EQ(d.placements.size(), 1u);  // 3 free devices: one 2-node gang
  const Placement* p = Placed(d, "gang2");
  ASSERT_NE(p, nullptr);
  EXPECT_NE(p->nodes[0].devices, p->nodes[1].devices);
  ASSERT_NE(Waiting(d, "gang2b"), nullptr);
  for (const Launch& l : d.launches) EXPECT_EQ(l.host, "host-0");
}

TEST(SchedulerDevicesTest, SaysHowTheFreeDevicesAreScattered) {
  Snapshot s = Hosts({2, 1, 1, 0});
  s.jobs.push_back(GpuJob("four", 1, 4));
  Decisions d = MustDecide(s);
  const Wait* w = Waiting(d, "four");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->reason, WaitReason::kCapacity);
  EXPECT_NE(w->message.find("; needs 4 GPUs on one node: free 2+1+1 over 3 hosts"),
            std::string::npos)
      << w->message;
}

TEST(SchedulerDevicesTest, ARequestNoInstanceCanHoldStaysRunnableAsMisconfiguration) {
  struct Case {
    Job job;
    std::string says;
  };
  for (const Case& c :
       {Case{GpuJob("nine", 1, 9),
             "gpus: its instance type p4d.24xlarge (96 vCPU, 1179648 MiB, 8 accelerators) is "
             "smaller than a node (1 vCPU, 1024 MiB, 9 accelerators)"},
        Case{
            GpuJob("neuron", 1, 1, 1, "neuron"),
            "gpus: its instance type p4d.24xlarge has 8 GPUs, and a node needs 1 Neuron device"}}) {
    Snapshot s = Hosts({8});
    s.jobs.push_back(c.job);
    Decisions d = MustDecide(s);
    EXPECT_TRUE(d.never_fits.empty()) << "AWS leaves it RUNNABLE";
    const Wait* w = Waiting(d, c.job.id);
    ASSERT_NE(w, nullptr);
    EXPECT_EQ(w->reason, WaitReason::kMisconfiguration);
    EXPECT_EQ(w->message.rfind("MISCONFIGURATION:JOB_RESOURCE_REQUIREMENT - ", 0), 0u)
        << w->message;
    EXPECT_NE(w->message.find(c.says), std::string::npos) << w->message;
  }
  // Too many vCPUs is still a failure at once (lote's rule; docs/scheduler.md).
  Snapshot s = Hosts({8});
  Job huge = GpuJob("huge", 1, 1);
  huge.nodes[0].each.milli_vcpu = 1000 * 1000;
  s.jobs.push_back(huge);
  EXPECT_EQ(MustDecide(s).never_fits.size(), 1u);
}

TEST(SchedulerDevicesTest, JobsWithoutDevicesGoWhereTheFewestDevicesAreFree) {
  Snapshot s = Hosts({8, 0, 3});
  Job cpu = GpuJob("cpu", 1, 0);
  s.jobs.push_back(cpu);
  Decisions d = MustDecide(s);
  ASSERT_NE(Placed(d, "cpu"), nullptr);
  EXPECT_EQ(Placed(d, "cpu")->nodes[0].instance_id, "i-1");
}

TEST(SchedulerDevicesTest, RefusesAHostTheSnapshotLacks) {
  Snapshot s = Hosts({8});
  s.compute_environments[0].instances[0].host = "elsewhere";
  EXPECT_TRUE(Decide(s, kT0).status().IsInvalidArgument());
  s = Hosts({8});
  s.hosts[0].island = {0, 1};
  EXPECT_TRUE(Decide(s, kT0).status().IsInvalidArgument());
}

}  // namespace
}  // namespace lote::sched
