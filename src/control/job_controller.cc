#include "control/job_controller.h"

#include <algorithm>
#include <set>

#include "control/job_sched.h"
#include "control/job_submit.h"

namespace lote::control {
namespace {

std::string QueueNameOfArn(const std::string& arn) {
  const size_t slash = arn.rfind('/');
  return slash == std::string::npos ? arn : arn.substr(slash + 1);
}

// A whole number of seconds in 1..max, or nullopt.
std::optional<int64_t> ParseTimeoutSeconds(const std::string& text,
                                           int64_t max = kMaxProgressTimeoutSeconds) {
  if (text.empty() || text.size() > 10) return std::nullopt;
  int64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + (c - '0');
  }
  if (value < 1 || value > max) return std::nullopt;
  return value;
}

// One line of a hang report: at most 200 bytes, without control characters.
std::string Clip(const std::string& line) {
  std::string out = line.size() > 200 ? line.substr(0, 200) + "..." : line;
  for (char& c : out)
    if (static_cast<unsigned char>(c) < 0x20) c = ' ';
  return out;
}

}  // namespace

sched::Resources ShapeOf(const InstanceType& type) {
  return sched::Resources{int64_t{type.vcpus} * 1000, type.memory_mib, type.accelerators};
}

Result<sched::Snapshot> BuildSchedulerSnapshot(
    const JobTable& jobs, const SubmitOrder& submit_order, InstanceTable* instances,
    ControlPlane* control, const ShareHistory& share_history, int64_t now,
    const std::map<std::string, exec::Capacity>& backend_capacity) {
  SchedulerJobs candidates;
  for (const auto& [id, job] : jobs) {
    if (job.CurrentAttempt() != nullptr) candidates.holding.push_back(&job);
    if (job.status == JobStatus::kRunnable && !job.IsArrayParent())
      candidates.runnable.push_back(&job);
  }
  return BuildSchedulerSnapshot(candidates, submit_order, instances, control, share_history, now,
                                backend_capacity);
}

Result<sched::Snapshot> BuildSchedulerSnapshot(
    const SchedulerJobs& jobs, const SubmitOrder& submit_order, InstanceTable* instances,
    ControlPlane* control, const ShareHistory& share_history, int64_t now,
    const std::map<std::string, exec::Capacity>& backend_capacity) {
  ASSIGN_OR_RETURN(sched::Snapshot snap,
                   BuildSchedulerEnvironments(jobs.holding, instances, control, share_history, now,
                                              backend_capacity));
  std::set<std::string> known_queues;
  for (const auto& q : snap.queues) known_queues.insert(q.name);
  for (const Job* runnable : jobs.runnable) {
    const std::string id = runnable->id;
    sched::Job sj =
        SchedulerJobOrNodeless(*runnable, submit_order.count(id) ? submit_order.at(id) : 0);
    // Jobs of a queue that has gone are left RUNNABLE.
    if (known_queues.count(sj.queue)) snap.jobs.push_back(std::move(sj));
  }
  return snap;
}

sched::Job SchedulerJobOrNodeless(const Job& job, int64_t submit_order) {
  Result<sched::Job> sj = SchedulerJob(job, submit_order);
  if (sj.ok()) return std::move(sj).value();
  // No nodes to schedule: the pass rejects the job (with a reason) instead
  // of leaving it RUNNABLE for ever.
  sched::Job nodeless;
  nodeless.id = job.id;
  nodeless.queue = QueueNameOfArn(job.queue_arn);
  return nodeless;
}

Result<sched::Snapshot> BuildSchedulerEnvironments(
    const std::vector<const Job*>& holding, InstanceTable* instances, ControlPlane* control,
    const ShareHistory& share_history, int64_t now,
    const std::map<std::string, exec::Capacity>& backend_capacity) {
  sched::Snapshot snap;
  // What running attempts hold on each instance.
  std::map<std::string, std::pair<sched::Resources, uint64_t>> held;    // resources, devices
  std::map<std::string, std::map<std::string, int64_t>> running_share;  // queue -> share -> mvcpu
  for (const Job* holder : holding) {
    const Job& job = *holder;
    const Attempt* attempt = job.CurrentAttempt();
    if (attempt == nullptr) continue;
    for (const NodeAttempt& node : attempt->nodes) {
      const ContainerSpec* c = job.ContainerFor(node.node_index);
      if (c == nullptr) continue;
      auto& h = held[node.instance_id];
      h.first += sched::Resources{c->MilliVcpu(), c->MemoryMib(), c->Accelerators().count};
      for (int32_t d : node.devices)
        if (d >= 0 && d < 64) h.second |= (uint64_t{1} << d);
      running_share[QueueNameOfArn(job.queue_arn)][job.share_identifier] += c->MilliVcpu();
    }
  }
  std::map<std::string, std::string> ce_name_of_arn;
  for (const ComputeEnvironmentSpec& ce : control->ComputeEnvironments()) {
    ce_name_of_arn[ce.arn] = ce.name;
    sched::ComputeEnvironment out;
    out.name = ce.name;
    out.state = ce.enabled ? sched::State::kEnabled : sched::State::kDisabled;
    out.valid = ce.status == "VALID";
    out.status = ce.status;
    // UNMANAGED (no instance type): lote launches nothing there; its jobs wait
    // (RUNNABLE, AWS) until a backend that serves it brings capacity.
    out.unmanaged = ce.instance_types.empty();
    if (!out.unmanaged) {
      out.instance_type = sched::InstanceType{ce.instance_types.front().name,
                                              ShapeOf(ce.instance_types.front()), ""};
    }
    out.placement_group = ce.placement_group;
    out.min_vcpus = ce.min_vcpus;
    out.max_vcpus = ce.max_vcpus;
    out.desired_vcpus = ce.desired_vcpus;
    bool backend_queues = false;
    if (auto cap = backend_capacity.find(ce.name); out.unmanaged && cap != backend_capacity.end() &&
                                                   cap->second.nodes > 0 &&
                                                   cap->second.milli_vcpu_per_node > 0) {
      // The backend's machines, as fixed instances (see the header).
      const exec::Capacity& c = cap->second;
      backend_queues = true;
      const sched::Resources shape{c.milli_vcpu_per_node, c.memory_mib_per_node, c.gpus_per_node};
      out.unmanaged = false;
      out.instance_type =
          sched::InstanceType{c.description.empty() ? "node" : c.description, shape, ""};
      const int64_t vcpus = (c.milli_vcpu_per_node + 999) / 1000;
      out.min_vcpus = out.max_vcpus = out.desired_vcpus = vcpus * c.nodes;
      for (int32_t k = 0; k < c.nodes; ++k) {
        const std::string iid = ce.name + "/node-" + std::to_string(k);
        auto [it, added] = instances->try_emplace(iid);
        if (added) it->second = VirtualInstance{iid, ce.name, shape, "", now};
        it->second.shape = shape;
      }
      // Nodes the partition no longer has.
      for (auto it = instances->begin(); it != instances->end();) {
        const std::string prefix = ce.name + "/node-";
        if (it->second.compute_environment == ce.name && it->first.rfind(prefix, 0) == 0 &&
            std::stol(it->first.substr(prefix.size())) >= c.nodes && !held.count(it->first)) {
          it = instances->erase(it);
        } else {
          ++it;
        }
      }
    }
    for (auto& [iid, inst] : *instances) {
      if (inst.compute_environment != ce.name) continue;
      sched::Instance si;
      si.id = iid;
      si.total = inst.shape;
      auto h = held.find(iid);
      const sched::Resources used = h == held.end() ? sched::Resources{} : h->second.first;
      const uint64_t used_devices = h == held.end() ? 0 : h->second.second;
      si.available =
          sched::Resources{std::max<int64_t>(0, inst.shape.milli_vcpu - used.milli_vcpu),
                           std::max<int64_t>(0, inst.shape.memory_mib - used.memory_mib),
                           std::max<int32_t>(0, inst.shape.accelerators - used.accelerators)};
      const uint64_t all = inst.shape.accelerators >= 64
                               ? ~uint64_t{0}
                               : ((uint64_t{1} << inst.shape.accelerators) - 1);
      si.free_devices = all & ~used_devices;
      if (backend_queues) {
        // The backend queues what does not fit now (Slurm PENDING, shown
        // RUNNABLE with its reason): its nodes are only a size limit here.
        si.available = inst.shape;
        si.free_devices = all;
      }
      // Keep popcount(free_devices) == available.accelerators.
      while (__builtin_popcountll(si.free_devices) > si.available.accelerators)
        si.free_devices &= si.free_devices - 1;
      if (h != held.end()) {
        inst.idle_since_ms = sched::Instance::kBusy;
      } else if (inst.idle_since_ms == sched::Instance::kBusy) {
        inst.idle_since_ms = now;
      }
      si.idle_since_ms = inst.idle_since_ms;
      out.instances.push_back(std::move(si));
    }
    snap.compute_environments.push_back(std::move(out));
  }
  for (const JobQueueSpec& q : control->JobQueues()) {
    if (q.type != "ECS") continue;  // service jobs: not container jobs on instances
    sched::JobQueue out;
    out.name = q.name;
    out.priority = q.priority;
    out.state = q.enabled ? sched::State::kEnabled : sched::State::kDisabled;
    for (const std::string& arn : q.compute_environment_arns) {
      auto it = ce_name_of_arn.find(arn);
      if (it == ce_name_of_arn.end()) continue;
      out.compute_environments.push_back(it->second);
    }
    if (!q.scheduling_policy_arn.empty()) {
      Result<Json> policies = control->DescribeSchedulingPolicies(
          Json{{"arns", Json::array({q.scheduling_policy_arn})}});
      sched::FairSharePolicy fs;
      if (policies.ok() && (*policies).contains("schedulingPolicies") &&
          !(*policies)["schedulingPolicies"].empty()) {
        const Json p =
            (*policies)["schedulingPolicies"][0].value("fairsharePolicy", Json::object());
        fs.compute_reservation = p.value("computeReservation", 0);
        fs.share_decay_seconds = p.value("shareDecaySeconds", 0);
        for (const Json& s : p.value("shareDistribution", Json::array()))
          fs.share_distribution.push_back(
              sched::ShareWeight{s.value("shareIdentifier", ""), s.value("weightFactor", 1.0)});
      }
      out.fair_share = fs;
      std::set<std::string> shares;
      for (const auto& [share, mv] : running_share[q.name]) shares.insert(share);
      for (const auto& [key, h] : share_history)
        if (h.queue == q.name) shares.insert(h.share_identifier);
      for (const std::string& share : shares) {
        if (share.empty()) continue;
        sched::ShareUsage u;
        u.share_identifier = share;
        u.running_milli_vcpu = running_share[q.name][share];
        auto h = share_history.find(q.name + "/" + share);
        if (h != share_history.end()) {
          u.history_vcpu_seconds = h->second.history_vcpu_seconds;
          u.history_as_of_ms = h->second.history_as_of_ms;
        }
        out.share_usage.push_back(u);
      }
    }
    snap.queues.push_back(std::move(out));
  }
  return snap;
}

std::optional<JobEvent> ArrayParentEvent(const Job& parent, std::map<std::string, int32_t> counts,
                                         int64_t now) {
  if (!parent.IsArrayParent()) return std::nullopt;
  int64_t counted = 0;
  for (const auto& [status, n] : counts) counted += n;
  if (counted != parent.array->size) return std::nullopt;
  if (counts == parent.array->status_summary) return std::nullopt;
  return JobEvent::ArrayChildrenUpdated(std::move(counts), now);
}

std::optional<int64_t> ProgressTimeoutSeconds(const Job& job) {
  const std::string* value = job.LoteSetting(kProgressTimeoutKey);
  return value ? ParseTimeoutSeconds(*value) : std::nullopt;
}

Status ValidateProgressTimeout(const Job& job) {
  for (const auto* map : {&job.parameters, &job.tags}) {
    auto it = map->find(kProgressTimeoutKey);
    if (it != map->end() && !ParseTimeoutSeconds(it->second)) {
      return Status::InvalidArgument(
          std::string(kProgressTimeoutKey) + " is '" + it->second +
          "': give a whole number of seconds from 1 to " +
          std::to_string(kMaxProgressTimeoutSeconds) +
          " (how long a running node may go without a LOTE_PROGRESS line)");
    }
  }
  return Status();
}

std::optional<int64_t> TerminationGraceSeconds(const Job& job) {
  const std::string* value = job.LoteSetting(kTerminationGraceKey);
  return value ? ParseTimeoutSeconds(*value, kMaxTerminationGraceSeconds) : std::nullopt;
}

Status ValidateTerminationGrace(const Job& job) {
  for (const auto* map : {&job.parameters, &job.tags}) {
    auto it = map->find(kTerminationGraceKey);
    if (it != map->end() && !ParseTimeoutSeconds(it->second, kMaxTerminationGraceSeconds)) {
      return Status::InvalidArgument(
          std::string(kTerminationGraceKey) + " is '" + it->second +
          "': give a whole number of seconds from 1 to " +
          std::to_string(kMaxTerminationGraceSeconds) +
          " (how long a terminated node has between SIGTERM and SIGKILL)");
    }
  }
  return Status();
}

std::vector<int32_t> HungNodes(const std::vector<int32_t>& stalled,
                               const std::optional<Json>& progress) {
  std::set<int32_t> reporting;
  if (progress && progress->is_object() && progress->contains("nodes") &&
      (*progress)["nodes"].is_array()) {
    for (const Json& n : (*progress)["nodes"])
      if (n.is_object() && n.value("node", Json()).is_number_integer())
        reporting.insert(n["node"].get<int32_t>());
  }
  if (reporting.empty()) return stalled;
  std::vector<int32_t> hung;
  for (int32_t n : stalled)
    if (reporting.count(n)) hung.push_back(n);
  return hung;
}

std::string HangReason(
    const Job& job, const Attempt& attempt, const std::vector<int32_t>& stalled,
    int64_t timeout_seconds,
    const std::function<std::vector<std::string>(const std::string&)>& last_lines) {
  std::string nodes;
  for (int32_t n : stalled) nodes += (nodes.empty() ? "" : ", ") + std::to_string(n);
  std::string reason =
      (job.IsMultiNode() ? (stalled.size() == 1 ? "node " : "nodes ") + nodes : "the job") +
      " reported no progress (LOTE_PROGRESS line) for " + std::to_string(timeout_seconds) + " s (" +
      kProgressTimeoutKey + ")";
  for (size_t i = 0; i < stalled.size() && i < 4; ++i) {
    const NodeAttempt* node = attempt.Node(stalled[i]);
    if (node == nullptr || node->log_stream_name.empty()) continue;
    std::vector<std::string> lines = last_lines(node->log_stream_name);
    reason += job.IsMultiNode() ? "; last lines of node " + std::to_string(stalled[i]) + ":"
                                : "; last lines:";
    if (lines.empty()) reason += " (none)";
    for (const std::string& line : lines) reason += " | " + Clip(line);
  }
  return reason;
}

}  // namespace lote::control
