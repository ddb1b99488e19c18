#include "sched/scheduler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "common/clock.h"

namespace lote::sched {
namespace {

constexpr int64_t kT0 = 1'700'000'000'000;

Resources Cpu(int64_t vcpus, int64_t mib, int32_t accelerators = 0) {
  return Resources{vcpus * 1000, mib, accelerators};
}

std::string InstanceId(const std::string& ce, int i) {
  return ce + "-i" + (i < 10 ? "0" : "") + std::to_string(i);
}

ComputeEnvironment MakeCe(const std::string& name, Resources shape, int64_t max_vcpus,
                          int idle_instances, int64_t min_vcpus = 0) {
  ComputeEnvironment ce;
  ce.name = name;
  ce.instance_type = {"m5", shape, ""};
  ce.min_vcpus = min_vcpus;
  ce.max_vcpus = max_vcpus;
  for (int i = 0; i < idle_instances; ++i) {
    ce.instances.push_back(MakeIdleInstance(InstanceId(name, i), shape, kT0));
  }
  return ce;
}

JobQueue MakeQueue(const std::string& name, int32_t priority, std::vector<std::string> ces) {
  JobQueue q;
  q.name = name;
  q.priority = priority;
  q.compute_environments = std::move(ces);
  return q;
}

Job MakeJob(const std::string& id, const std::string& queue, int64_t order, Resources each,
            int32_t nodes = 1, const std::string& share = "") {
  Job j;
  j.id = id;
  j.queue = queue;
  j.submit_order = order;
  j.submitted_at_ms = kT0 + order;
  j.share_identifier = share;
  j.nodes = {NodeRange{nodes, each, ""}};
  return j;
}

Decisions MustDecide(const Snapshot& s, int64_t now) {
  Result<Decisions> d = Decide(s, now);
  EXPECT_TRUE(d.ok()) << d.status().ToString();
  return d.ok() ? *d : Decisions{};
}

std::vector<std::string> PlacedIds(const Decisions& d) {
  std::vector<std::string> out;
  for (const Placement& p : d.placements) out.push_back(p.job_id);
  return out;
}

const Wait* FindWait(const Decisions& d, const std::string& id) {
  for (const Wait& w : d.waiting) {
    if (w.job_id == id) return &w;
  }
  return nullptr;
}

const Placement* FindPlacement(const Decisions& d, const std::string& id) {
  for (const Placement& p : d.placements) {
    if (p.job_id == id) return &p;
  }
  return nullptr;
}

// Every job is placed, waiting or failed: exactly once.
void ExpectEveryJobAccountedFor(const Snapshot& s, const Decisions& d) {
  std::multiset<std::string> seen;
  for (const Placement& p : d.placements) seen.insert(p.job_id);
  for (const Wait& w : d.waiting) seen.insert(w.job_id);
  for (const NeverFits& n : d.never_fits) seen.insert(n.job_id);
  ASSERT_EQ(seen.size(), s.jobs.size());
  for (const Job& j : s.jobs) EXPECT_EQ(seen.count(j.id), 1u) << j.id;
}

// A tiny control plane for multi-pass tests: applies decisions to the snapshot,
// runs placed jobs for their duration on a FakeClock, then frees their resources.
class Cluster {
 public:
  Snapshot s;
  FakeClock clock{kT0};
  std::map<std::string, int64_t> duration_ms;  // default 10 s
  std::map<std::string, int64_t> started_at;
  std::map<std::string, int64_t> finished_at;

  void Submit(Job j, int64_t duration) {
    j.submit_order = next_order_++;
    j.submitted_at_ms = clock.NowMillis();
    duration_ms[j.id] = duration;
    share_of_[j.id] = j.share_identifier;
    s.jobs.push_back(std::move(j));
  }

  Decisions Step() {
    RefreshShareUsage();
    Decisions d = MustDecide(s, clock.NowMillis());
    for (const ShareUsageUpdate& u : d.share_usage) {
      history_[{u.queue, u.share_identifier}] = {u.history_vcpu_seconds, u.history_as_of_ms};
    }
    ExpectEveryJobAccountedFor(s, d);
    std::vector<std::string> launched;
    for (const Launch& l : d.launches) {
      std::string id = "L" + std::to_string(next_instance_++);
      Ce(l.compute_environment)
          .instances.push_back(MakeIdleInstance(id, l.shape, clock.NowMillis()));
      launched.push_back(id);
    }
    for (const Placement& p : d.placements) {
      EXPECT_EQ(started_at.count(p.job_id), 0u) << p.job_id << " started twice";
      started_at[p.job_id] = clock.NowMillis();
      Running r;
      r.job = p.job_id;
      r.queue = p.queue;
      r.share = share_of_[p.job_id];
      r.end_ms = clock.NowMillis() + duration_ms[p.job_id];
      std::set<std::string> distinct;
      for (const NodePlacement& n : p.nodes) {
        std::string id = n.launch_index >= 0 ? launched[n.launch_index] : n.instance_id;
        distinct.insert(id);
        Instance& inst = Find(p.compute_environment, id);
        EXPECT_TRUE(n.resources.FitsIn(inst.available)) << p.job_id << " overcommits " << id;
        inst.available -= n.resources;
        for (int32_t dev : n.devices) {
          EXPECT_TRUE(inst.free_devices & (uint64_t{1} << dev)) << "device given twice";
          inst.free_devices &= ~(uint64_t{1} << dev);
        }
        inst.idle_since_ms = Instance::kBusy;
        r.nodes.push_back({p.compute_environment, id, n.resources, n.devices});
      }
      if (p.nodes.size() > 1) {
        EXPECT_EQ(distinct.size(), p.nodes.size()) << "gang nodes share";
      }
      running_.push_back(r);
    }
    for (const Removal& rm : d.removals) {
      auto& v = Ce(rm.compute_environment).instances;
      v.erase(std::remove_if(v.begin(), v.end(),
                             [&](const Instance& i) { return i.id == rm.instance_id; }),
              v.end());
    }
    std::set<std::string> gone;
    for (const Placement& p : d.placements) gone.insert(p.job_id);
    for (const NeverFits& n : d.never_fits) gone.insert(n.job_id);
    s.jobs.erase(std::remove_if(s.jobs.begin(), s.jobs.end(),
                                [&](const Job& j) { return gone.count(j.id) > 0; }),
                 s.jobs.end());
    return d;
  }

  std::map<std::string, int> StartedByShare() const {
    std::map<std::string, int> out;
    for (const auto& [id, t] : started_at) ++out[share_of_.at(id)];
    return out;
  }

  void Advance(int64_t ms) {
    clock.AdvanceMillis(ms);
    int64_t now = clock.NowMillis();
    for (auto it = running_.begin(); it != running_.end();) {
      if (it->end_ms > now) {
        ++it;
        continue;
      }
      for (const auto& n : it->nodes) {
        Instance& inst = Find(n.ce, n.instance);
        inst.available += n.resources;
        for (int32_t dev : n.devices) inst.free_devices |= uint64_t{1} << dev;
        if (inst.available == inst.total) inst.idle_since_ms = now;
      }
      finished_at[it->job] = now;
      it = running_.erase(it);
    }
  }

 private:
  struct RunningNode {
    std::string ce;
    std::string instance;
    Resources resources;
    std::vector<int32_t> devices;
  };
  struct Running {
    std::string job;
    std::string queue;
    std::string share;
    int64_t end_ms = 0;
    std::vector<RunningNode> nodes;
  };

  ComputeEnvironment& Ce(const std::string& name) {
    for (ComputeEnvironment& ce : s.compute_environments) {
      if (ce.name == name) return ce;
    }
    ADD_FAILURE() << "no compute environment " << name;
    return s.compute_environments.front();
  }
  Instance& Find(const std::string& ce, const std::string& id) {
    for (Instance& i : Ce(ce).instances) {
      if (i.id == id) return i;
    }
    ADD_FAILURE() << "no instance " << id;
    return Ce(ce).instances.front();
  }

  // What a control plane does for fair-share queues: running vCPUs per share from its
  // running jobs, history from the previous Decisions::share_usage.
  void RefreshShareUsage() {
    for (JobQueue& q : s.queues) {
      if (!q.fair_share) continue;
      std::map<std::string, ShareUsage> by_share;
      for (const auto& [key, h] : history_) {
        if (key.first != q.name) continue;
        ShareUsage& u = by_share[key.second];
        u.share_identifier = key.second;
        u.history_vcpu_seconds = h.first;
        u.history_as_of_ms = h.second;
      }
      for (const Running& r : running_) {
        if (r.queue != q.name) continue;
        ShareUsage& u = by_share[r.share];
        if (u.share_identifier.empty()) u.history_as_of_ms = clock.NowMillis();
        u.share_identifier = r.share;
        for (const RunningNode& n : r.nodes) u.running_milli_vcpu += n.resources.milli_vcpu;
      }
      q.share_usage.clear();
      for (auto& [id, u] : by_share) q.share_usage.push_back(u);
    }
  }

  std::map<std::string, std::string> share_of_;
  std::map<std::pair<std::string, std::string>, std::pair<double, int64_t>> history_;
  int64_t next_order_ = 1;
  int next_instance_ = 0;
  std::vector<Running> running_;
};

// ---- priority and FIFO ------------------------------------------------------------------

TEST(SchedulerTest, HigherPriorityQueueGoesFirst) {
  struct Case {
    int32_t prio_a, prio_b;
    std::string want;
  };
  for (const Case& c : {Case{10, 1, "ja"}, Case{1, 10, "jb"}, Case{5, 5, "ja"}}) {
    Snapshot s;
    s.compute_environments.push_back(MakeCe("ce-a", Cpu(1, 1024), 1, 1));
    s.queues.push_back(MakeQueue("qa", c.prio_a, {"ce-a"}));
    s.queues.push_back(MakeQueue("qb", c.prio_b, {"ce-a"}));
    s.jobs.push_back(MakeJob("ja", "qa", 2, Cpu(1, 512)));
    s.jobs.push_back(MakeJob("jb", "qb", 1, Cpu(1, 512)));
    Decisions d = MustDecide(s, kT0);
    EXPECT_EQ(PlacedIds(d), std::vector<std::string>{c.want}) << c.prio_a << "/" << c.prio_b;
    ExpectEveryJobAccountedFor(s, d);
  }
}

TEST(SchedulerTest, FifoWithinAQueueBySubmitOrder) {
  Snapshot s;
  s.compute_environments.push_back(MakeCe("ce-a", Cpu(1, 1024), 2, 2));
  s.queues.push_back(MakeQueue("q", 1, {"ce-a"}));
  s.jobs.push_back(MakeJob("j3", "q", 3, Cpu(1, 512)));
  s.jobs.push_back(MakeJob("j1", "q", 1, Cpu(1, 512)));
  s.jobs.push_back(MakeJob("j2", "q", 2, Cpu(1, 512)));
  Decisions d = MustDecide(s, kT0);
  EXPECT_EQ(PlacedIds(d), (std::vector<std::string>{"j1", "j2"}));
  ASSERT_NE(FindWait(d, "j3"), nullptr);
  EXPECT_EQ(FindWait(d, "j3")->reason, WaitReason::kCapacity);
}

TEST(SchedulerTest, ComputeEnvironmentsTriedInQueueOrder) {
  for (bool a_first : {true, false}) {
    Snapshot s;
    s.compute_environments.push_back(MakeCe("ce-a", Cpu(2, 1024), 2, 1));
    s.compute_environments.push_back(MakeCe("ce-b", Cpu(2, 1024), 2, 1));
    s.queues.push_back(MakeQueue("q", 1,
                                 a_first ? std::vector<std::string>{"ce-a", "ce-b"}
                                         : std::vector<std::string>{"ce-b", "ce-a"}));
    s.jobs.push_back(MakeJob("j1", "q", 1, Cpu(1, 100)));
    s.jobs.push_back(MakeJob("j2", "q", 2, Cpu(1, 100)));
    s.jobs.push_back(MakeJob("j3", "q", 3, Cpu(1, 100)));
    Decisions d = MustDecide(s, kT0);
    ASSERT_EQ(d.placements.size(), 3u);
    std::string first = a_first ? "ce-a" : "ce-b";
    EXPECT_EQ(d.placements[0].compute_environment, first);
    EXPECT_EQ(d.placements[1].compute_environment, first);  // packs before spilling over
    EXPECT_NE(d.placements[2].compute_environment, first);
  }
}

// ---- fair share -------------------------------------------------------------------------

Snapshot FairShareSnapshot(int slots, FairSharePolicy policy) {
  Snapshot s;
  s.compute_environments.push_back(MakeCe("ce-a", Cpu(1, 1024), slots, slots));
  JobQueue q = MakeQueue("q", 1, {"ce-a"});
  q.fair_share = std::move(policy);
  s.queues.push_back(q);
  return s;
}

std::map<std::string, int> PlacedByShare(const Snapshot& s, const Decisions& d) {
  std::map<std::string, std::string> share_of;
  for (const Job& j : s.jobs) share_of[j.id] = j.share_identifier;
  std::map<std::string, int> out;
  for (const Placement& p : d.placements) ++out[share_of[p.job_id]];
  return out;
}

TEST(SchedulerTest, FairShareSplitsByWeightFactor) {
  struct Case {
    double weight_a, weight_b;
    int want_a, want_b;
  };
  for (const Case& c :
       {Case{1, 1, 15, 15}, Case{0.5, 1, 20, 10}, Case{0.25, 1, 24, 6}, Case{1, 0.5, 10, 20}}) {
    Snapshot s =
        FairShareSnapshot(30, FairSharePolicy{0, 0, {{"a", c.weight_a}, {"b", c.weight_b}}});
    for (int i = 0; i < 40; ++i) {
      s.jobs.push_back(MakeJob("a" + std::to_string(i), "q", 2 * i, Cpu(1, 10), 1, "a"));
      s.jobs.push_back(MakeJob("b" + std::to_string(i), "q", 2 * i + 1, Cpu(1, 10), 1, "b"));
    }
    Decisions d = MustDecide(s, kT0);
    std::map<std::string, int> got = PlacedByShare(s, d);
    EXPECT_EQ(got["a"], c.want_a) << c.weight_a << "/" << c.weight_b;
    EXPECT_EQ(got["b"], c.want_b) << c.weight_a << "/" << c.weight_b;
  }
}

TEST(SchedulerTest, FairShareCountsRunningUsageAndWildcardWeights) {
  // team1 already runs 4 vCPUs on 4 busy instances; 8 idle 1-vCPU instances remain.
  struct Case {
    std::vector<ShareWeight> weights;
    int want_team1, want_other;
  };
  for (const Case& c : {Case{{{"team*", 0.5}}, 4, 4}, Case{{}, 2, 6}, Case{{{"*", 0.5}}, 2, 6}}) {
    Snapshot s = FairShareSnapshot(12, FairSharePolicy{0, 0, c.weights});
    for (int i = 0; i < 4; ++i) {
      Instance& busy = s.compute_environments[0].instances[i];
      busy.available = Resources{};
      busy.idle_since_ms = Instance::kBusy;
    }
    s.queues[0].share_usage.push_back(ShareUsage{"team1", 4000, 0, kT0});
    for (int i = 0; i < 8; ++i) {
      s.jobs.push_back(MakeJob("t1-" + std::to_string(i), "q", i, Cpu(1, 10), 1, "team1"));
      s.jobs.push_back(MakeJob("o-" + std::to_string(i), "q", 10 + i, Cpu(1, 10), 1, "other"));
    }
    Decisions d = MustDecide(s, kT0);
    std::map<std::string, int> got = PlacedByShare(s, d);
    EXPECT_EQ(got["team1"], c.want_team1) << c.weights.size();
    EXPECT_EQ(got["other"], c.want_other) << c.weights.size();
    ASSERT_GE(d.placements.size(), 2u);
    EXPECT_EQ(d.placements[0].job_id, "o-0");  // team1's running vCPUs count against it
    EXPECT_EQ(d.placements[1].job_id, "o-1");
  }
}

TEST(SchedulerTest, SchedulingPriorityOrdersJobsWithinAShare) {
  Snapshot s = FairShareSnapshot(1, FairSharePolicy{});
  s.jobs.push_back(MakeJob("old", "q", 1, Cpu(1, 10), 1, "a"));
  Job urgent = MakeJob("urgent", "q", 2, Cpu(1, 10), 1, "a");
  urgent.scheduling_priority = 5;
  s.jobs.push_back(urgent);
  Decisions d = MustDecide(s, kT0);
  EXPECT_EQ(PlacedIds(d), std::vector<std::string>{"urgent"});
}

TEST(SchedulerTest, FairShareHistoryDecays) {
  // Share a used a lot long ago, b a little just now: a's usage decays below b's.
  struct Case {
    int64_t now;
    std::string want;
  };
  const int64_t half_life_s = 600;
  for (const Case& c : {Case{kT0, "b1"}, Case{kT0 + 10 * half_life_s * 1000, "a1"}}) {
    Snapshot s = FairShareSnapshot(1, FairSharePolicy{0, half_life_s, {}});
    s.queues[0].share_usage.push_back(ShareUsage{"a", 0, 3600.0, kT0});
    s.queues[0].share_usage.push_back(ShareUsage{"b", 0, 360.0, c.now});
    s.jobs.push_back(MakeJob("a1", "q", 1, Cpu(1, 10), 1, "a"));
    s.jobs.push_back(MakeJob("b1", "q", 2, Cpu(1, 10), 1, "b"));
    Decisions d = MustDecide(s, c.now);
    EXPECT_EQ(PlacedIds(d), std::vector<std::string>{c.want}) << c.now - kT0;
    // The history to keep is decayed to now.
    ASSERT_EQ(d.share_usage.size(), 2u);
    EXPECT_EQ(d.share_usage[0].history_as_of_ms, c.now);
    EXPECT_NEAR(d.share_usage[0].history_vcpu_seconds,
                3600.0 * std::exp2(-static_cast<double>(c.now - kT0) / 600000.0), 1e-6);
  }
}

TEST(SchedulerTest, FairShareConvergesToWeightsOverManyPasses) {
  // Two shares keep the queue full; b (weight 0.5) should get twice a's (weight 1.0) vCPU time.
  struct Case {
    int64_t decay_s;
  };
  for (const Case& c : {Case{0}, Case{60}, Case{3600}}) {
    Cluster cl;
    cl.s.compute_environments.push_back(MakeCe("ce-a", Cpu(1, 1024), 6, 6));
    JobQueue q = MakeQueue("q", 1, {"ce-a"});
    q.fair_share = FairSharePolicy{0, c.decay_s, {{"a", 1.0}, {"b", 0.5}}};
    cl.s.queues.push_back(q);
    int n = 0;
    for (int step = 0; step < 200; ++step) {
      for (const char* share : {"a", "b"}) {
        int queued = 0;
        for (const Job& j : cl.s.jobs) queued += j.share_identifier == share;
        for (; queued < 10; ++queued) {
          cl.Submit(MakeJob("j" + std::to_string(n++), "q", 0, Cpu(1, 10), 1, share), 10'000);
        }
      }
      Decisions d = cl.Step();
      for (const Placement& p : d.placements) {
        for (const Job& j : cl.s.jobs) EXPECT_NE(j.id, p.job_id);
      }
      cl.Advance(5'000);
    }
    std::map<std::string, int> by_share = cl.StartedByShare();
    int a = by_share["a"];
    int b = by_share["b"];
    ASSERT_GT(a, 0) << c.decay_s;
    double ratio = static_cast<double>(b) / a;
    EXPECT_NEAR(ratio, 2.0, 0.25) << "decay " << c.decay_s << ": a " << a << ", b " << b;
  }
}

TEST(SchedulerTest, ComputeReservationHoldsCapacityForInactiveShares) {
  struct Case {
    int32_t reservation;
    int shares;
    size_t want_placed;
  };
  for (const Case& c : {Case{50, 1, 4}, Case{50, 2, 6}, Case{25, 1, 6}, Case{0, 1, 8}}) {
    Snapshot s = FairShareSnapshot(8, FairSharePolicy{c.reservation, 0, {}});
    for (int sh = 0; sh < c.shares; ++sh) {
      for (int i = 0; i < 10; ++i) {
        std::string share = "s" + std::to_string(sh);
        s.jobs.push_back(
            MakeJob(share + "-" + std::to_string(i), "q", sh * 100 + i, Cpu(1, 10), 1, share));
      }
    }
    Decisions d = MustDecide(s, kT0);
    EXPECT_EQ(d.placements.size(), c.want_placed) << c.reservation << "/" << c.shares;
    if (c.reservation == 50 && c.shares == 1) {
      const Wait* w = FindWait(d, "s0-9");
      ASSERT_NE(w, nullptr);
      EXPECT_EQ(w->reason, WaitReason::kComputeReservation);
      EXPECT_EQ(w->message,
                "waiting for 1 node (1 vCPU, 10 MiB): fair-share computeReservation 50 of job "
                "queue q holds back 4 of 8 vCPU for inactive share identifiers (1 active share); "
                "the queue's jobs hold 4 vCPU");
    }
  }
}

// ---- gangs ------------------------------------------------------------------------------

TEST(SchedulerTest, GangIsPlacedWholeOrNotAtAll) {
  struct Case {
    int idle;  // idle instances of 4 vCPU
    int busy;  // instances with 1 vCPU left
    int64_t max_vcpus;
    bool want_placed;
    int want_launches;
  };
  for (const Case& c : {Case{4, 0, 16, true, 0}, Case{3, 1, 16, false, 0}, Case{2, 0, 16, true, 2},
                        Case{2, 1, 16, false, 0}}) {
    Snapshot s;
    ComputeEnvironment ce = MakeCe("ce-a", Cpu(4, 4096), c.max_vcpus, c.idle);
    for (int i = 0; i < c.busy; ++i) {
      Instance b = MakeIdleInstance("busy" + std::to_string(i), Cpu(4, 4096), kT0);
      b.available = Cpu(1, 1024);
      b.idle_since_ms = Instance::kBusy;
      ce.instances.push_back(b);
    }
    s.compute_environments.push_back(ce);
    s.queues.push_back(MakeQueue("q", 1, {"ce-a"}));
    s.jobs.push_back(MakeJob("gang", "q", 1, Cpu(4, 4096), 4));
    Decisions d = MustDecide(s, kT0);
    ExpectEveryJobAccountedFor(s, d);
    if (c.want_placed) {
      ASSERT_EQ(d.placements.size(), 1u);
      const Placement& p = d.placements[0];
      ASSERT_EQ(p.nodes.size(), 4u);
      std::set<std::string> where;
      int launches = 0;
      for (size_t n = 0; n < p.nodes.size(); ++n) {
        EXPECT_EQ(p.nodes[n].node_index, static_cast<int32_t>(n));
        if (p.nodes[n].launch_index >= 0) {
          ++launches;
          where.insert("launch" + std::to_string(p.nodes[n].launch_index));
        } else {
          where.insert(p.nodes[n].instance_id);
        }
      }
      EXPECT_EQ(where.size(), 4u) << "one node per instance";
      EXPECT_EQ(launches, c.want_launches);
      EXPECT_EQ(d.launches.size(), static_cast<size_t>(c.want_launches));
    } else {
      EXPECT_TRUE(d.placements.empty()) << "a gang must never be placed in part";
      EXPECT_TRUE(d.launches.empty()) << "no instance is launched for a gang that cannot start";
      ASSERT_NE(FindWait(d, "gang"), nullptr);
    }
  }
}

TEST(SchedulerTest, ARetryAvoidsTheFailedNodesInstanceWhenThereIsRoomElsewhere) {
  // A 2-node gang (4 vCPU nodes) that avoids ce-a-i01; 4 vCPU instances.
  struct Case {
    const char* name;
    int idle;                       // idle instances ce-a-i00...
    int64_t max_vcpus;              // room to launch more
    std::vector<std::string> want;  // per node: an instance id, or "launch"; empty: waits
    bool busy_i02 = false;          // ce-a-i02 (if any) is busy now
  };
  const std::vector<Case> cases = {
      {"another idle instance takes its place", 3, 12, {"ce-a-i00", "ce-a-i02"}},
      {"a launch takes its place", 2, 12, {"ce-a-i00", "launch"}},
      {"no other capacity at all: it is used rather than waiting", 2, 8, {"ce-a-i00", "ce-a-i01"}},
      {"another instance is busy now: it waits for it", 3, 12, {}, true},
  };
  for (const Case& c : cases) {
    Snapshot s;
    ComputeEnvironment ce = MakeCe("ce-a", Cpu(4, 4096), c.max_vcpus, c.idle);
    if (c.busy_i02) {
      ce.instances[2].available = Resources{};
      ce.instances[2].idle_since_ms = Instance::kBusy;
    }
    s.compute_environments.push_back(ce);
    s.queues.push_back(MakeQueue("q", 1, {"ce-a"}));
    Job retry = MakeJob("retry", "q", 1, Cpu(4, 4096), 2);
    retry.avoid_instances = {"ce-a-i01"};
    s.jobs.push_back(retry);
    Decisions d = MustDecide(s, kT0);
    ExpectEveryJobAccountedFor(s, d);
    if (c.want.empty()) {
      EXPECT_TRUE(d.placements.empty()) << c.name;
      EXPECT_NE(FindWait(d, "retry"), nullptr) << c.name;
      continue;
    }
    ASSERT_EQ(d.placements.size(), 1u) << c.name;
    std::vector<std::string> got;
    for (const NodePlacement& n : d.placements[0].nodes)
      got.push_back(n.launch_index >= 0 ? "launch" : n.instance_id);
    EXPECT_EQ(got, c.want) << c.name;
  }
  // A single-node retry the same way; and what it avoids is not remembered
  // as a failure: the next job of the same shape still gets the instance.
  Snapshot s;
  s.compute_environments.push_back(MakeCe("ce-a", Cpu(4, 4096), 8, 2));
  s.queues.push_back(MakeQueue("q", 1, {"ce-a"}));
  Job single = MakeJob("single", "q", 1, Cpu(4, 4096));
  single.avoid_instances = {"ce-a-i00"};
  s.jobs.push_back(single);
  s.jobs.push_back(MakeJob("next", "q", 2, Cpu(4, 4096)));
  Decisions d = MustDecide(s, kT0);
  ASSERT_NE(FindPlacement(d, "single"), nullptr);
  EXPECT_EQ(FindPlacement(d, "single")->nodes[0].instance_id, "ce-a-i01");
  ASSERT_NE(FindPlacement(d, "next"), nullptr);
  EXPECT_EQ(FindPlacement(d, "next")->nodes[0].instance_id, "ce-a-i00");
}

TEST(SchedulerTest, BlockedGangHoldsInstancesAgainstBackfill) {
  // Six instances with 2 of 4 vCPUs free; a 4-node gang of 4 vCPU nodes at the head.
  Snapshot s;
  ComputeEnvironment ce = MakeCe("ce-a", Cpu(4, 4096), 24, 6);
  for (Instance& i : ce.instances) {
    i.available = Cpu(2, 2048);
    i.idle_since_ms = Instance::kBusy;
  }
  s.compute_environments.push_back(ce);
  s.queues.push_back(MakeQueue("q", 1, {"ce-a"}));
  s.queues.push_back(MakeQueue("low", 0, {"ce-a"}));
  s.jobs.push_back(MakeJob("gang", "q", 1, Cpu(4, 4096), 4));
  for (int i = 0; i < 10; ++i) {
    s.jobs.push_back(
        MakeJob("small" + std::to_string(i), i % 2 ? "q" : "low", 10 + i, Cpu(1, 100)));
  }
  Decisions d = MustDecide(s, kT0);
  ExpectEveryJobAccountedFor(s, d);
  EXPECT_EQ(FindPlacement(d, "gang"), nullptr);
  // Backfill only onto the two instances that are not held: 2 x 2 vCPU.
  ASSERT_EQ(d.placements.size(), 4u);
  for (const Placement& p : d.placements) {
    EXPECT_TRUE(p.nodes[0].instance_id == "ce-a-i04" || p.nodes[0].instance_id == "ce-a-i05")
        << p.job_id << " landed on held instance " << p.nodes[0].instance_id;
  }
  const Wait* w = FindWait(d, "small9");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->message,
            "waiting for 1 node (1 vCPU, 100 MiB): compute environment ce-a has 0 free of 6 "
            "(4 held for job gang)");
}

TEST(SchedulerTest, BlockedGangAlsoHoldsLaunchSlots) {
  // maxvCpus allows 4 instances; 2 exist and are busy, so 2 more could be launched.
  Snapshot s;
  ComputeEnvironment ce = MakeCe("ce-a", Cpu(4, 4096), 16, 2);
  for (Instance& i : ce.instances) {
    i.available = Cpu(1, 1024);
    i.idle_since_ms = Instance::kBusy;
  }
  s.compute_environments.push_back(ce);
  s.queues.push_back(MakeQueue("q", 1, {"ce-a"}));
  s.jobs.push_back(MakeJob("gang", "q", 1, Cpu(4, 4096), 4));
  s.jobs.push_back(MakeJob("big", "q", 2, Cpu(2, 1024)));
  Decisions d = MustDecide(s, kT0);
  EXPECT_TRUE(d.placements.empty());
  EXPECT_TRUE(d.launches.empty()) << "the held launch slots are not used by the job behind";
  EXPECT_EQ(FindWait(d, "gang")->message,
            "waiting for 4 nodes (4 vCPU, 4096 MiB each): compute environment ce-a has 2 free of "
            "4; ce-a holds 2 instances and 2 launch slots for this job until it fits");
  EXPECT_EQ(FindWait(d, "big")->message,
            "waiting for 1 node (2 vCPU, 1024 MiB): compute environment ce-a has 0 free of 4 (2 "
            "held for job gang)");
}

TEST(SchedulerTest, StreamOfSmallJobsCannotStarveAGang) {
  Cluster cl;
  cl.s.compute_environments.push_back(MakeCe("ce-a", Cpu(4, 4096), 16, 4));
  cl.s.queues.push_back(MakeQueue("q", 1, {"ce-a"}));
  // Fill every instance with 1-vCPU jobs that end between 10 s and 40 s.
  for (int i = 0; i < 16; ++i) {
    cl.Submit(MakeJob("fill" + std::to_string(i), "q", 0, Cpu(1, 100)), 10'000 + 2'000 * i);
  }
  cl.Step();
  cl.Submit(MakeJob("gang", "q", 0, Cpu(4, 4096), 4), 100'000);
  int small = 0;
  for (int step = 0; step < 60 && cl.started_at.count("gang") == 0; ++step) {
    for (int k = 0; k < 4; ++k) {
      cl.Submit(MakeJob("s" + std::to_string(small++), "q", 0, Cpu(1, 100)), 30'000);
    }
    cl.Step();
    cl.Advance(5'000);
  }
  ASSERT_EQ(cl.started_at.count("gang"), 1u) << "the gang starved";
  // The last filler ends at 40 s; the gang starts on the first pass after that.
  EXPECT_LE(cl.started_at["gang"], kT0 + 45'000);
}

TEST(SchedulerTest, TwoGangsNeverDeadlockOrHoldPartialCapacity) {
  struct Case {
    bool same_queue;
  };
  for (const Case& c : {Case{true}, Case{false}}) {
    Cluster cl;
    cl.s.compute_environments.push_back(MakeCe("ce-a", Cpu(4, 4096), 16, 4));
    cl.s.queues.push_back(MakeQueue("q1", 1, {"ce-a"}));
    cl.s.queues.push_back(MakeQueue("q2", 1, {"ce-a"}));
    cl.Submit(MakeJob("A", "q1", 0, Cpu(4, 4096), 3), 60'000);
    cl.Submit(MakeJob("B", c.same_queue ? "q1" : "q2", 0, Cpu(4, 4096), 3), 60'000);
    Decisions first = cl.Step();
    ASSERT_EQ(first.placements.size(), 1u);
    EXPECT_EQ(first.placements[0].job_id, "A");
    EXPECT_EQ(first.placements[0].nodes.size(), 3u);
    const Wait* w = FindWait(first, "B");
    ASSERT_NE(w, nullptr);
    EXPECT_EQ(w->message,
              "waiting for 3 nodes (4 vCPU, 4096 MiB each): compute environment ce-a has 1 free "
              "of 4; ce-a holds 3 instances for this job until it fits");
    for (int step = 0; step < 20; ++step) {
      cl.Advance(10'000);
      cl.Step();
    }
    EXPECT_EQ(cl.finished_at.count("A"), 1u);
    EXPECT_EQ(cl.finished_at.count("B"), 1u);
    EXPECT_GE(cl.started_at["B"], cl.finished_at["A"]);
  }
}

TEST(SchedulerTest, NodeRangesWithDifferentShapes) {
  Snapshot s;
  ComputeEnvironment ce = MakeCe("ce-a", Cpu(8, 8192), 24, 3);
  ce.instances[0].available = Cpu(2, 2048);  // only room for a small node
  ce.instances[0].idle_since_ms = Instance::kBusy;
  ce.instances[1].available = Cpu(2, 2048);
  ce.instances[1].idle_since_ms = Instance::kBusy;
  s.compute_environments.push_back(ce);
  s.queues.push_back(MakeQueue("q", 1, {"ce-a"}));
  Job j = MakeJob("mixed", "q", 1, Cpu(2, 1024));
  j.nodes = {NodeRange{1, Cpu(2, 1024), ""}, NodeRange{1, Cpu(8, 8192), ""},
             NodeRange{1, Cpu(2, 1024), ""}};
  s.jobs.push_back(j);
  Decisions d = MustDecide(s, kT0);
  ASSERT_EQ(d.placements.size(), 1u);
  const Placement& p = d.placements[0];
  ASSERT_EQ(p.nodes.size(), 3u);
  EXPECT_EQ(p.nodes[1].instance_id, "ce-a-i02");  // the big node gets the empty instance
  EXPECT_EQ(p.nodes[1].resources, Cpu(8, 8192));
  EXPECT_EQ(p.nodes[0].instance_id, "ce-a-i00");
  EXPECT_EQ(p.nodes[2].instance_id, "ce-a-i01");
}

TEST(SchedulerTest, AcceleratorsGetDistinctDeviceIndices) {
  Snapshot s;
  ComputeEnvironment ce = MakeCe("ce-a", Cpu(8, 8192, 4), 8, 1);
  ce.instances[0].free_devices = 0b1101;  // device 1 is taken
  ce.instances[0].available = Cpu(6, 6000, 3);
  ce.instances[0].idle_since_ms = Instance::kBusy;
  s.compute_environments.push_back(ce);
  s.queues.push_back(MakeQueue("q", 1, {"ce-a"}));
  s.jobs.push_back(MakeJob("two", "q", 1, Cpu(1, 100, 2)));
  s.jobs.push_back(MakeJob("one", "q", 2, Cpu(1, 100, 1)));
  s.jobs.push_back(MakeJob("more", "q", 3, Cpu(1, 100, 1)));
  Decisions d = MustDecide(s, kT0);
  ASSERT_EQ(d.placements.size(), 2u);
  EXPECT_EQ(d.placements[0].nodes[0].devices, (std::vector<int32_t>{0, 2}));
  EXPECT_EQ(d.placements[1].nodes[0].devices, (std::vector<int32_t>{3}));
  ASSERT_NE(FindWait(d, "more"), nullptr);
}

// ---- never fits -------------------------------------------------------------------------

TEST(SchedulerTest, JobsThatCanNeverFitFailAtOnce) {
  struct Case {
    std::string name;
    Job job;
    int64_t max_vcpus;
    std::string want;  // "" = must not fail
  };
  std::vector<Case> cases = {
      {"memory", MakeJob("j", "q", 1, Cpu(2, 999999)), 16,
       "can never run: it needs 1 node (2 vCPU, 999999 MiB) but no compute environment of job "
       "queue q can ever hold it: ce-a: its instance type m5 (4 vCPU, 16384 MiB) is smaller "
       "than a node (2 vCPU, 999999 MiB)"},
      {"gang over maxvCpus", MakeJob("j", "q", 1, Cpu(4, 1024), 5), 16,
       "can never run: it needs 5 nodes (4 vCPU, 1024 MiB each) but no compute environment of "
       "job queue q can ever hold it: ce-a: maxvCpus 16 allows only 4 instances of 4 vCPU, and "
       "the job needs 5 (one per node)"},
      {"instance over maxvCpus", MakeJob("j", "q", 1, Cpu(1, 1024)), 2,
       "can never run: it needs 1 node (1 vCPU, 1024 MiB) but no compute environment of job "
       "queue q can ever hold it: ce-a: maxvCpus 2 allows no instance of 4 vCPU"},
      {"fits exactly", MakeJob("j", "q", 1, Cpu(4, 16384), 4), 16, ""},
  };
  for (const Case& c : cases) {
    Snapshot s;
    s.compute_environments.push_back(MakeCe("ce-a", Cpu(4, 16384), c.max_vcpus, 0));
    s.queues.push_back(MakeQueue("q", 1, {"ce-a"}));
    s.jobs.push_back(c.job);
    Decisions d = MustDecide(s, kT0);
    if (c.want.empty()) {
      EXPECT_TRUE(d.never_fits.empty()) << c.name;
      EXPECT_EQ(d.placements.size(), 1u) << c.name;
    } else {
      ASSERT_EQ(d.never_fits.size(), 1u) << c.name;
      EXPECT_EQ(d.never_fits[0].message, c.want) << c.name;
      EXPECT_TRUE(d.waiting.empty()) << c.name << ": never-fitting jobs must not stay RUNNABLE";
    }
  }
}

TEST(SchedulerTest, FeasibleSomewhereIsNotNever) {
  Snapshot s;
  s.compute_environments.push_back(MakeCe("small", Cpu(1, 1024), 16, 0));
  ComputeEnvironment big = MakeCe("big", Cpu(8, 8192), 16, 0);
  big.state = State::kDisabled;
  s.compute_environments.push_back(big);
  s.queues.push_back(MakeQueue("q", 1, {"small", "big"}));
  s.jobs.push_back(MakeJob("j", "q", 1, Cpu(4, 1024)));
  Decisions d = MustDecide(s, kT0);
  EXPECT_TRUE(d.never_fits.empty());
  const Wait* w = FindWait(d, "j");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->reason, WaitReason::kCapacity);
  EXPECT_EQ(w->message,
            "waiting for 1 node (4 vCPU, 1024 MiB): compute environment small can never hold it "
            "(its instance type m5 (1 vCPU, 1024 MiB) is smaller than a node (4 vCPU, 1024 "
            "MiB)); compute environment big is DISABLED");
}

// ---- explanations -----------------------------------------------------------------------

TEST(SchedulerTest, ExplainsAWaitingGangAsTheIssueDoes) {
  // 21 trn1.32xlarge-sized instances (maxvCpus allows 21); 20 are busy.
  Snapshot s;
  Resources trn{128000, 524288, 16};
  ComputeEnvironment ce = MakeCe("ce-a", trn, 21 * 128, 21);
  for (int i = 1; i < 21; ++i) {
    ce.instances[i].available = Resources{8000, 10000, 0};
    ce.instances[i].free_devices = 0;
    ce.instances[i].idle_since_ms = Instance::kBusy;
  }
  s.compute_environments.push_back(ce);
  s.queues.push_back(MakeQueue("q", 1, {"ce-a"}));
  s.jobs.push_back(MakeJob("gang-1", "q", 1, Cpu(96, 500000), 4));
  s.jobs.push_back(MakeJob("gang-2", "q", 2, Cpu(96, 500000), 2));
  Decisions d = MustDecide(s, kT0);
  EXPECT_TRUE(d.placements.empty());
  ASSERT_NE(FindWait(d, "gang-1"), nullptr);
  EXPECT_EQ(FindWait(d, "gang-1")->message,
            "waiting for 4 nodes (96 vCPU, 500000 MiB each): compute environment ce-a has 1 free "
            "of 21; ce-a holds 4 instances for this job until it fits");
  ASSERT_NE(FindWait(d, "gang-2"), nullptr);
  EXPECT_EQ(FindWait(d, "gang-2")->message,
            "waiting for 2 nodes (96 vCPU, 500000 MiB each): compute environment ce-a has 0 free "
            "of 21 (1 held for job gang-1)");
}

TEST(SchedulerTest, ExplainsDisabledQueueAndEnvironments) {
  struct Case {
    State queue_state;
    State ce_state;
    bool ce_valid;
    WaitReason reason;
    std::string want;
  };
  std::vector<Case> cases = {
      {State::kDisabled, State::kEnabled, true, WaitReason::kQueueDisabled,
       "waiting for 1 node (1 vCPU, 10 MiB): job queue q is DISABLED"},
      {State::kEnabled, State::kDisabled, true, WaitReason::kNoUsableEnvironment,
       "waiting for 1 node (1 vCPU, 10 MiB): no compute environment of job queue q is ENABLED "
       "and VALID (ce-a is DISABLED)"},
      {State::kEnabled, State::kEnabled, false, WaitReason::kNoUsableEnvironment,
       "waiting for 1 node (1 vCPU, 10 MiB): no compute environment of job queue q is ENABLED "
       "and VALID (ce-a is INVALID)"},
  };
  for (const Case& c : cases) {
    Snapshot s;
    ComputeEnvironment ce = MakeCe("ce-a", Cpu(1, 1024), 4, 4);
    ce.state = c.ce_state;
    ce.valid = c.ce_valid;
    s.compute_environments.push_back(ce);
    JobQueue q = MakeQueue("q", 1, {"ce-a"});
    q.state = c.queue_state;
    s.queues.push_back(q);
    s.jobs.push_back(MakeJob("j", "q", 1, Cpu(1, 10)));
    Decisions d = MustDecide(s, kT0);
    EXPECT_TRUE(d.placements.empty());
    ASSERT_EQ(d.waiting.size(), 1u);
    EXPECT_EQ(d.waiting[0].reason, c.reason);
    EXPECT_EQ(d.waiting[0].message, c.want);
  }
}

// ---- scaling ----------------------------------------------------------------------------

TEST(SchedulerTest, ScalesUpWithDemandWithinMaxvCpus) {
  struct Case {
    int jobs;
    Resources each;
    int64_t min_vcpus;
    size_t want_launches;
    size_t want_placed;
    int64_t want_desired;
  };
  for (const Case& c : {Case{3, Cpu(4, 1024), 0, 3, 3, 12}, Case{6, Cpu(4, 1024), 0, 4, 4, 16},
                        Case{8, Cpu(1, 1024), 0, 2, 8, 8}, Case{0, Cpu(1, 1), 8, 2, 0, 8},
                        Case{1, Cpu(1, 1), 8, 2, 1, 8}}) {
    Snapshot s;
    s.compute_environments.push_back(MakeCe("ce-a", Cpu(4, 4096), 16, 0, c.min_vcpus));
    s.queues.push_back(MakeQueue("q", 1, {"ce-a"}));
    for (int i = 0; i < c.jobs; ++i)
      s.jobs.push_back(MakeJob("j" + std::to_string(i), "q", i, c.each));
    Decisions d = MustDecide(s, kT0);
    EXPECT_EQ(d.launches.size(), c.want_launches) << c.jobs;
    EXPECT_EQ(d.placements.size(), c.want_placed) << c.jobs;
    ASSERT_EQ(d.targets.size(), 1u);
    EXPECT_EQ(d.targets[0].desired_vcpus, c.want_desired) << c.jobs;
    for (const Placement& p : d.placements) {
      EXPECT_GE(p.nodes[0].launch_index, 0);
      EXPECT_LT(p.nodes[0].launch_index, static_cast<int32_t>(d.launches.size()));
    }
    if (c.jobs == 6) {
      EXPECT_EQ(FindWait(d, "j5")->message,
                "waiting for 1 node (4 vCPU, 1024 MiB): compute environment ce-a has 0 free of 4");
    }
  }
}

TEST(SchedulerTest, ScalesDownIdleInstancesAfterTimeoutToMinvCpus) {
  struct Case {
    int64_t now_offset_ms;
    int64_t min_vcpus;
    std::vector<std::string> want_removed;
    int64_t want_desired;
  };
  // i00 idle since T0, i01 idle since T0+60s, i02 busy; timeout 300 s.
  for (const Case& c : {Case{200'000, 0, {}, 12}, Case{330'000, 0, {"ce-a-i00"}, 8},
                        Case{400'000, 0, {"ce-a-i00", "ce-a-i01"}, 4},
                        Case{400'000, 8, {"ce-a-i00"}, 8}, Case{400'000, 12, {}, 12}}) {
    Snapshot s;
    s.config.idle_timeout_ms = 300'000;
    ComputeEnvironment ce = MakeCe("ce-a", Cpu(4, 4096), 16, 3, c.min_vcpus);
    ce.instances[1].idle_since_ms = kT0 + 60'000;
    ce.instances[2].available = Cpu(1, 1024);
    ce.instances[2].idle_since_ms = Instance::kBusy;
    s.compute_environments.push_back(ce);
    s.queues.push_back(MakeQueue("q", 1, {"ce-a"}));
    Decisions d = MustDecide(s, kT0 + c.now_offset_ms);
    std::vector<std::string> removed;
    for (const Removal& r : d.removals) removed.push_back(r.instance_id);
    EXPECT_EQ(removed, c.want_removed) << c.now_offset_ms << "/" << c.min_vcpus;
    EXPECT_EQ(d.targets[0].desired_vcpus, c.want_desired);
    EXPECT_TRUE(d.launches.empty());
  }
}

TEST(SchedulerTest, IdleInstanceThatGetsWorkIsKept) {
  Snapshot s;
  s.config.idle_timeout_ms = 1000;
  s.compute_environments.push_back(MakeCe("ce-a", Cpu(4, 4096), 8, 2));
  s.queues.push_back(MakeQueue("q", 1, {"ce-a"}));
  s.jobs.push_back(MakeJob("j", "q", 1, Cpu(1, 10)));
  Decisions d = MustDecide(s, kT0 + 60'000);
  ASSERT_EQ(d.placements.size(), 1u);
  ASSERT_EQ(d.removals.size(), 1u);
  EXPECT_NE(d.removals[0].instance_id, d.placements[0].nodes[0].instance_id);
}

TEST(SchedulerTest, ScaleUpThenDownOverTime) {
  Cluster cl;
  cl.s.config.idle_timeout_ms = 60'000;
  cl.s.compute_environments.push_back(MakeCe("ce-a", Cpu(4, 4096), 16, 0, 4));
  cl.s.queues.push_back(MakeQueue("q", 1, {"ce-a"}));
  for (int i = 0; i < 8; ++i)
    cl.Submit(MakeJob("j" + std::to_string(i), "q", 0, Cpu(4, 1024)), 30'000);
  Decisions d = cl.Step();
  EXPECT_EQ(d.placements.size(), 4u);
  EXPECT_EQ(d.targets[0].desired_vcpus, 16);
  cl.Advance(30'000);
  d = cl.Step();
  EXPECT_EQ(d.placements.size(), 4u);
  EXPECT_TRUE(d.launches.empty());
  cl.Advance(30'000);
  d = cl.Step();
  EXPECT_TRUE(d.removals.empty());  // idle for 0 s
  cl.Advance(61'000);
  d = cl.Step();
  EXPECT_EQ(d.removals.size(), 3u);  // down to minvCpus 4
  EXPECT_EQ(d.targets[0].desired_vcpus, 4);
  EXPECT_EQ(cl.s.compute_environments[0].instances.size(), 1u);
}

TEST(SchedulerTest, SameSnapshotSameDecisions) {
  Snapshot s;
  s.compute_environments.push_back(MakeCe("ce-a", Cpu(4, 4096), 64, 5));
  s.queues.push_back(MakeQueue("q", 1, {"ce-a"}));
  for (int i = 0; i < 30; ++i)
    s.jobs.push_back(MakeJob("j" + std::to_string(i), "q", i, Cpu(1 + i % 3, 100)));
  Decisions a = MustDecide(s, kT0);
  std::reverse(s.jobs.begin(), s.jobs.end());
  std::reverse(s.compute_environments[0].instances.begin(),
               s.compute_environments[0].instances.end());
  Decisions b = MustDecide(s, kT0);
  ASSERT_EQ(a.placements.size(), b.placements.size());
  for (size_t i = 0; i < a.placements.size(); ++i) {
    EXPECT_EQ(a.placements[i].job_id, b.placements[i].job_id);
    EXPECT_EQ(a.placements[i].nodes[0].instance_id, b.placements[i].nodes[0].instance_id);
  }
}

TEST(SchedulerTest, InvalidSnapshotIsAnError) {
  Snapshot s;
  s.queues.push_back(MakeQueue("q", 1, {"missing"}));
  Result<Decisions> d = Decide(s, kT0);
  ASSERT_FALSE(d.ok());
  EXPECT_TRUE(d.status().IsInvalidArgument());
}

}  // namespace
}  // namespace lote::sched

namespace lote::sched {
namespace {

// A malformed job is set aside with its reason; the pass goes on for the rest.
TEST(SchedulerTest, MalformedJobsAreRejectedOneByOne) {
  Snapshot s;
  s.compute_environments.push_back(MakeCe("ce-a", Cpu(8, 16000), 64, 1));
  s.queues.push_back(MakeQueue("q", 1, {"ce-a"}));
  s.jobs.push_back(MakeJob("neg-gpu", "q", 0, Resources{1000, 100, -2147483647 - 1}));
  s.jobs.push_back(MakeJob("neg-mem", "q", 1, Resources{1000, -5, 0}));
  s.jobs.push_back(MakeJob("zero-cpu", "q", 2, Resources{0, 100, 0}));
  s.jobs.push_back(MakeJob("huge", "q", 3, Resources{int64_t{1} << 62, int64_t{1} << 62, 0}));
  s.jobs.push_back(MakeJob("many", "q", 4, Cpu(1, 10), 1 << 30));
  s.jobs.push_back(MakeJob("no-queue", "gone", 5, Cpu(1, 10)));
  Job empty = MakeJob("no-nodes", "q", 6, Cpu(1, 10));
  empty.nodes.clear();
  s.jobs.push_back(empty);
  s.jobs.push_back(MakeJob("good", "q", 7, Cpu(2, 1000)));
  s.jobs.push_back(MakeJob("good", "q", 8, Cpu(2, 1000)));  // the same id again
  Decisions d = MustDecide(s, kT0);
  EXPECT_EQ(PlacedIds(d), std::vector<std::string>{"good"});
  std::map<std::string, std::string> rejected;
  for (const Rejected& r : d.rejected) rejected[r.job_id] = r.message;
  EXPECT_EQ(rejected.size(), 8u);
  for (const char* id : {"neg-gpu", "neg-mem", "zero-cpu", "huge", "many", "no-queue", "no-nodes"})
    EXPECT_NE(rejected[id].find(std::string("job \"") + id + "\""), std::string::npos) << id;
  EXPECT_NE(rejected["good"].find("appears twice"), std::string::npos);
  EXPECT_NE(rejected["huge"].find("at most"), std::string::npos);
  for (const Wait& w : d.waiting) EXPECT_EQ(rejected.count(w.job_id), 0u) << w.job_id;
}

}  // namespace
}  // namespace lote::sched

namespace lote::sched {
namespace {

// A queue whose only environment is UNMANAGED keeps its jobs RUNNABLE (AWS:
// capacity may appear), and one still CREATING is called CREATING, not INVALID.
TEST(SchedulerTest, UnmanagedOrCreatingEnvironmentsKeepJobsWaiting) {
  Snapshot s;
  ComputeEnvironment u;
  u.name = "ce-u";
  u.unmanaged = true;
  s.compute_environments.push_back(u);
  ComputeEnvironment creating = MakeCe("ce-c", Cpu(8, 16000), 64, 0);
  creating.valid = false;
  creating.status = "CREATING";
  s.compute_environments.push_back(creating);
  s.queues.push_back(MakeQueue("qu", 1, {"ce-u"}));
  s.queues.push_back(MakeQueue("qc", 1, {"ce-c"}));
  s.jobs.push_back(MakeJob("big", "qu", 0, Cpu(512, 1 << 30)));
  s.jobs.push_back(MakeJob("small", "qc", 1, Cpu(1, 100)));
  Decisions d = MustDecide(s, kT0);
  EXPECT_TRUE(d.never_fits.empty());
  EXPECT_TRUE(d.placements.empty());
  EXPECT_TRUE(d.launches.empty());
  ASSERT_NE(FindWait(d, "big"), nullptr);
  EXPECT_EQ(FindWait(d, "big")->reason, WaitReason::kNoUsableEnvironment);
  EXPECT_NE(FindWait(d, "big")->message.find("ce-u is UNMANAGED"), std::string::npos)
      << FindWait(d, "big")->message;
  ASSERT_NE(FindWait(d, "small"), nullptr);
  EXPECT_NE(FindWait(d, "small")->message.find("ce-c is CREATING"), std::string::npos)
      << FindWait(d, "small")->message;
  for (const CeTarget& t : d.targets) EXPECT_NE(t.compute_environment, "ce-u");
}

}  // namespace
}  // namespace lote::sched

namespace lote::sched {
namespace {

// Consumable resources (docs/scheduler.md, "Consumable resources").
Snapshot ConsumableSnapshot(int64_t available) {
  Snapshot s;
  s.compute_environments = {MakeCe("ce", Cpu(16, 65536), 64, 4)};
  s.queues = {MakeQueue("q", 1, {"ce"})};
  s.consumables = {Consumable{"lic", 4, available}};
  return s;
}

Job Needing(const std::string& id, int64_t order, int64_t units) {
  Job j = MakeJob(id, "q", order, Cpu(1, 1024));
  j.consumables = {ConsumableNeed{"lic", units}};
  return j;
}

TEST(SchedulerConsumablesTest, NeverPlacesMoreUnitsThanAreAvailable) {
  Snapshot s = ConsumableSnapshot(2);
  for (int i = 0; i < 5; ++i) s.jobs.push_back(Needing("j" + std::to_string(i), i, 1));
  Decisions d = MustDecide(s, kT0);
  EXPECT_EQ(PlacedIds(d), (std::vector<std::string>{"j0", "j1"}));
  const Wait* w = FindWait(d, "j2");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->reason, WaitReason::kConsumableResource);
  EXPECT_EQ(w->message,
            "waiting for 1 node (1 vCPU, 1024 MiB): consumable resource lic has 0 of 4 units "
            "available and the job needs 1");
}

TEST(SchedulerConsumablesTest, AWaitingJobHoldsTheResourceAgainstJobsBehindIt) {
  Snapshot s = ConsumableSnapshot(2);
  s.jobs = {Needing("big", 1, 3), Needing("small", 2, 1)};
  Job free_job = MakeJob("other", "q", 3, Cpu(1, 1024));  // needs no units: backfills
  s.jobs.push_back(free_job);
  Decisions d = MustDecide(s, kT0);
  EXPECT_EQ(PlacedIds(d), (std::vector<std::string>{"other"}));
  ASSERT_NE(FindWait(d, "small"), nullptr);
  EXPECT_NE(FindWait(d, "small")->message.find("held for job big ahead of it"), std::string::npos)
      << FindWait(d, "small")->message;
  EXPECT_NE(FindWait(d, "big")->message.find("has 2 of 4 units available and the job needs 3"),
            std::string::npos);
}

TEST(SchedulerConsumablesTest, AMissingResourceMakesTheJobWaitNotFail) {
  Snapshot s = ConsumableSnapshot(4);
  Job j = MakeJob("j", "q", 1, Cpu(1, 1024));
  j.consumables = {ConsumableNeed{"gone", 1}};
  s.jobs = {j};
  Decisions d = MustDecide(s, kT0);
  EXPECT_TRUE(d.placements.empty());
  EXPECT_TRUE(d.never_fits.empty());
  ASSERT_NE(FindWait(d, "j"), nullptr);
  EXPECT_NE(FindWait(d, "j")->message.find("consumable resource gone does not exist"),
            std::string::npos);
}

TEST(SchedulerConsumablesTest, MalformedNeedsAreRejectedAlone) {
  Snapshot s = ConsumableSnapshot(4);
  Job bad = Needing("bad", 1, 0);
  s.jobs = {bad, Needing("good", 2, 4)};
  Decisions d = MustDecide(s, kT0);
  ASSERT_EQ(d.rejected.size(), 1u);
  EXPECT_EQ(d.rejected[0].job_id, "bad");
  EXPECT_EQ(PlacedIds(d), (std::vector<std::string>{"good"}));
}

}  // namespace
}  // namespace lote::sched

namespace lote::sched {
namespace {

TEST(SchedulerConsumablesTest, AJobThatCanNeverGetItsUnitsHoldsNothing) {
  // "head" needs a deleted resource and lic: it waits, and lic stays free for others.
  Snapshot s = ConsumableSnapshot(4);
  Job head = MakeJob("head", "q", 1, Cpu(1, 1024));
  head.consumables = {ConsumableNeed{"deleted", 1}, ConsumableNeed{"lic", 1}};
  Job too_big = MakeJob("too-big", "q", 2, Cpu(1, 1024));
  too_big.consumables = {ConsumableNeed{"lic", 5}};  // more than the total of 4
  s.jobs = {head, too_big, Needing("after", 3, 4)};
  Decisions d = MustDecide(s, kT0);
  EXPECT_EQ(PlacedIds(d), (std::vector<std::string>{"after"}));
  EXPECT_NE(FindWait(d, "too-big")->message.find("has 4 units in all and the job needs 5"),
            std::string::npos);
}

TEST(SchedulerConsumablesTest, AJobBlockedByAHoldTakesNoHoldOfItsOwn) {
  // big holds lic; mid (lic + seat) waits behind it and must not hold seat.
  Snapshot s = ConsumableSnapshot(2);
  s.consumables.push_back(Consumable{"seat", 1, 1});
  Job mid = MakeJob("mid", "q", 2, Cpu(1, 1024));
  mid.consumables = {ConsumableNeed{"lic", 1}, ConsumableNeed{"seat", 1}};
  Job seat_only = MakeJob("seat-only", "q", 3, Cpu(1, 1024));
  seat_only.consumables = {ConsumableNeed{"seat", 1}};
  s.jobs = {Needing("big", 1, 3), mid, seat_only};
  Decisions d = MustDecide(s, kT0);
  EXPECT_EQ(PlacedIds(d), (std::vector<std::string>{"seat-only"}));
}

}  // namespace
}  // namespace lote::sched
