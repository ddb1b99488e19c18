#include "server/job_logs.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <climits>
#include <utility>

#include "common/thread_name.h"
#include "logs/stream_names.h"

namespace lote::server {
namespace {

// A follower whose ingestion keeps failing is given up after this many tries
// (its file stays on disk; the next server start tries again).
constexpr int32_t kMaxFailures = 50;
// How long the pump sleeps when no followed file grew.
constexpr std::chrono::milliseconds kIdlePoll{20};

}  // namespace

JobLogs::JobLogs(logs::LogStore* store) : store_(store), history_(store) {
  pump_ = NamedThread("lote-job-logs", [this] { Pump(); });
}

JobLogs::~JobLogs() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  pump_.join();
}

std::shared_ptr<logs::ProgressTracker> JobLogs::TrackerLocked(const AttemptKey& key) {
  std::shared_ptr<logs::ProgressTracker>& tracker = trackers_[key];
  if (!tracker) tracker = std::make_shared<logs::ProgressTracker>();
  return tracker;
}

void JobLogs::Follow(const NodeLogKey& node, const std::string& output_path,
                     const std::string& stream, int64_t started_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  TrackerLocked({node.job_id, node.attempt})->NodeStarted(node.node, started_ms);
  Follower& f = followers_[node];
  f.output_path = output_path;
  f.stream = stream;
  if (completed_early_.erase(node) > 0) f.complete = true;
  changed_ = true;
  cv_.notify_all();
}

void JobLogs::Complete(const NodeLogKey& node) {
  std::lock_guard<std::mutex> lock(mu_);
  if (trackers_.count({node.job_id, node.attempt}))
    ended_[{node.job_id, node.attempt}].insert(node.node);
  auto it = followers_.find(node);
  if (it == followers_.end()) {
    completed_early_.insert(node);
    return;
  }
  it->second.complete = true;
  changed_ = true;
  cv_.notify_all();
}

std::optional<Json> JobLogs::Progress(const std::string& job_id, int32_t attempt,
                                      int64_t now_ms) const {
  std::shared_ptr<logs::ProgressTracker> tracker;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!reported_.count({job_id, attempt})) return std::nullopt;
    auto it = trackers_.find({job_id, attempt});
    if (it == trackers_.end()) return std::nullopt;
    tracker = it->second;
  }
  return tracker->ToJson(now_ms);
}

std::vector<int32_t> JobLogs::StalledNodes(const std::string& job_id, int32_t attempt,
                                           int64_t now_ms, int64_t timeout_ms) const {
  std::shared_ptr<logs::ProgressTracker> tracker;
  std::set<int32_t> ended;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = trackers_.find({job_id, attempt});
    if (it == trackers_.end()) return {};
    tracker = it->second;
    if (auto e = ended_.find({job_id, attempt}); e != ended_.end()) ended = e->second;
  }
  std::vector<int32_t> stalled;
  for (int32_t node : tracker->StalledNodes(now_ms, timeout_ms))
    if (!ended.count(node)) stalled.push_back(node);
  return stalled;
}

void JobLogs::ReleaseAttempt(const std::string& job_id, int32_t attempt) {
  std::lock_guard<std::mutex> lock(mu_);
  const AttemptKey key{job_id, attempt};
  ended_.erase(key);
  if (!reported_.count(key)) trackers_.erase(key);
}

bool JobLogs::AttemptPending(const std::string& job_id, int32_t attempt) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = followers_.lower_bound(NodeLogKey{job_id, attempt, INT32_MIN});
  return it != followers_.end() && it->first.job_id == job_id && it->first.attempt == attempt;
}

void JobLogs::OnStored(std::function<void()> callback) {
  std::lock_guard<std::mutex> lock(mu_);
  on_stored_ = std::move(callback);
}

bool JobLogs::Pending(const std::string& job_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = followers_.lower_bound(NodeLogKey{job_id, INT32_MIN, INT32_MIN});
  return it != followers_.end() && it->first.job_id == job_id;
}

Result<int64_t> JobLogs::StoredOffset(const std::string& stream) const {
  return store_->SourceOffset(std::string(logs::kBatchJobLogGroup), stream);
}

Status JobLogs::StoreText(const std::string& stream, const std::string& text, int64_t at_ms) {
  const std::string group(logs::kBatchJobLogGroup);
  RETURN_IF_ERROR(store_->EnsureStream(group, stream));
  std::vector<logs::InputEvent> events;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    if (end > start)
      events.push_back(
          logs::InputEvent{at_ms, std::string_view(text).substr(start, end - start), -1});
    start = end + 1;
  }
  if (events.empty()) return Status::Ok();
  return store_->Append(group, stream, events).status();
}

std::vector<std::string> JobLogs::LastLines(const std::string& stream, size_t n) const {
  std::vector<std::string> lines;
  Result<std::vector<logs::LogEvent>> tail =
      store_->Tail(std::string(logs::kBatchJobLogGroup), stream, n);
  if (!tail.ok()) return lines;
  for (const logs::LogEvent& e : *tail) lines.push_back(e.message);
  return lines;
}

void JobLogs::WaitIdle() {
  std::unique_lock<std::mutex> lock(mu_);
  idle_cv_.wait(lock, [this] {
    if (stopping_) return true;
    for (const auto& [key, f] : followers_)
      if (f.complete) return false;
    return true;
  });
}

void JobLogs::Pump() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    changed_ = false;
    lock.unlock();
    const bool busy = PollAll();
    lock.lock();
    if (!busy) cv_.wait_for(lock, kIdlePoll, [this] { return stopping_ || changed_; });
  }
}

bool JobLogs::PollAll() {
  // Only this thread erases followers, so the pointers stay valid unlocked.
  std::vector<std::pair<NodeLogKey, Follower*>> work;
  {
    std::lock_guard<std::mutex> lock(mu_);
    work.reserve(followers_.size());
    for (auto& [key, f] : followers_) work.emplace_back(key, &f);
  }
  bool busy = false;
  std::vector<NodeLogKey> done, given_up;
  // Logged on the first failure and when giving up; retried on later passes.
  auto failed = [&given_up](const NodeLogKey& key, Follower* f, const Status& status) {
    if (++f->failures == 1 || f->failures >= kMaxFailures)
      spdlog::warn("logs: storing the output of {} attempt {} node {}: {}", key.job_id, key.attempt,
                   key.node, status.ToString());
    if (f->failures >= kMaxFailures) given_up.push_back(key);
  };
  for (auto& [key, f] : work) {
    bool complete = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      complete = f->complete;
    }
    if (!f->ingestor) {
      logs::IngestorOptions options;
      options.source_path = f->output_path;
      options.group = std::string(logs::kBatchJobLogGroup);
      options.stream = f->stream;
      std::shared_ptr<logs::ProgressTracker> tracker;
      {
        std::lock_guard<std::mutex> lock(mu_);
        tracker = TrackerLocked({key.job_id, key.attempt});
      }
      options.on_progress = [this, tracker, key](const logs::ProgressReport& report) {
        tracker->Report(key.node, report);
        if (Status st = history_.Record(key.job_id, key.attempt, key.node, report); !st.ok())
          spdlog::debug("progress history of {} attempt {}: {}", key.job_id, key.attempt,
                        st.ToString());
        std::lock_guard<std::mutex> lock(mu_);
        reported_.insert({key.job_id, key.attempt});
      };
      Result<std::unique_ptr<logs::LogIngestor>> created =
          logs::LogIngestor::Create(store_, std::move(options));
      if (!created.ok()) {
        failed(key, f, created.status());
        continue;
      }
      f->ingestor = std::move(*created);
    }
    if (complete) f->ingestor->MarkComplete();
    const uint64_t before = f->ingestor->stats().bytes_consumed;
    Result<bool> polled = f->ingestor->Poll();
    if (!polled.ok()) {
      failed(key, f, polled.status());
      continue;
    }
    if (f->ingestor->stats().bytes_consumed != before) busy = true;
    if (*polled) done.push_back(key);
  }
  if (!done.empty() || !given_up.empty()) {
    std::function<void()> on_stored;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (const NodeLogKey& key : done) followers_.erase(key);
      for (const NodeLogKey& key : given_up) followers_.erase(key);
      idle_cv_.notify_all();
      on_stored = on_stored_;
    }
    if (on_stored) on_stored();
    busy = true;
  }
  return busy;
}

}  // namespace lote::server
