#include "logs/log_store.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "common/crypto.h"
#include "common/files.h"
#include "common/json.h"
#include "common/thread_name.h"
#include "logs/crc32c.h"
#include "logs/utf8.h"

namespace lote::logs {

namespace fs = std::filesystem;

namespace {

constexpr uint32_t kIndexMagic = 0x49544F4Cu;  // bytes 'L' 'O' 'T' 'I'
constexpr size_t kEventOverhead = 26;          // AWS's per-event size overhead

Status Errno(std::string_view what, const std::string& path) {
  return Status::Internal(std::string(what) + " " + path + ": " + std::strerror(errno));
}

// A directory name for a group or stream name: a readable prefix plus a hash,
// so any name (up to 512 characters, any bytes but ':' and '*') maps to a
// short, safe, unique file name.
std::string DirNameFor(std::string_view name) {
  std::string out;
  for (char c : name) {
    if (out.size() >= 40) break;
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_';
    out.push_back(ok ? c : '_');
  }
  return out + "." + Sha256Hex(name).substr(0, 24);
}

std::string SegmentName(uint64_t base, std::string_view ext) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%020" PRIu64 ".%s", base, std::string(ext).c_str());
  return buf;
}

// Writes all of `data` at `offset`.
Status PWriteAll(int fd, std::string_view data, uint64_t offset, const std::string& path) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n =
        ::pwrite(fd, data.data() + done, data.size() - done, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return Errno("cannot write", path);
    }
    done += static_cast<size_t>(n);
  }
  return Status::Ok();
}

// Whether the stream folder `dir` holds a segment file.
bool HoldsSegments(const std::string& dir) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.path().extension() == ".seg") return true;
  }
  return false;
}

// Reads records of one stream's segments, keeping the last file open.
class SegmentReader {
 public:
  explicit SegmentReader(std::string dir) : dir_(std::move(dir)) {}
  ~SegmentReader() {
    if (fd_ >= 0) ::close(fd_);
  }
  SegmentReader(const SegmentReader&) = delete;
  SegmentReader& operator=(const SegmentReader&) = delete;

  // Reads exactly n bytes at offset of segment `base`; NotFound if the
  // segment is gone (removed by retention).
  Status Read(uint64_t base, uint64_t offset, size_t n, std::string* out) {
    std::string path = dir_ + "/" + SegmentName(base, "seg");
    if (fd_ < 0 || base_ != base) {
      if (fd_ >= 0) ::close(fd_);
      fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd_ < 0) {
        if (errno == ENOENT) return Status::NotFound("segment removed: " + path);
        return Errno("cannot open", path);
      }
      base_ = base;
    }
    out->resize(n);
    size_t done = 0;
    while (done < n) {
      ssize_t r = ::pread(fd_, out->data() + done, n - done, static_cast<off_t>(offset + done));
      if (r < 0) {
        if (errno == EINTR) continue;
        return Errno("cannot read", path);
      }
      if (r == 0) return Status::DataLoss("segment " + path + " is shorter than its index says");
      done += static_cast<size_t>(r);
    }
    return Status::Ok();
  }

 private:
  std::string dir_;
  int fd_ = -1;
  uint64_t base_ = 0;
};

}  // namespace

// One record (batch of events) of a stream, as kept in memory.
struct BatchEntry {
  uint64_t first_seq = 0;
  uint32_t count = 0;
  uint32_t bytes = 0;         // whole record
  uint64_t segment_base = 0;  // which segment file
  uint64_t offset = 0;        // within the segment
  int64_t min_ts = 0;
  int64_t max_ts = 0;
  int64_t source_end = -1;
  int64_t ingestion_ms = 0;
  uint64_t flags = 0;
  int64_t prefix_max_ts = 0;  // max timestamp of this and every earlier record
  uint64_t end_seq() const { return first_seq + count; }
};

struct SegmentFile {
  uint64_t base = 0;  // sequence of its first event; also its file name
  uint64_t size = 0;  // committed bytes
  bool sealed = false;
};

struct LogStore::Stream {
  std::string group;
  std::string name;
  std::string dir;
  int64_t creation_ms = 0;

  mutable std::mutex mu;
  mutable std::condition_variable cv;
  // Guarded by mu:
  std::vector<SegmentFile> segments;  // ascending base; the last one is active unless sealed
  std::vector<BatchEntry> batches;    // ascending first_seq
  uint64_t next_seq = 0;
  int64_t source_end = -1;
  std::optional<int64_t> last_event_ms;
  std::optional<int64_t> last_ingestion_ms;
  int64_t stored_bytes = 0;
  bool sorted = true;  // every timestamp >= all earlier ones
  bool deleted = false;
  std::string write_buf;
  // The group's total of stored bytes, which this stream's bytes are part of
  // once the stream is in the group's map (null before, and once deleted).
  std::shared_ptr<std::atomic<int64_t>> group_bytes;

  std::string SegmentPath(uint64_t base, std::string_view ext) const {
    return dir + "/" + SegmentName(base, ext);
  }
  void AddEntry(BatchEntry e) {
    int64_t prev = batches.empty() ? INT64_MIN : batches.back().prefix_max_ts;
    if (!(e.flags & kRecordSorted) || e.min_ts < prev) sorted = false;
    e.prefix_max_ts = std::max(prev, e.max_ts);
    if (e.source_end >= 0) source_end = e.source_end;
    last_event_ms = last_event_ms ? std::max(*last_event_ms, e.max_ts) : e.max_ts;
    last_ingestion_ms = e.ingestion_ms;
    stored_bytes += e.bytes;
    next_seq = std::max(next_seq, e.end_seq());
    batches.push_back(e);
  }
  StreamInfo InfoLocked() const {
    StreamInfo info;
    info.group = group;
    info.name = name;
    info.creation_ms = creation_ms;
    if (!batches.empty()) info.first_event_ms = batches.front().min_ts;
    info.last_event_ms = last_event_ms;
    info.last_ingestion_ms = last_ingestion_ms;
    info.first_sequence = batches.empty() ? next_seq : batches.front().first_seq;
    info.next_sequence = next_seq;
    info.stored_bytes = stored_bytes;
    return info;
  }
  // The index file contents of a segment (all its entries).
  std::string IndexData(const SegmentFile& seg) const {
    std::string data;
    auto put = [&data](const void* p, size_t n) { data.append(static_cast<const char*>(p), n); };
    uint32_t magic = kIndexMagic;
    uint32_t count = 0;
    for (const BatchEntry& e : batches) count += e.segment_base == seg.base;
    put(&magic, 4);
    put(&count, 4);
    put(&seg.size, 8);
    for (const BatchEntry& e : batches) {
      if (e.segment_base != seg.base) continue;
      put(&e.first_seq, 8);
      put(&e.count, 4);
      put(&e.bytes, 4);
      put(&e.offset, 8);
      put(&e.min_ts, 8);
      put(&e.max_ts, 8);
      put(&e.source_end, 8);
      put(&e.ingestion_ms, 8);
      put(&e.flags, 8);
    }
    uint32_t crc = Crc32c(data);
    put(&crc, 4);
    return data;
  }
};

struct LogStore::Group {
  std::string name;
  std::string dir;
  int64_t creation_ms = 0;
  std::optional<int32_t> retention_days;
  // Guarded by the store's mu_:
  std::map<std::string, std::shared_ptr<Stream>> streams;  // the streams in memory
  bool all_loaded = false;                                 // every stream on disk is in `streams`
  bool deleted = false;
  // The stored bytes of the streams in `streams` (each adds and removes its own).
  std::shared_ptr<std::atomic<int64_t>> stored_bytes = std::make_shared<std::atomic<int64_t>>(0);
  std::mutex disk_mu;  // one stream read from disk at a time, outside the store's mu_

  Status WriteMeta() const {
    Json j = {{"name", name}, {"creationTime", creation_ms}};
    if (retention_days) j["retentionInDays"] = *retention_days;
    return WriteFileAtomic(dir + "/group.json", j.dump() + "\n");
  }
};

namespace {

// Loads a segment's index file; false if missing or invalid for this segment.
bool LoadIndex(const std::string& path, const SegmentFile& seg, std::vector<BatchEntry>* out) {
  Result<std::string> data = ReadFile(path);
  if (!data.ok() || data->size() < 20) return false;
  const std::string& d = *data;
  if (Crc32cExtend(0, d.data(), d.size() - 4) != [&] {
        uint32_t c;
        std::memcpy(&c, d.data() + d.size() - 4, 4);
        return c;
      }()) {
    return false;
  }
  const char* p = d.data();
  auto get = [&p](void* dst, size_t n) {
    std::memcpy(dst, p, n);
    p += n;
  };
  uint32_t magic, count;
  uint64_t size;
  get(&magic, 4);
  get(&count, 4);
  get(&size, 8);
  constexpr size_t kEntry = 8 + 4 + 4 + 8 * 6;
  if (magic != kIndexMagic || size != seg.size || d.size() != 16 + count * kEntry + 4) return false;
  for (uint32_t i = 0; i < count; ++i) {
    BatchEntry e;
    get(&e.first_seq, 8);
    get(&e.count, 4);
    get(&e.bytes, 4);
    get(&e.offset, 8);
    get(&e.min_ts, 8);
    get(&e.max_ts, 8);
    get(&e.source_end, 8);
    get(&e.ingestion_ms, 8);
    get(&e.flags, 8);
    e.segment_base = seg.base;
    out->push_back(e);
  }
  return true;
}

// Scans a segment record by record, verifying checksums. Returns the number
// of valid bytes (a torn or corrupt tail starts there).
Result<uint64_t> ScanSegment(const std::string& path, uint64_t base, std::vector<BatchEntry>* out) {
  Result<std::string> data = ReadFile(path);
  if (!data.ok()) return data.status();
  std::string_view d = *data;
  uint64_t pos = 0;
  uint64_t expect_seq = base;
  while (pos + kRecordHeaderBytes <= d.size()) {
    RecordHeader h;
    if (!ParseRecordHeader(d.substr(pos), &h)) break;
    if (pos + h.total_bytes() > d.size()) break;
    if (h.first_seq != expect_seq) break;
    if (!VerifyRecord(d.substr(pos, h.total_bytes()), h)) break;
    BatchEntry e;
    e.first_seq = h.first_seq;
    e.count = h.count;
    e.bytes = static_cast<uint32_t>(h.total_bytes());
    e.segment_base = base;
    e.offset = pos;
    e.min_ts = h.min_ts;
    e.max_ts = h.max_ts;
    e.source_end = h.source_end;
    e.ingestion_ms = h.ingestion_ms;
    e.flags = h.flags;
    out->push_back(e);
    pos += h.total_bytes();
    expect_seq += h.count;
  }
  return pos;
}

Status RecoverStream(LogStore::Stream* s) {
  std::vector<uint64_t> bases;
  std::error_code ec;
  for (const auto& ent : fs::directory_iterator(s->dir, ec)) {
    std::string fname = ent.path().filename().string();
    if (fname.size() == 24 && fname.ends_with(".seg")) {
      bases.push_back(std::strtoull(fname.c_str(), nullptr, 10));
    } else if (fname.find(".tmp.") != std::string::npos) {
      fs::remove(ent.path(), ec);  // an interrupted atomic write
    }
  }
  if (ec) return Status::Internal("cannot list " + s->dir + ": " + ec.message());
  std::sort(bases.begin(), bases.end());
  for (size_t i = 0; i < bases.size(); ++i) {
    SegmentFile seg;
    seg.base = bases[i];
    std::string path = s->SegmentPath(seg.base, "seg");
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return Errno("cannot stat", path);
    seg.size = static_cast<uint64_t>(st.st_size);
    std::vector<BatchEntry> entries;
    bool last = i + 1 == bases.size();
    if (!last && LoadIndex(s->SegmentPath(seg.base, "idx"), seg, &entries)) {
      seg.sealed = true;
    } else {
      entries.clear();
      ASSIGN_OR_RETURN(uint64_t valid, ScanSegment(path, seg.base, &entries));
      if (valid < seg.size) {
        // A torn or corrupt tail: never show it. Only the last segment can
        // legitimately have one; elsewhere it is kept on disk but not indexed.
        if (last) {
          if (::truncate(path.c_str(), static_cast<off_t>(valid)) != 0)
            return Errno("cannot truncate", path);
        }
        seg.size = valid;
      }
      seg.sealed = !last;
    }
    if (s->next_seq > seg.base) {
      return Status::DataLoss("segment " + path + " overlaps the previous segment");
    }
    s->next_seq = seg.base;
    for (const BatchEntry& e : entries) s->AddEntry(e);
    s->segments.push_back(seg);
  }
  // Remove index files whose segment is gone (retention interrupted).
  for (const auto& ent : fs::directory_iterator(s->dir, ec)) {
    std::string fname = ent.path().filename().string();
    if (fname.size() == 24 && fname.ends_with(".idx")) {
      uint64_t base = std::strtoull(fname.c_str(), nullptr, 10);
      if (!std::binary_search(bases.begin(), bases.end(), base)) fs::remove(ent.path(), ec);
    }
  }
  return Status::Ok();
}

}  // namespace

LogStore::LogStore(LogStoreOptions options) : options_(std::move(options)) {
  if (!options_.clock) options_.clock = SystemClock::Default();
  sealer_ = NamedThread("lote-log-seal", [this] { SealLoop(); });
}

LogStore::~LogStore() {
  load_stop_ = true;
  if (loader_.joinable()) loader_.join();
  {
    std::lock_guard<std::mutex> lock(seal_mu_);
    seal_stop_ = true;
    seal_cv_.notify_all();
  }
  sealer_.join();  // drains the queue first
}

void LogStore::SealLoop() {
  std::unique_lock<std::mutex> lock(seal_mu_);
  for (;;) {
    seal_cv_.wait(lock, [&] { return seal_stop_ || !seal_queue_.empty(); });
    if (seal_queue_.empty()) return;  // stopping, nothing left
    SealJob job = std::move(seal_queue_.front());
    seal_queue_.pop_front();
    lock.unlock();
    // Data first, then the index that points into it. A failure (e.g. the
    // stream was deleted meanwhile) only means there is no index: opening
    // the store then scans the segment instead.
    if (SyncPath(job.segment_path).ok()) (void)WriteFileAtomic(job.index_path, job.index_data);
    lock.lock();
  }
}

Result<std::unique_ptr<LogStore>> LogStore::Open(LogStoreOptions options) {
  if (options.root.empty()) return Status::InvalidArgument("log store root directory is empty");
  if (options.record_bytes < 4096) options.record_bytes = 4096;
  std::unique_ptr<LogStore> store(new LogStore(std::move(options)));
  RETURN_IF_ERROR(store->Recover());
  if (store->options_.load_in_background) {
    LogStore* s = store.get();
    store->loader_ = NamedThread("lote-log-load", [s] { s->LoadLoop(); });
  }
  return store;
}

Status LogStore::Recover() {
  const std::string& root = options_.root;
  RETURN_IF_ERROR(MakeDirs(root + "/groups"));
  std::error_code ec;
  fs::remove_all(root + "/trash", ec);  // deletions interrupted by a crash
  for (const auto& gent : fs::directory_iterator(root + "/groups", ec)) {
    std::string gdir = gent.path().string();
    if (gent.path().filename().string().starts_with(".tmp")) {
      fs::remove_all(gent.path(), ec);
      continue;
    }
    Result<Json> meta = ReadJsonFile(gdir + "/group.json");
    if (!meta.ok()) {
      return meta.status().WithContext(
          "log group directory " + gdir +
          " has no readable group.json (move the directory away to start)");
    }
    auto g = std::make_shared<Group>();
    g->dir = gdir;
    g->name = meta->value("name", "");
    g->creation_ms = meta->value("creationTime", int64_t{0});
    if (meta->contains("retentionInDays"))
      g->retention_days = (*meta)["retentionInDays"].get<int32_t>();
    if (g->name.empty()) return Status::DataLoss(gdir + "/group.json has no name");
    // Its streams are read when named, or by the loader thread.
    groups_.emplace(g->name, std::move(g));
  }
  if (ec) return Status::Internal("cannot list " + root + "/groups: " + ec.message());
  return Status::Ok();
}

void LogStore::LoadLoop() {
  std::vector<std::shared_ptr<Group>> groups;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [name, g] : groups_) groups.push_back(g);
  }
  for (const auto& g : groups) {
    if (load_stop_) break;
    Status s = LoadAllStreams(g, &load_stop_);
    if (!s.ok())
      std::fprintf(stderr, "lote: log group %s: %s\n", g->name.c_str(), s.ToString().c_str());
  }
  std::lock_guard<std::mutex> lock(load_mu_);
  load_done_ = true;
  load_cv_.notify_all();
}

Result<std::shared_ptr<LogStore::Stream>> LogStore::LoadStream(const std::shared_ptr<Group>& g,
                                                               const std::string& dir_name) const {
  std::lock_guard<std::mutex> disk(g->disk_mu);
  std::string dir;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (g->deleted) return std::shared_ptr<Stream>();
    dir = g->dir + "/streams/" + dir_name;
  }
  auto on_disk = [&dir] {
    struct stat st;
    return ::stat(dir.c_str(), &st) == 0;
  };
  if (!on_disk()) return std::shared_ptr<Stream>();
  auto s = std::make_shared<Stream>();
  s->dir = dir;
  s->group = g->name;
  Result<Json> meta = ReadJsonFile(dir + "/stream.json");
  if (!meta.ok() && !HoldsSegments(dir)) {
    // Looked at again under mu_: a stream made without `durable` is made in
    // place (its folder, then stream.json), under mu_.
    std::lock_guard<std::mutex> lock(mu_);
    meta = ReadJsonFile(dir + "/stream.json");
    if (!meta.ok() && !HoldsSegments(dir)) {
      // A creation without fsync that a machine crash cut short (the folder
      // reached the disk, its stream.json did not): it never held an event.
      spdlog::warn(
          "log store: removing {}: a log stream folder without its stream.json and "
          "without events (a creation a machine crash interrupted)",
          dir);
      std::error_code ec;
      fs::remove_all(dir, ec);
      return std::shared_ptr<Stream>();
    }
  }
  if (meta.ok()) {
    s->name = meta->value("name", "");
    s->creation_ms = meta->value("creationTime", int64_t{0});
    std::lock_guard<std::mutex> lock(mu_);
    if (g->deleted) return std::shared_ptr<Stream>();
    auto it = g->streams.find(s->name);
    if (it != g->streams.end()) return it->second;  // read already, or created since
  }
  // Recovery truncates a torn tail; a stream deleted meanwhile is in the trash
  // by then, so nothing of a live stream is touched twice.
  Status read = meta.ok() ? RecoverStream(s.get()) : meta.status();
  std::lock_guard<std::mutex> lock(mu_);
  if (g->deleted || !on_disk()) return std::shared_ptr<Stream>();  // deleted meanwhile
  if (!read.ok()) {
    return read.WithContext("log stream directory " + dir +
                            " cannot be read (move the directory away to use the others)");
  }
  auto it = g->streams.find(s->name);
  if (it != g->streams.end()) return it->second;  // deleted and created again meanwhile
  {
    std::lock_guard<std::mutex> slock(s->mu);
    s->group_bytes = g->stored_bytes;
    *s->group_bytes += s->stored_bytes;
  }
  g->streams.emplace(s->name, s);
  return s;
}

Status LogStore::LoadAllStreams(const std::shared_ptr<Group>& g,
                                const std::atomic<bool>* stop) const {
  std::string streams_dir;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (g->all_loaded || g->deleted) return Status::Ok();
    streams_dir = g->dir + "/streams";
  }
  std::vector<std::string> dirs, stale;
  std::error_code ec;
  for (const auto& ent : fs::directory_iterator(streams_dir, ec)) {
    std::string fname = ent.path().filename().string();
    (fname.starts_with(".tmp") ? stale : dirs).push_back(std::move(fname));
  }
  if (ec) {
    std::lock_guard<std::mutex> lock(mu_);
    if (g->deleted) return Status::Ok();
    return Status::Internal("cannot list " + streams_dir + ": " + ec.message());
  }
  Status first_error;
  for (const std::string& dir : dirs) {
    if (stop && *stop) return Status::Ok();
    Result<std::shared_ptr<Stream>> s = LoadStream(g, dir);
    if (!s.ok() && first_error.ok()) first_error = s.status();
  }
  RETURN_IF_ERROR(first_error);
  std::lock_guard<std::mutex> lock(mu_);
  if (g->deleted) return Status::Ok();
  // A stream is created under mu_, so a temporary folder seen now was left by
  // a creation that a crash interrupted.
  for (const std::string& tmp : stale) fs::remove_all(streams_dir + "/" + tmp, ec);
  g->all_loaded = true;
  return Status::Ok();
}

size_t LogStore::LoadedStreamCount() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (const auto& [name, g] : groups_) n += g->streams.size();
  return n;
}

bool LogStore::AllStreamsLoaded() const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [name, g] : groups_) {
    if (!g->all_loaded) return false;
  }
  return true;
}

void LogStore::WaitUntilAllStreamsLoaded() const {
  if (loader_.joinable()) {
    std::unique_lock<std::mutex> lock(load_mu_);
    load_cv_.wait(lock, [this] { return load_done_; });
    return;
  }
  std::vector<std::shared_ptr<Group>> groups;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [name, g] : groups_) groups.push_back(g);
  }
  for (const auto& g : groups) (void)LoadAllStreams(g);
}

Status LogStore::CreateGroup(const std::string& name) {
  if (name.empty()) return Status::InvalidArgument("log group name is empty");
  std::lock_guard<std::mutex> lock(mu_);
  if (groups_.count(name))
    return Status::AlreadyExists("The specified log group already exists: " + name);
  auto g = std::make_shared<Group>();
  g->name = name;
  g->creation_ms = options_.clock->NowMillis();
  g->dir = options_.root + "/groups/" + DirNameFor(name);
  g->all_loaded = true;  // a new group has no streams on disk
  // Build the directory under a temporary name, then rename it into place.
  std::string tmp = options_.root + "/groups/.tmp-" + HexEncode(RandomBytes(8));
  RETURN_IF_ERROR(MakeDirs(tmp + "/streams"));
  std::string final_dir = g->dir;
  g->dir = tmp;
  RETURN_IF_ERROR(g->WriteMeta());
  g->dir = final_dir;
  if (::rename(tmp.c_str(), final_dir.c_str()) != 0)
    return Errno("cannot create log group directory", final_dir);
  RETURN_IF_ERROR(SyncPath(options_.root + "/groups"));
  groups_.emplace(name, std::move(g));
  return Status::Ok();
}

Status LogStore::DeleteGroup(const std::string& name) {
  std::vector<std::shared_ptr<Stream>> streams;
  std::string trash;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = groups_.find(name);
    if (it == groups_.end())
      return Status::NotFound("The specified log group does not exist: " + name);
    RETURN_IF_ERROR(MakeDirs(options_.root + "/trash"));
    trash = options_.root + "/trash/" + HexEncode(RandomBytes(8));
    std::shared_ptr<Group> g = it->second;
    if (::rename(g->dir.c_str(), trash.c_str()) != 0) return Errno("cannot delete", g->dir);
    RETURN_IF_ERROR(SyncPath(options_.root + "/groups"));
    groups_.erase(it);
    g->deleted = true;
    g->dir = trash;
    for (const auto& [sname, s] : g->streams) streams.push_back(s);
  }
  for (const auto& s : streams) {
    std::lock_guard<std::mutex> lock(s->mu);
    s->deleted = true;
    s->group_bytes.reset();
    s->cv.notify_all();
  }
  std::error_code ec;
  fs::remove_all(trash, ec);
  return Status::Ok();
}

Status LogStore::SetRetention(const std::string& name, std::optional<int32_t> days) {
  std::lock_guard<std::mutex> lock(mu_);
  ASSIGN_OR_RETURN(std::shared_ptr<Group> g, GroupLocked(name));
  std::optional<int32_t> old = g->retention_days;
  g->retention_days = days;
  Status s = g->WriteMeta();
  if (!s.ok()) g->retention_days = old;
  return s;
}

Result<GroupInfo> LogStore::GetGroup(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  ASSIGN_OR_RETURN(std::shared_ptr<Group> g, GroupLocked(name));
  return GroupInfo{name, g->creation_ms, g->retention_days, g->stored_bytes->load()};
}

std::vector<GroupInfo> LogStore::ListGroups() const {
  std::vector<GroupInfo> out;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [name, g] : groups_)
    out.push_back(GroupInfo{name, g->creation_ms, g->retention_days, g->stored_bytes->load()});
  return out;
}

size_t LogStore::GroupCount() const {
  std::lock_guard<std::mutex> lock(mu_);
  return groups_.size();
}

Status LogStore::CreateStreamLocked(Group* g, const std::string& name, bool durable) {
  auto s = std::make_shared<Stream>();
  s->group = g->name;
  s->name = name;
  s->creation_ms = options_.clock->NowMillis();
  s->dir = g->dir + "/streams/" + DirNameFor(name);
  const std::string meta = Json{{"name", name}, {"creationTime", s->creation_ms}}.dump() + "\n";
  if (durable) {
    // Made under a temporary name, synced and renamed into place whole: after
    // a crash it is there with its stream.json, or not at all.
    std::string tmp = g->dir + "/streams/.tmp-" + HexEncode(RandomBytes(8));
    if (::mkdir(tmp.c_str(), 0755) != 0) return Errno("cannot create", tmp);
    RETURN_IF_ERROR(WriteFileAtomic(tmp + "/stream.json", meta));
    if (::rename(tmp.c_str(), s->dir.c_str()) != 0)
      return Errno("cannot create log stream directory", s->dir);
    RETURN_IF_ERROR(SyncPath(g->dir + "/streams"));
  } else {
    // A job's stream, one per node: made in place, two steps instead of
    // three. Under mu_, so no reader of this process sees the folder without
    // its stream.json (LoadStream looks again under mu_); a crash between the
    // two leaves a folder without events, which the next load removes, or
    // this creation takes over (CreateStream found no stream.json in it).
    RETURN_IF_ERROR(MakeDir(s->dir));
    RETURN_IF_ERROR(WriteNewFile(s->dir + "/stream.json", meta));
  }
  s->group_bytes = g->stored_bytes;
  g->streams.emplace(name, std::move(s));
  return Status::Ok();
}

Status LogStore::CreateStream(const std::string& group, const std::string& name, bool durable) {
  if (name.empty()) return Status::InvalidArgument("log stream name is empty");
  std::lock_guard<std::mutex> lock(mu_);
  ASSIGN_OR_RETURN(std::shared_ptr<Group> g, GroupLocked(group));
  bool exists = g->streams.count(name) > 0;
  if (!exists && !g->all_loaded) {
    // On disk but not read yet (streams are created and deleted under mu_);
    // a folder an interrupted creation left (no stream.json, no events) does
    // not count: the creation's rename replaces it.
    const std::string dir = g->dir + "/streams/" + DirNameFor(name);
    struct stat st;
    exists = ::stat((dir + "/stream.json").c_str(), &st) == 0 || HoldsSegments(dir);
  }
  if (exists) return Status::AlreadyExists("The specified log stream already exists: " + name);
  return CreateStreamLocked(g.get(), name, durable);
}

Status LogStore::EnsureStream(const std::string& group, const std::string& name, bool durable) {
  Status s = CreateGroup(group);
  if (!s.ok() && !s.IsAlreadyExists()) return s;
  s = CreateStream(group, name, durable);
  if (!s.ok() && !s.IsAlreadyExists()) return s;
  return Status::Ok();
}

Status LogStore::DeleteStream(const std::string& group, const std::string& name) {
  ASSIGN_OR_RETURN(std::shared_ptr<Stream> s, FindStream(group, name));
  std::string trash;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ASSIGN_OR_RETURN(std::shared_ptr<Group> g, GroupLocked(group));
    auto it = g->streams.find(name);
    if (it == g->streams.end() || it->second != s)  // deleted meanwhile
      return Status::NotFound("The specified log stream does not exist: " + name);
    RETURN_IF_ERROR(MakeDirs(options_.root + "/trash"));
    trash = options_.root + "/trash/" + HexEncode(RandomBytes(8));
    std::lock_guard<std::mutex> slock(s->mu);  // no append is mid-write while we move it
    if (::rename(s->dir.c_str(), trash.c_str()) != 0) return Errno("cannot delete", s->dir);
    RETURN_IF_ERROR(SyncPath(g->dir + "/streams"));
    s->deleted = true;
    if (s->group_bytes) *s->group_bytes -= s->stored_bytes;
    s->group_bytes.reset();
    s->cv.notify_all();
    g->streams.erase(it);
  }
  std::error_code ec;
  fs::remove_all(trash, ec);
  return Status::Ok();
}

Result<std::shared_ptr<LogStore::Group>> LogStore::GroupLocked(const std::string& name) const {
  auto it = groups_.find(name);
  if (it == groups_.end())
    return Status::NotFound("The specified log group does not exist: " + name);
  return it->second;
}

Result<std::shared_ptr<LogStore::Group>> LogStore::LoadedGroup(const std::string& name) const {
  std::shared_ptr<Group> g;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ASSIGN_OR_RETURN(g, GroupLocked(name));
  }
  RETURN_IF_ERROR(LoadAllStreams(g));
  return g;
}

Result<std::shared_ptr<LogStore::Stream>> LogStore::FindStream(const std::string& group,
                                                               const std::string& name) const {
  std::shared_ptr<Group> g;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ASSIGN_OR_RETURN(g, GroupLocked(group));
    auto it = g->streams.find(name);
    if (it != g->streams.end()) return it->second;
    if (g->all_loaded) return Status::NotFound("The specified log stream does not exist: " + name);
  }
  ASSIGN_OR_RETURN(std::shared_ptr<Stream> s, LoadStream(g, DirNameFor(name)));
  if (!s || s->name != name)
    return Status::NotFound("The specified log stream does not exist: " + name);
  return s;
}

Result<StreamInfo> LogStore::GetStream(const std::string& group, const std::string& name) const {
  ASSIGN_OR_RETURN(std::shared_ptr<Stream> s, FindStream(group, name));
  std::lock_guard<std::mutex> lock(s->mu);
  return s->InfoLocked();
}

Result<std::vector<StreamInfo>> LogStore::ListStreams(const std::string& group) const {
  ASSIGN_OR_RETURN(std::shared_ptr<Group> g, LoadedGroup(group));
  std::vector<std::shared_ptr<Stream>> streams;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [name, s] : g->streams) streams.push_back(s);
  }
  std::vector<StreamInfo> out;
  out.reserve(streams.size());
  for (const auto& s : streams) {
    std::lock_guard<std::mutex> lock(s->mu);
    out.push_back(s->InfoLocked());
  }
  return out;
}

Result<AppendResult> LogStore::Append(const std::string& group, const std::string& stream,
                                      std::span<const InputEvent> events,
                                      const AppendOptions& options) {
  ASSIGN_OR_RETURN(std::shared_ptr<Stream> s, FindStream(group, stream));
  const int64_t now = options_.clock->NowMillis();
  std::unique_lock<std::mutex> lock(s->mu);
  if (s->deleted) return Status::NotFound("The specified log stream does not exist: " + stream);
  AppendResult result{s->next_seq, 0};
  if (events.empty()) return result;

  // Encode every record into one buffer, written with one system call.
  std::string& buf = s->write_buf;
  buf.clear();
  std::vector<RecordHeader> headers;
  std::vector<size_t> offsets;
  RecordBuilder builder;
  uint64_t seq = s->next_seq;
  bool open = false;
  std::string repaired;
  for (const InputEvent& ev : events) {
    std::string_view msg = ev.message;
    if (!IsValidUtf8(msg)) {
      repaired.clear();
      AppendSanitizedUtf8(msg, &repaired);
      msg = repaired;
    }
    // All pieces of one input event go into the same record, so a record's
    // source_end always covers whole input events.
    if (open && builder.size() + msg.size() + 16 > options_.record_bytes) {
      headers.push_back(builder.Finish());
      open = false;
    }
    if (!open) {
      offsets.push_back(buf.size());
      builder.Begin(&buf, seq, now);
      open = true;
    }
    if (msg.size() <= kMaxEventBytes) {
      builder.Add(ev.timestamp_ms, msg);
      ++seq;
    } else {
      for (std::string_view piece : SplitUtf8(msg, kMaxEventBytes)) {
        builder.Add(ev.timestamp_ms, piece);
        ++seq;
      }
    }
    if (ev.source_end >= 0) builder.set_source_end(ev.source_end);
  }
  headers.push_back(builder.Finish());

  // The active segment: the last one unless it is sealed or there is none.
  if (s->segments.empty() || s->segments.back().sealed) {
    SegmentFile seg;
    seg.base = s->next_seq;
    std::string path = s->SegmentPath(seg.base, "seg");
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
      // The group was deleted while this append waited: same answer as before it.
      if (errno == ENOENT)
        return Status::NotFound("The specified log stream does not exist: " + stream);
      return Errno("cannot create", path);
    }
    ::close(fd);
    RETURN_IF_ERROR(SyncPath(s->dir));
    s->segments.push_back(seg);
  }
  SegmentFile& seg = s->segments.back();
  std::string path = s->SegmentPath(seg.base, "seg");
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) {
    // The group was deleted while this append waited: same answer as before it.
    if (errno == ENOENT)
      return Status::NotFound("The specified log stream does not exist: " + stream);
    return Errno("cannot open", path);
  }
  Status ws = PWriteAll(fd, buf, seg.size, path);
  if (ws.ok() && options.sync && ::fdatasync(fd) != 0) ws = Errno("cannot sync", path);
  if (!ws.ok()) {
    // Cut off whatever part was written so the next append starts clean.
    (void)::ftruncate(fd, static_cast<off_t>(seg.size));
    ::close(fd);
    return ws;
  }
  for (size_t i = 0; i < headers.size(); ++i) {
    const RecordHeader& h = headers[i];
    BatchEntry e;
    e.first_seq = h.first_seq;
    e.count = h.count;
    e.bytes = static_cast<uint32_t>(h.total_bytes());
    e.segment_base = seg.base;
    e.offset = seg.size + offsets[i];
    e.min_ts = h.min_ts;
    e.max_ts = h.max_ts;
    e.source_end = h.source_end;
    e.ingestion_ms = h.ingestion_ms;
    e.flags = h.flags;
    s->AddEntry(e);
  }
  seg.size += buf.size();
  if (s->group_bytes) *s->group_bytes += static_cast<int64_t>(buf.size());
  result.count = seq - result.first_sequence;
  std::optional<SealJob> seal;
  if (seg.size >= options_.segment_bytes) {
    // Seal: the next append starts a new segment. The sealer thread makes
    // this one durable and then writes its index, off the append path.
    seg.sealed = true;
    seal = SealJob{path, s->SegmentPath(seg.base, "idx"), s->IndexData(seg)};
  }
  ::close(fd);
  lock.unlock();
  s->cv.notify_all();
  if (seal) {
    std::lock_guard<std::mutex> slock(seal_mu_);
    seal_queue_.push_back(std::move(*seal));
    seal_cv_.notify_one();
  }
  return result;
}

Result<ReadResult> LogStore::Read(const std::string& group, const std::string& stream,
                                  const ReadRequest& req) const {
  ASSIGN_OR_RETURN(std::shared_ptr<Stream> s, FindStream(group, stream));
  ReadResult result;
  std::vector<BatchEntry> entries;
  bool sorted;
  bool more_beyond = false;  // entries exist beyond the copied range
  std::string dir;
  uint64_t position = req.position;
  {
    std::lock_guard<std::mutex> lock(s->mu);
    if (req.direction == Direction::kBackward) position = std::min(position, s->next_seq);
    sorted = s->sorted;
    dir = s->dir;
    result.stream_next_sequence = s->next_seq;
    const auto& b = s->batches;
    size_t scan = 0;
    if (req.direction == Direction::kForward) {
      size_t i =
          std::partition_point(b.begin(), b.end(),
                               [&](const BatchEntry& e) { return e.end_seq() <= position; }) -
          b.begin();
      if (req.start_time_ms) {
        size_t j = std::partition_point(
                       b.begin(), b.end(),
                       [&](const BatchEntry& e) { return e.prefix_max_ts < *req.start_time_ms; }) -
                   b.begin();
        i = std::max(i, j);
      }
      for (; i < b.size(); ++i) {
        if (scan >= req.max_scan_bytes) break;
        scan += b[i].bytes;
        entries.push_back(b[i]);
      }
      more_beyond = i < b.size();
    } else {
      size_t end =
          std::partition_point(b.begin(), b.end(),
                               [&](const BatchEntry& e) { return e.first_seq < position; }) -
          b.begin();
      size_t i = end;
      while (i > 0) {
        if (scan >= req.max_scan_bytes) break;
        --i;
        scan += b[i].bytes;
        entries.push_back(b[i]);  // descending
        if (req.start_time_ms && b[i].prefix_max_ts < *req.start_time_ms) break;
      }
      more_beyond = i > 0;
    }
  }

  std::string buf;
  SegmentReader reader(dir);
  std::vector<EventView> views;
  size_t bytes = 0;
  auto in_range = [&](int64_t ts) {
    return (!req.start_time_ms || ts >= *req.start_time_ms) &&
           (!req.end_time_ms || ts < *req.end_time_ms);
  };
  // Adds `v` to the page when its timestamp is in the range; false (and `v`
  // not added) when the page is full.
  auto take = [&](const EventView& v) {
    if (!in_range(v.timestamp_ms)) return true;
    const size_t size = v.message.size() + kEventOverhead;
    if (result.events.size() >= req.limit ||
        (!result.events.empty() && bytes + size > req.max_bytes)) {
      return false;
    }
    bytes += size;
    result.events.push_back(
        LogEvent{v.sequence, v.timestamp_ms, v.ingestion_ms, std::string(v.message)});
    return true;
  };
  auto load = [&](const BatchEntry& e) -> Status {
    views.clear();
    Status st = reader.Read(e.segment_base, e.offset, e.bytes, &buf);
    if (st.IsNotFound()) return Status::Ok();  // removed by retention meanwhile
    RETURN_IF_ERROR(st);
    RecordHeader h;
    if (!ParseRecordHeader(buf, &h)) {
      return Status::DataLoss("bad record header in segment " + std::to_string(e.segment_base) +
                              " of " + dir);
    }
    return DecodeRecord(buf, h, &views);
  };

  if (req.direction == Direction::kForward) {
    result.next_position = position;
    result.exhausted = !more_beyond;
    for (const BatchEntry& e : entries) {
      if (sorted && req.end_time_ms && e.min_ts >= *req.end_time_ms) {
        // Timestamps never decrease in this stream: nothing later can match.
        result.exhausted = true;
        break;
      }
      RETURN_IF_ERROR(load(e));
      bool stopped = false;
      for (const EventView& v : views) {
        if (v.sequence < position) continue;
        if (!take(v)) {
          stopped = true;
          break;
        }
        result.next_position = v.sequence + 1;
      }
      if (stopped) {
        result.exhausted = false;
        break;
      }
      result.next_position = std::max(result.next_position, e.end_seq());
    }
  } else {
    result.next_position = position;
    result.exhausted = !more_beyond;
    bool stopped = false;
    for (const BatchEntry& e : entries) {  // descending
      if (req.start_time_ms && e.prefix_max_ts < *req.start_time_ms) {
        result.exhausted = true;
        break;
      }
      if (sorted && req.end_time_ms && e.min_ts >= *req.end_time_ms) {
        result.next_position = std::min(result.next_position, e.first_seq);
        continue;
      }
      RETURN_IF_ERROR(load(e));
      for (auto it = views.rbegin(); it != views.rend(); ++it) {
        const EventView& v = *it;
        if (v.sequence >= position) continue;
        if (!take(v)) {
          stopped = true;
          break;
        }
        result.next_position = v.sequence;
      }
      if (stopped) {
        result.exhausted = false;
        break;
      }
      result.next_position = std::min(result.next_position, e.first_seq);
    }
    std::reverse(result.events.begin(), result.events.end());
  }
  return result;
}

Result<std::vector<LogEvent>> LogStore::Tail(const std::string& group, const std::string& stream,
                                             size_t n) const {
  ReadRequest req;
  req.direction = Direction::kBackward;
  req.position = UINT64_MAX;
  req.limit = n;
  req.max_bytes = SIZE_MAX;
  ASSIGN_OR_RETURN(ReadResult r, Read(group, stream, req));
  return std::move(r.events);
}

Result<bool> LogStore::WaitForEvents(const std::string& group, const std::string& stream,
                                     uint64_t position, std::chrono::milliseconds timeout) const {
  ASSIGN_OR_RETURN(std::shared_ptr<Stream> s, FindStream(group, stream));
  std::unique_lock<std::mutex> lock(s->mu);
  bool ready = s->cv.wait_for(lock, timeout, [&] { return s->deleted || s->next_seq > position; });
  if (s->deleted) return Status::NotFound("The specified log stream does not exist: " + stream);
  return ready;
}

Result<int64_t> LogStore::SourceOffset(const std::string& group, const std::string& stream) const {
  ASSIGN_OR_RETURN(std::shared_ptr<Stream> s, FindStream(group, stream));
  std::lock_guard<std::mutex> lock(s->mu);
  return s->source_end;
}

Status LogStore::Sync(const std::string& group, const std::string& stream) {
  ASSIGN_OR_RETURN(std::shared_ptr<Stream> s, FindStream(group, stream));
  std::lock_guard<std::mutex> lock(s->mu);
  if (s->segments.empty()) return Status::Ok();
  return SyncPath(s->SegmentPath(s->segments.back().base, "seg"));
}

Status LogStore::EnforceRetention(int64_t now_ms) {
  std::vector<std::shared_ptr<Group>> groups;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [name, g] : groups_) {
      if (g->retention_days) groups.push_back(g);
    }
  }
  std::vector<std::pair<int64_t, std::shared_ptr<Stream>>> work;
  Status first_error;
  for (const auto& g : groups) {
    // A stream that cannot be read is left alone; the others still expire.
    Status loaded = LoadAllStreams(g);
    if (!loaded.ok() && first_error.ok()) first_error = loaded;
    std::lock_guard<std::mutex> lock(mu_);
    if (!g->retention_days) continue;
    int64_t cutoff = now_ms - int64_t{*g->retention_days} * 86'400'000;
    for (const auto& [sname, s] : g->streams) work.emplace_back(cutoff, s);
  }
  for (auto& [cutoff, s] : work) {
    std::lock_guard<std::mutex> lock(s->mu);
    if (s->deleted) continue;
    // Segments, oldest first, whose events are all older than the cutoff.
    size_t expired = 0;
    for (const SegmentFile& seg : s->segments) {
      bool any = false, all_old = true;
      for (const BatchEntry& e : s->batches) {
        if (e.segment_base != seg.base) continue;
        any = true;
        if (e.max_ts >= cutoff) {
          all_old = false;
          break;
        }
      }
      if (!any || !all_old) break;
      ++expired;
    }
    if (expired == 0) continue;
    if (expired == s->segments.size()) {
      // Everything is old: start a fresh, empty active segment first so the
      // next sequence number survives a restart.
      SegmentFile fresh;
      fresh.base = s->next_seq;
      std::string path = s->SegmentPath(fresh.base, "seg");
      int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
      if (fd < 0) return Errno("cannot create", path);
      ::close(fd);
      RETURN_IF_ERROR(SyncPath(s->dir));
      s->segments.push_back(fresh);
    }
    for (size_t i = 0; i < expired; ++i) {
      const SegmentFile& seg = s->segments[i];
      ::unlink(s->SegmentPath(seg.base, "seg").c_str());
      ::unlink(s->SegmentPath(seg.base, "idx").c_str());
    }
    uint64_t keep_from = s->segments[expired].base;
    s->segments.erase(s->segments.begin(), s->segments.begin() + static_cast<ptrdiff_t>(expired));
    auto first_kept = std::find_if(s->batches.begin(), s->batches.end(),
                                   [&](const BatchEntry& e) { return e.first_seq >= keep_from; });
    int64_t removed = 0;
    for (auto it = s->batches.begin(); it != first_kept; ++it) removed += it->bytes;
    s->stored_bytes -= removed;
    if (s->group_bytes) *s->group_bytes -= removed;
    s->batches.erase(s->batches.begin(), first_kept);
    RETURN_IF_ERROR(SyncPath(s->dir));
  }
  return first_error;
}

}  // namespace lote::logs
