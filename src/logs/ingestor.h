// LogIngestor: turns a job node's raw output file into a log stream.
//
// The executor writes each node's combined stdout/stderr, raw bytes, append
// only, to a file, and later says the file is complete (MarkComplete, or a
// done-marker file that appears). The ingestor follows the file, splits it
// into lines ('\n' ends a line and is not stored; a partial last line waits
// for its newline, or is stored when the file is complete; a line or partial
// line longer than kMaxEventBytes is stored in pieces) and appends them, one
// event per line, to a stream of a LogStore, with the read time as timestamp.
//
// Exactly once: each stored event carries the source offset just past its
// bytes (InputEvent::source_end), written atomically with it, and a new
// ingestor resumes from LogStore::SourceOffset. After any crash or restart
// (even kill -9 mid-write) every line is stored once, in order.
//
// Progress: a complete line "LOTE_PROGRESS {json object}" is stored like any
// line and also reported to on_progress, after it is stored (at most once:
// a crash between storing and reporting skips the report). Malformed JSON is
// ignored and counted.
//
// Thread safety: Poll() is for one thread at a time; Start() runs it on the
// ingestor's own thread. MarkComplete, stats, WaitUntilComplete and Stop are
// safe from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "common/json.h"
#include "common/status.h"
#include "logs/log_store.h"

namespace lote::logs {

inline constexpr std::string_view kProgressPrefix = "LOTE_PROGRESS ";

struct ProgressReport {
  int64_t timestamp_ms = 0;  // when the line was read
  Json values;               // the parsed object, e.g. {"step": 10, "loss": 2.3}
};

struct IngestorStats {
  uint64_t bytes_consumed = 0;  // source bytes stored (this ingestor instance)
  uint64_t events = 0;          // events appended
  uint64_t progress_reports = 0;
  uint64_t malformed_progress = 0;
  int64_t source_offset = 0;  // next source byte to store
  bool complete = false;      // the whole file is stored
};

struct IngestorOptions {
  std::string source_path;       // the raw output file (may not exist yet)
  std::string done_marker_path;  // optional: the file is complete once this exists
  std::string group;             // created with the stream if missing
  std::string stream;
  size_t read_bytes = 1 << 20;              // bytes read per system call (fits in cache)
  std::chrono::milliseconds idle_poll{20};  // sleep when there is nothing new
  bool sync = false;                        // fdatasync every append (machine-crash durability)
  std::function<void(const ProgressReport&)> on_progress;
};

class LogIngestor {
 public:
  // Creates the group/stream if needed and positions at the stored offset.
  static Result<std::unique_ptr<LogIngestor>> Create(LogStore* store, IngestorOptions options);
  ~LogIngestor();  // stops the thread if running
  LogIngestor(const LogIngestor&) = delete;
  LogIngestor& operator=(const LogIngestor&) = delete;

  // Stores everything available now. Returns true once the source is complete
  // and entirely stored (later calls return true at once).
  Result<bool> Poll();
  // The source will not grow any more (the node's process has exited and
  // its output is flushed).
  void MarkComplete();

  // Runs Poll on a background thread until complete, an error, or Stop().
  Status Start();
  // Stops the thread (a partial last line stays unstored until a later
  // ingestor or completion); returns the thread's error, if any.
  Status Stop();
  // Blocks until complete (OK), an error (returned), or the timeout
  // (DeadlineExceeded).
  Status WaitUntilComplete(std::chrono::milliseconds timeout);

  IngestorStats stats() const;

 private:
  LogIngestor(LogStore* store, IngestorOptions options);
  Status Emit(std::vector<InputEvent>& events, std::vector<std::string_view>& progress);
  void Run();

  LogStore* store_;
  IngestorOptions options_;
  int fd_ = -1;
  std::string buf_;          // bytes [consumed_, read_offset_) of the source
  int64_t consumed_ = 0;     // source offset of buf_[0] (everything before is stored)
  int64_t read_offset_ = 0;  // next source byte to read

  std::atomic<bool> complete_requested_{false};
  std::atomic<uint64_t> bytes_consumed_{0}, events_{0}, progress_reports_{0}, malformed_{0};
  std::atomic<int64_t> source_offset_{0};

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;  // guarded by mu_
  bool stop_ = false;  // guarded by mu_
  Status error_;       // guarded by mu_
  std::thread thread_;
};

}  // namespace lote::logs
