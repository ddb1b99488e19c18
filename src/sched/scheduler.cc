#include "sched/scheduler.h"

#include <algorithm>
#include <bit>
#include <queue>
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
};

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

// Whether compute environment `w` could ever hold the job (ignoring its state).
bool CanEverHold(const WorkCe& w, const Job& job, int32_t nodes) {
  if (w.ce->unmanaged) return true;  // capacity may appear there at any time
  if (nodes > w.max_instances) return false;
  for (const NodeRange& r : job.nodes) {
    if (!r.each.FitsIn(w.ce->instance_type.shape)) return false;
  }
  return true;
}

// Why compute environment `ce` can never hold `job`, or "" when it can.
std::string NeverFitsIn(const WorkCe& w, const JobWork& jw) {
  const ComputeEnvironment& ce = *w.ce;
  for (const NodeRange& r : jw.job->nodes) {
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

std::vector<int32_t> TakeDevices(uint64_t* free_devices, int32_t count) {
  std::vector<int32_t> out;
  out.reserve(count);
  for (int32_t i = 0; i < count; ++i) {
    int32_t bit = std::countr_zero(*free_devices);
    out.push_back(bit);
    *free_devices &= ~(uint64_t{1} << bit);
  }
  return out;
}

class Pass {
 public:
  Pass(const Snapshot& s, int64_t now_ms) : s_(s), now_ms_(now_ms) {}

  Decisions Run() {
    BuildComputeEnvironments();
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
        w.instances.push_back(wi);
        w.total_milli += inst.total.milli_vcpu;
      }
      ce_index_.emplace(ce.name, static_cast<int32_t>(i));
    }
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
    for (size_t k = 0; k < qw.ces.size(); ++k) {
      WorkCe& w = ces_[qw.ces[k]];
      if (!w.usable || !Feasible(jw, k)) continue;
      if (TryPlace(qw.ces[k], j)) {
        jw.outcome = Outcome::kPlaced;
        qw.used_milli += jw.total_milli;
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

  void Wait(int32_t j, WaitReason reason) {
    jobs_[j].outcome = Outcome::kWaiting;
    jobs_[j].reason = reason;
  }

  // ---- placement in one compute environment -----------------------------------------

  bool CanHost(const WorkInstance& wi, const Resources& need) const {
    return wi.reserved_by == kNobody && need.FitsIn(wi.available);
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
    wi.free_devices = MakeIdleInstance("", wi.total, now_ms_).free_devices;
    wi.idle_since_ms = now_ms_;
    d_.launches.push_back(Launch{w.ce->name, wi.total});
    w.instances.push_back(wi);
    w.total_milli += w.type_milli;
    w.failed.clear();  // capacity grew
    return static_cast<int32_t>(w.instances.size()) - 1;
  }

  // Puts node `node` (needing `need`) on instance i of compute environment w.
  void PlaceNode(WorkCe& w, int32_t i, const Resources& need, int32_t node, NodePlacement* np) {
    WorkInstance& wi = w.instances[i];
    np->node_index = node;
    np->resources = need;
    if (wi.source >= 0) {
      np->instance_id = w.ce->instances[wi.source].id;
    } else {
      np->launch_index = wi.launch;
    }
    np->devices = TakeDevices(&wi.free_devices, need.accelerators);
    wi.available -= need;
    wi.placed = true;
    wi.idle_since_ms = Instance::kBusy;
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

    if (jw.nodes == 1) {  // first fit, else launch
      const Resources& need = job.nodes[0].each;
      int32_t found = -1;
      for (size_t i = w.scan_start; i < w.instances.size(); ++i) {
        if (usable(i, need)) {
          found = static_cast<int32_t>(i);
          break;
        }
      }
      if (found < 0) {
        if (w.Headroom() < 1) {
          remember();
          return false;
        }
        found = LaunchInstance(c);
      }
      Placement p = NewPlacement(w, job, 1);
      PlaceNode(w, found, need, 0, &p.nodes[0]);
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
    int32_t missing = 0;
    for (int32_t r : range_order) {
      const Resources& need = job.nodes[r].each;
      int32_t want = job.nodes[r].count;
      int32_t node = first_node[r];
      for (size_t i = w.scan_start; i < w.instances.size() && want > 0; ++i) {
        if (taken[i] || !usable(i, need)) continue;
        chosen[node++] = static_cast<int32_t>(i);
        taken[i] = 1;
        --want;
      }
      missing += want;
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
        PlaceNode(w, i, job.nodes[r].each, node, &p.nodes[node]);
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
      bool fa = jw.largest.FitsIn(ia.available);
      bool fb = jw.largest.FitsIn(ib.available);
      if (fa != fb) return fa;
      if (ia.available.accelerators != ib.available.accelerators) {
        return ia.available.accelerators > ib.available.accelerators;
      }
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
      if (!need.FitsIn(wi.available)) continue;
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
  Resources min_need_;
  std::unordered_map<std::string, Availability> availability_;
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
  rest.compute_environments = snapshot.compute_environments;
  rest.queues = snapshot.queues;
  rest.config = snapshot.config;
  for (size_t i = 0; i < snapshot.jobs.size(); ++i)
    if (keep[i]) rest.jobs.push_back(snapshot.jobs[i]);
  Decisions d = Pass(rest, now_ms).Run();
  d.rejected = std::move(rejected);
  return d;
}

}  // namespace lote::sched
