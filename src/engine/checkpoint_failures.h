// What a failed checkpoint does to a training run (docs/checkpoints.md): a
// checkpoint whose upload fails (a full disk, a store refusing writes, an injected
// fault) does not end the run. The trainer warns, naming the step and the error; the
// previous complete checkpoint stays the latest (a failed one never gets its
// manifest); the next checkpoint step tries again. Only `limit` failed checkpoints
// in a row (--max-checkpoint-failures, default 3) end the run.
//
// Pure: no I/O.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"

namespace lote::engine {

inline constexpr int kDefaultMaxCheckpointFailures = 3;

class CheckpointFailures {
 public:
  explicit CheckpointFailures(int limit) : limit_(limit < 1 ? 1 : limit) {}

  // The upload of checkpoint `step` (at `step_uri`) ended with `upload`. OK:
  // Ok and `*warning` empty. Failed: the warning to log in `*warning`, and Ok while
  // fewer than `limit` checkpoints in a row have failed, else the error that ends
  // the run (naming the step, the error and the latest complete checkpoint).
  Status Record(int64_t step, const std::string& step_uri, const Status& upload,
                std::string* warning);

  int64_t latest_step() const { return latest_; }  // 0: none complete yet
  int consecutive() const { return consecutive_; }
  int64_t failed_total() const { return failed_total_; }

 private:
  std::string LatestName() const;

  int limit_;
  int consecutive_ = 0;
  int64_t failed_total_ = 0;
  int64_t latest_ = 0;
};

}  // namespace lote::engine
