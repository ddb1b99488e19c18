#include "sched/snapshot.h"

#include <bit>
#include <string_view>
#include <unordered_set>

namespace lote::sched {

Instance MakeIdleInstance(std::string id, const Resources& shape, int64_t now_ms) {
  Instance inst;
  inst.id = std::move(id);
  inst.total = shape;
  inst.available = shape;
  inst.free_devices =
      shape.accelerators >= 64 ? ~uint64_t{0} : ((uint64_t{1} << shape.accelerators) - 1);
  inst.idle_since_ms = now_ms;
  return inst;
}

int32_t Job::NumNodes() const {
  int32_t n = 0;
  for (const NodeRange& r : nodes) n += r.count;
  return n;
}

namespace {

Status Bad(std::string what) { return Status::InvalidArgument(std::move(what)); }

Status ValidateShape(const Resources& r, const std::string& where) {
  if (r.milli_vcpu <= 0 || r.memory_mib <= 0 || r.accelerators < 0) {
    return Bad(where + " must have milli_vcpu > 0, memory_mib > 0 and accelerators >= 0 (got " +
               std::to_string(r.milli_vcpu) + " milli-vCPU, " + std::to_string(r.memory_mib) +
               " MiB, " + std::to_string(r.accelerators) + " accelerators)");
  }
  if (r.accelerators > 64) {
    return Bad(where + " has " + std::to_string(r.accelerators) +
               " accelerators; at most 64 per instance are supported");
  }
  return Status::Ok();
}

}  // namespace

Status ValidateEnvironments(const Snapshot& s) {
  std::unordered_set<std::string_view> ce_names;
  std::unordered_set<std::string_view> instance_ids;
  std::unordered_set<std::string_view> host_names;
  for (const Host& h : s.hosts) {
    std::string where = "host \"" + h.name + "\"";
    if (h.name.empty()) return Bad("a host has an empty name: give it one");
    if (!host_names.insert(h.name).second) return Bad(where + " appears twice in the snapshot");
    if (h.devices < 0 || h.devices > 64) {
      return Bad(where + " has " + std::to_string(h.devices) +
                 " devices; 0..64 per host are supported");
    }
    if (h.devices < 64 && (h.free_devices >> h.devices) != 0) {
      return Bad(where + " marks a device position >= its " + std::to_string(h.devices) +
                 " devices as free");
    }
    if (!h.island.empty() && h.island.size() != static_cast<size_t>(h.devices)) {
      return Bad(where + " has " + std::to_string(h.island.size()) + " island numbers for " +
                 std::to_string(h.devices) + " devices: give one per device or none");
    }
  }
  for (const ComputeEnvironment& ce : s.compute_environments) {
    std::string where = "compute environment \"" + ce.name + "\"";
    if (ce.name.empty()) return Bad("a compute environment has an empty name: give it one");
    if (!ce_names.insert(ce.name).second) {
      return Bad(where + " appears twice in the snapshot: list each once");
    }
    if (!ce.unmanaged)
      RETURN_IF_ERROR(ValidateShape(ce.instance_type.shape, where + "'s instance type"));
    if (!ce.host.empty() && !host_names.count(ce.host)) {
      return Bad(where + " launches on host \"" + ce.host + "\", which is not in the snapshot");
    }
    if (ce.min_vcpus < 0 || ce.max_vcpus < ce.min_vcpus) {
      return Bad(where + " needs 0 <= minvCpus <= maxvCpus (got " + std::to_string(ce.min_vcpus) +
                 " and " + std::to_string(ce.max_vcpus) + ")");
    }
    for (const Instance& inst : ce.instances) {
      std::string iw = "instance \"" + inst.id + "\" of " + where;
      if (inst.id.empty()) return Bad("an instance of " + where + " has an empty id");
      if (!instance_ids.insert(inst.id).second) {
        return Bad(iw + ": the id is used twice; instance ids must be unique");
      }
      RETURN_IF_ERROR(ValidateShape(inst.total, iw + "'s total"));
      if (!inst.available.IsZeroOrPositive() || !inst.available.FitsIn(inst.total)) {
        return Bad(iw + " has available resources (" + Describe(inst.available) +
                   ") outside 0..total (" + Describe(inst.total) + ")");
      }
      if (!inst.host.empty()) {
        if (!host_names.count(inst.host)) {
          return Bad(iw + " names host \"" + inst.host + "\", which is not in the snapshot");
        }
        if (inst.free_devices != 0) {
          return Bad(iw + " takes its devices from host \"" + inst.host +
                     "\" and must have free_devices 0");
        }
        continue;
      }
      if (std::popcount(inst.free_devices) != inst.available.accelerators) {
        return Bad(iw + " has " + std::to_string(inst.available.accelerators) +
                   " available accelerators but " +
                   std::to_string(std::popcount(inst.free_devices)) +
                   " bits set in free_devices: they must agree");
      }
      if (inst.total.accelerators < 64 && (inst.free_devices >> inst.total.accelerators) != 0) {
        return Bad(iw + " marks a device index >= its " + std::to_string(inst.total.accelerators) +
                   " accelerators as free");
      }
    }
  }
  std::unordered_set<std::string_view> queue_names;
  for (const JobQueue& q : s.queues) {
    std::string where = "job queue \"" + q.name + "\"";
    if (q.name.empty()) return Bad("a job queue has an empty name: give it one");
    if (!queue_names.insert(q.name).second) return Bad(where + " appears twice in the snapshot");
    if (q.compute_environments.size() > 64) {
      return Bad(where + " lists " + std::to_string(q.compute_environments.size()) +
                 " compute environments; at most 64 are supported (AWS allows 3)");
    }
    for (const std::string& ce : q.compute_environments) {
      if (ce_names.count(ce) == 0) {
        return Bad(where + " lists compute environment \"" + ce +
                   "\", which is not in the snapshot: add it or remove it from the queue");
      }
    }
    std::unordered_set<std::string_view> shares;
    for (const ShareUsage& u : q.share_usage) {
      if (!shares.insert(u.share_identifier).second) {
        return Bad(where + " has two usage entries for share \"" + u.share_identifier +
                   "\": give one entry per share identifier");
      }
      if (u.running_milli_vcpu < 0 || u.history_vcpu_seconds < 0) {
        return Bad(where + " has negative usage for share \"" + u.share_identifier + "\"");
      }
    }
    if (q.fair_share) {
      const FairSharePolicy& p = *q.fair_share;
      if (p.compute_reservation < 0 || p.compute_reservation > 99) {
        return Bad(where + " has computeReservation " + std::to_string(p.compute_reservation) +
                   "; it must be 0..99");
      }
      if (p.share_decay_seconds < 0 || p.share_decay_seconds > 604800) {
        return Bad(where + " has shareDecaySeconds " + std::to_string(p.share_decay_seconds) +
                   "; it must be 0..604800");
      }
      for (const ShareWeight& w : p.share_distribution) {
        if (!(w.weight_factor > 0.0)) {
          return Bad(where + " gives share \"" + w.share_identifier + "\" weightFactor " +
                     std::to_string(w.weight_factor) + "; it must be > 0");
        }
      }
    }
  }
  if (s.config.idle_timeout_ms < 0) return Bad("config.idle_timeout_ms must be >= 0");
  return Status::Ok();
}

Status ValidateJob(const Job& j, const Snapshot& s) {
  auto where = [&j] { return "job \"" + j.id + "\""; };
  if (j.id.empty()) return Bad("a job has an empty id");
  bool known_queue = false;
  for (const JobQueue& q : s.queues) known_queue |= q.name == j.queue;
  if (!known_queue) {
    return Bad(where() + " is in job queue \"" + j.queue +
               "\", which is not in the snapshot: add the queue");
  }
  if (j.nodes.empty()) return Bad(where() + " has no node ranges: give it at least one node");
  int64_t nodes = 0;
  for (const NodeRange& r : j.nodes) {
    if (r.count < 1) return Bad(where() + " has a node range with count < 1");
    nodes += r.count;
    if (r.each.milli_vcpu <= 0 || r.each.memory_mib < 0 || r.each.accelerators < 0) {
      return Bad(where() + " asks for " + Describe(r.each) +
                 " per node; it needs milli_vcpu > 0 and no negative amounts");
    }
    if (!r.each.FitsIn(kMaxNodeRequest)) {
      return Bad(where() + " asks for " + Describe(r.each) + " per node; at most " +
                 Describe(kMaxNodeRequest) + " per node can be scheduled");
    }
  }
  if (nodes > kMaxJobNodes) {
    return Bad(where() + " has " + std::to_string(nodes) + " nodes; at most " +
               std::to_string(kMaxJobNodes) + " can be scheduled");
  }
  for (size_t i = 0; i < j.consumables.size(); ++i) {
    const ConsumableNeed& c = j.consumables[i];
    if (c.name.empty() || c.quantity < 1 || c.quantity > kMaxConsumableUnits) {
      return Bad(where() + " asks for " + std::to_string(c.quantity) +
                 " units of consumable resource \"" + c.name +
                 "\"; a need names a resource and asks for 1 to 2^50 units");
    }
    for (size_t k = 0; k < i; ++k)
      if (j.consumables[k].name == c.name)
        return Bad(where() + " names consumable resource \"" + c.name + "\" twice");
  }
  return Status::Ok();
}

Status Validate(const Snapshot& s) {
  RETURN_IF_ERROR(ValidateEnvironments(s));
  std::unordered_set<std::string_view> job_ids;
  job_ids.reserve(s.jobs.size());
  for (const Job& j : s.jobs) {
    RETURN_IF_ERROR(ValidateJob(j, s));
    if (!job_ids.insert(j.id).second)
      return Bad("job \"" + j.id + "\" appears twice in the snapshot");
  }
  return Status::Ok();
}

}  // namespace lote::sched
