// The pure parts of `lote logs`: where a job's output is (from DescribeJobs),
// merging the streams of its nodes and attempts, and how lines are printed.
//
// No I/O here: pages of log events come from a PageSource (the command reads
// them with GetLogEvents; tests use in-memory sources). Not thread-safe: one
// merger and one printer per command.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/json.h"
#include "common/status.h"

namespace lote::cli {

// One attempt of a job (1-based), with its start time (0: not known yet).
struct AttemptRef {
  int32_t number = 0;
  int64_t started_at_ms = 0;
};

// The output of one node (0 for single-node jobs) in one attempt.
struct StreamRef {
  int32_t attempt = 0;
  int32_t node = 0;
  std::string stream;  // in log group /aws/batch/job
};

// Where a job's output is, as DescribeJobs reports it now.
struct JobLogPlan {
  std::string job_id;
  std::string job_name;
  std::string status;  // SUBMITTED ... SUCCEEDED, FAILED
  std::string status_reason;
  std::string failure_category;  // failureCategory (lote extra), e.g. HANG
  int64_t stopped_at_ms = 0;     // stoppedAt; 0 while the job runs
  // lote's extra key logsComplete of an ended job: every node's output is
  // stored. Absent from other servers (then a short settle time is used).
  std::optional<bool> logs_complete;
  bool multi_node = false;  // a multi-node parent: lines get a "[node N] " prefix
  int32_t num_nodes = 1;
  int32_t max_attempts = 1;          // retryStrategy.attempts
  std::vector<AttemptRef> attempts;  // ascending; those with at least one stream
  std::vector<StreamRef> streams;    // ascending by (attempt, node)

  bool Final() const { return status == "SUCCEEDED" || status == "FAILED"; }
};

// Reads the plan from a job's DescribeJobs entry (`job`) and, for a
// multi-node parent, the entries of its node views JOBID#N (`node_views`, in
// any order; each names its node in nodeDetails.nodeIndex). Streams are
// container.logStreamName of each entry of attempts[] (attempt i+1) and of the
// container itself when it names a stream no finished attempt has (the
// attempt in progress). InvalidArgument for an array parent (it has no output
// of its own; the message names its children).
Result<JobLogPlan> PlanJobLogs(const Json& job, const std::vector<Json>& node_views);

// Keeps only node `node` and/or attempt `attempt` (1-based). InvalidArgument,
// naming the valid range, for a node the job does not have or an attempt < 1.
Status FilterPlan(JobLogPlan* plan, std::optional<int32_t> node, std::optional<int32_t> attempt);

// The process exit code for a job's status: 0 SUCCEEDED, 1 FAILED, 0 otherwise.
int ExitCodeForStatus(std::string_view status);

struct LogLine {
  int64_t timestamp_ms = 0;
  std::string message;
};

// Pages of one stream's lines, in stream order.
class PageSource {
 public:
  virtual ~PageSource() = default;
  // The next lines; empty when there is nothing more for now (a later call
  // may return more: the stream is still growing).
  virtual Result<std::vector<LogLine>> NextPage() = 0;
};

// Merges streams in order of (attempt, timestamp, node); lines of one stream
// keep their order. Pages are pulled lazily: at most one page per stream is
// held, so arbitrarily long streams merge in bounded memory.
class LogMerger {
 public:
  using Emit = std::function<void(int32_t attempt, int32_t node, const LogLine& line)>;

  void Add(int32_t attempt, int32_t node, std::unique_ptr<PageSource> source);
  // Emits every line available now, merged; returns how many. Lines that
  // arrive in a stream later come out of a later Drain.
  Result<uint64_t> Drain(const Emit& emit);
  size_t size() const { return inputs_.size(); }

 private:
  struct Input {
    int32_t attempt = 0;
    int32_t node = 0;
    std::unique_ptr<PageSource> source;
    std::vector<LogLine> page;
    size_t next = 0;  // index into page
  };
  std::vector<Input> inputs_;
};

// "--- attempt 2 (started 2026-11-30T10:30:00Z) ---\n" ("not started yet" when unknown).
std::string AttemptHeader(const AttemptRef& attempt);
// "[node 3] message\n" with `node_prefix`, else "message\n".
std::string FormatLogLine(bool node_prefix, int32_t node, std::string_view message);

// Turns merged lines into text: the "[node N] " prefix for multi-node jobs,
// and, when attempts are marked, a header before the first output of each
// attempt (attempts are announced in ascending order, each once).
class LogPrinter {
 public:
  using Write = std::function<void(std::string_view text)>;
  LogPrinter(bool node_prefix, bool mark_attempts, Write write);

  void set_mark_attempts(bool mark) { mark_attempts_ = mark; }
  // The attempt exists (its header may be printed); later calls update its start time.
  void KnowAttempt(const AttemptRef& attempt);
  void Line(int32_t attempt, int32_t node, const LogLine& line);
  // Prints the headers of known attempts not announced yet (a new attempt
  // that has no output so far).
  void AnnounceAttempts();

 private:
  void AnnounceUpTo(int32_t attempt);

  bool node_prefix_;
  bool mark_attempts_;
  Write write_;
  std::vector<AttemptRef> known_;  // ascending by number
  int32_t announced_ = 0;          // highest attempt whose header was printed
};

}  // namespace lote::cli
