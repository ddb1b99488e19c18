#include "engine/checkpoint_failures.h"

#include <fmt/format.h>

namespace lote::engine {

std::string CheckpointFailures::LatestName() const {
  return latest_ > 0 ? fmt::format("step_{}", latest_) : "none (no checkpoint has completed)";
}

Status CheckpointFailures::Record(int64_t step, const std::string& step_uri, const Status& upload,
                                  std::string* warning) {
  warning->clear();
  if (upload.ok()) {
    consecutive_ = 0;
    latest_ = step;
    return Status::Ok();
  }
  ++consecutive_;
  ++failed_total_;
  *warning = fmt::format(
      "warning: checkpoint at step {} failed ({}): {}; the latest checkpoint stays {} "
      "({} of {} allowed failures in a row; {})",
      step, step_uri, upload.ToString(), LatestName(), consecutive_, limit_,
      consecutive_ < limit_ ? "trying again at the next checkpoint step" : "the run ends");
  if (consecutive_ < limit_) return Status::Ok();
  return Status(upload.code(),
                fmt::format("{} failed checkpoint(s) in a row (--max-checkpoint-failures {}); "
                            "the last, at step {}: {}; the latest complete checkpoint is {}",
                            consecutive_, limit_, step, upload.message(), LatestName()));
}

}  // namespace lote::engine
