// The job loop's side of bad-node quarantine (quarantine.h): the failures of
// closed attempts recorded, the state rebuilt from the stored attempts at
// start-up, quarantined instances kept out of placement, shown by
// DescribeComputeEnvironments (loteQuarantinedNodes), released by the API.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "control/job_loop.h"
#include "exec/batch_env.h"

namespace lote::control {

void JobLoop::NoteClosedAttemptLocked(const Job& job, size_t attempt) {
  for (const NodeFailure& f : NodeFailuresOf(job, attempt)) {
    std::optional<QuarantinedNode> q = quarantine_.Record(f);
    if (!q) continue;
    spdlog::warn("jobs: node {} of {} quarantined until {}: {}", q->node, q->compute_environment,
                 q->until_ms, q->reason);
  }
}

void JobLoop::RebuildQuarantineLocked() {
  // The jobs in memory, and those only the store holds whose NODE_LOST or
  // HANG attempts ended within the window (and the cool-down of what they
  // quarantined).
  std::vector<const Job*> jobs;
  for (const auto& [id, job] : jobs_) jobs.push_back(&job);
  std::vector<Job> stored;
  const int64_t since =
      clock_->NowMillis() - options_.quarantine.window_ms - options_.quarantine.cooldown_ms;
  Result<std::vector<store::JobRow>> rows = store_->JobsWithNodeFailuresSince(since);
  if (!rows.ok()) spdlog::warn("jobs: quarantine: {}", rows.status().ToString());
  for (const store::JobRow& row : rows.ok() ? *rows : std::vector<store::JobRow>()) {
    if (jobs_.count(row.job_id)) continue;
    Result<Json> doc = ParseJson(row.doc);
    Result<Job> job = doc.ok() ? JobFromJson(*doc) : Result<Job>(doc.status());
    if (job.ok()) stored.push_back(std::move(job).value());
  }
  for (const Job& job : stored) jobs.push_back(&job);
  std::vector<NodeFailure> failures;
  for (const Job* job : jobs) {
    for (size_t a = 0; a < job->attempts.size(); ++a) {
      std::vector<NodeFailure> f = NodeFailuresOf(*job, a);
      failures.insert(failures.end(), f.begin(), f.end());
    }
  }
  std::sort(failures.begin(), failures.end(), [](const NodeFailure& a, const NodeFailure& b) {
    return a.at_ms != b.at_ms ? a.at_ms < b.at_ms : a.job_id < b.job_id;
  });
  for (const NodeFailure& f : failures) quarantine_.Record(f);
  RestoreQuarantinedInstancesLocked(jobs);
}

void JobLoop::RestoreQuarantinedInstancesLocked(const std::vector<const Job*>& jobs) {
  // A quarantined virtual instance is kept across a restart (else a new one
  // would take its place at once), with the address its nodes had.
  std::map<std::string, std::string> ips;
  for (const Job* job : jobs)
    for (const Attempt& a : job->attempts)
      for (const NodeAttempt& n : a.nodes)
        if (!n.instance_id.empty()) ips[n.instance_id] = n.private_ipv4;
  for (const QuarantinedNode& q : quarantine_.Active(clock_->NowMillis())) {
    if (instances_.count(q.node) || !ips.count(q.node)) continue;
    Result<ComputeEnvironmentSpec> ce = control_->FindComputeEnvironment(q.compute_environment);
    if (!ce.ok() || ce->instance_types.empty()) continue;  // gone, or a backend's own node
    instances_[q.node] =
        VirtualInstance{q.node, q.compute_environment, ShapeOf(ce->instance_types.front()),
                        ips[q.node], sched::Instance::kBusy};
    next_instance_index_ =
        std::max(next_instance_index_, exec::InstanceIndexOfPrivateIp(ips[q.node]) + 1);
  }
}

void JobLoop::MaskQuarantinedLocked(sched::Snapshot* environments, int64_t now) {
  quarantine_.TakeExpired(now);
  Json shown = Json::object();
  for (const QuarantinedNode& q : quarantine_.Active(now)) {
    if (!shown.contains(q.compute_environment)) shown[q.compute_environment] = Json::array();
    shown[q.compute_environment].push_back(
        Json{{"node", q.node}, {"since", q.since_ms}, {"until", q.until_ms}, {"reason", q.reason}});
  }
  // No new placement on a quarantined instance, and it is kept (not removed
  // as idle) until its quarantine ends.
  for (sched::ComputeEnvironment& ce : environments->compute_environments) {
    for (sched::Instance& inst : ce.instances) {
      if (!quarantine_.IsQuarantined(inst.id, now)) continue;
      inst.available = sched::Resources{};
      inst.free_devices = 0;
      inst.idle_since_ms = sched::Instance::kBusy;
    }
  }
  if (shown == shown_quarantine_) return;
  for (const auto& [ce, nodes] : shown_quarantine_.items())
    if (!shown.contains(ce)) control_->SetQuarantinedNodes(ce, Json());
  for (const auto& [ce, nodes] : shown.items()) control_->SetQuarantinedNodes(ce, nodes);
  shown_quarantine_ = std::move(shown);
}

Result<Json> JobLoop::ReleaseNode(const Json& request) {
  if (!request.is_object() || !request.contains("node") || !request["node"].is_string() ||
      request["node"].get<std::string>().empty())
    return Status::InvalidArgument(
        "node is required: the quarantined node's name (an instance id "
        "or a Slurm node name)");
  const std::string node = request["node"].get<std::string>();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!quarantine_.Release(node, clock_->NowMillis()))
      return Status::InvalidArgument("node " + node + " is not quarantined");
  }
  spdlog::info("jobs: node {} released from quarantine", node);
  Wake();
  return Json{{"node", node}, {"released", true}};
}

}  // namespace lote::control
