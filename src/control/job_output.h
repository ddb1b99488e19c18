// JobOutput: where the job loop sends the output of the nodes it runs (the log
// streams of /aws/batch/job and the LOTE_PROGRESS values found there). The
// server implements it with its log store (server/job_logs.h); the loop runs
// without one (null) in tests that do not look at logs.
//
// The loop calls Follow when a node runs (its output file, as the node's
// backend names it, and the stream DescribeJobs reports), and Complete when the
// node has ended. Thread safety: implementations are safe from any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/status.h"

namespace lote::control {

// One node of one attempt of a job.
struct NodeOutputKey {
  std::string job_id;
  int32_t attempt = 0;  // 1-based
  int32_t node = 0;
  auto operator<=>(const NodeOutputKey&) const = default;
};

class JobOutput {
 public:
  virtual ~JobOutput() = default;

  // Starts storing `output_path` into `stream`. The node's silence (for hang
  // detection) counts from `started_ms`.
  virtual void Follow(const NodeOutputKey& node, const std::string& output_path,
                      const std::string& stream, int64_t started_ms) = 0;
  // The node has ended: its file will not grow any more.
  virtual void Complete(const NodeOutputKey& node) = 0;
  // DescribeJobs' `progress` of an attempt; nullopt when nothing was reported.
  virtual std::optional<Json> Progress(const std::string& job_id, int32_t attempt,
                                       int64_t now_ms) const = 0;
  // The attempt's followed nodes without a progress report (or start) in the
  // last `timeout_ms`, ascending.
  virtual std::vector<int32_t> StalledNodes(const std::string& job_id, int32_t attempt,
                                            int64_t now_ms, int64_t timeout_ms) const = 0;
  // The attempt is over and its job final or retried.
  virtual void ReleaseAttempt(const std::string& job_id, int32_t attempt) = 0;
  // The source offset stored with the stream's last event (-1: none; NotFound:
  // no such stream).
  virtual Result<int64_t> StoredOffset(const std::string& stream) const = 0;
  // True while some node of the job is followed (output not entirely stored).
  virtual bool Pending(const std::string& job_id) const = 0;
  // True while some node of this attempt is followed.
  virtual bool AttemptPending(const std::string& job_id, int32_t attempt) const = 0;
  // The last `n` stored lines of a stream (for a hang report).
  virtual std::vector<std::string> LastLines(const std::string& stream, size_t n) const = 0;
  // Stores `text` (one event per line, at `at_ms`) into `stream`, made if
  // missing (a hang's stack dumps: "<node's stream>/dump").
  virtual Status StoreText(const std::string& stream, const std::string& text, int64_t at_ms) = 0;
};

}  // namespace lote::control
