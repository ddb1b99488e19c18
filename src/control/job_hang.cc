// The job loop's hang evidence (docs/faults.md): when hang detection fires,
// the attempt does not fail at once. The pass that found it asks for
// evidence (evidence_wanted_); after that pass, with no lock held,
// CollectHangEvidence (on a thread of the loop's own in lote server) has the
// attempt's backend dump the stacks of every
// process of every node, stores each node's dump as "<its stream>/dump" and
// keeps the sentence that names the straggler; the next pass fails the
// attempt (HANG) with that sentence at the end of its reason. `lote jobs
// dump` (DumpJob) collects the same evidence of a running job without
// failing it.
#include <spdlog/spdlog.h>

#include "common/thread_name.h"
#include "control/hang_evidence.h"
#include "control/job_loop.h"
#include "control/job_model.h"

namespace lote::control {
namespace {

constexpr int64_t kDumpTimeoutMs = 60'000;  // per process (gdb on a big process is slow)

}  // namespace

Result<JobLoop::EvidenceTarget> JobLoop::EvidenceTargetLocked(const std::string& job_id) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return Status::NotFound("job " + job_id + " does not exist");
  const Attempt* attempt = it->second.CurrentAttempt();
  if (attempt == nullptr || it->second.status != JobStatus::kRunning)
    return Status::FailedPrecondition("job " + job_id + " is " +
                                      std::string(JobStatusName(it->second.status)) +
                                      ": only a RUNNING job's nodes can be dumped");
  EvidenceTarget t;
  t.key = exec::AttemptKey{job_id, static_cast<int32_t>(it->second.attempts.size())};
  t.backend = BackendOf(*attempt);
  for (const NodeAttempt& n : attempt->nodes)
    if (!n.log_stream_name.empty()) t.streams[n.node_index] = n.log_stream_name;
  t.num_nodes = static_cast<int32_t>(attempt->nodes.size());
  return t;
}

JobLoop::HangEvidence JobLoop::CollectEvidence(const EvidenceTarget& t, Json* nodes) {
  if (t.backend == nullptr) return {"", EvidenceSentence({}, "", "the attempt's backend is gone")};
  const std::string injected = t.backend->InjectedFault(t.key, t.num_nodes);
  Result<std::map<int32_t, std::string>> dumps =
      t.backend->CollectStackDumps(t.key, kDumpTimeoutMs);
  if (!dumps.ok()) return {injected, EvidenceSentence({}, "", dumps.status().message())};
  const int64_t now = clock_->NowMillis();
  std::string stored_as = "<node's log stream>/dump";
  for (const auto& [node, text] : *dumps) {
    auto stream = t.streams.find(node);
    if (stream == t.streams.end() || output_ == nullptr) continue;
    const std::string name = DumpStreamName(stream->second);
    if (Status s = output_->StoreText(name, text, now); !s.ok())
      spdlog::warn("jobs: dump of {} node {}: {}", t.key.job_id, node, s.ToString());
    if (nodes != nullptr)
      nodes->push_back(Json{{"nodeIndex", node},
                            {"logStreamName", stream->second},
                            {"dumpLogStreamName", name},
                            {"stopped", text.find("(T (stopped))") != std::string::npos}});
  }
  if (t.streams.size() == 1) stored_as = DumpStreamName(t.streams.begin()->second);
  return {injected, EvidenceSentence(*dumps, stored_as, "")};
}

JobLoop::~JobLoop() { JoinEvidenceCollector(); }

void JobLoop::JoinEvidenceCollector() {
  if (evidence_thread_.joinable()) evidence_thread_.join();
}

void JobLoop::CollectHangEvidence() {
  if (!evidence_due_.load()) return;  // the usual pass: no lock taken
  if (!options_.collect_evidence_in_background) {
    CollectWantedEvidence();
    return;
  }
  if (evidence_running_.exchange(true)) return;  // a pass after the collector's end takes it
  if (evidence_thread_.joinable()) evidence_thread_.join();
  evidence_thread_ = NamedThread("lote-evidence", [this] {
    while (evidence_due_.load()) CollectWantedEvidence();
    evidence_running_ = false;
  });
}

void JobLoop::CollectWantedEvidence() {
  evidence_due_ = false;
  std::vector<EvidenceTarget> targets;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const exec::AttemptKey& key : evidence_wanted_) {
      Result<EvidenceTarget> t = EvidenceTargetLocked(key.job_id);
      if (t.ok() && t->key == key) {
        evidence_collecting_.insert(key);
        targets.push_back(std::move(*t));
      } else {
        hang_evidence_[key] = HangEvidence{};  // it ended meanwhile: no evidence
      }
    }
    evidence_wanted_.clear();
  }
  if (targets.empty()) return;
  for (const EvidenceTarget& t : targets) {
    spdlog::info("jobs: {} attempt {} hangs: collecting stack dumps of its nodes", t.key.job_id,
                 t.key.attempt);
    HangEvidence evidence = CollectEvidence(t, nullptr);
    std::lock_guard<std::mutex> lock(mu_);
    evidence_collecting_.erase(t.key);
    hang_evidence_[t.key] = std::move(evidence);
  }
  Wake();
}

Result<Json> JobLoop::DumpJob(const Json& request) {
  std::string id =
      request.value("jobId", Json()).is_string() ? request["jobId"].get<std::string>() : "";
  if (id.empty()) return Status::InvalidArgument("DumpJob: jobId is required");
  if (auto node = ParseNodeJobId(id)) id = node->first;
  EvidenceTarget t;
  {
    std::lock_guard<std::mutex> lock(mu_);
    SyncWithStoreLocked();
    ASSIGN_OR_RETURN(t, EvidenceTargetLocked(id));
  }
  Json nodes = Json::array();
  HangEvidence evidence = CollectEvidence(t, &nodes);
  std::string sentence = evidence.sentence;
  if (sentence.rfind("; ", 0) == 0) sentence = sentence.substr(2);
  Json out{{"jobId", id}, {"attempt", t.key.attempt}, {"nodes", nodes}, {"summary", sentence}};
  if (!evidence.injected.empty()) out["injectedFault"] = evidence.injected;
  return out;
}

}  // namespace lote::control
