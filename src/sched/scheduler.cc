#include "sched/scheduler.h"

#include <algorithm>
#include <bit>
#include <queue>
#include <set>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "sched/fair_share.h"

namespace lote::sched {
namespace {

constexpr int32_t kNobody = -1;
constexpr size_t kMaxFailedShapes = 32;

// A virtual instance as this pass sees it: existing or launched this pass.
struct WorkInstance {
  int32_t source = -1;  // index into ComputeEnvironment::instances; -1 for a launch
  int32_t launch = -1;  // index into Decisions::launches
  Resources total;
  Resources available;
  uint64_t free_devices = 0;
  int64_t idle_since_ms = Instance::kBusy;
  int32_t reserved_by = kNobody;  // job (index into Snapshot::jobs) it is held for
  bool placed = false;            // a node was placed on it this pass
  int32_t host = -1;              // index into Pass::hosts_ when its devices are a host's
};

// A host as this pass sees it: its free devices and the instances sharing them.
struct WorkHost {
  const Host* host = nullptr;
  uint64_t free_devices = 0;
  std::vector<std::pair<int32_t, int32_t>> members;  // (compute environment, instance)
};

constexpr int32_t kMaxDevices = 64;

// A request (one node shape, node count) that found no room in a compute
// environment. Capacity only shrinks during a pass until something is
// launched there, so any request at least as large fails too.
struct FailedShape {
  Resources each;
  int32_t nodes = 1;
};

struct HeadroomHold {
  int32_t job = kNobody;
  int32_t launches = 0;
};

struct WorkCe {
  const ComputeEnvironment* ce = nullptr;
  bool usable = false;     // ENABLED and VALID
  int64_t type_milli = 1;  // vCPUs of one launched instance
  int64_t max_milli = 0;   // maxvCpus in milli-vCPU
  int64_t min_milli = 0;
  int64_t total_milli = 0;    // all instances, launches included
  int64_t max_instances = 0;  // the most instances it can ever have
  std::vector<WorkInstance> instances;
  size_t scan_start = 0;      // instances before it can take no job this pass
  int32_t held_launches = 0;  // launch slots held by reservations
  std::vector<HeadroomHold> headroom_holds;
  std::vector<FailedShape> failed;
  // Instances with accelerators are chosen best fit (the fewest free devices
  // that fit), found through buckets by free device count.
  bool devices = false;
  int32_t host = -1;                       // the host of its launches
  std::vector<std::set<int32_t>> by_free;  // kMaxDevices + 1 buckets of instance indices
  std::vector<int32_t> bucket;             // per instance: its bucket now

  // Instances that may still be launched for anyone (not held).
  int64_t Headroom() const {
    int64_t h = (max_milli - total_milli) / type_milli - held_launches;
    return h > 0 ? h : 0;
  }
};

enum class Outcome { kUndecided, kPlaced, kNeverFits, kWaiting };

struct JobWork {
  const Job* job = nullptr;
  int32_t queue = 0;
  Resources largest;        // componentwise max over its node ranges
  int64_t total_milli = 0;  // over all nodes
  int32_t nodes = 0;
  bool uniform = true;  // one node range
  Outcome outcome = Outcome::kUndecided;
  WaitReason reason = WaitReason::kCapacity;
  uint64_t feasible_ce = 0;  // bit k: the queue's k-th compute environment can ever hold it
  int32_t held_ce = -1;      // compute environment holding capacity for it
  int32_t held_instances = 0;
  int32_t held_launches = 0;
  int32_t short_need = -1;  // kConsumableResource: the index in job->consumables that is short
  std::vector<int32_t> consumables;  // per job->consumables entry: its WorkConsumable, or -1
};

// A consumable resource during a pass.
struct WorkConsumable {
  const Consumable* consumable = nullptr;
  int64_t available = 0;      // after this pass's placements
  int32_t held_by = kNobody;  // the first job that waited for it this pass
};

struct QueueWork {
  const JobQueue* queue = nullptr;
  std::vector<int32_t> ces;   // compute environment indices, queue order
  std::vector<int32_t> jobs;  // indices into Snapshot::jobs
  bool has_reservation = false;
  // Fair share.
  int64_t cap_milli = 0;   // the most vCPUs its jobs may hold (computeReservation)
  int64_t used_milli = 0;  // held now + placed this pass
  int64_t queue_max_milli = 0;
  int32_t active_shares = 0;
};

std::string NodesPhrase(const Job& job) {
  int32_t n = job.NumNodes();
  std::string out = std::to_string(n) + (n == 1 ? " node (" : " nodes (");
  if (job.nodes.size() == 1) {
    out += Describe(job.nodes[0].each);
    if (n > 1) out += " each";
  } else {
    for (size_t i = 0; i < job.nodes.size(); ++i) {
      if (i > 0) out += "; ";
      out += std::to_string(job.nodes[i].count) + " x " + Describe(job.nodes[i].each);
    }
  }
  return out + ")";
}

bool KindFits(const NodeRange& r, const InstanceType& t) {
  return r.each.accelerators == 0 || r.accelerator_kind.empty() || t.accelerator_kind.empty() ||
         r.accelerator_kind == t.accelerator_kind;
}

// "4 GPUs", "1 Neuron device", "2 accelerators".
std::string DevicePhrase(const std::string& kind, int64_t n) {
  std::string out = std::to_string(n);
  if (kind == "gpu") return out + (n == 1 ? " GPU" : " GPUs");
  if (kind == "neuron") return out + (n == 1 ? " Neuron device" : " Neuron devices");
  return out + (n == 1 ? " accelerator" : " accelerators");
}

// Whether compute environment `w` could ever hold the job (ignoring its state).
// `accelerators`: false to ask the same without the accelerators.
bool CanEverHold(const WorkCe& w, const Job& job, int32_t nodes, bool accelerators = true) {
  if (w.ce->unmanaged) return true;  // capacity may appear there at any time
  if (nodes > w.max_instances) return false;
  for (const NodeRange& r : job.nodes) {
    Resources need = r.each;
    if (!accelerators) need.accelerators = 0;
    if (!need.FitsIn(w.ce->instance_type.shape)) return false;
    if (accelerators && !KindFits(r, w.ce->instance_type)) return false;
  }
  return true;
}

// Why compute environment `ce` can never hold `job`, or "" when it can.
std::string NeverFitsIn(const WorkCe& w, const JobWork& jw) {
  const ComputeEnvironment& ce = *w.ce;
  for (const NodeRange& r : jw.job->nodes) {
    if (!KindFits(r, ce.instance_type)) {
      std::string type = ce.instance_type.name.empty() ? "" : ce.instance_type.name + " ";
      return "its instance type " + type + "has " +
             DevicePhrase(ce.instance_type.accelerator_kind, ce.instance_type.shape.accelerators) +
             ", and a node needs " + DevicePhrase(r.accelerator_kind, r.each.accelerators);
    }
    if (!r.each.FitsIn(ce.instance_type.shape)) {
      std::string type = ce.instance_type.name.empty() ? "" : ce.instance_type.name + " ";
      return "its instance type " + type + "(" + Describe(ce.instance_type.shape) +
             ") is smaller than a node (" + Describe(r.each) + ")";
    }
  }
  if (jw.nodes > w.max_instances) {
    std::string per = FormatVcpus(w.type_milli) + " vCPU";
    if (w.max_instances == 0) {
      return "maxvCpus " + std::to_string(ce.max_vcpus) + " allows no instance of " + per;
    }
    return "maxvCpus " + std::to_string(ce.max_vcpus) + " allows only " +
           std::to_string(w.max_instances) +
           (w.max_instances == 1 ? " instance of " : " instances of ") + per +
           ", and the job needs " + std::to_string(jw.nodes) + " (one per node)";
  }
  return "";
}

std::string CeStateWord(const ComputeEnvironment& ce) {
  if (ce.state == State::kDisabled) return "DISABLED";
  if (!ce.valid) return ce.status.empty() || ce.status == "VALID" ? "INVALID" : ce.status;
  if (ce.unmanaged) return "UNMANAGED with no capacity lote can launch";
  return "ENABLED";
}

bool Dominates(const Resources& a, const Resources& b) { return b.FitsIn(a); }  // a >= b

// Sorts node ranges largest first: the greedy match for gangs.
bool LargerShape(const Resources& a, const Resources& b) {
  if (a.accelerators != b.accelerators) return a.accelerators > b.accelerators;
  if (a.milli_vcpu != b.milli_vcpu) return a.milli_vcpu > b.milli_vcpu;
  return a.memory_mib > b.memory_mib;
}

int32_t IslandOf(const std::vector<int32_t>* island, int32_t position) {
  return island == nullptr || island->empty() ? 0 : (*island)[position];
}

// Free devices per island: (island, count), islands in first-position order.
std::vector<std::pair<int32_t, int32_t>> FreePerIsland(uint64_t free_devices,
                                                       const std::vector<int32_t>* island) {
  std::vector<std::pair<int32_t, int32_t>> out;
  for (uint64_t m = free_devices; m != 0; m &= m - 1) {
    const int32_t isl = IslandOf(island, std::countr_zero(m));
    auto it = std::find_if(out.begin(), out.end(), [&](const auto& p) { return p.first == isl; });
    if (it == out.end()) {
      out.emplace_back(isl, 1);
    } else {
      ++it->second;
    }
  }
  return out;
}

// Whether `count` free devices lie on one island.
bool FitsOneIsland(uint64_t free_devices, const std::vector<int32_t>* island, int32_t count) {
  if (island == nullptr || island->empty()) return std::popcount(free_devices) >= count;
  for (const auto& [isl, n] : FreePerIsland(free_devices, island))
    if (n >= count) return true;
  return false;
}

// Takes `count` free devices, lowest positions first, from one island when
// one has room (the island with the fewest free devices that fit, so larger
// islands stay whole), else from the islands with the most free devices
// first (the fewest islands spanned).
std::vector<int32_t> TakeDevices(uint64_t* free_devices, const std::vector<int32_t>* island,
                                 int32_t count) {
  std::vector<int32_t> out;
  out.reserve(count);
  std::vector<std::pair<int32_t, int32_t>> per = FreePerIsland(*free_devices, island);
  std::stable_sort(per.begin(), per.end(), [&](const auto& a, const auto& b) {
    const bool fa = a.second >= count, fb = b.second >= count;
    if (fa != fb) return fa;
    return fa ? a.second < b.second : a.second > b.second;
  });
  for (const auto& [isl, n] : per) {
    for (uint64_t m = *free_devices; m != 0 && static_cast<int32_t>(out.size()) < count;
         m &= m - 1) {
      const int32_t bit = std::countr_zero(m);
      if (IslandOf(island, bit) != isl) continue;
      out.push_back(bit);
      *free_devices &= ~(uint64_t{1} << bit);
    }
    if (static_cast<int32_t>(out.size()) >= count) break;
  }
  return out;
}

class Pass {
 public:
  Pass(const Snapshot& s, int64_t now_ms) : s_(s), now_ms_(now_ms) {}

  Decisions Run() {
    BuildComputeEnvironments();
    BuildConsumables();
    BuildJobs();
    BuildQueues();
    for (int32_t q : queue_order_) ScheduleQueue(q);
    Explain();
    Scale();
    UpdateShareUsage();
    return std::move(d_);
  }

 private:
  void BuildComputeEnvironments() {
    std::unordered_map<std::string, int32_t> host_index;
    hosts_.resize(s_.hosts.size());
    for (size_t h = 0; h < s_.hosts.size(); ++h) {
      hosts_[h].host = &s_.hosts[h];
      hosts_[h].free_devices = s_.hosts[h].free_devices;
      host_index.emplace(s_.hosts[h].name, static_cast<int32_t>(h));
    }
    auto host_of = [&](const std::string& name) {
      if (name.empty()) return -1;
      auto it = host_index.find(name);
      return it == host_index.end() ? -1 : it->second;
    };
    ces_.resize(s_.compute_environments.size());
    for (size_t i = 0; i < ces_.size(); ++i) {
      const ComputeEnvironment& ce = s_.compute_environments[i];
      WorkCe& w = ces_[i];
      w.ce = &ce;
      w.usable = ce.state == State::kEnabled && ce.valid && !ce.unmanaged;
      w.type_milli = ce.unmanaged ? 1 : ce.instance_type.shape.milli_vcpu;
      w.max_milli = ce.unmanaged ? 0 : ce.max_vcpus * 1000;
      w.min_milli = ce.unmanaged ? 0 : ce.min_vcpus * 1000;
      w.max_instances =
          std::max<int64_t>(static_cast<int64_t>(ce.instances.size()), w.max_milli / w.type_milli);
      // Stable order: by id, so that decisions do not depend on the store's row order.
      std::vector<int32_t> order(ce.instances.size());
      for (size_t k = 0; k < order.size(); ++k) order[k] = static_cast<int32_t>(k);
      std::sort(order.begin(), order.end(),
                [&](int32_t a, int32_t b) { return ce.instances[a].id < ce.instances[b].id; });
      w.instances.reserve(order.size());
      for (int32_t k : order) {
        const Instance& inst = ce.instances[k];
        WorkInstance wi;
        wi.source = k;
        wi.total = inst.total;
        wi.available = inst.available;
        wi.free_devices = inst.free_devices;
        wi.idle_since_ms = inst.idle_since_ms;
        wi.host = host_of(inst.host);
        w.devices = w.devices || inst.total.accelerators > 0;
        w.instances.push_back(wi);
        w.total_milli += inst.total.milli_vcpu;
      }
      w.host = host_of(ce.host);
      w.devices = w.devices || (!ce.unmanaged && ce.instance_type.shape.accelerators > 0);
      if (w.devices) {
        w.by_free.resize(kMaxDevices + 1);
        w.bucket.assign(w.instances.size(), -1);
      }
      for (size_t k = 0; k < w.instances.size(); ++k) {
        if (w.instances[k].host >= 0)
          hosts_[w.instances[k].host].members.emplace_back(static_cast<int32_t>(i),
                                                           static_cast<int32_t>(k));
      }
      ce_index_.emplace(ce.name, static_cast<int32_t>(i));
    }
    for (size_t i = 0; i < ces_.size(); ++i)
      for (size_t k = 0; k < ces_[i].instances.size(); ++k)
        Rekey(static_cast<int32_t>(i), static_cast<int32_t>(k));
  }

  // ---- devices -----------------------------------------------------------------------

  // Devices instance `wi` can hand out now.
  int32_t FreeDevices(const WorkInstance& wi) const {
    if (wi.host < 0) return std::popcount(wi.free_devices);
    return std::min(wi.available.accelerators, std::popcount(hosts_[wi.host].free_devices));
  }
  uint64_t DeviceMask(const WorkInstance& wi) const {
    return wi.host < 0 ? wi.free_devices : hosts_[wi.host].free_devices;
  }
  const std::vector<int32_t>* IslandsOf(const WorkInstance& wi) const {
    return wi.host < 0 ? nullptr : &hosts_[wi.host].host->island;
  }
  bool FitsNow(const WorkInstance& wi, const Resources& need) const {
    return need.FitsIn(wi.available) &&
           (need.accelerators == 0 || FreeDevices(wi) >= need.accelerators);
  }

  // Files instance k of compute environment c under its free device count.
  void Rekey(int32_t c, int32_t k) {
    WorkCe& w = ces_[c];
    if (!w.devices) return;
    const int32_t key = std::min(FreeDevices(w.instances[k]), kMaxDevices);
    if (w.bucket[k] == key) return;
    if (w.bucket[k] >= 0) w.by_free[w.bucket[k]].erase(k);
    w.by_free[key].insert(k);
    w.bucket[k] = key;
  }

  // After the devices of instance k of c changed: it and every instance sharing its host.
  void DevicesChanged(int32_t c, int32_t k) {
    const int32_t h = ces_[c].instances[k].host;
    if (h < 0) {
      Rekey(c, k);
      return;
    }
    for (const auto& [mc, mk] : hosts_[h].members) Rekey(mc, mk);
  }

  // The instance of w to put a node needing `need` on, among those `ok`
  // accepts: first fit from scan_start without accelerators; with them, best
  // fit (the fewest free devices that fit; a node asking for none goes where
  // the fewest are free), preferring one whose free devices on a single island
  // fit the node. -1 when none.
  template <typename Ok>
  int32_t FindInstance(const WorkCe& w, const Resources& need, Ok ok) const {
    if (!w.devices) {
      for (size_t i = w.scan_start; i < w.instances.size(); ++i)
        if (ok(i)) return static_cast<int32_t>(i);
      return -1;
    }
    constexpr int kIslandLook = 8;  // instances of one bucket looked at for a single island
    for (int32_t k = need.accelerators; k <= kMaxDevices; ++k) {
      int32_t first = -1, looked = 0;
      for (int32_t i : w.by_free[k]) {
        if (!ok(static_cast<size_t>(i))) continue;
        const WorkInstance& wi = w.instances[i];
        if (need.accelerators == 0 ||
            FitsOneIsland(DeviceMask(wi), IslandsOf(wi), need.accelerators))
          return i;
        if (first < 0) first = i;
        if (++looked >= kIslandLook) break;
      }
      if (first >= 0) return first;
    }
    return -1;
  }

  void BuildJobs() {
    jobs_.resize(s_.jobs.size());
    bool first = true;
    for (size_t i = 0; i < jobs_.size(); ++i) {
      const Job& job = s_.jobs[i];
      JobWork& jw = jobs_[i];
      jw.job = &job;
      jw.nodes = job.NumNodes();
      jw.uniform = job.nodes.size() == 1;
      for (const NodeRange& r : job.nodes) {
        jw.largest = Max(jw.largest, r.each);
        jw.total_milli += r.each.milli_vcpu * r.count;
        if (first) {
          min_need_ = r.each;
          first = false;
        } else {
          min_need_ = Resources{std::min(min_need_.milli_vcpu, r.each.milli_vcpu),
                                std::min(min_need_.memory_mib, r.each.memory_mib),
                                std::min(min_need_.accelerators, r.each.accelerators)};
        }
      }
    }
  }

  void BuildQueues() {
    queues_.resize(s_.queues.size());
    std::unordered_map<std::string, int32_t> by_name;
    for (size_t i = 0; i < queues_.size(); ++i) {
      queues_[i].queue = &s_.queues[i];
      for (const std::string& name : s_.queues[i].compute_environments) {
        queues_[i].ces.push_back(ce_index_.at(name));
      }
      by_name.emplace(s_.queues[i].name, static_cast<int32_t>(i));
      queue_order_.push_back(static_cast<int32_t>(i));
    }
    for (size_t j = 0; j < jobs_.size(); ++j) {
      int32_t q = by_name.at(s_.jobs[j].queue);
      jobs_[j].queue = q;
      queues_[q].jobs.push_back(static_cast<int32_t>(j));
    }
    // Higher priority first; equal priorities by name so the order is stable.
    std::sort(queue_order_.begin(), queue_order_.end(), [&](int32_t a, int32_t b) {
      const JobQueue& qa = s_.queues[a];
      const JobQueue& qb = s_.queues[b];
      if (qa.priority != qb.priority) return qa.priority > qb.priority;
      return qa.name < qb.name;
    });
  }

  // ---- one queue -------------------------------------------------------------------

  void ScheduleQueue(int32_t q) {
    QueueWork& qw = queues_[q];
    // "Never" first: those fail whatever the queue's state is.
    std::vector<int32_t> candidates;
    candidates.reserve(qw.jobs.size());
    for (int32_t j : qw.jobs) {
      JobWork& jw = jobs_[j];
      jw.feasible_ce = 0;
      for (size_t k = 0; k < qw.ces.size(); ++k) {
        if (CanEverHold(ces_[qw.ces[k]], *jw.job, jw.nodes)) jw.feasible_ce |= uint64_t{1} << k;
      }
      if (jw.feasible_ce == 0) {
        if (OnlyAcceleratorsNeverFit(qw, jw)) {
          // AWS: RUNNABLE with MISCONFIGURATION:JOB_RESOURCE_REQUIREMENT, not failed.
          Wait(j, WaitReason::kMisconfiguration);
          continue;
        }
        jw.outcome = Outcome::kNeverFits;
        d_.never_fits.push_back(NeverFits{jw.job->id, NeverFitsMessage(qw, jw)});
        continue;
      }
      candidates.push_back(j);
    }
    bool any_usable = false;
    for (int32_t c : qw.ces) any_usable = any_usable || ces_[c].usable;
    if (qw.queue->state == State::kDisabled || !any_usable) {
      // Nothing is tried: the order is that of the queue's policy.
      std::sort(candidates.begin(), candidates.end(), [&](int32_t a, int32_t b) {
        const Job& ja = s_.jobs[a];
        const Job& jb = s_.jobs[b];
        if (qw.queue->fair_share && ja.scheduling_priority != jb.scheduling_priority)
          return ja.scheduling_priority > jb.scheduling_priority;
        if (ja.submit_order != jb.submit_order) return ja.submit_order < jb.submit_order;
        return ja.id < jb.id;
      });
      const WaitReason why = qw.queue->state == State::kDisabled ? WaitReason::kQueueDisabled
                                                                 : WaitReason::kNoUsableEnvironment;
      for (int32_t j : candidates) {
        d_.order[qw.queue->name].push_back(s_.jobs[j].id);
        Wait(j, why);
      }
      return;
    }
    if (qw.queue->fair_share) {
      ScheduleFairShare(q, candidates);
    } else {
      std::sort(candidates.begin(), candidates.end(), [&](int32_t a, int32_t b) {
        const Job& ja = s_.jobs[a];
        const Job& jb = s_.jobs[b];
        if (ja.submit_order != jb.submit_order) return ja.submit_order < jb.submit_order;
        return ja.id < jb.id;
      });
      for (int32_t j : candidates) TryJob(q, j);
    }
  }

  void ScheduleFairShare(int32_t q, const std::vector<int32_t>& candidates) {
    QueueWork& qw = queues_[q];
    const FairSharePolicy& policy = *qw.queue->fair_share;
    struct Share {
      std::string id;
      double weight = 1.0;
      ShareUsage usage;
      int64_t placed_milli = 0;
      std::vector<int32_t> jobs;
      size_t next = 0;
    };
    std::vector<Share> shares;
    std::unordered_map<std::string, int32_t> index;
    auto share_of = [&](const std::string& id) -> Share& {
      auto [it, inserted] = index.emplace(id, static_cast<int32_t>(shares.size()));
      if (inserted) {
        shares.emplace_back();
        shares.back().id = id;
        shares.back().weight = WeightFactor(policy, id);
        shares.back().usage.share_identifier = id;
        shares.back().usage.history_as_of_ms = now_ms_;
      }
      return shares[it->second];
    };
    for (const ShareUsage& u : qw.queue->share_usage) {
      share_of(u.share_identifier).usage = u;
      qw.used_milli += u.running_milli_vcpu;
    }
    for (int32_t j : candidates) share_of(s_.jobs[j].share_identifier).jobs.push_back(j);
    for (Share& sh : shares) {
      if (!sh.jobs.empty() || sh.usage.running_milli_vcpu > 0) ++qw.active_shares;
      std::sort(sh.jobs.begin(), sh.jobs.end(), [&](int32_t a, int32_t b) {
        const Job& ja = s_.jobs[a];
        const Job& jb = s_.jobs[b];
        if (ja.scheduling_priority != jb.scheduling_priority) {
          return ja.scheduling_priority > jb.scheduling_priority;
        }
        if (ja.submit_order != jb.submit_order) return ja.submit_order < jb.submit_order;
        return ja.id < jb.id;
      });
    }
    for (int32_t c : qw.ces) {
      if (ces_[c].usable) qw.queue_max_milli += ces_[c].max_milli;
    }
    double reserved = ReservedFraction(policy.compute_reservation, qw.active_shares);
    qw.cap_milli = static_cast<int64_t>(static_cast<double>(qw.queue_max_milli) * (1.0 - reserved));

    // The share with the least weighted usage goes next; ties by its head job's age.
    auto key = [&](const Share& sh) {
      return sh.weight * UsageVcpus(sh.usage, sh.placed_milli, policy.share_decay_seconds, now_ms_);
    };
    using Entry = std::pair<double, int32_t>;
    auto later = [&](const Entry& a, const Entry& b) {
      if (a.first != b.first) return a.first > b.first;
      const Job& ja = s_.jobs[shares[a.second].jobs[shares[a.second].next]];
      const Job& jb = s_.jobs[shares[b.second].jobs[shares[b.second].next]];
      if (ja.submit_order != jb.submit_order) return ja.submit_order > jb.submit_order;
      return shares[a.second].id > shares[b.second].id;
    };
    std::priority_queue<Entry, std::vector<Entry>, decltype(later)> heap(later);
    for (size_t i = 0; i < shares.size(); ++i) {
      if (!shares[i].jobs.empty()) heap.emplace(key(shares[i]), static_cast<int32_t>(i));
    }
    while (!heap.empty()) {
      int32_t i = heap.top().second;
      heap.pop();
      Share& sh = shares[i];
      int32_t j = sh.jobs[sh.next++];
      if (TryJob(q, j)) sh.placed_milli += jobs_[j].total_milli;
      if (sh.next < sh.jobs.size()) heap.emplace(key(sh), i);
    }
  }

  // Places job j now, or records why it waits. True when placed.
  bool TryJob(int32_t q, int32_t j) {
    QueueWork& qw = queues_[q];
    JobWork& jw = jobs_[j];
    d_.order[qw.queue->name].push_back(jw.job->id);
    if (qw.queue->fair_share && qw.queue->fair_share->compute_reservation > 0 &&
        qw.used_milli + jw.total_milli > qw.cap_milli) {
      Wait(j, WaitReason::kComputeReservation);
      return false;
    }
    if (!ConsumablesFit(j)) {
      // The first job that waits for units it can get later holds the
      // resources it needs: nobody behind it takes their units this pass, so
      // a large need is not starved by small ones. A job that can never get
      // them now (a resource missing, a need above the total) or that waits
      // behind another's hold holds nothing.
      Wait(j, WaitReason::kConsumableResource);
      if (ConsumablesCanHold(j))
        for (int32_t c : jw.consumables)
          if (consumables_[c].held_by == kNobody) consumables_[c].held_by = j;
      return false;
    }
    for (size_t k = 0; k < qw.ces.size(); ++k) {
      WorkCe& w = ces_[qw.ces[k]];
      if (!w.usable || !Feasible(jw, k)) continue;
      if (TryPlace(qw.ces[k], j)) {
        jw.outcome = Outcome::kPlaced;
        qw.used_milli += jw.total_milli;
        for (size_t i = 0; i < jw.consumables.size(); ++i)
          consumables_[jw.consumables[i]].available -= jw.job->consumables[i].quantity;
        return true;
      }
    }
    Wait(j, WaitReason::kCapacity);
    if (!qw.has_reservation) {
      // The first job of the queue that is blocked for capacity: hold capacity for it so
      // that later jobs cannot keep taking what it needs.
      for (size_t k = 0; k < qw.ces.size(); ++k) {
        if (ces_[qw.ces[k]].usable && Feasible(jw, k)) {
          Reserve(qw.ces[k], j);
          qw.has_reservation = true;
          break;
        }
      }
    }
    return false;
  }

  static bool Feasible(const JobWork& jw, size_t k) { return (jw.feasible_ce >> k) & 1; }

  // ---- consumable resources ----------------------------------------------------------

  void BuildConsumables() {
    consumables_.resize(s_.consumables.size());
    for (size_t i = 0; i < consumables_.size(); ++i) {
      consumables_[i].consumable = &s_.consumables[i];
      consumables_[i].available = s_.consumables[i].available;
      consumable_index_.emplace(s_.consumables[i].name, static_cast<int32_t>(i));
    }
  }

  // Whether every consumable resource job j needs exists, has the units and
  // is held by no job ahead of it; else its first short need is recorded.
  bool ConsumablesFit(int32_t j) {
    JobWork& jw = jobs_[j];
    const std::vector<ConsumableNeed>& needs = jw.job->consumables;
    if (jw.consumables.size() != needs.size()) {  // resolved once per pass
      jw.consumables.resize(needs.size());
      for (size_t i = 0; i < needs.size(); ++i) {
        auto it = consumable_index_.find(needs[i].name);
        jw.consumables[i] = it == consumable_index_.end() ? -1 : it->second;
      }
    }
    for (size_t i = 0; i < needs.size(); ++i) {
      const WorkConsumable* c = jw.consumables[i] < 0 ? nullptr : &consumables_[jw.consumables[i]];
      if (c == nullptr || c->available < needs[i].quantity ||
          (c->held_by != kNobody && c->held_by != j)) {
        jw.short_need = static_cast<int32_t>(i);
        return false;
      }
    }
    return true;
  }

  // Whether job j, short of units, may hold its resources: each exists, its
  // need is within the total, and none is held by another job.
  bool ConsumablesCanHold(int32_t j) const {
    const JobWork& jw = jobs_[j];
    for (size_t i = 0; i < jw.consumables.size(); ++i) {
      if (jw.consumables[i] < 0) return false;
      const WorkConsumable& c = consumables_[jw.consumables[i]];
      if (jw.job->consumables[i].quantity > c.consumable->total) return false;
      if (c.held_by != kNobody && c.held_by != j) return false;
    }
    return true;
  }

  // "consumable resource licence has 1 of 4 units available and the job needs 2".
  std::string ConsumableShortfall(int32_t j) const {
    const JobWork& jw = jobs_[j];
    const ConsumableNeed& need = jw.job->consumables.at(static_cast<size_t>(jw.short_need));
    std::string out = "consumable resource " + need.name;
    auto it = consumable_index_.find(need.name);
    if (it == consumable_index_.end())
      return out + " does not exist (create it with CreateConsumableResource)";
    const WorkConsumable& c = consumables_[it->second];
    if (need.quantity > c.consumable->total) {
      return out + " has " + std::to_string(c.consumable->total) +
             " units in all and the job needs " + std::to_string(need.quantity) +
             " (raise its total with UpdateConsumableResource)";
    }
    out += " has " + std::to_string(std::max<int64_t>(c.available, 0)) + " of " +
           std::to_string(c.consumable->total) + " units available and the job needs " +
           std::to_string(need.quantity);
    if (c.held_by != kNobody && c.held_by != j && c.available >= need.quantity)
      out += ", but they are held for job " + s_.jobs[c.held_by].id + " ahead of it";
    return out;
  }

  // Whether a job no compute environment of its queue can ever hold would fit
  // one of them but for its accelerators.
  bool OnlyAcceleratorsNeverFit(const QueueWork& qw, const JobWork& jw) const {
    if (jw.largest.accelerators == 0) return false;
    for (int32_t c : qw.ces)
      if (CanEverHold(ces_[c], *jw.job, jw.nodes, /*accelerators=*/false)) return true;
    return false;
  }

  // "; needs 4 GPUs on one node: free 2+1+1 over 3 hosts" for a job waiting
  // for accelerators, over the usable environments of its queue that can hold it.
  std::string DeviceShortfall(const QueueWork& qw, const JobWork& jw) const {
    std::string kind;
    for (const NodeRange& r : jw.job->nodes)
      if (r.each.accelerators == jw.largest.accelerators) kind = r.accelerator_kind;
    std::vector<int32_t> free;
    std::unordered_set<int32_t> hosts_seen;
    bool any_host = false;
    for (size_t k = 0; k < qw.ces.size(); ++k) {
      const WorkCe& w = ces_[qw.ces[k]];
      if (!w.usable || !Feasible(jw, k)) continue;
      for (const WorkInstance& wi : w.instances) {
        if (wi.host >= 0) {
          any_host = true;
          if (!hosts_seen.insert(wi.host).second) continue;
          const int32_t n = std::popcount(hosts_[wi.host].free_devices);
          if (n > 0) free.push_back(n);
        } else if (FreeDevices(wi) > 0) {
          free.push_back(FreeDevices(wi));
        }
      }
    }
    std::sort(free.rbegin(), free.rend());
    std::string out = "; needs " + DevicePhrase(kind, jw.largest.accelerators) + " on one node: ";
    if (free.empty()) return out + "none free";
    out += "free ";
    for (size_t i = 0; i < free.size() && i < 8; ++i)
      out += (i == 0 ? "" : "+") + std::to_string(free[i]);
    if (free.size() > 8) out += "+...";
    out += " over " + std::to_string(free.size()) + (any_host ? " host" : " instance") +
           (free.size() == 1 ? "" : "s");
    return out;
  }

  void Wait(int32_t j, WaitReason reason) {
    jobs_[j].outcome = Outcome::kWaiting;
    jobs_[j].reason = reason;
  }

  // ---- placement in one compute environment -----------------------------------------

  bool CanHost(const WorkInstance& wi, const Resources& need) const {
    return wi.reserved_by == kNobody && FitsNow(wi, need);
  }

  bool Dead(const WorkInstance& wi) const {
    return wi.reserved_by != kNobody || !min_need_.FitsIn(wi.available);
  }

  bool KnownToFail(const WorkCe& w, const JobWork& jw) const {
    if (!jw.uniform) return false;
    for (const FailedShape& f : w.failed) {
      if (Dominates(jw.largest, f.each) && jw.nodes >= f.nodes) return true;
    }
    return false;
  }

  void RememberFailure(WorkCe& w, const JobWork& jw) {
    if (jw.uniform && w.failed.size() < kMaxFailedShapes) {
      w.failed.push_back(FailedShape{jw.largest, jw.nodes});
    }
  }

  int32_t LaunchInstance(int32_t c) {
    WorkCe& w = ces_[c];
    WorkInstance wi;
    wi.launch = static_cast<int32_t>(d_.launches.size());
    wi.total = w.ce->instance_type.shape;
    wi.available = wi.total;
    wi.host = w.host;
    wi.free_devices = wi.host >= 0 ? 0 : MakeIdleInstance("", wi.total, now_ms_).free_devices;
    wi.idle_since_ms = now_ms_;
    d_.launches.push_back(Launch{w.ce->name, wi.total, w.ce->host});
    w.instances.push_back(wi);
    w.total_milli += w.type_milli;
    w.failed.clear();  // capacity grew
    const int32_t k = static_cast<int32_t>(w.instances.size()) - 1;
    if (wi.host >= 0) hosts_[wi.host].members.emplace_back(c, k);
    if (w.devices) {
      w.bucket.push_back(-1);
      Rekey(c, k);
    }
    return k;
  }

  // Puts node `node` (needing `need`) on instance i of compute environment c.
  void PlaceNode(int32_t c, int32_t i, const Resources& need, int32_t node, NodePlacement* np) {
    WorkCe& w = ces_[c];
    WorkInstance& wi = w.instances[i];
    np->node_index = node;
    np->resources = need;
    if (wi.source >= 0) {
      np->instance_id = w.ce->instances[wi.source].id;
    } else {
      np->launch_index = wi.launch;
    }
    if (wi.host >= 0) {
      np->devices = TakeDevices(&hosts_[wi.host].free_devices, &hosts_[wi.host].host->island,
                                need.accelerators);
    } else {
      np->devices = TakeDevices(&wi.free_devices, nullptr, need.accelerators);
    }
    wi.available -= need;
    wi.placed = true;
    wi.idle_since_ms = Instance::kBusy;
    if (need.accelerators > 0 || w.devices) DevicesChanged(c, i);
  }

  Placement NewPlacement(const WorkCe& w, const Job& job, int32_t nodes) {
    Placement p;
    p.job_id = job.id;
    p.queue = job.queue;
    p.compute_environment = w.ce->name;
    p.nodes.resize(nodes);
    return p;
  }

  // A retry is kept off the instances it avoids when the compute environment
  // could ever hold all its nodes elsewhere (other instances of a fitting
  // shape, busy or not, plus what it may still launch): then it is placed
  // there now or waits for them. Otherwise it is placed as any job.
  bool TryPlace(int32_t c, int32_t j) {
    WorkCe& w = ces_[c];
    JobWork& jw = jobs_[j];
    if (KnownToFail(w, jw)) return false;
    while (w.scan_start < w.instances.size() && Dead(w.instances[w.scan_start])) ++w.scan_start;
    const std::vector<std::string>& avoid = jw.job->avoid_instances;
    if (!avoid.empty()) {
      std::vector<char> skip(w.instances.size(), 0);
      bool any = false;
      for (size_t i = 0; i < w.instances.size(); ++i) {
        const WorkInstance& wi = w.instances[i];
        if (wi.source < 0) continue;
        const std::string& id = w.ce->instances[wi.source].id;
        skip[i] = std::find(avoid.begin(), avoid.end(), id) != avoid.end();
        any = any || skip[i];
      }
      if (any && OthersCouldHold(w, jw, skip)) return PlaceOn(c, j, &skip);
    }
    return PlaceOn(c, j, nullptr);
  }

  // Whether compute environment w could ever hold every node of jw on
  // instances not marked in `skip` (existing ones whose shape fits, and launches).
  bool OthersCouldHold(const WorkCe& w, const JobWork& jw, const std::vector<char>& skip) const {
    int64_t others = 0;
    for (size_t i = 0; i < w.instances.size(); ++i)
      if (!skip[i] && jw.largest.FitsIn(w.instances[i].total)) ++others;
    if (jw.largest.FitsIn(w.ce->instance_type.shape) && w.max_milli > w.total_milli)
      others += (w.max_milli - w.total_milli) / w.type_milli;
    return others >= jw.nodes;
  }

  // Places job j in compute environment c, on no instance marked in `skip`
  // (null: any). A failure is remembered only when nothing was skipped.
  bool PlaceOn(int32_t c, int32_t j, const std::vector<char>* skip) {
    WorkCe& w = ces_[c];
    JobWork& jw = jobs_[j];
    const Job& job = *jw.job;
    auto usable = [&](size_t i, const Resources& need) {
      return CanHost(w.instances[i], need) && (skip == nullptr || !(*skip)[i]);
    };
    auto remember = [&] {
      if (skip == nullptr) RememberFailure(w, jw);
    };

    if (jw.nodes == 1) {  // first fit (best fit for accelerators), else launch
      const Resources& need = job.nodes[0].each;
      int32_t found = FindInstance(w, need, [&](size_t i) { return usable(i, need); });
      if (found < 0) {
        if (w.Headroom() < 1 ||
            (w.host >= 0 && std::popcount(hosts_[w.host].free_devices) < need.accelerators)) {
          remember();
          return false;
        }
        found = LaunchInstance(c);
      }
      Placement p = NewPlacement(w, job, 1);
      PlaceNode(c, found, need, 0, &p.nodes[0]);
      d_.placements.push_back(std::move(p));
      return true;
    }

    // A gang: node ranges largest first, each node on its own instance.
    std::vector<int32_t> range_order(job.nodes.size());
    std::vector<int32_t> first_node(job.nodes.size());
    for (size_t r = 0, n = 0; r < job.nodes.size(); ++r) {
      range_order[r] = static_cast<int32_t>(r);
      first_node[r] = static_cast<int32_t>(n);
      n += job.nodes[r].count;
    }
    std::stable_sort(range_order.begin(), range_order.end(), [&](int32_t a, int32_t b) {
      return LargerShape(job.nodes[a].each, job.nodes[b].each);
    });
    std::vector<int32_t> chosen(jw.nodes, -1);  // instance per node; -1 = launch one
    std::vector<char> taken(w.instances.size(), 0);
    std::unordered_map<int32_t, int32_t> pending;  // host -> devices chosen for earlier nodes
    int32_t missing = 0;
    for (int32_t r : range_order) {
      const Resources& need = job.nodes[r].each;
      int32_t want = job.nodes[r].count;
      int32_t node = first_node[r];
      if (!w.devices) {
        for (size_t i = w.scan_start; i < w.instances.size() && want > 0; ++i) {
          if (taken[i] || !usable(i, need)) continue;
          chosen[node++] = static_cast<int32_t>(i);
          taken[i] = 1;
          --want;
        }
      } else {
        auto ok = [&](size_t i) {
          if (taken[i] || !usable(i, need)) return false;
          const WorkInstance& wi = w.instances[i];
          if (wi.host < 0 || need.accelerators == 0) return true;
          auto p = pending.find(wi.host);
          return p == pending.end() || FreeDevices(wi) - p->second >= need.accelerators;
        };
        for (; want > 0; --want) {
          const int32_t i = FindInstance(w, need, ok);
          if (i < 0) break;
          chosen[node++] = i;
          taken[i] = 1;
          if (w.instances[i].host >= 0) pending[w.instances[i].host] += need.accelerators;
        }
      }
      missing += want;
    }
    // Launched instances of a host-backed environment share its devices too.
    if (missing > 0 && w.host >= 0) {
      int32_t launch_devices = 0;
      for (size_t r = 0; r < job.nodes.size(); ++r)
        for (int32_t k = 0; k < job.nodes[r].count; ++k)
          if (chosen[first_node[r] + k] < 0) launch_devices += job.nodes[r].each.accelerators;
      auto p = pending.find(w.host);
      const int32_t used = p == pending.end() ? 0 : p->second;
      if (launch_devices > 0 &&
          std::popcount(hosts_[w.host].free_devices) - used < launch_devices) {
        remember();
        return false;
      }
    }
    if (missing > w.Headroom()) {
      remember();
      return false;
    }
    // Commit: all nodes or none.
    Placement p = NewPlacement(w, job, jw.nodes);
    for (size_t r = 0; r < job.nodes.size(); ++r) {
      for (int32_t k = 0; k < job.nodes[r].count; ++k) {
        int32_t node = first_node[r] + k;
        int32_t i = chosen[node] >= 0 ? chosen[node] : LaunchInstance(c);
        PlaceNode(c, i, job.nodes[r].each, node, &p.nodes[node]);
      }
    }
    d_.placements.push_back(std::move(p));
    return true;
  }

  // Holds capacity of compute environment c for job j: launch slots first,
  // then the existing instances closest to hosting a node. Nothing else is
  // placed there for the rest of the pass; nothing is allocated to j.
  void Reserve(int32_t c, int32_t j) {
    WorkCe& w = ces_[c];
    JobWork& jw = jobs_[j];
    int32_t launches = static_cast<int32_t>(std::min<int64_t>(w.Headroom(), jw.nodes));
    if (launches > 0) {
      w.held_launches += launches;
      w.headroom_holds.push_back(HeadroomHold{j, launches});
    }
    int32_t want = jw.nodes - launches;
    std::vector<int32_t> pool;
    for (size_t i = 0; i < w.instances.size(); ++i) {
      const WorkInstance& wi = w.instances[i];
      if (wi.reserved_by == kNobody && jw.largest.FitsIn(wi.total)) {
        pool.push_back(static_cast<int32_t>(i));
      }
    }
    auto closer = [&](int32_t a, int32_t b) {
      const WorkInstance& ia = w.instances[a];
      const WorkInstance& ib = w.instances[b];
      bool fa = FitsNow(ia, jw.largest);
      bool fb = FitsNow(ib, jw.largest);
      if (fa != fb) return fa;
      if (FreeDevices(ia) != FreeDevices(ib)) return FreeDevices(ia) > FreeDevices(ib);
      if (ia.available.milli_vcpu != ib.available.milli_vcpu) {
        return ia.available.milli_vcpu > ib.available.milli_vcpu;
      }
      if (ia.available.memory_mib != ib.available.memory_mib) {
        return ia.available.memory_mib > ib.available.memory_mib;
      }
      return a < b;
    };
    size_t take = std::min<size_t>(std::max(want, 0), pool.size());
    std::partial_sort(pool.begin(), pool.begin() + static_cast<std::ptrdiff_t>(take), pool.end(),
                      closer);
    for (size_t k = 0; k < take; ++k) w.instances[pool[k]].reserved_by = j;
    jw.held_ce = c;
    jw.held_instances = static_cast<int32_t>(take);
    jw.held_launches = launches;
  }

  // ---- messages ----------------------------------------------------------------------

  std::string NeverFitsMessage(const QueueWork& qw, const JobWork& jw) const {
    std::string out = "can never run: it needs " + NodesPhrase(*jw.job);
    if (qw.ces.empty()) {
      return out + " but job queue " + qw.queue->name + " has no compute environments";
    }
    out += " but no compute environment of job queue " + qw.queue->name + " can ever hold it: ";
    for (size_t k = 0; k < qw.ces.size(); ++k) {
      if (k > 0) out += "; ";
      const WorkCe& w = ces_[qw.ces[k]];
      out += w.ce->name + ": " + NeverFitsIn(w, jw);
    }
    return out;
  }

  struct Availability {
    int64_t free = 0;  // unheld instances that can take one node now, plus unheld launches
    std::vector<std::pair<int32_t, int64_t>> held;  // (job, instances/launches it holds that fit)
  };

  const Availability& AvailabilityFor(int32_t c, const Resources& need) {
    auto [it, inserted] = availability_.try_emplace(
        std::to_string(c) + "/" + std::to_string(need.milli_vcpu) + "/" +
        std::to_string(need.memory_mib) + "/" + std::to_string(need.accelerators));
    Availability& a = it->second;
    if (!inserted) return a;
    const WorkCe& w = ces_[c];
    auto add_held = [&](int32_t job, int64_t n) {
      for (auto& [hj, hn] : a.held) {
        if (hj == job) {
          hn += n;
          return;
        }
      }
      a.held.emplace_back(job, n);
    };
    for (const WorkInstance& wi : w.instances) {
      if (!FitsNow(wi, need)) continue;
      if (wi.reserved_by == kNobody) {
        ++a.free;
      } else {
        add_held(wi.reserved_by, 1);
      }
    }
    a.free += w.Headroom();
    for (const HeadroomHold& h : w.headroom_holds) add_held(h.job, h.launches);
    return a;
  }

  std::string WaitMessage(int32_t j) {
    const JobWork& jw = jobs_[j];
    const QueueWork& qw = queues_[jw.queue];
    std::string out = "waiting for " + NodesPhrase(*jw.job) + ": ";
    switch (jw.reason) {
      case WaitReason::kQueueDisabled:
        return out + "job queue " + qw.queue->name + " is DISABLED";
      case WaitReason::kNoUsableEnvironment: {
        out += "no compute environment of job queue " + qw.queue->name + " is ENABLED and VALID (";
        for (size_t k = 0; k < qw.ces.size(); ++k) {
          if (k > 0) out += ", ";
          const ComputeEnvironment& ce = *ces_[qw.ces[k]].ce;
          out += ce.name + " is " + CeStateWord(ce);
        }
        return out + ")";
      }
      case WaitReason::kComputeReservation: {
        const FairSharePolicy& p = *qw.queue->fair_share;
        return out + "fair-share computeReservation " + std::to_string(p.compute_reservation) +
               " of job queue " + qw.queue->name + " holds back " +
               FormatVcpus(qw.queue_max_milli - qw.cap_milli) + " of " +
               FormatVcpus(qw.queue_max_milli) + " vCPU for inactive share identifiers (" +
               std::to_string(qw.active_shares) +
               (qw.active_shares == 1 ? " active share" : " active shares") +
               "); the queue's jobs hold " + FormatVcpus(qw.used_milli) + " vCPU";
      }
      case WaitReason::kMisconfiguration: {
        std::string why = NeverFitsMessage(qw, jw);
        why = why.substr(std::string("can never run: ").size());
        return "MISCONFIGURATION:JOB_RESOURCE_REQUIREMENT - The job resource requirement "
               "(vCPU/memory/GPU) is higher than that can be met by the CE(s) attached to the "
               "job queue: " +
               why;
      }
      case WaitReason::kConsumableResource:
        return out + ConsumableShortfall(j);
      case WaitReason::kCapacity:
        break;
    }
    for (size_t k = 0; k < qw.ces.size(); ++k) {
      if (k > 0) out += "; ";
      int32_t c = qw.ces[k];
      const WorkCe& w = ces_[c];
      out += "compute environment " + w.ce->name;
      if (!w.usable) {
        out += " is " + CeStateWord(*w.ce);
        continue;
      }
      if (!Feasible(jw, k)) {
        out += " can never hold it (" + NeverFitsIn(w, jw) + ")";
        continue;
      }
      const Availability& a = AvailabilityFor(c, jw.largest);
      int64_t own = 0;
      int64_t others = 0;
      int32_t holders = 0;
      int32_t holder = kNobody;
      for (const auto& [hj, hn] : a.held) {
        if (hj == j) {
          own += hn;
        } else {
          others += hn;
          ++holders;
          holder = hj;
        }
      }
      out += " has " + std::to_string(a.free + own) + " free of " + std::to_string(w.max_instances);
      if (others > 0) {
        out += " (" + std::to_string(others) + " held for " +
               (holders == 1 ? "job " + s_.jobs[holder].id
                             : std::to_string(holders) + " jobs ahead of it") +
               ")";
      }
    }
    if (jw.held_ce >= 0 && jw.held_instances + jw.held_launches > 0) {
      out += "; " + ces_[jw.held_ce].ce->name + " holds ";
      if (jw.held_instances > 0) {
        out += std::to_string(jw.held_instances) +
               (jw.held_instances == 1 ? " instance" : " instances");
        if (jw.held_launches > 0) out += " and ";
      }
      if (jw.held_launches > 0) {
        out += std::to_string(jw.held_launches) +
               (jw.held_launches == 1 ? " launch slot" : " launch slots");
      }
      out += " for this job until it fits";
    }
    if (jw.largest.accelerators > 0) out += DeviceShortfall(qw, jw);
    return out;
  }

  void Explain() {
    for (size_t j = 0; j < jobs_.size(); ++j) {
      if (jobs_[j].outcome != Outcome::kWaiting) continue;
      d_.waiting.push_back(
          sched::Wait{jobs_[j].job->id, jobs_[j].reason, WaitMessage(static_cast<int32_t>(j))});
    }
  }

  // ---- scaling -----------------------------------------------------------------------

  void Scale() {
    for (size_t c = 0; c < ces_.size(); ++c) {
      WorkCe& w = ces_[c];
      const ComputeEnvironment& ce = *w.ce;
      if (ce.unmanaged) continue;  // nothing to scale, no desiredvCpus (AWS)
      if (ce.valid) {
        // Remove instances idle for the timeout, longest idle first, down to minvCpus.
        std::vector<int32_t> idle;
        for (size_t i = 0; i < w.instances.size(); ++i) {
          const WorkInstance& wi = w.instances[i];
          if (wi.source < 0 || wi.placed || wi.reserved_by != kNobody) continue;
          if (wi.idle_since_ms == Instance::kBusy || !(wi.available == wi.total)) continue;
          if (now_ms_ - wi.idle_since_ms < s_.config.idle_timeout_ms) continue;
          idle.push_back(static_cast<int32_t>(i));
        }
        std::sort(idle.begin(), idle.end(), [&](int32_t a, int32_t b) {
          if (w.instances[a].idle_since_ms != w.instances[b].idle_since_ms) {
            return w.instances[a].idle_since_ms < w.instances[b].idle_since_ms;
          }
          return a < b;
        });
        for (int32_t i : idle) {
          const WorkInstance& wi = w.instances[i];
          if (w.total_milli - wi.total.milli_vcpu < w.min_milli) break;
          w.total_milli -= wi.total.milli_vcpu;
          d_.removals.push_back(Removal{ce.name, ce.instances[wi.source].id});
        }
      }
      if (w.usable) {
        // Keep at least minvCpus, never past maxvCpus.
        while (w.total_milli < w.min_milli && w.total_milli + w.type_milli <= w.max_milli) {
          LaunchInstance(static_cast<int32_t>(c));
        }
      }
      d_.targets.push_back(CeTarget{ce.name, WholeVcpus(w.total_milli)});
    }
  }

  void UpdateShareUsage() {
    for (const JobQueue& q : s_.queues) {
      if (!q.fair_share) continue;
      for (const ShareUsage& u : q.share_usage) {
        d_.share_usage.push_back(ShareUsageUpdate{
            q.name, u.share_identifier,
            AccumulatedHistory(u, q.fair_share->share_decay_seconds, now_ms_), now_ms_});
      }
    }
  }

  const Snapshot& s_;
  const int64_t now_ms_;
  Decisions d_;
  std::vector<WorkCe> ces_;
  std::unordered_map<std::string, int32_t> ce_index_;
  std::vector<JobWork> jobs_;
  std::vector<QueueWork> queues_;
  std::vector<int32_t> queue_order_;
  std::vector<WorkHost> hosts_;
  Resources min_need_;
  std::unordered_map<std::string, Availability> availability_;
  std::vector<WorkConsumable> consumables_;
  std::unordered_map<std::string, int32_t> consumable_index_;
};

}  // namespace

Result<Decisions> Decide(const Snapshot& snapshot, int64_t now_ms) {
  RETURN_IF_ERROR(ValidateEnvironments(snapshot));
  std::vector<Rejected> rejected;
  std::vector<bool> keep(snapshot.jobs.size(), true);
  std::unordered_set<std::string_view> ids;
  ids.reserve(snapshot.jobs.size());
  for (size_t i = 0; i < snapshot.jobs.size(); ++i) {
    const Job& job = snapshot.jobs[i];
    Status st = ValidateJob(job, snapshot);
    if (st.ok() && !ids.insert(job.id).second) {
      st = Status::InvalidArgument("job \"" + job.id + "\" appears twice in the snapshot");
    }
    if (!st.ok()) {
      rejected.push_back(Rejected{job.id, st.message()});
      keep[i] = false;
    }
  }
  if (rejected.empty()) return Pass(snapshot, now_ms).Run();
  Snapshot rest;
  rest.hosts = snapshot.hosts;
  rest.compute_environments = snapshot.compute_environments;
  rest.queues = snapshot.queues;
  rest.config = snapshot.config;
  rest.consumables = snapshot.consumables;
  for (size_t i = 0; i < snapshot.jobs.size(); ++i)
    if (keep[i]) rest.jobs.push_back(snapshot.jobs[i]);
  Decisions d = Pass(rest, now_ms).Run();
  d.rejected = std::move(rejected);
  return d;
}

}  // namespace lote::sched
