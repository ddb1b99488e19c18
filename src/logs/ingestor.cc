#include "logs/ingestor.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/files.h"
#include "common/thread_name.h"
#include "logs/utf8.h"

namespace lote::logs {

LogIngestor::LogIngestor(LogStore* store, IngestorOptions options)
    : store_(store), options_(std::move(options)) {}

LogIngestor::~LogIngestor() {
  (void)Stop();
  if (fd_ >= 0) ::close(fd_);
}

Result<std::unique_ptr<LogIngestor>> LogIngestor::Create(LogStore* store, IngestorOptions options) {
  if (options.source_path.empty()) return Status::InvalidArgument("ingestor: source_path is empty");
  if (options.group.empty() || options.stream.empty()) {
    return Status::InvalidArgument("ingestor: log group and stream names are required");
  }
  if (options.read_bytes < 4096) options.read_bytes = 4096;
  // A stream whose appends are not synced is made without a sync either.
  RETURN_IF_ERROR(store->EnsureStream(options.group, options.stream, options.sync));
  ASSIGN_OR_RETURN(int64_t offset, store->SourceOffset(options.group, options.stream));
  std::unique_ptr<LogIngestor> ing(new LogIngestor(store, std::move(options)));
  ing->consumed_ = ing->read_offset_ = offset < 0 ? 0 : offset;
  ing->source_offset_ = ing->consumed_;
  ing->buf_.reserve(ing->options_.read_bytes + kMaxEventBytes);
  return ing;
}

void LogIngestor::MarkComplete() {
  complete_requested_ = true;
  std::lock_guard<std::mutex> lock(mu_);
  cv_.notify_all();
}

Status LogIngestor::Emit(std::vector<InputEvent>& events, std::vector<std::string_view>& progress) {
  if (events.empty()) return Status::Ok();
  AppendOptions ao;
  ao.sync = options_.sync;
  ASSIGN_OR_RETURN(AppendResult r, store_->Append(options_.group, options_.stream, events, ao));
  events_ += r.count;
  int64_t end = events.back().source_end;
  bytes_consumed_ += static_cast<uint64_t>(end - consumed_);
  source_offset_ = end;
  if (!progress.empty()) {
    int64_t now = store_->clock()->NowMillis();
    for (std::string_view text : progress) {
      Result<Json> j = ParseJson(text);
      if (!j.ok() || !j->is_object()) {
        ++malformed_;
        continue;
      }
      ++progress_reports_;
      if (options_.on_progress) options_.on_progress(ProgressReport{now, std::move(*j)});
    }
  }
  events.clear();
  progress.clear();
  return Status::Ok();
}

Result<bool> LogIngestor::Poll() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (done_) return true;
  }
  // Decide completeness before reading: everything written before the marker
  // is then read by the loop below.
  bool complete = complete_requested_.load() ||
                  (!options_.done_marker_path.empty() && FileExists(options_.done_marker_path));
  if (fd_ < 0) {
    fd_ = ::open(options_.source_path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0 && errno != ENOENT) {
      return Status::Internal("cannot open " + options_.source_path + ": " + std::strerror(errno));
    }
  }
  std::vector<InputEvent> events;
  std::vector<std::string_view> progress;
  int64_t timestamp = store_->clock()->NowMillis();
  // Bound one call so a writer that never pauses cannot keep Poll from returning.
  constexpr uint64_t kMaxBytesPerPoll = 256ull << 20;
  uint64_t polled = 0;
  bool at_eof = false;
  while (fd_ >= 0 && polled < kMaxBytesPerPoll) {
    timestamp = store_->clock()->NowMillis();
    // Size first: a quiet file costs one fstat and no buffer (many followed
    // files are idle at any time).
    struct stat st;
    if (::fstat(fd_, &st) != 0) {
      return Status::Internal("cannot stat " + options_.source_path + ": " + std::strerror(errno));
    }
    if (st.st_size < read_offset_) {
      return Status::DataLoss(options_.source_path + " shrank below the ingested offset " +
                              std::to_string(read_offset_) + "; output files must be append-only");
    }
    if (st.st_size == read_offset_) {
      at_eof = true;
      break;
    }
    const size_t want = static_cast<size_t>(
        std::min<int64_t>(static_cast<int64_t>(options_.read_bytes), st.st_size - read_offset_));
    size_t have = buf_.size();
    buf_.resize(have + want);
    ssize_t n;
    do {
      n = ::pread(fd_, buf_.data() + have, want, static_cast<off_t>(read_offset_));
    } while (n < 0 && errno == EINTR);
    if (n < 0) {
      buf_.resize(have);
      return Status::Internal("cannot read " + options_.source_path + ": " + std::strerror(errno));
    }
    buf_.resize(have + static_cast<size_t>(n));
    if (n == 0) {
      at_eof = true;
      break;
    }
    read_offset_ += n;
    polled += static_cast<uint64_t>(n);

    // Cut complete lines (and over-long partial lines) into events.
    const char* base = buf_.data();
    size_t start = 0, size = buf_.size();
    while (start < size) {
      const void* nl = std::memchr(base + start, '\n', size - start);
      size_t end = nl ? static_cast<size_t>(static_cast<const char*>(nl) - base) : size;
      if (!nl && end - start <= kMaxEventBytes) break;  // partial line: wait for more
      std::string_view line(base + start, end - start);
      const bool whole = line.size() <= kMaxEventBytes;
      while (line.size() > kMaxEventBytes) {
        size_t len = Utf8PrefixLength(line, kMaxEventBytes);
        if (len == 0) len = kMaxEventBytes;
        events.push_back(InputEvent{timestamp, line.substr(0, len),
                                    consumed_ + static_cast<int64_t>(line.data() - base + len)});
        line.remove_prefix(len);
      }
      if (!nl) {
        // A long partial line: its head is stored, its tail waits.
        start = static_cast<size_t>(line.data() - base);
        break;
      }
      events.push_back(InputEvent{timestamp, line, consumed_ + static_cast<int64_t>(end + 1)});
      if (whole && line.starts_with(kProgressPrefix))
        progress.push_back(line.substr(kProgressPrefix.size()));
      start = end + 1;
    }
    RETURN_IF_ERROR(Emit(events, progress));
    buf_.erase(0, start);
    consumed_ += static_cast<int64_t>(start);
  }
  // An idle follower gives its read buffer back.
  if (polled == 0 && buf_.capacity() > (64u << 10) && buf_.size() < (16u << 10))
    buf_.shrink_to_fit();
  if (!complete || (fd_ >= 0 && !at_eof)) return false;
  if (!buf_.empty()) {
    // The file is complete: its unterminated last line is an event too.
    std::string_view line(buf_);
    events.push_back(InputEvent{timestamp, line, consumed_ + static_cast<int64_t>(line.size())});
    if (line.starts_with(kProgressPrefix)) progress.push_back(line.substr(kProgressPrefix.size()));
    RETURN_IF_ERROR(Emit(events, progress));
    consumed_ += static_cast<int64_t>(buf_.size());
    buf_.clear();
  }
  std::lock_guard<std::mutex> lock(mu_);
  done_ = true;
  cv_.notify_all();
  return true;
}

void LogIngestor::Run() {
  for (;;) {
    uint64_t before = bytes_consumed_.load();
    int64_t read_before = read_offset_;
    Result<bool> r = Poll();
    std::unique_lock<std::mutex> lock(mu_);
    if (!r.ok()) {
      error_ = r.status();
      cv_.notify_all();
      return;
    }
    if (*r || stop_) return;
    if (bytes_consumed_.load() == before && read_offset_ == read_before) {
      cv_.wait_for(lock, options_.idle_poll, [&] { return stop_ || complete_requested_.load(); });
      if (stop_) return;
    }
  }
}

Status LogIngestor::Start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (thread_.joinable()) return Status::FailedPrecondition("ingestor already started");
  stop_ = false;
  thread_ = NamedThread("lote-ingest", [this] { Run(); });
  return Status::Ok();
}

Status LogIngestor::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    cv_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
  std::lock_guard<std::mutex> lock(mu_);
  return error_;
}

Status LogIngestor::WaitUntilComplete(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return done_ || !error_.ok(); });
  if (!error_.ok()) return error_;
  if (!done_)
    return Status::DeadlineExceeded("ingestion of " + options_.source_path + " is not complete");
  return Status::Ok();
}

IngestorStats LogIngestor::stats() const {
  IngestorStats s;
  s.bytes_consumed = bytes_consumed_.load();
  s.events = events_.load();
  s.progress_reports = progress_reports_.load();
  s.malformed_progress = malformed_.load();
  s.source_offset = source_offset_.load();
  std::lock_guard<std::mutex> lock(mu_);
  s.complete = done_;
  return s;
}

}  // namespace lote::logs
