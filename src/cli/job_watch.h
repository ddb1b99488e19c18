// The server-facing side of `lote logs`, `lote wait` and `lote status`:
// DescribeJobs / ListJobs / GetLogEvents calls through the BatchClient, driving
// the pure parts in job_logs.h and status_table.h.
//
// Errors are Status values: NotFound for an unknown job id (the message says
// how to find the right one), InvalidArgument for options the job cannot
// honour, Unavailable/Internal from the client. Not thread-safe (one BatchClient).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "cli/batch_client.h"
#include "cli/job_logs.h"
#include "common/clock.h"
#include "common/json.h"
#include "common/status.h"

namespace lote::cli {

// Log group of AWS Batch job output.
inline constexpr std::string_view kJobLogGroup = "/aws/batch/job";

// How a job ended (or stands, when it has not).
struct JobOutcome {
  std::string job_id;
  std::string name;
  std::string status;
  std::string reason;
  std::string failure_category;  // lote's extra key failureCategory (HANG, USER_ERROR, ...)
  int exit_code = 0;             // ExitCodeForStatus(status)
};

// Waits between polls; tests may pass a fake.
using Sleeper = std::function<void(int64_t millis)>;
Sleeper RealSleeper();

// The job's log plan: DescribeJobs of the job and, for a multi-node parent,
// of its node views JOBID#0..JOBID#(n-1).
Result<JobLogPlan> ReadJobLogPlan(BatchClient* client, const std::string& job_id);

// One stream's lines through GetLogEvents (startFromHead, paging with
// nextForwardToken; the token coming back unchanged means "nothing more for
// now"). A stream that does not exist yet reads as empty.
class StreamPages : public PageSource {
 public:
  StreamPages(BatchClient* client, std::string stream, std::optional<int64_t> start_time_ms);
  Result<std::vector<LogLine>> NextPage() override;

 private:
  BatchClient* client_;
  std::string stream_;
  std::optional<int64_t> start_time_ms_;
  std::optional<std::string> token_;
};

struct LogsOptions {
  std::string job_id;
  std::optional<int32_t> node;
  std::optional<int32_t> attempt;
  bool follow = false;
  std::optional<int64_t> since_ms;  // only events newer than now - since
  int64_t poll_ms = 200;            // follow: wait when a round found nothing new
};

inline constexpr int64_t kSettleMs = 10'000;
// lote servers: how long after the job's end to keep reading while the
// server says its streams are not complete yet.
inline constexpr int64_t kMaxStoreLagMs = 120'000;

// Prints the job's output through `write` (merged by timestamp, "[node N] "
// prefixes for multi-node jobs, a header where each attempt starts when the
// job may have several). With `follow`, keeps polling (picking up the streams
// of new attempts) until the job has ended and its streams hold nothing new.
// The server stores a node's last output just after the job ends: a lote
// server says when that is done (DescribeJobs' extra key logsComplete), and
// the streams are read until then; for other servers, a job that ended less
// than kSettleMs ago is read until a round finds nothing new. Returns the
// job's status as it was at the end.
Result<JobOutcome> RunLogs(BatchClient* client, const LogsOptions& options,
                           const std::function<void(std::string_view)>& write, const Clock* clock,
                           const Sleeper& sleep);

// Blocks until the job is SUCCEEDED or FAILED; DeadlineExceeded (naming the
// status it is still in) once `timeout_ms` has passed.
Result<JobOutcome> WaitForJob(BatchClient* client, const std::string& job_id,
                              std::optional<int64_t> timeout_ms, const Clock* clock,
                              const Sleeper& sleep);

// "job ID (NAME) STATUS [CATEGORY]: reason" — the line `lote wait` prints.
std::string FormatOutcome(const JobOutcome& outcome);

// The `lote status` table for every queue, or only `queue` (NotFound if it
// does not exist).
Result<std::string> RenderStatus(BatchClient* client, const std::optional<std::string>& queue,
                                 int64_t now_ms);

}  // namespace lote::cli
