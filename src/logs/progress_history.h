// ProgressHistory: the LOTE_PROGRESS reports of every job attempt as a series
// of points against `step` (what the console's training charts draw), kept
// small for long runs and persisted in a LogStore so it survives restarts.
//
// Downsampling: an attempt keeps at most `max_points` points. Reports are
// numbered 0, 1, 2, ... as they arrive; a report is kept when its number is a
// multiple of the attempt's stride (initially 1). When keeping one more would
// exceed `max_points`, the stride doubles and the kept points that are not
// multiples of it are dropped, so the points stay evenly spread over the
// whole run: a 1,000,000-step run keeps at most `max_points` points (memory
// and answers) and its stream holds about max_points * (1 + log2(reports /
// max_points) / 2) small events. A report with the same step as the last kept
// one (validation loss printed after the training line) is merged into it.
// A report whose step is below the attempt's last step (a replay) is ignored.
//
// Storage: group kProgressHistoryGroup of the LogStore, one stream per
// attempt ("<job id>/<attempt>", ':' of array child ids written as '.'), one
// event per kept report: {"n": number, "s": stride, "step": step,
// "node": node, "v": {values}}. Readers rebuild the series by replaying the
// stream with the same rule, so any number of ProgressHistory objects over one
// store agree: the writer (the server's job output pump) and readers (the
// console) are separate instances; there is one writer per store. Points()
// reads only the events appended since its last call.
//
// Thread safety: all methods are safe from any thread. Errors are the log
// store's (NotFound when an attempt has no history).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "logs/ingestor.h"
#include "logs/log_store.h"

namespace lote::logs {

inline constexpr std::string_view kProgressHistoryGroup = "/lote/progress";

struct ProgressPoint {
  int64_t n = 0;  // report number within the attempt
  int64_t step = 0;
  int64_t time_ms = 0;  // when the report was read
  int32_t node = 0;
  Json values = Json::object();  // the report's keys (loss, lr, ...), merged per step
};

class ProgressHistory {
 public:
  static constexpr size_t kDefaultMaxPoints = 2048;
  // Attempts whose series stay cached in memory (least recently used go).
  static constexpr size_t kCachedAttempts = 64;

  // `store` must outlive the history. max_points >= 2.
  explicit ProgressHistory(LogStore* store, size_t max_points = kDefaultMaxPoints);

  // Records a report of `node` of the attempt (1-based). Reports without an
  // integer `step` are ignored (OK).
  Status Record(const std::string& job_id, int32_t attempt, int32_t node,
                const ProgressReport& report);

  // The kept points of an attempt, ascending step. NotFound: no history.
  Result<std::vector<ProgressPoint>> Points(const std::string& job_id, int32_t attempt) const;

  // How many events the attempt's stream holds (its size on disk, in points).
  Result<uint64_t> StoredEvents(const std::string& job_id, int32_t attempt) const;

  // "<job id>/<attempt>" with ':' as '.'.
  static std::string StreamName(std::string_view job_id, int32_t attempt);

 private:
  struct Series {
    uint64_t position = 0;  // next stream sequence to replay
    int64_t stride = 1;
    std::vector<ProgressPoint> points;
    int64_t next_n = 0;             // number of the next report (writer)
    int64_t last_step = INT64_MIN;  // highest step seen (writer)
    bool last_kept = false;         // the report of last_step was kept
    uint64_t last_used = 0;
  };
  using Key = std::pair<std::string, int32_t>;

  // The attempt's series, brought up to date with its stream (mu_ held).
  // With `refresh` false a cached series is returned as it is (the writer's
  // own appends are replayed right after each append).
  Result<Series*> SyncLocked(const Key& key, bool create, bool refresh = true) const;
  void Apply(Series& series, const Json& event) const;
  void EvictLocked() const;

  LogStore* store_;
  const size_t max_points_;
  mutable std::mutex mu_;
  mutable std::map<Key, Series> series_;  // guarded by mu_
  mutable uint64_t uses_ = 0;             // guarded by mu_
};

}  // namespace lote::logs
