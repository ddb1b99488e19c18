#include "objstore/buckets.h"

#include <dirent.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <tuple>

#include "common/crypto.h"
#include "common/files.h"
#include "common/json.h"

namespace lote::objstore {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kTmpPrefix = ".lote-tmp-";  // files being written (FileStore's too)
constexpr std::string_view kStateDir = ".lote-s3";     // per bucket: bucket.json, meta/, uploads/
constexpr std::string_view kFolderMarker = ".lote-s3-folder";  // the file behind a key "dir/"
constexpr std::string_view kMetaSuffix = ".meta";
constexpr size_t kMaxKeyBytes = 1024;
constexpr size_t kMaxSegmentBytes = 250;  // NAME_MAX less ".meta"
constexpr size_t kBlockBytes = 1 << 20;
constexpr size_t kUploadIdBytes = 16;

// ---------------------------------------------------------------------------
// Errors

Status InvalidArgument(std::string_view message) {
  return S3Error(Status::InvalidArgument(""), "InvalidArgument", message);
}
Status Internal(std::string_view message) {
  return S3Error(Status::Internal(""), "InternalError", message);
}
Status IoError(std::string_view what, const std::string& path, int err) {
  return Internal(std::string(what) + " " + path + ": " + std::strerror(err));
}
Status NoSuchBucket(const std::string& bucket) {
  return S3Error(Status::NotFound(""), "NoSuchBucket", "the bucket " + bucket + " does not exist");
}
Status NoSuchKey(const std::string& bucket, const std::string& key) {
  return S3Error(Status::NotFound(""), "NoSuchKey",
                 "the key " + key + " does not exist in the bucket " + bucket);
}
Status NoSuchUpload(const std::string& upload_id) {
  return S3Error(Status::NotFound(""), "NoSuchUpload",
                 "the multipart upload " + upload_id + " does not exist (completed or aborted?)");
}
Status InvalidPart(std::string_view message) {
  return S3Error(Status::InvalidArgument(""), "InvalidPart", message);
}
// A status from common/ (no S3 code) as an InternalError.
Status AsS3(const Status& status) {
  if (status.ok() || status.message().rfind("InternalError: ", 0) == 0 ||
      S3ErrorCode(status) != "InternalError") {
    return status;
  }
  return Status(status.code(), "InternalError: " + status.message());
}

// ---------------------------------------------------------------------------
// Small file helpers

std::string TmpName() { return std::string(kTmpPrefix) + HexEncode(RandomBytes(8)); }

// Unlinks a file when destroyed unless Release()d.
class ScopedUnlink {
 public:
  explicit ScopedUnlink(std::string path) : path_(std::move(path)) {}
  ~ScopedUnlink() {
    if (!path_.empty()) ::unlink(path_.c_str());
  }
  ScopedUnlink(const ScopedUnlink&) = delete;
  ScopedUnlink& operator=(const ScopedUnlink&) = delete;
  void Release() { path_.clear(); }

 private:
  std::string path_;
};

// Closes a descriptor when destroyed.
class ScopedFd {
 public:
  explicit ScopedFd(int fd) : fd_(fd) {}
  ~ScopedFd() {
    if (fd_ >= 0) ::close(fd_);
  }
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// A new .lote-tmp- file in `dir` holding `data` (fsynced when `durable`); its path.
Result<std::string> WriteTempFile(const std::string& dir, std::string_view data, bool durable) {
  std::string path = dir + "/" + TmpName();
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return IoError("cannot create", path, errno);
  Status st = AsS3(WriteAll(fd, data, path));
  if (st.ok() && durable && ::fsync(fd) != 0) st = IoError("cannot fsync", path, errno);
  ::close(fd);
  if (!st.ok()) {
    ::unlink(path.c_str());
    return st;
  }
  return path;
}

// Replaces `path` with `data` durably (temporary file beside it, fsync, rename, folder fsync).
Status WriteFileDurably(const std::string& path, std::string_view data) {
  const std::string dir = fs::path(path).parent_path().string();
  ASSIGN_OR_RETURN(std::string tmp, WriteTempFile(dir, data, /*durable=*/true));
  ScopedUnlink guard(tmp);
  if (::rename(tmp.c_str(), path.c_str()) != 0) return IoError("cannot rename to", path, errno);
  guard.Release();
  return AsS3(SyncPath(dir));
}

bool IsDir(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool IsRegularFile(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

int64_t MtimeMillis(const struct stat& st) {
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000 + st.st_mtim.tv_nsec / 1'000'000;
}

// Copies `n` bytes of `in` from `offset` to `out` at its file offset (copy_file_range, or
// read/write in 1 MiB blocks where the kernel or file system cannot).
Status CopyRange(int in, uint64_t offset, uint64_t n, int out, const std::string& out_path) {
  off_t in_off = static_cast<off_t>(offset);
  uint64_t left = n;
  bool kernel_copy = true;
  std::string buf;
  while (left > 0) {
    if (kernel_copy) {
      ssize_t c = ::copy_file_range(in, &in_off, out, nullptr,
                                    static_cast<size_t>(std::min<uint64_t>(left, 1u << 30)), 0);
      if (c > 0) {
        left -= static_cast<uint64_t>(c);
        continue;
      }
      if (c == 0) return Internal("a source of " + out_path + " shrank while it was copied");
      if (errno == EINTR) continue;
      if (errno != EXDEV && errno != ENOSYS && errno != EINVAL && errno != EOPNOTSUPP &&
          errno != EPERM) {
        return IoError("cannot copy into", out_path, errno);
      }
      kernel_copy = false;
    }
    buf.resize(static_cast<size_t>(std::min<uint64_t>(left, kBlockBytes)));
    ssize_t r = ::pread(in, buf.data(), buf.size(), in_off);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return IoError("cannot read a source of", out_path, errno);
    if (r == 0) return Internal("a source of " + out_path + " shrank while it was copied");
    RETURN_IF_ERROR(
        AsS3(WriteAll(out, std::string_view(buf.data(), static_cast<size_t>(r)), out_path)));
    in_off += r;
    left -= static_cast<uint64_t>(r);
  }
  return Status::Ok();
}

// Removes a folder tree by renaming it aside first (it disappears at once), then deleting it.
Status RemoveTree(const std::string& path, const std::string& parent) {
  const std::string trash = parent + "/" + TmpName();
  if (::rename(path.c_str(), trash.c_str()) != 0) return IoError("cannot remove", path, errno);
  RETURN_IF_ERROR(AsS3(SyncPath(parent)));
  std::error_code ec;
  fs::remove_all(trash, ec);
  if (ec) return Internal("cannot remove " + trash + ": " + ec.message());
  return Status::Ok();
}

// ---------------------------------------------------------------------------
// Hashes

class Md5 {
 public:
  Md5() : ctx_(EVP_MD_CTX_new()) { EVP_DigestInit_ex(ctx_, EVP_md5(), nullptr); }
  ~Md5() { EVP_MD_CTX_free(ctx_); }
  Md5(const Md5&) = delete;
  Md5& operator=(const Md5&) = delete;
  void Update(std::string_view data) { EVP_DigestUpdate(ctx_, data.data(), data.size()); }
  std::string FinishRaw() {
    unsigned char out[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    EVP_DigestFinal_ex(ctx_, out, &n);
    return std::string(reinterpret_cast<const char*>(out), n);
  }

 private:
  EVP_MD_CTX* ctx_;
};

// The MD5 (hex) of everything `fd` holds.
Result<std::string> Md5OfFd(int fd, const std::string& path) {
  Md5 md5;
  std::string buf(kBlockBytes, '\0');
  off_t off = 0;
  for (;;) {
    ssize_t r = ::pread(fd, buf.data(), buf.size(), off);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return IoError("cannot read", path, errno);
    if (r == 0) break;
    md5.Update(std::string_view(buf.data(), static_cast<size_t>(r)));
    off += r;
  }
  return HexEncode(md5.FinishRaw());
}

bool HexDecode(std::string_view hex, std::string* out) {
  if (hex.size() % 2 != 0) return false;
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  out->clear();
  for (size_t i = 0; i < hex.size(); i += 2) {
    int hi = nibble(hex[i]), lo = nibble(hex[i + 1]);
    if (hi < 0 || lo < 0) return false;
    out->push_back(static_cast<char>(hi * 16 + lo));
  }
  return true;
}

// An ETag as stored: no quotes, lowercase.
std::string NormalEtag(std::string_view etag) {
  if (etag.size() >= 2 && etag.front() == '"' && etag.back() == '"') {
    etag = etag.substr(1, etag.size() - 2);
  }
  std::string out(etag);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool IsMd5Hex(std::string_view s) {
  std::string raw;
  return s.size() == 32 && HexDecode(s, &raw);
}

// ---------------------------------------------------------------------------
// Names

Status ValidateBucketName(const std::string& name) {
  auto invalid = [&](std::string_view why) {
    return S3Error(Status::InvalidArgument(""), "InvalidBucketName",
                   "the bucket name \"" + name + "\" " + std::string(why));
  };
  if (name.size() < 3 || name.size() > 63) return invalid("must be 3 to 63 characters long");
  for (char c : name) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '-')) {
      return invalid("may hold only lowercase letters, digits, '.' and '-'");
    }
  }
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (!alnum(name.front()) || !alnum(name.back())) {
    return invalid("must begin and end with a letter or digit");
  }
  if (name.find("..") != std::string::npos) return invalid("must not hold \"..\"");
  int dots = 0;
  bool digits_and_dots = true;
  for (char c : name) {
    if (c == '.') ++dots;
    if (c != '.' && !(c >= '0' && c <= '9')) digits_and_dots = false;
  }
  if (digits_and_dots && dots == 3) return invalid("must not be an IP address");
  return Status::Ok();
}

// A folder name under the root that can be a bucket: what CreateBucket makes, or any plain
// folder made through file:// (not hidden, one path segment).
bool UsableBucketName(const std::string& name) {
  return !name.empty() && name.size() <= 255 && name.front() != '.' &&
         name.find('/') == std::string::npos && name.find('\0') == std::string::npos;
}

// A key's path segment that lote keeps for itself.
bool ReservedSegment(std::string_view segment) {
  return segment == kStateDir || segment == kFolderMarker || segment.rfind(kTmpPrefix, 0) == 0;
}

Status ValidateKey(const std::string& key) {
  auto invalid = [&](std::string_view why) {
    return InvalidArgument("the key \"" + key + "\" " + std::string(why));
  };
  if (key.empty()) return invalid("is empty");
  if (key.size() > kMaxKeyBytes) {
    return S3Error(Status::InvalidArgument(""), "KeyTooLongError",
                   "a key is at most 1024 bytes; this one has " + std::to_string(key.size()));
  }
  if (key.find('\0') != std::string::npos) return invalid("holds a NUL byte");
  if (key.front() == '/') return invalid("begins with '/' (keys are relative paths)");
  // The segments between '/'; a trailing '/' (a folder marker) ends the last one.
  const size_t end = key.back() == '/' ? key.size() - 1 : key.size();
  size_t begin = 0;
  while (begin <= end) {
    size_t slash = key.find('/', begin);
    if (slash == std::string::npos || slash > end) slash = end;
    std::string_view segment(key.data() + begin, slash - begin);
    if (segment.empty()) return invalid("has an empty path segment (\"//\")");
    if (segment == "." || segment == "..") return invalid("has a \".\" or \"..\" path segment");
    if (ReservedSegment(segment)) {
      return invalid("uses a name lote keeps for itself (.lote-s3, .lote-s3-folder, .lote-tmp-*)");
    }
    if (segment.size() > kMaxSegmentBytes) {
      return S3Error(Status::InvalidArgument(""), "KeyTooLongError",
                     "a key's path segment is at most 250 bytes");
    }
    begin = slash + 1;
  }
  return Status::Ok();
}

bool ValidUploadId(const std::string& id) {
  if (id.size() != 2 * kUploadIdBytes) return false;
  return std::all_of(id.begin(), id.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// The bucket folder's paths.
struct BucketPaths {
  std::string dir;      // <root>/<bucket>
  std::string state;    // .../.lote-s3
  std::string meta;     // .../.lote-s3/meta
  std::string uploads;  // .../.lote-s3/uploads

  explicit BucketPaths(const std::string& root, const std::string& bucket)
      : dir(root + "/" + bucket),
        state(dir + "/" + std::string(kStateDir)),
        meta(state + "/meta"),
        uploads(state + "/uploads") {}
};

// The path of a key's file below the bucket folder: the key, or <key>.lote-s3-folder for "dir/".
std::string DataRel(const std::string& key) {
  return key.back() == '/' ? key + std::string(kFolderMarker) : key;
}
std::string MetaRel(const std::string& key) { return DataRel(key) + std::string(kMetaSuffix); }
// The folder part of a relative path ("" at the top).
std::string ParentRel(const std::string& rel) {
  size_t slash = rel.rfind('/');
  return slash == std::string::npos ? "" : rel.substr(0, slash);
}
std::string Join(const std::string& base, const std::string& rel) {
  return rel.empty() ? base : base + "/" + rel;
}

std::string PartName(int32_t number) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%05d", number);
  return buf;
}

// ---------------------------------------------------------------------------
// Folders of keys

Status Collision(const std::string& key, const std::string& what) {
  return InvalidArgument("the key \"" + key + "\" collides with " + what +
                         " (a key cannot be both an object and the folder of other keys)");
}

// Makes the folders of `rel`'s parent below `base`; each folder that gained an entry is added to
// `to_sync`. A file in the way is a collision with the key it belongs to.
Status MakeParents(const std::string& base, const std::string& rel, const std::string& key,
                   std::vector<std::string>* to_sync) {
  std::string dir = base;
  size_t begin = 0;
  for (size_t slash = rel.find('/'); slash != std::string::npos; slash = rel.find('/', begin)) {
    std::string child = dir + "/" + rel.substr(begin, slash - begin);
    if (::mkdir(child.c_str(), 0755) == 0) {
      to_sync->push_back(dir);
    } else if (errno == EEXIST) {
      if (!IsDir(child)) return Collision(key, "the file " + rel.substr(0, slash));
    } else {
      return IoError("cannot create", child, errno);
    }
    dir = std::move(child);
    begin = slash + 1;
  }
  return Status::Ok();
}

// Makes room for a file at `path`: an empty folder there is removed; one holding anything is a
// collision.
Status ClearTarget(const std::string& path, const std::string& key, const std::string& rel) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return Status::Ok();
  if (::rmdir(path.c_str()) == 0) return Status::Ok();
  if (errno == ENOTEMPTY || errno == EEXIST) return Collision(key, "the keys under " + rel + "/");
  return IoError("cannot remove the empty folder", path, errno);
}

// Removes the empty folders of `rel_dir` below `base`, deepest first; returns the deepest folder
// left (the one whose entries changed last).
std::string PruneEmpty(const std::string& base, std::string rel_dir) {
  while (!rel_dir.empty()) {
    if (::rmdir(Join(base, rel_dir).c_str()) != 0) return Join(base, rel_dir);
    rel_dir = ParentRel(rel_dir);
  }
  return base;
}

// Makes the folders for a key's data file and sidecar (each folder that gained an entry is added
// to `to_sync`) and clears empty leftover folders where the two files go. On failure (a collision
// with another key) the folders made are removed again.
Status MakeRoom(const BucketPaths& paths, const std::string& key,
                std::vector<std::string>* to_sync) {
  const std::string rel = DataRel(key), meta_rel = MetaRel(key);
  Status made = MakeParents(paths.dir, rel, key, to_sync);
  if (made.ok()) made = ClearTarget(paths.dir + "/" + rel, key, rel);
  if (made.ok()) made = MakeParents(paths.state, "meta/", key, to_sync);
  if (made.ok()) made = MakeParents(paths.meta, meta_rel, key, to_sync);
  if (made.ok()) made = ClearTarget(paths.meta + "/" + meta_rel, key, rel);
  if (!made.ok()) {
    PruneEmpty(paths.dir, ParentRel(rel));
    PruneEmpty(paths.meta, ParentRel(meta_rel));
  }
  return made;
}

// ---------------------------------------------------------------------------
// Sidecars: JSON stamped with the data file's inode, size and mtime

struct Stamp {
  uint64_t ino = 0;
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  bool operator==(const Stamp&) const = default;
};

Stamp StampOf(const struct stat& st) {
  return Stamp{
      .ino = static_cast<uint64_t>(st.st_ino),
      .size = static_cast<uint64_t>(st.st_size),
      .mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec};
}

std::string Dump(const Json& json) {
  return json.dump(-1, ' ', false, Json::error_handler_t::replace);
}

Json StampJson(const Stamp& stamp) {
  return Json{{"ino", stamp.ino}, {"size", stamp.size}, {"mtime_ns", stamp.mtime_ns}};
}

// The JSON at `path` when it parses and its "stamp" is `stamp`.
std::optional<Json> ReadStamped(const std::string& path, const Stamp& stamp) {
  auto text = ReadFile(path);
  if (!text.ok()) return std::nullopt;
  Json json = Json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!json.is_object()) return std::nullopt;
  try {
    const Json& s = json.at("stamp");
    Stamp found{.ino = s.at("ino").get<uint64_t>(),
                .size = s.at("size").get<uint64_t>(),
                .mtime_ns = s.at("mtime_ns").get<int64_t>()};
    if (found != stamp) return std::nullopt;
  } catch (const Json::exception&) {
    return std::nullopt;
  }
  return json;
}

using StringMap = std::map<std::string, std::string>;

StringMap MapOr(const Json& json, const char* name) {
  auto it = json.find(name);
  if (it == json.end() || !it->is_object()) return {};
  StringMap out;
  for (const auto& [k, v] : it->items()) {
    if (v.is_string()) out[k] = v.get<std::string>();
  }
  return out;
}

std::string StringOr(const Json& json, const char* name) {
  auto it = json.find(name);
  return it != json.end() && it->is_string() ? it->get<std::string>() : "";
}

template <typename T>
T NumberOr(const Json& json, const char* name, T fallback) {
  auto it = json.find(name);
  return it != json.end() && it->is_number_integer() ? it->get<T>() : fallback;
}

// The fields of a meta that are stored (size and mtime come from the data file).
Json MetaJson(const ObjectMeta& meta) {
  Json json = Json::object();
  json["etag"] = meta.etag;
  json["content_type"] = meta.content_type;
  json["headers"] = meta.headers;
  json["user"] = meta.user;
  json["checksums"] = meta.checksums;
  json["parts"] = meta.parts;
  return json;
}

ObjectMeta MetaFromJson(const Json& json) {
  ObjectMeta meta;
  meta.etag = StringOr(json, "etag");
  meta.content_type = StringOr(json, "content_type");
  meta.headers = MapOr(json, "headers");
  meta.user = MapOr(json, "user");
  meta.checksums = MapOr(json, "checksums");
  meta.parts = NumberOr<int32_t>(json, "parts", 0);
  return meta;
}

std::string SidecarText(const Stamp& stamp, const Json& fields) {
  Json json = fields;
  json["stamp"] = StampJson(stamp);
  return Dump(json);
}

// Writes `meta` as the sidecar of `key` whose data file had `stamp` when it was hashed, if it
// still has (checked under the bucket's `lock`). A cache: best effort, not synced (a torn sidecar
// reads as stale).
void CacheSidecar(const BucketPaths& paths, const std::string& key, const Stamp& stamp,
                  const ObjectMeta& meta, std::mutex& lock) {
  std::lock_guard guard(lock);
  struct stat now;
  std::vector<std::string> unused;
  const std::string data_path = paths.dir + "/" + DataRel(key);
  if (::stat(data_path.c_str(), &now) != 0 || StampOf(now) != stamp ||
      !MakeParents(paths.state, "meta/" + MetaRel(key), key, &unused).ok()) {
    return;
  }
  auto tmp = WriteTempFile(paths.state, SidecarText(stamp, MetaJson(meta)), /*durable=*/false);
  const std::string meta_path = paths.meta + "/" + MetaRel(key);
  if (tmp.ok() && ::rename(tmp->c_str(), meta_path.c_str()) != 0) ::unlink(tmp->c_str());
}

// The metadata of the key whose data file is open as `fd` (`st` its fstat): the sidecar when its
// stamp matches, else the MD5 of the bytes (then cached in the sidecar).
Result<ObjectMeta> ResolveMeta(const BucketPaths& paths, const std::string& key, int fd,
                               const struct stat& st, std::mutex& lock) {
  const Stamp stamp = StampOf(st);
  ObjectMeta meta;
  if (auto json = ReadStamped(paths.meta + "/" + MetaRel(key), stamp)) {
    meta = MetaFromJson(*json);
  } else {
    ASSIGN_OR_RETURN(meta.etag, Md5OfFd(fd, paths.dir + "/" + DataRel(key)));
    CacheSidecar(paths, key, stamp, meta, lock);
  }
  meta.size = static_cast<uint64_t>(st.st_size);
  meta.mtime_millis = MtimeMillis(st);
  return meta;
}

// An open data file.
struct DataFile {
  std::shared_ptr<int> fd;
  struct stat st;
};

// Opens a key's data file: NoSuchKey when there is none (or a folder is there).
Result<DataFile> OpenDataFile(const BucketPaths& paths, const std::string& bucket,
                              const std::string& key) {
  const std::string path = paths.dir + "/" + DataRel(key);
  // O_NONBLOCK: a FIFO placed through file:// must not hang the open.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ENOENT || errno == ENOTDIR || errno == EISDIR) return NoSuchKey(bucket, key);
    return IoError("cannot open", path, errno);
  }
  DataFile file{.fd = std::shared_ptr<int>(new int(fd),
                                           [](int* p) {
                                             ::close(*p);
                                             delete p;
                                           }),
                .st = {}};
  if (::fstat(fd, &file.st) != 0) return IoError("cannot stat", path, errno);
  if (!S_ISREG(file.st.st_mode)) return NoSuchKey(bucket, key);
  return file;
}

// ---------------------------------------------------------------------------
// Listing

// An entry of a bucket's folder as listing sees it.
struct DirEntry {
  std::string name;
  std::string order;  // what sorts it among its siblings: name, name + "/" for a folder
  bool is_dir = false;
  bool is_marker = false;  // .lote-s3-folder: the key of the folder itself
};

// What listing makes of the entry `e` of the open folder `dir` (`top`: the bucket's folder);
// nullopt for one that cannot hold a key.
std::optional<DirEntry> Classify(DIR* dir, const struct dirent* e, bool top) {
  const std::string_view name = e->d_name;
  if (name == "." || name == ".." || name == kStateDir || name.rfind(kTmpPrefix, 0) == 0 ||
      name.size() > kMaxSegmentBytes) {
    return std::nullopt;
  }
  bool is_dir = e->d_type == DT_DIR, is_file = e->d_type == DT_REG;
  if (e->d_type == DT_UNKNOWN || e->d_type == DT_LNK) {
    struct stat st;
    if (::fstatat(::dirfd(dir), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) return std::nullopt;
    if (S_ISLNK(st.st_mode)) {  // a link to a file is an object; one to a folder is not followed
      if (::fstatat(::dirfd(dir), e->d_name, &st, 0) != 0 || !S_ISREG(st.st_mode)) {
        return std::nullopt;
      }
    }
    is_dir = S_ISDIR(st.st_mode);
    is_file = S_ISREG(st.st_mode);
  }
  if (name == kFolderMarker) {
    if (!is_file || top) return std::nullopt;
    return DirEntry{.name = std::string(name), .order = "", .is_dir = false, .is_marker = true};
  }
  if (!is_dir && !is_file) return std::nullopt;
  return DirEntry{.name = std::string(name),
                  .order = is_dir ? std::string(name) + "/" : std::string(name),
                  .is_dir = is_dir,
                  .is_marker = false};
}

// The entries of `path` that can hold keys, in key byte order; false when it cannot be read.
bool ReadEntries(const std::string& path, bool top, std::vector<DirEntry>* out) {
  DIR* dir = ::opendir(path.c_str());
  if (dir == nullptr) return false;
  while (const struct dirent* e = ::readdir(dir)) {
    if (std::optional<DirEntry> entry = Classify(dir, e, top)) out->push_back(std::move(*entry));
  }
  ::closedir(dir);
  std::sort(out->begin(), out->end(),
            [](const DirEntry& a, const DirEntry& b) { return a.order < b.order; });
  return true;
}

// Whether the folder `path` (its keys begin with `rel`) holds at least one key; stops at the
// first one found, in no particular order.
bool HoldsKey(const std::string& path, const std::string& rel) {
  DIR* dir = ::opendir(path.c_str());
  if (dir == nullptr) return false;
  bool found = false;
  while (const struct dirent* e = ::readdir(dir)) {
    std::optional<DirEntry> entry = Classify(dir, e, rel.empty());
    if (!entry) continue;
    if (!entry->is_dir) {
      found = entry->is_marker || rel.size() + entry->name.size() <= kMaxKeyBytes;
    } else if (rel.size() + entry->name.size() < kMaxKeyBytes) {
      found = HoldsKey(path + "/" + entry->name, rel + entry->name + "/");
    }
    if (found) break;
  }
  ::closedir(dir);
  return found;
}

// One page of a listing: walks the folders in key order, skipping the ones that cannot hold a key
// the request wants, rolling keys up into common prefixes, and stops at the first item past the
// page.
class Lister {
 public:
  struct Item {
    std::string name;  // a key or a common prefix
    bool is_prefix = false;
  };

  Lister(ListRequest request, size_t max_items)
      : request_(std::move(request)), max_items_(max_items) {}

  // Walks the folder `path` whose keys begin with `rel` ("" or ending in '/'); false once the page
  // is full.
  bool Walk(const std::string& path, const std::string& rel) {
    std::vector<DirEntry> entries;
    if (!ReadEntries(path, rel.empty(), &entries)) return true;  // vanished meanwhile
    for (const DirEntry& e : entries) {
      if (e.is_marker || !e.is_dir) {
        if (!Offer(e.is_marker ? rel : rel + e.name)) return false;
        continue;
      }
      const std::string sub_rel = rel + e.name + "/";
      if (!MayHold(sub_rel)) continue;
      const std::string sub_path = path + "/" + e.name;
      if (std::optional<std::string> prefix = RolledUp(sub_rel)) {
        // Every key below rolls up into this one common prefix.
        if (*prefix == last_prefix_ || *prefix <= request_.start_after) continue;
        if (!HoldsKey(sub_path, sub_rel)) continue;
        if (!Emit(*prefix, true)) return false;
        continue;
      }
      if (!Walk(sub_path, sub_rel)) return false;
    }
    return true;
  }

  const std::vector<Item>& items() const { return items_; }
  bool truncated() const { return truncated_; }

 private:
  // Whether the folder whose keys begin with `dir` (ending in '/') can hold a key to list.
  bool MayHold(const std::string& dir) const {
    if (dir.size() > kMaxKeyBytes) return false;
    if (!dir.starts_with(request_.prefix) && !request_.prefix.starts_with(dir)) return false;
    // All its keys are <= start_after when start_after is past `dir` and not below it.
    const std::string& after = request_.start_after;
    return !(after > dir && !after.starts_with(dir));
  }

  // The common prefix all keys beginning with `dir` roll up into, if they all roll into one.
  std::optional<std::string> RolledUp(const std::string& dir) const {
    if (request_.delimiter.empty() || !dir.starts_with(request_.prefix)) return std::nullopt;
    size_t at = dir.find(request_.delimiter, request_.prefix.size());
    if (at == std::string::npos) return std::nullopt;
    return dir.substr(0, at + request_.delimiter.size());
  }

  bool Offer(const std::string& key) {
    if (key.size() > kMaxKeyBytes || !key.starts_with(request_.prefix)) return true;
    if (!request_.delimiter.empty()) {
      size_t at = key.find(request_.delimiter, request_.prefix.size());
      if (at != std::string::npos) {
        std::string prefix = key.substr(0, at + request_.delimiter.size());
        if (prefix == last_prefix_ || prefix <= request_.start_after) return true;
        return Emit(std::move(prefix), true);
      }
    }
    if (key <= request_.start_after) return true;
    return Emit(key, false);
  }

  bool Emit(std::string name, bool is_prefix) {
    if (items_.size() >= max_items_) {
      truncated_ = true;
      return false;
    }
    if (is_prefix) last_prefix_ = name;
    items_.push_back(Item{.name = std::move(name), .is_prefix = is_prefix});
    return true;
  }

  const ListRequest request_;
  const size_t max_items_;
  std::vector<Item> items_;
  std::string last_prefix_;
  bool truncated_ = false;
};

// ---------------------------------------------------------------------------
// Multipart uploads

Json UploadJson(const UploadInfo& upload) {
  return Json{{"key", upload.key},
              {"key_hex", HexEncode(upload.key)},  // exact even where the key is not UTF-8
              {"initiated", upload.initiated_millis},
              {"meta", MetaJson(upload.meta)}};
}

Result<UploadInfo> ReadUpload(const BucketPaths& paths, const std::string& upload_id) {
  if (!ValidUploadId(upload_id)) return NoSuchUpload(upload_id);
  const std::string path = paths.uploads + "/" + upload_id + "/upload.json";
  auto text = ReadFile(path);
  if (!text.ok()) {
    if (text.status().IsNotFound()) return NoSuchUpload(upload_id);
    return AsS3(text.status());
  }
  Json json = Json::parse(*text, nullptr, /*allow_exceptions=*/false);
  UploadInfo upload;
  upload.upload_id = upload_id;
  if (!json.is_object() || !HexDecode(StringOr(json, "key_hex"), &upload.key) ||
      upload.key.empty()) {
    return Internal("damaged upload record " + path);
  }
  upload.initiated_millis = NumberOr<int64_t>(json, "initiated", 0);
  if (auto it = json.find("meta"); it != json.end() && it->is_object()) {
    upload.meta = MetaFromJson(*it);
  }
  return upload;
}

// A part as stored, with the stamp of the file its info describes.
struct StoredPart {
  PartInfo info;
  Stamp stamp;
};

// Part `number` of the upload folder `dir`: NotFound when it was not sent. A sidecar that does not
// match the file (a crash between the renames) is ignored and the MD5 recomputed.
Result<StoredPart> ReadPart(const std::string& dir, int32_t number) {
  const std::string path = dir + "/" + PartName(number);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return Status::NotFound("no part " + std::to_string(number));
    return IoError("cannot open", path, errno);
  }
  ScopedFd closer(fd);
  struct stat st;
  if (::fstat(fd, &st) != 0) return IoError("cannot stat", path, errno);
  StoredPart part{.info = PartInfo{.number = number,
                                   .etag = "",
                                   .size = static_cast<uint64_t>(st.st_size),
                                   .mtime_millis = MtimeMillis(st),
                                   .checksums = {}},
                  .stamp = StampOf(st)};
  if (auto json = ReadStamped(path + std::string(kMetaSuffix), part.stamp)) {
    part.info.etag = StringOr(*json, "etag");
    part.info.checksums = MapOr(*json, "checksums");
  }
  if (!IsMd5Hex(part.info.etag)) {
    ASSIGN_OR_RETURN(part.info.etag, Md5OfFd(fd, path));
    part.info.checksums.clear();
  }
  return part;
}

// The stored parts a CompleteMultipartUpload names, checked: ascending numbers
// (InvalidPartOrder), each sent with that ETag (InvalidPart), all but the last at least 5 MiB
// (EntityTooSmall).
Result<std::vector<StoredPart>> CheckParts(
    const std::string& dir, const std::vector<std::pair<int32_t, std::string>>& parts) {
  if (parts.empty()) return InvalidArgument("completing an upload takes at least one part");
  std::vector<StoredPart> stored;
  for (size_t i = 0; i < parts.size(); ++i) {
    const auto& [number, etag] = parts[i];
    if (i > 0 && number <= parts[i - 1].first) {
      return S3Error(Status::InvalidArgument(""), "InvalidPartOrder",
                     "the parts must be listed in ascending order of number, each once");
    }
    auto part = number < 1 || number > Buckets::kMaxParts
                    ? Result<StoredPart>(Status::NotFound("part number out of range"))
                    : ReadPart(dir, number);
    if (!part.ok()) {
      if (part.status().IsNotFound()) {
        return InvalidPart("part " + std::to_string(number) + " was not uploaded");
      }
      return part.status();
    }
    if (NormalEtag(etag) != part->info.etag) {
      return InvalidPart("part " + std::to_string(number) + " has the ETag \"" + part->info.etag +
                         "\", not " + etag);
    }
    stored.push_back(std::move(*part));
  }
  for (size_t i = 0; i + 1 < stored.size(); ++i) {
    if (stored[i].info.size < Buckets::kMinPartBytes) {
      return S3Error(Status::InvalidArgument(""), "EntityTooSmall",
                     "part " + std::to_string(stored[i].info.number) + " has " +
                         std::to_string(stored[i].info.size) +
                         " bytes; every part but the last needs at least 5 MiB");
    }
  }
  return stored;
}

// The part numbers present in an upload folder, ascending.
std::vector<int32_t> PartNumbers(const std::string& dir) {
  std::vector<int32_t> out;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return out;
  while (const struct dirent* e = ::readdir(d)) {
    const std::string_view name = e->d_name;
    if (name.size() != 5 ||
        !std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      continue;
    }
    out.push_back(std::stoi(std::string(name)));
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

// Removes .lote-tmp- files and folders anywhere under `root` (what a crash left).
Status RemoveDebris(const std::string& root) {
  std::vector<fs::path> debris;
  std::error_code ec;
  fs::recursive_directory_iterator it(root, fs::directory_options::skip_permission_denied, ec);
  if (ec) return Internal("cannot read " + root + ": " + ec.message());
  for (; it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) return Internal("cannot read " + root + ": " + ec.message());
    if (it->path().filename().string().rfind(kTmpPrefix, 0) == 0) {
      debris.push_back(it->path());
      it.disable_recursion_pending();
    }
  }
  for (const fs::path& path : debris) {
    fs::remove_all(path, ec);
    if (ec) return Internal("cannot remove " + path.string() + ": " + ec.message());
  }
  return Status::Ok();
}

}  // namespace

// ---------------------------------------------------------------------------

std::string S3ErrorCode(const Status& status) {
  if (status.ok()) return "";
  const std::string& m = status.message();
  size_t colon = m.find(": ");
  if (colon == 0 || colon == std::string::npos || !std::isupper(static_cast<unsigned char>(m[0])) ||
      !std::all_of(m.begin(), m.begin() + static_cast<std::ptrdiff_t>(colon),
                   [](char c) { return std::isalnum(static_cast<unsigned char>(c)); })) {
    return "InternalError";
  }
  return m.substr(0, colon);
}

Status S3Error(const Status& kind, std::string_view code, std::string_view message) {
  const StatusCode c = kind.ok() ? StatusCode::kInternal : kind.code();
  return Status(c, std::string(code) + ": " + std::string(message));
}

PendingFile::~PendingFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(path_.c_str());
}

Status PendingFile::Append(std::string_view bytes) {
  RETURN_IF_ERROR(AsS3(WriteAll(fd_, bytes, path_)));
  size_ += bytes.size();
  return Status::Ok();
}

Result<std::unique_ptr<Buckets>> Buckets::Open(std::string root) {
  if (root.empty()) return InvalidArgument("empty buckets root");
  std::error_code ec;
  fs::path abs = fs::absolute(root, ec);
  if (ec) return InvalidArgument("bad buckets root " + root + ": " + ec.message());
  std::string s = abs.lexically_normal().string();
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  if (fs::exists(s, ec) && !fs::is_directory(s, ec)) {
    return InvalidArgument("the buckets root " + s + " exists and is not a folder");
  }
  RETURN_IF_ERROR(AsS3(MakeDirs(s)));
  RETURN_IF_ERROR(RemoveDebris(s));
  return std::unique_ptr<Buckets>(new Buckets(s));
}

std::mutex& Buckets::LockOf(const std::string& bucket) const {
  std::lock_guard guard(locks_mu_);
  std::unique_ptr<std::mutex>& mu = locks_[bucket];
  if (!mu) mu = std::make_unique<std::mutex>();
  return *mu;
}

// --- Buckets

Status Buckets::CreateBucket(const std::string& bucket, int64_t now_millis) {
  RETURN_IF_ERROR(ValidateBucketName(bucket));
  const BucketPaths paths(root_, bucket);
  if (::mkdir(paths.dir.c_str(), 0755) != 0) {
    if (errno == EEXIST) {
      return S3Error(Status::AlreadyExists(""), "BucketAlreadyOwnedByYou",
                     "the bucket " + bucket + " exists");
    }
    return IoError("cannot create", paths.dir, errno);
  }
  RETURN_IF_ERROR(AsS3(MakeDir(paths.state)));
  RETURN_IF_ERROR(
      WriteFileDurably(paths.state + "/bucket.json", Dump(Json{{"created", now_millis}})));
  RETURN_IF_ERROR(AsS3(SyncPath(paths.dir)));
  return AsS3(SyncPath(root_));
}

Status Buckets::DeleteBucket(const std::string& bucket) {
  if (!UsableBucketName(bucket)) return NoSuchBucket(bucket);
  const BucketPaths paths(root_, bucket);
  std::lock_guard guard(LockOf(bucket));
  if (!IsDir(paths.dir)) return NoSuchBucket(bucket);
  auto not_empty = [&](std::string_view what) {
    return S3Error(Status::FailedPrecondition(""), "BucketNotEmpty",
                   "the bucket " + bucket + " holds " + std::string(what));
  };
  if (HoldsKey(paths.dir, "")) return not_empty("objects");
  if (DIR* d = ::opendir(paths.uploads.c_str())) {
    bool uploads = false;
    while (const struct dirent* e = ::readdir(d)) uploads = uploads || ValidUploadId(e->d_name);
    ::closedir(d);
    if (uploads) return not_empty("multipart uploads in progress");
  }
  return RemoveTree(paths.dir, root_);
}

Result<BucketInfo> Buckets::HeadBucket(const std::string& bucket) const {
  if (!UsableBucketName(bucket)) return NoSuchBucket(bucket);
  const BucketPaths paths(root_, bucket);
  struct stat st;
  if (::stat(paths.dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return NoSuchBucket(bucket);
  BucketInfo info{.name = bucket, .created_millis = MtimeMillis(st)};
  if (auto text = ReadFile(paths.state + "/bucket.json"); text.ok()) {
    Json json = Json::parse(*text, nullptr, /*allow_exceptions=*/false);
    if (json.is_object()) info.created_millis = NumberOr(json, "created", info.created_millis);
  }
  return info;
}

Result<std::vector<BucketInfo>> Buckets::ListBuckets() const {
  DIR* d = ::opendir(root_.c_str());
  if (d == nullptr) return IoError("cannot read", root_, errno);
  std::vector<std::string> names;
  while (const struct dirent* e = ::readdir(d)) {
    if (UsableBucketName(e->d_name)) names.emplace_back(e->d_name);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  std::vector<BucketInfo> out;
  for (const std::string& name : names) {
    auto info = HeadBucket(name);
    if (info.ok()) out.push_back(std::move(*info));  // not a folder, or gone meanwhile
  }
  return out;
}

// --- Objects

Result<std::unique_ptr<PendingFile>> Buckets::NewPendingFile(const std::string& bucket) {
  if (!UsableBucketName(bucket)) return NoSuchBucket(bucket);
  const BucketPaths paths(root_, bucket);
  const std::string path = paths.dir + "/" + TmpName();
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    if (errno == ENOENT || errno == ENOTDIR) return NoSuchBucket(bucket);
    return IoError("cannot create", path, errno);
  }
  return std::unique_ptr<PendingFile>(new PendingFile(fd, path));
}

Result<ObjectMeta> Buckets::PutObject(const std::string& bucket, const std::string& key,
                                      std::unique_ptr<PendingFile> file, ObjectMeta meta,
                                      bool if_none_match) {
  RETURN_IF_ERROR(ValidateKey(key));
  if (!UsableBucketName(bucket)) return NoSuchBucket(bucket);
  if (file == nullptr || file->fd_ < 0) return Internal("PutObject without a file");
  const BucketPaths paths(root_, bucket);
  if (::fsync(file->fd_) != 0) return IoError("cannot fsync", file->path_, errno);
  struct stat st;
  if (::fstat(file->fd_, &st) != 0) return IoError("cannot stat", file->path_, errno);
  meta.size = static_cast<uint64_t>(st.st_size);
  meta.mtime_millis = MtimeMillis(st);
  meta.etag = NormalEtag(meta.etag);
  if (meta.etag.empty()) {
    ASSIGN_OR_RETURN(meta.etag, Md5OfFd(file->fd_, file->path_));
  }

  // The sidecar, durable before the lock is taken (its inode stamp survives the rename).
  if (::mkdir(paths.state.c_str(), 0755) != 0 && errno != EEXIST) {
    if (errno == ENOENT) return NoSuchBucket(bucket);
    return IoError("cannot create", paths.state, errno);
  }
  ASSIGN_OR_RETURN(std::string meta_tmp,
                   WriteTempFile(paths.state, SidecarText(StampOf(st), MetaJson(meta)), true));
  ScopedUnlink meta_tmp_guard(meta_tmp);

  const std::string rel = DataRel(key), meta_rel = MetaRel(key);
  const std::string data_path = paths.dir + "/" + rel, meta_path = paths.meta + "/" + meta_rel;
  std::vector<std::string> to_sync;
  {
    std::lock_guard guard(LockOf(bucket));
    if (!IsDir(paths.dir)) return NoSuchBucket(bucket);
    if (if_none_match && IsRegularFile(data_path)) {
      return S3Error(Status::FailedPrecondition(""), "PreconditionFailed",
                     "the key " + key + " exists (If-None-Match: *)");
    }
    RETURN_IF_ERROR(MakeRoom(paths, key, &to_sync));
    if (::rename(meta_tmp.c_str(), meta_path.c_str()) != 0) {
      return IoError("cannot rename to", meta_path, errno);
    }
    meta_tmp_guard.Release();
    if (::rename(file->path_.c_str(), data_path.c_str()) != 0) {
      return IoError("cannot rename to", data_path, errno);
    }
    file->committed_ = true;
  }
  // The folders are synced outside the bucket's lock, so that concurrent
  // writers' syncs overlap; the call still returns only once they are durable.
  to_sync.push_back(Join(paths.dir, ParentRel(rel)));
  to_sync.push_back(Join(paths.meta, ParentRel(meta_rel)));
  std::sort(to_sync.begin(), to_sync.end());
  to_sync.erase(std::unique(to_sync.begin(), to_sync.end()), to_sync.end());
  for (const std::string& dir : to_sync) RETURN_IF_ERROR(AsS3(SyncPath(dir)));
  return meta;
}

Result<OpenObject> Buckets::GetObject(const std::string& bucket, const std::string& key) const {
  RETURN_IF_ERROR(ValidateKey(key));
  if (!UsableBucketName(bucket)) return NoSuchBucket(bucket);
  const BucketPaths paths(root_, bucket);
  auto file = OpenDataFile(paths, bucket, key);
  if (!file.ok()) {
    if (S3ErrorCode(file.status()) == "NoSuchKey" && !IsDir(paths.dir)) return NoSuchBucket(bucket);
    return file.status();
  }
  ASSIGN_OR_RETURN(ObjectMeta meta, ResolveMeta(paths, key, *file->fd, file->st, LockOf(bucket)));
  return OpenObject{.meta = std::move(meta), .fd = std::move(file->fd)};
}

Result<ObjectMeta> Buckets::HeadObject(const std::string& bucket, const std::string& key) const {
  ASSIGN_OR_RETURN(OpenObject object, GetObject(bucket, key));
  return std::move(object.meta);
}

Status Buckets::DeleteObject(const std::string& bucket, const std::string& key) {
  RETURN_IF_ERROR(ValidateKey(key));
  if (!UsableBucketName(bucket)) return NoSuchBucket(bucket);
  const BucketPaths paths(root_, bucket);
  const std::string rel = DataRel(key), meta_rel = MetaRel(key);
  const std::string data_path = paths.dir + "/" + rel, meta_path = paths.meta + "/" + meta_rel;
  std::lock_guard guard(LockOf(bucket));
  if (!IsDir(paths.dir)) return NoSuchBucket(bucket);
  struct stat st;
  if (::lstat(data_path.c_str(), &st) == 0 && !S_ISDIR(st.st_mode)) {
    if (::unlink(data_path.c_str()) != 0 && errno != ENOENT) {
      return IoError("cannot delete", data_path, errno);
    }
    RETURN_IF_ERROR(AsS3(SyncPath(PruneEmpty(paths.dir, ParentRel(rel)))));
  }
  if (::unlink(meta_path.c_str()) == 0) {
    RETURN_IF_ERROR(AsS3(SyncPath(PruneEmpty(paths.meta, ParentRel(meta_rel)))));
  } else if (errno != ENOENT && errno != ENOTDIR) {
    return IoError("cannot delete", meta_path, errno);
  }
  return Status::Ok();
}

Result<ObjectMeta> Buckets::CopyObject(const std::string& src_bucket, const std::string& src_key,
                                       const std::string& dst_bucket, const std::string& dst_key,
                                       const std::optional<ObjectMeta>& replace) {
  RETURN_IF_ERROR(ValidateKey(dst_key));
  ASSIGN_OR_RETURN(OpenObject src, GetObject(src_bucket, src_key));
  ASSIGN_OR_RETURN(std::unique_ptr<PendingFile> file, NewPendingFile(dst_bucket));
  RETURN_IF_ERROR(CopyRange(*src.fd, 0, src.meta.size, file->fd_, file->path_));
  file->size_ = src.meta.size;
  ObjectMeta meta = replace ? *replace : src.meta;
  if (replace && meta.checksums.empty()) meta.checksums = src.meta.checksums;
  meta.parts = 0;
  if (src.meta.parts > 0) {
    ASSIGN_OR_RETURN(meta.etag, Md5OfFd(*src.fd, src_bucket + "/" + src_key));
    if (!replace) meta.checksums.clear();  // a multipart object's checksums are of its parts
  } else {
    meta.etag = src.meta.etag;
  }
  return PutObject(dst_bucket, dst_key, std::move(file), std::move(meta));
}

Result<ListResult> Buckets::List(const std::string& bucket, const ListRequest& request) const {
  if (!UsableBucketName(bucket)) return NoSuchBucket(bucket);
  const BucketPaths paths(root_, bucket);
  if (!IsDir(paths.dir)) return NoSuchBucket(bucket);
  const size_t max_items = static_cast<size_t>(std::clamp(request.max_keys, 0, 1000));
  Lister lister(request, max_items);
  lister.Walk(paths.dir, "");
  ListResult result;
  result.truncated = max_items > 0 && lister.truncated();
  for (const Lister::Item& item : lister.items()) {
    result.last = item.name;
    if (item.is_prefix) {
      result.common_prefixes.push_back(item.name);
      continue;
    }
    auto file = OpenDataFile(paths, bucket, item.name);
    if (!file.ok()) {
      if (file.status().IsNotFound()) continue;  // deleted meanwhile
      return file.status();
    }
    ASSIGN_OR_RETURN(ObjectMeta meta,
                     ResolveMeta(paths, item.name, *file->fd, file->st, LockOf(bucket)));
    result.objects.push_back(ListedObject{.key = item.name, .meta = std::move(meta)});
  }
  return result;
}

// --- Multipart uploads

Result<std::string> Buckets::CreateUpload(const std::string& bucket, const std::string& key,
                                          ObjectMeta meta, int64_t now_millis) {
  RETURN_IF_ERROR(ValidateKey(key));
  if (!UsableBucketName(bucket)) return NoSuchBucket(bucket);
  const BucketPaths paths(root_, bucket);
  std::lock_guard guard(LockOf(bucket));
  if (!IsDir(paths.dir)) return NoSuchBucket(bucket);
  RETURN_IF_ERROR(AsS3(MakeDir(paths.state)));
  RETURN_IF_ERROR(AsS3(MakeDir(paths.uploads)));
  meta.etag.clear();
  meta.parts = 0;
  const UploadInfo upload{.upload_id = HexEncode(RandomBytes(kUploadIdBytes)),
                          .key = key,
                          .initiated_millis = now_millis,
                          .meta = std::move(meta)};
  const std::string dir = paths.uploads + "/" + upload.upload_id;
  if (::mkdir(dir.c_str(), 0755) != 0) return IoError("cannot create", dir, errno);
  Status written = WriteFileDurably(dir + "/upload.json", Dump(UploadJson(upload)));
  if (written.ok()) written = AsS3(SyncPath(paths.uploads));
  // The folders made on the way (.lote-s3, uploads) into their parents.
  if (written.ok()) written = AsS3(SyncPath(paths.state));
  if (written.ok()) written = AsS3(SyncPath(paths.dir));
  if (!written.ok()) {
    std::error_code ec;
    fs::remove_all(dir, ec);
    return written;
  }
  return upload.upload_id;
}

Result<PartInfo> Buckets::PutPart(const std::string& bucket, const std::string& upload_id,
                                  std::unique_ptr<PendingFile> file, PartInfo part) {
  if (part.number < 1 || part.number > kMaxParts) {
    return InvalidArgument("a part number is 1 to 10000, not " + std::to_string(part.number));
  }
  if (!UsableBucketName(bucket)) return NoSuchBucket(bucket);
  if (file == nullptr || file->fd_ < 0) return Internal("PutPart without a file");
  const BucketPaths paths(root_, bucket);
  RETURN_IF_ERROR(ReadUpload(paths, upload_id));
  const std::string dir = paths.uploads + "/" + upload_id;
  if (::fsync(file->fd_) != 0) return IoError("cannot fsync", file->path_, errno);
  struct stat st;
  if (::fstat(file->fd_, &st) != 0) return IoError("cannot stat", file->path_, errno);
  part.size = static_cast<uint64_t>(st.st_size);
  part.mtime_millis = MtimeMillis(st);
  part.etag = NormalEtag(part.etag);
  if (part.etag.empty()) {
    ASSIGN_OR_RETURN(part.etag, Md5OfFd(file->fd_, file->path_));
  }
  if (!IsMd5Hex(part.etag)) return InvalidArgument("a part's ETag is its MD5 in hex");
  const Json fields{{"number", part.number}, {"etag", part.etag}, {"checksums", part.checksums}};
  ASSIGN_OR_RETURN(std::string meta_tmp,
                   WriteTempFile(dir, SidecarText(StampOf(st), fields), true));
  ScopedUnlink meta_tmp_guard(meta_tmp);
  const std::string path = dir + "/" + PartName(part.number);
  std::lock_guard guard(LockOf(bucket));
  if (!FileExists(dir + "/upload.json")) return NoSuchUpload(upload_id);
  const std::string meta_path = path + std::string(kMetaSuffix);
  if (::rename(meta_tmp.c_str(), meta_path.c_str()) != 0) {
    return IoError("cannot rename to", meta_path, errno);
  }
  meta_tmp_guard.Release();
  if (::rename(file->path_.c_str(), path.c_str()) != 0) {
    return IoError("cannot rename to", path, errno);
  }
  file->committed_ = true;
  RETURN_IF_ERROR(AsS3(SyncPath(dir)));
  return part;
}

Result<UploadInfo> Buckets::GetUpload(const std::string& bucket,
                                      const std::string& upload_id) const {
  if (!UsableBucketName(bucket)) return NoSuchBucket(bucket);
  const BucketPaths paths(root_, bucket);
  if (!IsDir(paths.dir)) return NoSuchBucket(bucket);
  return ReadUpload(paths, upload_id);
}

Result<std::vector<PartInfo>> Buckets::ListParts(const std::string& bucket,
                                                 const std::string& upload_id) const {
  RETURN_IF_ERROR(GetUpload(bucket, upload_id));
  const std::string dir = BucketPaths(root_, bucket).uploads + "/" + upload_id;
  std::vector<PartInfo> out;
  for (int32_t number : PartNumbers(dir)) {
    auto part = ReadPart(dir, number);
    if (!part.ok()) {
      if (part.status().IsNotFound()) continue;  // replaced or aborted meanwhile
      return part.status();
    }
    out.push_back(std::move(part->info));
  }
  return out;
}

Result<ObjectMeta> Buckets::CompleteUpload(
    const std::string& bucket, const std::string& upload_id,
    const std::vector<std::pair<int32_t, std::string>>& parts) {
  ASSIGN_OR_RETURN(UploadInfo upload, GetUpload(bucket, upload_id));
  const BucketPaths paths(root_, bucket);
  const std::string dir = paths.uploads + "/" + upload_id;
  ASSIGN_OR_RETURN(std::vector<StoredPart> stored, CheckParts(dir, parts));
  Md5 etag_md5;
  for (const StoredPart& part : stored) {
    std::string raw;
    if (!HexDecode(part.info.etag, &raw)) return Internal("damaged part ETag in " + dir);
    etag_md5.Update(raw);
  }
  ASSIGN_OR_RETURN(std::unique_ptr<PendingFile> file, NewPendingFile(bucket));
  for (const StoredPart& part : stored) {
    const std::string path = dir + "/" + PartName(part.info.number);
    ScopedFd in(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    struct stat st;
    if (in.get() < 0 || ::fstat(in.get(), &st) != 0 || StampOf(st) != part.stamp) {
      return InvalidPart("part " + std::to_string(part.info.number) +
                         " changed or vanished while the upload was completed");
    }
    RETURN_IF_ERROR(CopyRange(in.get(), 0, part.info.size, file->fd_, file->path_));
    file->size_ += part.info.size;
  }
  ObjectMeta meta = upload.meta;
  meta.etag = HexEncode(etag_md5.FinishRaw()) + "-" + std::to_string(stored.size());
  meta.parts = static_cast<int32_t>(stored.size());
  ASSIGN_OR_RETURN(ObjectMeta done, PutObject(bucket, upload.key, std::move(file), meta));
  std::lock_guard guard(LockOf(bucket));
  if (IsDir(dir)) RETURN_IF_ERROR(RemoveTree(dir, paths.uploads));
  return done;
}

Status Buckets::AbortUpload(const std::string& bucket, const std::string& upload_id) {
  RETURN_IF_ERROR(GetUpload(bucket, upload_id));
  const BucketPaths paths(root_, bucket);
  const std::string dir = paths.uploads + "/" + upload_id;
  std::lock_guard guard(LockOf(bucket));
  if (!IsDir(dir)) return NoSuchUpload(upload_id);
  return RemoveTree(dir, paths.uploads);
}

Result<std::vector<UploadInfo>> Buckets::ListUploads(const std::string& bucket,
                                                     const std::string& prefix) const {
  if (!UsableBucketName(bucket)) return NoSuchBucket(bucket);
  const BucketPaths paths(root_, bucket);
  if (!IsDir(paths.dir)) return NoSuchBucket(bucket);
  std::vector<UploadInfo> out;
  DIR* d = ::opendir(paths.uploads.c_str());
  if (d == nullptr) return out;
  std::vector<std::string> ids;
  while (const struct dirent* e = ::readdir(d)) {
    if (ValidUploadId(e->d_name)) ids.emplace_back(e->d_name);
  }
  ::closedir(d);
  for (const std::string& id : ids) {
    auto upload = ReadUpload(paths, id);
    if (upload.ok() && upload->key.starts_with(prefix)) out.push_back(std::move(*upload));
  }
  std::sort(out.begin(), out.end(), [](const UploadInfo& a, const UploadInfo& b) {
    return std::tie(a.key, a.initiated_millis, a.upload_id) <
           std::tie(b.key, b.initiated_millis, b.upload_id);
  });
  return out;
}

}  // namespace lote::objstore
