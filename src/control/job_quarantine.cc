// The job loop's side of bad-node quarantine (quarantine.h): the failures of
// closed attempts recorded, the state rebuilt from the stored attempts at
// start-up, quarantined instances kept out of placement, shown by
// DescribeComputeEnvironments (loteQuarantinedNodes), released by the API.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "control/job_loop.h"
#include "exec/batch_env.h"
#include "store/store.h"

namespace lote::control {

std::vector<NodeFailure> JobLoop::NodeFailuresLocked(const Job& job, size_t attempt) {
  const Attempt& a = job.attempts[attempt];
  if (a.stopped_at == 0 || (a.failure_category != FailureCategory::kNodeLost &&
                            a.failure_category != FailureCategory::kHang))
    return {};
  // A backend with machines of its own (Slurm) names where the nodes ran.
  std::optional<std::vector<std::string>> hosts;
  if (exec::Backend* backend = BackendOf(a))
    hosts = backend->NodeHosts(exec::AttemptKey{job.id, static_cast<int32_t>(attempt) + 1},
                               static_cast<int32_t>(a.nodes.size()));
  return NodeFailuresOf(job, attempt, hosts);
}

void JobLoop::NoteClosedAttemptLocked(const Job& job, size_t attempt) {
  for (const NodeFailure& f : NodeFailuresLocked(job, attempt)) {
    std::optional<QuarantinedNode> q = quarantine_.Record(f);
    if (!q) continue;
    spdlog::warn("jobs: node {} of {} quarantined until {}: {}", q->node, q->compute_environment,
                 q->until_ms, q->reason);
    DrainQuarantinedHostLocked(*q);
    // Shown at once: a scheduling pass may not come soon (an idle server
    // runs none), and DescribeComputeEnvironments must not lag behind.
    ShowQuarantineLocked(clock_->NowMillis());
  }
}

void JobLoop::RebuildQuarantineLocked() {
  // Releases first: failures before a node's release do not count.
  Result<std::vector<store::NodeReleaseRow>> releases =
      store_ != nullptr
          ? store_->LoadNodeReleases()
          : Result<std::vector<store::NodeReleaseRow>>(std::vector<store::NodeReleaseRow>{});
  if (releases.ok()) {
    for (const store::NodeReleaseRow& r : *releases) quarantine_.SetReleased(r.node, r.released_ms);
  } else {
    spdlog::error("jobs: node releases not loaded: {}", releases.status().ToString());
  }
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
      std::vector<NodeFailure> f = NodeFailuresLocked(*job, a);
      failures.insert(failures.end(), f.begin(), f.end());
    }
  }
  std::sort(failures.begin(), failures.end(), [](const NodeFailure& a, const NodeFailure& b) {
    return a.at_ms != b.at_ms ? a.at_ms < b.at_ms : a.job_id < b.job_id;
  });
  for (const NodeFailure& f : failures) quarantine_.Record(f);
  // A backend's machine stays drained (again, if someone resumed it while no
  // server ran); one whose cool-down ended meanwhile is resumed by the first pass.
  for (const QuarantinedNode& q : quarantine_.Active(clock_->NowMillis()))
    DrainQuarantinedHostLocked(q);
  RestoreQuarantinedInstancesLocked(jobs);
}

exec::Backend* JobLoop::QuarantineBackendLocked(const QuarantinedNode& q) {
  Result<ComputeEnvironmentSpec> ce = control_->FindComputeEnvironment(q.compute_environment);
  if (!ce.ok() || !ce->instance_types.empty()) return nullptr;  // lote's own instances
  Result<exec::Backend*> backend = options_.backends->ForEnvironment(*ce);
  return backend.ok() ? *backend : nullptr;
}

void JobLoop::DrainQuarantinedHostLocked(const QuarantinedNode& q) {
  // Rare (a quarantine's start): one Slurm command under the lock.
  exec::Backend* backend = QuarantineBackendLocked(q);
  if (backend == nullptr) return;
  Status st = backend->DrainHost(q.node, q.reason);
  if (st.ok()) {
    spdlog::info("jobs: {} drained node {} (quarantine)", backend->Name(), q.node);
  } else if (st.code() != StatusCode::kUnimplemented) {
    spdlog::warn("jobs: drain of node {}: {}", q.node, st.ToString());
  }
}

void JobLoop::ResumeQuarantinedHostLocked(const QuarantinedNode& q) {
  exec::Backend* backend = QuarantineBackendLocked(q);
  if (backend == nullptr) return;
  Status st = backend->ResumeHost(q.node);
  if (st.ok()) {
    spdlog::info("jobs: {} resumed node {} (quarantine over)", backend->Name(), q.node);
  } else if (st.code() != StatusCode::kUnimplemented) {
    spdlog::warn("jobs: resume of node {}: {}", q.node, st.ToString());
  }
}

std::vector<std::string> JobLoop::AvoidedHosts(const Job& job, const exec::Backend& backend) const {
  // The attempt being launched is the last; the one before it failed.
  if (job.attempts.size() < 2) return {};
  const Attempt* failed = RetryAvoidanceSource(job, job.attempts.size() - 1);
  if (failed == nullptr || failed->compute_environment != job.attempts.back().compute_environment)
    return {};
  std::optional<std::vector<std::string>> hosts =
      backend.NodeHosts(exec::AttemptKey{job.id, static_cast<int32_t>(job.attempts.size()) - 1},
                        static_cast<int32_t>(failed->nodes.size()));
  if (!hosts) return {};
  std::vector<std::string> out;
  for (int32_t k : BlamedNodes(*failed))
    if (k >= 0 && static_cast<size_t>(k) < hosts->size() && !(*hosts)[k].empty())
      out.push_back((*hosts)[k]);
  return out;
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

void JobLoop::ShowQuarantineLocked(int64_t now) {
  Json shown = Json::object();
  for (const QuarantinedNode& q : quarantine_.Active(now)) {
    if (!shown.contains(q.compute_environment)) shown[q.compute_environment] = Json::array();
    shown[q.compute_environment].push_back(
        Json{{"node", q.node}, {"since", q.since_ms}, {"until", q.until_ms}, {"reason", q.reason}});
  }
  if (shown == shown_quarantine_) return;
  for (const auto& [ce, nodes] : shown_quarantine_.items())
    if (!shown.contains(ce)) control_->SetQuarantinedNodes(ce, Json());
  for (const auto& [ce, nodes] : shown.items()) control_->SetQuarantinedNodes(ce, nodes);
  shown_quarantine_ = std::move(shown);
}

void JobLoop::MaskQuarantinedLocked(sched::Snapshot* environments, int64_t now) {
  for (const QuarantinedNode& q : quarantine_.TakeExpired(now)) ResumeQuarantinedHostLocked(q);
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
  ShowQuarantineLocked(now);
}

Result<Json> JobLoop::ReleaseNode(const Json& request) {
  if (!request.is_object() || !request.contains("node") || !request["node"].is_string() ||
      request["node"].get<std::string>().empty())
    return Status::InvalidArgument(
        "node is required: the quarantined node's name (an instance id "
        "or a Slurm node name)");
  const std::string node = request["node"].get<std::string>();
  auto quarantined = [&](int64_t now) -> std::optional<QuarantinedNode> {
    for (const QuarantinedNode& q : quarantine_.Active(now))
      if (q.node == node) return q;
    return std::nullopt;
  };
  int64_t now = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    now = clock_->NowMillis();
    if (!quarantined(now)) return Status::InvalidArgument("node " + node + " is not quarantined");
  }
  // Stored before it takes effect (and outside the loop's lock): a release
  // is never lost to a restart.
  if (store_ != nullptr) {
    store::WriteBatch batch;
    batch.PutNodeRelease(store::NodeReleaseRow{node, now});
    Status st = store_->Write(std::move(batch));
    if (!st.ok()) return st.WithContext("the release of node " + node + " was not stored");
  }
  exec::Backend* backend = nullptr;
  std::optional<QuarantinedNode> released;
  {
    std::lock_guard<std::mutex> lock(mu_);
    released = quarantined(clock_->NowMillis());
    if (!released) return Status::InvalidArgument("node " + node + " is not quarantined");
    quarantine_.Release(node, now);
    ShowQuarantineLocked(now);
    backend = QuarantineBackendLocked(*released);
  }
  // The backend's machine back in service (Slurm: scontrol ... state=resume).
  if (backend != nullptr) {
    Status st = backend->ResumeHost(node);
    if (!st.ok() && st.code() != StatusCode::kUnimplemented)
      return st.WithContext("node " + node + " was released, but " + backend->Name() +
                            " did not take it back");
  }
  spdlog::info("jobs: node {} released from quarantine", node);
  Wake();
  return Json{{"node", node}, {"released", true}};
}

}  // namespace lote::control
