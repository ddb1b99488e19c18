// JobLogs: the output of every node of every attempt, stored into its log
// stream of "/aws/batch/job", and the progress each node reports there.
//
// The job loop calls Follow when a node has started (its output file and the
// stream name DescribeJobs reports), and Complete when the node's process has
// ended. One pump thread follows every file with a logs::LogIngestor: new
// bytes become events, `LOTE_PROGRESS {json}` lines also update the attempt's
// logs::ProgressTracker and the attempt's logs::ProgressHistory. After Complete the rest of the
// file is stored and the node is dropped.
//
// Exactly once across restarts: the ingestor resumes from the offset stored
// with the stream's last event, so the next server's Follow/Complete of the
// same node stores only what is missing (see logs/ingestor.h).
//
// Thread safety: every method is safe from any thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "common/json.h"
#include "control/job_output.h"
#include "logs/ingestor.h"
#include "logs/log_store.h"
#include "logs/progress.h"
#include "logs/progress_history.h"

namespace lote::server {

// One node of one attempt of a job.
using NodeLogKey = control::NodeOutputKey;

class JobLogs final : public control::JobOutput {
 public:
  explicit JobLogs(logs::LogStore* store);
  ~JobLogs() override;  // stops the pump; what is not stored yet is stored by the next server
  JobLogs(const JobLogs&) = delete;
  JobLogs& operator=(const JobLogs&) = delete;

  // Starts storing `output_path` into `stream` of /aws/batch/job. The node's
  // silence (for hang detection) counts from `started_ms`.
  void Follow(const NodeLogKey& node, const std::string& output_path, const std::string& stream,
              int64_t started_ms) override;
  // The node's process has ended: its file will not grow any more.
  void Complete(const NodeLogKey& node) override;

  // DescribeJobs' `progress` of an attempt (logs::ProgressTracker::ToJson);
  // nullopt when nothing was reported.
  std::optional<Json> Progress(const std::string& job_id, int32_t attempt,
                               int64_t now_ms) const override;
  // The attempt's followed nodes without a progress report (or start) in the
  // last `timeout_ms`, ascending.
  std::vector<int32_t> StalledNodes(const std::string& job_id, int32_t attempt, int64_t now_ms,
                                    int64_t timeout_ms) const override;
  // The attempt is over and its job final or retried: keeps its progress only
  // if something was reported.
  void ReleaseAttempt(const std::string& job_id, int32_t attempt) override;
  // The source offset stored with the stream's last event (-1: none;
  // NotFound: no such stream).
  Result<int64_t> StoredOffset(const std::string& stream) const override;
  // True while some node of the job is followed (output not entirely stored).
  bool Pending(const std::string& job_id) const override;
  // True while some node of this attempt is followed: its progress may still
  // change (the last LOTE_PROGRESS line may not be stored yet).
  bool AttemptPending(const std::string& job_id, int32_t attempt) const override;
  // `callback` runs on the pump thread, with no lock held, each time the
  // output of completed nodes has been entirely stored (the job loop wakes
  // up to persist the attempt's final progress). Set it before any Follow.
  void OnStored(std::function<void()> callback);
  // Stores `text` into `stream` of /aws/batch/job, one event per line.
  Status StoreText(const std::string& stream, const std::string& text, int64_t at_ms) override;
  // The last `n` stored lines of a stream (for a hang report).
  std::vector<std::string> LastLines(const std::string& stream, size_t n) const override;

  // Blocks until every completed node is stored (tests, shutdown).
  void WaitIdle();

 private:
  struct Follower {
    std::string output_path;
    std::string stream;
    std::unique_ptr<logs::LogIngestor> ingestor;  // created by the pump
    bool complete = false;
    int32_t failures = 0;
  };
  using AttemptKey = std::pair<std::string, int32_t>;

  std::shared_ptr<logs::ProgressTracker> TrackerLocked(const AttemptKey& key);
  void Pump();
  // One Poll of every follower; true if anything was stored or finished.
  bool PollAll();

  logs::LogStore* store_;
  // Every report, downsampled, in the store's /lote/progress (console charts).
  logs::ProgressHistory history_;

  mutable std::mutex mu_;
  std::condition_variable cv_;       // wakes the pump
  std::condition_variable idle_cv_;  // WaitIdle
  std::map<NodeLogKey, Follower> followers_;
  std::set<NodeLogKey> completed_early_;  // Complete before Follow
  std::map<AttemptKey, std::shared_ptr<logs::ProgressTracker>> trackers_;
  std::set<AttemptKey> reported_;                  // attempts with at least one report
  std::map<AttemptKey, std::set<int32_t>> ended_;  // nodes Complete'd, per attempt
  bool stopping_ = false;
  bool changed_ = false;  // a Follow/Complete since the last pass
  std::function<void()> on_stored_;
  std::thread pump_;
};

}  // namespace lote::server
