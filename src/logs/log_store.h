// LogStore: durable log groups and streams on local disk.
//
// Layout under the root (normally $LOTE_HOME/logs), see docs/logs.md:
//   groups/<dir>/group.json                    name, creation time, retention
//   groups/<dir>/streams/<dir>/stream.json     name, creation time
//   groups/<dir>/streams/<dir>/<seq>.seg       append-only segment (records)
//   groups/<dir>/streams/<dir>/<seq>.idx       index of a sealed segment
// Each stream is an append-only sequence of events numbered 0, 1, 2, ...
// (sequence numbers never go backwards, even after retention removes old
// segments). Messages are stored as valid UTF-8 (invalid bytes become U+FFFD)
// and messages over kMaxEventBytes are split into several events.
//
// Opening reads the groups only. A stream is read from disk when it is first
// named (an append, a read, a create or a delete), and a background thread
// reads the rest of them after the store opened; a call that needs every
// stream of a group (listing its streams, retention) reads what is still
// missing first. So opening costs the same with a million streams as with one.
//
// Durability: an Append is acknowledged (returns OK) once its bytes are in the
// operating system (write(2) returned), so it survives a crash of this process
// (kill -9); with AppendOptions::sync it is also fsync'ed, surviving a machine
// crash. Full segments are sealed (fsync'ed, then indexed) by a background
// thread, off the append path; destruction waits for it. Reopening truncates a torn last record, so
// no partial event is ever visible. Metadata files are replaced atomically (write, fsync, rename).
//
// Thread safety: all methods may be called from any thread. Appends to one
// stream are serialised (one writer at a time); any number of readers proceed
// concurrently with the writer and see only whole, acknowledged records.
// Readers can block for new events with WaitForEvents.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "logs/record.h"

namespace lote::logs {

// Longest stored message in bytes; longer messages are split (256 KiB).
inline constexpr size_t kMaxEventBytes = 256 * 1024;

// An event to append. `source_end` is the byte offset in the ingestor's
// source file just after this event's raw bytes (-1 if not ingested), stored
// atomically with the event so ingestion resumes exactly (SourceOffset).
struct InputEvent {
  int64_t timestamp_ms = 0;
  std::string_view message;
  int64_t source_end = -1;
};

// A stored event, as returned by reads.
struct LogEvent {
  uint64_t sequence = 0;
  int64_t timestamp_ms = 0;
  int64_t ingestion_ms = 0;
  std::string message;
};

struct GroupInfo {
  std::string name;
  int64_t creation_ms = 0;
  std::optional<int32_t> retention_days;
  int64_t stored_bytes = 0;
};

struct StreamInfo {
  std::string group;
  std::string name;
  int64_t creation_ms = 0;
  std::optional<int64_t> first_event_ms;     // min timestamp of the first stored record
  std::optional<int64_t> last_event_ms;      // max timestamp seen
  std::optional<int64_t> last_ingestion_ms;  // ingestion time of the last append
  uint64_t first_sequence = 0;               // first event still stored
  uint64_t next_sequence = 0;                // sequence the next event will get
  int64_t stored_bytes = 0;                  // message bytes still stored
};

struct AppendOptions {
  bool sync = false;  // fdatasync before acknowledging (machine-crash durability)
};

struct AppendResult {
  uint64_t first_sequence = 0;  // of the first stored event
  uint64_t count = 0;           // events stored (more than given if some were split)
};

enum class Direction { kForward, kBackward };

// A read of one stream. Forward: events with sequence >= position, ascending.
// Backward: the events just before `position` (sequence < position), returned
// ascending. Time bounds are [start_time_ms, end_time_ms). A read stops at
// `limit` events, `max_bytes` of (message + 26) bytes, or after scanning
// about `max_scan_bytes` of records.
struct ReadRequest {
  Direction direction = Direction::kForward;
  uint64_t position = 0;
  std::optional<int64_t> start_time_ms;
  std::optional<int64_t> end_time_ms;
  size_t limit = 10000;
  size_t max_bytes = 1 << 20;
  size_t max_scan_bytes = 64 << 20;
};

struct ReadResult {
  std::vector<LogEvent> events;
  // Forward: the position to continue from (one past the last event scanned).
  // Backward: the lowest sequence scanned (continue backward from here).
  uint64_t next_position = 0;
  // True if the read reached the end of the stream (forward) or the
  // beginning / the start of the time range (backward).
  bool exhausted = false;
  uint64_t stream_next_sequence = 0;  // the stream's end when read
};

struct LogStoreOptions {
  std::string root;                      // e.g. $LOTE_HOME/logs; created if missing
  const Clock* clock = nullptr;          // nullptr: SystemClock::Default()
  uint64_t segment_bytes = 64ull << 20;  // a segment is sealed once this big
  size_t record_bytes = 512 * 1024;      // target size of one record (batch)
  // Read the streams not named yet in a background thread after opening.
  // Off (tests), streams are read only when named or when a group is listed.
  bool load_in_background = true;
};

class LogStore {
 public:
  // Opens (creating if needed) the store at options.root and reads its groups.
  // Each stream is recovered when it is first read from disk: torn trailing
  // records are truncated away.
  static Result<std::unique_ptr<LogStore>> Open(LogStoreOptions options);
  ~LogStore();
  LogStore(const LogStore&) = delete;
  LogStore& operator=(const LogStore&) = delete;

  // Groups. Names are validated by the caller (LogsService); the store only
  // requires them to be non-empty.
  Status CreateGroup(const std::string& name);
  // Deletes the group with all its streams (atomically: renamed, then removed).
  Status DeleteGroup(const std::string& name);
  Status SetRetention(const std::string& name, std::optional<int32_t> days);
  Result<GroupInfo> GetGroup(const std::string& name) const;
  std::vector<GroupInfo> ListGroups() const;  // sorted by name
  size_t GroupCount() const;

  // Streams. CreateStream: NotFound if no group, AlreadyExists if present.
  // `durable`: the stream's folder is fsynced before the answer, so it
  // survives a machine crash (as CreateLogStream promises). A stream whose
  // appends are not synced either (the job output's, LogIngestor without
  // `sync`) is made without: after a machine crash its folder may be gone, or
  // left without its stream.json, which the next open removes (it holds no
  // segment) as an interrupted creation.
  Status CreateStream(const std::string& group, const std::string& name, bool durable = true);
  // Creates the group and/or stream if missing (for the executor).
  Status EnsureStream(const std::string& group, const std::string& name, bool durable = true);
  Status DeleteStream(const std::string& group, const std::string& name);
  Result<StreamInfo> GetStream(const std::string& group, const std::string& name) const;
  Result<std::vector<StreamInfo>> ListStreams(const std::string& group) const;  // by name

  // Appends events in order; ingestion time is the clock's now.
  Result<AppendResult> Append(const std::string& group, const std::string& stream,
                              std::span<const InputEvent> events,
                              const AppendOptions& options = {});
  Result<ReadResult> Read(const std::string& group, const std::string& stream,
                          const ReadRequest& request) const;
  // The last `n` events of a stream (e.g. for a hang report).
  Result<std::vector<LogEvent>> Tail(const std::string& group, const std::string& stream,
                                     size_t n) const;
  // Blocks until the stream has an event with sequence >= position, the
  // timeout passes (returns false), or the stream is deleted (NotFound).
  Result<bool> WaitForEvents(const std::string& group, const std::string& stream, uint64_t position,
                             std::chrono::milliseconds timeout) const;
  // The source_end of the last stored event that had one (-1 if none).
  Result<int64_t> SourceOffset(const std::string& group, const std::string& stream) const;
  // fsyncs the stream's active segment.
  Status Sync(const std::string& group, const std::string& stream);

  // Deletes, in every group with a retention policy, the segments whose
  // events are all older than now - retention. Whole segments only; the
  // stream and its sequence numbers stay.
  Status EnforceRetention(int64_t now_ms);

  // Streams read from disk or created since opening (each keeps its index in
  // memory), and whether every stream of every group has been read.
  size_t LoadedStreamCount() const;
  bool AllStreamsLoaded() const;
  // Blocks until the background thread has read every stream (tests, benchmarks).
  void WaitUntilAllStreamsLoaded() const;

  const std::string& root() const { return options_.root; }
  const Clock* clock() const { return options_.clock; }

  struct Stream;
  struct Group;

 private:
  // A sealed segment waiting for fdatasync and its index file.
  struct SealJob {
    std::string segment_path;
    std::string index_path;
    std::string index_data;
  };

  explicit LogStore(LogStoreOptions options);
  Status Recover();
  void SealLoop();
  void LoadLoop();
  // The stream in the group's folder `dir_name`, read from disk unless it is in
  // memory already; nullptr if it is not on disk (or was deleted meanwhile).
  Result<std::shared_ptr<Stream>> LoadStream(const std::shared_ptr<Group>& group,
                                             const std::string& dir_name) const;
  // Reads every stream of the group that is not in memory yet (stops early,
  // unfinished, when `stop` becomes true).
  Status LoadAllStreams(const std::shared_ptr<Group>& group,
                        const std::atomic<bool>* stop = nullptr) const;
  // The group, or NotFound with AWS's message (mu_ held).
  Result<std::shared_ptr<Group>> GroupLocked(const std::string& name) const;
  // The group, its streams all in memory (read from disk first when needed).
  Result<std::shared_ptr<Group>> LoadedGroup(const std::string& name) const;
  Result<std::shared_ptr<Stream>> FindStream(const std::string& group,
                                             const std::string& name) const;
  Status CreateStreamLocked(Group* group, const std::string& name, bool durable);

  LogStoreOptions options_;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<Group>> groups_;  // guarded by mu_

  std::atomic<bool> load_stop_{false};
  mutable std::mutex load_mu_;
  mutable std::condition_variable load_cv_;
  bool load_done_ = false;  // guarded by load_mu_
  std::thread loader_;      // reads the streams not named yet (load_in_background)

  std::mutex seal_mu_;
  std::condition_variable seal_cv_;
  std::deque<SealJob> seal_queue_;  // guarded by seal_mu_
  bool seal_stop_ = false;          // guarded by seal_mu_
  std::thread sealer_;
};

}  // namespace lote::logs
