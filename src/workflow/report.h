// `lote report JOB`: what a training job did, from the server's public API
// and its checkpoint folder.
//
//   - the curve: every LOTE_PROGRESS line of the main node's log streams, of
//     every attempt (a resumed attempt continues the curve);
//   - the summary: final and validation loss, tokens/s and MFU, steps;
//   - the timeline of each attempt and node: queued (submitted → placed),
//     starting (placed → running), running (→ stopped), with exit codes;
//   - the checkpoints under the job's --checkpoint-uri (read from its command).
//
// The loss-curve PNG is drawn by matplotlib (Debian's python3-matplotlib), fed
// the curve as CSV on stdin.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cli/batch_client.h"
#include "common/json.h"
#include "common/status.h"
#include "engine/checkpoint_tools.h"

namespace lote::workflow {

struct ProgressPoint {
  int32_t attempt = 0;
  int64_t step = 0;
  int64_t timestamp_ms = 0;
  std::optional<double> loss, val_loss, lr, grad_norm, tokens_per_s, mfu;
};

struct NodeSpan {
  int32_t attempt = 0;
  int32_t node = 0;
  int64_t placed_at_ms = 0;   // STARTING (0: unknown)
  int64_t started_at_ms = 0;  // RUNNING (0: never)
  int64_t stopped_at_ms = 0;  // 0: still running
  // Container mode: the image pull inside the running span (0: cached / none).
  int64_t pull_started_at_ms = 0;
  int64_t pull_stopped_at_ms = 0;
  std::optional<int64_t> exit_code;
  std::string reason;
};

struct JobReport {
  Json job;  // DescribeJobs of the job
  int64_t created_at_ms = 0;
  std::vector<ProgressPoint> points;  // in log order, attempts ascending
  std::vector<NodeSpan> nodes;
  std::string checkpoint_uri;  // the job's folder; empty when it writes none
  std::vector<engine::CheckpointSummary> checkpoints;
  std::string checkpoint_problem;  // why they could not be listed, if so
};

Result<JobReport> BuildReport(cli::BatchClient* client, const std::string& job_id);

// The text `lote report` prints.
std::string FormatReport(const JobReport& report);

// step,attempt,loss,val_loss,lr,grad_norm,tokens_per_s,mfu (empty cells where a
// line did not report the value).
std::string ProgressCsv(const JobReport& report);

// Writes the loss curve (training and validation loss against step) to `png`.
// FailedPrecondition naming the package when python3-matplotlib is missing.
Status PlotLossCurve(const JobReport& report, const std::string& png);

}  // namespace lote::workflow
