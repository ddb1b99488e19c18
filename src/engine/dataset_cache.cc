#include "engine/dataset_cache.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <vector>

#include "common/crypto.h"
#include "common/files.h"
#include "common/json.h"
#include "data/indexed_dataset.h"
#include "data/prepare.h"
#include "engine/indexed_dataset.h"

namespace lote::engine {
namespace {

namespace fs = std::filesystem;

// The files of a dataset, in download order (the small index first).
const char* const kDataFiles[] = {"data.idx", "data.bin"};

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

// An exclusive flock(2) on a lock file, released when destroyed. flock locks
// belong to the open file description, so two callers in one process exclude
// each other as two processes do.
class FileLock {
 public:
  static Result<std::unique_ptr<FileLock>> Acquire(const std::string& path,
                                                   const std::function<void()>& on_wait,
                                                   const std::function<void(std::string_view)>& log,
                                                   const std::string& what) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
      return Status::Internal(
          fmt::format("cannot open lock file {}: {}", path, std::strerror(errno)));
    }
    std::unique_ptr<FileLock> lock(new FileLock(fd));
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) return lock;
    if (errno != EWOULDBLOCK) {
      return Status::Internal(fmt::format("cannot lock {}: {}", path, std::strerror(errno)));
    }
    log(fmt::format("waiting for another process to finish with the cached copy of {} (lock {})",
                    what, path));
    if (on_wait) on_wait();
    while (::flock(fd, LOCK_EX) != 0) {
      if (errno != EINTR) {
        return Status::Internal(fmt::format("cannot lock {}: {}", path, std::strerror(errno)));
      }
    }
    return lock;
  }
  ~FileLock() {
    ::flock(fd_, LOCK_UN);
    ::close(fd_);
  }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  explicit FileLock(int fd) : fd_(fd) {}
  int fd_;
};

// A folder name made of the dataset's last prefix segment: [A-Za-z0-9._-], at
// most 48 characters, never starting with '.'.
std::string ReadableName(const objstore::Uri& uri) {
  std::string_view key = uri.key;
  while (!key.empty() && key.back() == '/') key.remove_suffix(1);
  const size_t slash = key.rfind('/');
  std::string_view last = slash == std::string_view::npos ? key : key.substr(slash + 1);
  if (last.empty()) last = uri.bucket;
  std::string out;
  for (char c : last) {
    const bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '.' || c == '_' || c == '-';
    out += keep ? c : '_';
    if (out.size() == 48) break;
  }
  while (!out.empty() && out.front() == '.') out.erase(0, 1);
  return out.empty() ? "dataset" : out;
}

Result<uint64_t> LocalSize(const std::string& path) {
  std::error_code ec;
  const uint64_t size = fs::file_size(path, ec);
  if (ec) return Status::NotFound(fmt::format("{}: {}", path, ec.message()));
  return size;
}

// The sizes (and digests) of the manifest's "files", checked against a folder.
// Only sizes: cheap enough for every start.
Status CheckSizes(const std::string& dir, const data::DatasetManifest& m) {
  for (const char* name : kDataFiles) {
    const data::FileDigest* d = m.file(name);
    if (!d) continue;
    const std::string path = dir + "/" + name;
    ASSIGN_OR_RETURN(uint64_t size, LocalSize(path));
    if (size != d->bytes) {
      return Status::DataLoss(
          fmt::format("{} has {} bytes but manifest.json says {}", path, size, d->bytes));
    }
  }
  return Status::Ok();
}

Result<FetchedDataset> UseLocal(const std::string& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) {
    return Status::NotFound(
        fmt::format("dataset folder {} does not exist; make one with `lote data prepare`", path));
  }
  // Today's checks: manifest keys, the index against data.bin and the manifest.
  ASSIGN_OR_RETURN(auto ds, IndexedDataset::Open(path));
  // Manifests lote wrote also list the files' sizes: a truncated copy fails here.
  if (auto m = data::DatasetManifest::FromJson(ds->manifest()); m.ok()) {
    RETURN_IF_ERROR(CheckSizes(path, *m));
  }
  return FetchedDataset{.dir = path, .cached = false, .downloaded = false};
}

class Fetcher {
 public:
  Fetcher(const FetchOptions& options, objstore::ObjectStore* store, std::string root)
      : options_(options), store_(store), root_(std::move(root)) {
    log_ = options.log ? options.log : [](std::string_view line) {
      std::fprintf(stderr, "%.*s\n", static_cast<int>(line.size()), line.data());
    };
  }

  Result<FetchedDataset> Run(const objstore::Uri& uri, const std::string& cache_root) {
    // The manifest names the entry; every caller reads it (it is small).
    auto text = store_->GetBytes(data::kManifestName);
    if (!text.ok()) {
      if (text.status().code() == StatusCode::kNotFound) {
        return Status::NotFound(fmt::format(
            "{} has no manifest.json: not a lote dataset, or its upload has not finished "
            "(`lote data prepare` uploads manifest.json last)",
            root_));
      }
      return text.status().WithContext("reading " + Name(data::kManifestName));
    }
    manifest_text_ = std::move(*text);
    auto json = ParseJson(manifest_text_);
    if (!json.ok())
      return Status::DataLoss(Name(data::kManifestName) + ": " + json.status().message());
    auto manifest = data::DatasetManifest::FromJson(*json);
    if (!manifest.ok())
      return Status::DataLoss(Name(data::kManifestName) + ": " + manifest.status().message());
    manifest_ = std::move(*manifest);

    const std::string key = Sha256Hex(root_ + "\n" + manifest_text_).substr(0, 24);
    const std::string entry_name = ReadableName(uri) + "-" + key;
    const std::string entry = cache_root + "/" + entry_name;
    RETURN_IF_ERROR(MakeDirs(cache_root));
    ASSIGN_OR_RETURN(auto lock, FileLock::Acquire(cache_root + "/" + entry_name + ".lock",
                                                  options_.on_wait, log_, root_));
    RemoveLeftovers(cache_root, entry_name);
    RETURN_IF_ERROR(ExpectedSizes());

    std::error_code ec;
    if (fs::exists(entry, ec)) {
      Status reusable = CheckEntry(entry);
      if (reusable.ok()) return FetchedDataset{.dir = entry, .cached = true, .downloaded = false};
      log_(fmt::format("warning: the cached copy of {} is damaged ({}); downloading it again",
                       root_, reusable.message()));
      const std::string trash =
          cache_root + "/." + entry_name + ".trash-" + HexEncode(RandomBytes(4));
      if (::rename(entry.c_str(), trash.c_str()) != 0) {
        return Status::Internal(fmt::format("cannot move the damaged cache entry {} away: {}",
                                            entry, std::strerror(errno)));
      }
      fs::remove_all(trash, ec);
    }

    const std::string tmp = cache_root + "/." + entry_name + ".tmp-" + HexEncode(RandomBytes(4));
    RETURN_IF_ERROR(MakeDirs(tmp));
    DirGuard guard(tmp);
    RETURN_IF_ERROR(Download(tmp));
    RETURN_IF_ERROR(WriteFileAtomic(tmp + "/" + data::kManifestName, manifest_text_));
    if (auto ds = IndexedDataset::Open(tmp); !ds.ok()) {
      return ds.status().WithContext("the dataset downloaded from " + root_ + " is not usable");
    }
    if (::rename(tmp.c_str(), entry.c_str()) != 0) {
      return Status::Internal(
          fmt::format("cannot move {} to {}: {}", tmp, entry, std::strerror(errno)));
    }
    guard.Release();
    RETURN_IF_ERROR(SyncPath(cache_root));
    return FetchedDataset{.dir = entry, .cached = true, .downloaded = true};
  }

 private:
  std::string Name(std::string_view key) const { return objstore::JoinKey(root_, key); }

  // Temporary and damaged folders of this entry left by a caller that died
  // (this caller holds the entry's lock, so none is in use).
  static void RemoveLeftovers(const std::string& cache_root, const std::string& entry_name) {
    std::error_code ec;
    const std::string tmp = "." + entry_name + ".tmp-", trash = "." + entry_name + ".trash-";
    std::vector<fs::path> stale;
    for (const auto& e : fs::directory_iterator(cache_root, ec)) {
      const std::string n = e.path().filename().string();
      if (n.starts_with(tmp) || n.starts_with(trash)) stale.push_back(e.path());
    }
    for (const auto& p : stale) fs::remove_all(p, ec);
  }

  // What each file must weigh: the manifest's "files", else (older manifests)
  // the store's Head.
  Status ExpectedSizes() {
    for (const char* name : kDataFiles) {
      if (const data::FileDigest* d = manifest_.file(name)) {
        expected_.push_back(d->bytes);
        continue;
      }
      auto info = store_->Head(name);
      if (!info.ok()) return MissingObject(name, info.status());
      expected_.push_back(info->size);
    }
    return Status::Ok();
  }

  Status MissingObject(const char* name, const Status& s) const {
    if (s.code() == StatusCode::kNotFound) {
      return Status::NotFound(fmt::format(
          "{} is missing although {} is there: the dataset is incomplete; write it again with "
          "`lote data prepare`",
          Name(name), Name(data::kManifestName)));
    }
    return s.WithContext("reading " + Name(name));
  }

  // A complete entry is reused when its manifest is the store's and its files
  // have the expected sizes.
  Status CheckEntry(const std::string& entry) const {
    auto local = ReadFile(entry + "/" + data::kManifestName);
    if (!local.ok()) return local.status();
    if (*local != manifest_text_) return Status::DataLoss("its manifest.json differs");
    for (size_t i = 0; i < std::size(kDataFiles); ++i) {
      const std::string path = entry + "/" + kDataFiles[i];
      ASSIGN_OR_RETURN(uint64_t size, LocalSize(path));
      if (size != expected_[i]) {
        return Status::DataLoss(
            fmt::format("{} has {} bytes, expected {}", path, size, expected_[i]));
      }
    }
    return Status::Ok();
  }

  Status Download(const std::string& tmp) {
    uint64_t total = 0, base = 0;
    for (uint64_t s : expected_) total += s;
    bool warned = false;
    for (size_t i = 0; i < std::size(kDataFiles); ++i) {
      const char* name = kDataFiles[i];
      const std::string path = tmp + "/" + name;
      objstore::ProgressFn progress;
      if (options_.progress) {
        progress = [&](uint64_t done, uint64_t) { options_.progress(base + done, total); };
      }
      if (Status s = store_->GetFile(name, path, progress); !s.ok()) return MissingObject(name, s);
      ASSIGN_OR_RETURN(uint64_t size, LocalSize(path));
      if (size != expected_[i]) {
        return Status::DataLoss(
            fmt::format("{}: downloaded {} bytes but {} says {}", Name(name), size,
                        manifest_.file(name) ? "manifest.json" : "the store", expected_[i]));
      }
      if (const data::FileDigest* d = manifest_.file(name)) {
        ASSIGN_OR_RETURN(auto hash, data::HashFile(path));
        if (hash.first != d->sha256) {
          return Status::DataLoss(
              fmt::format("{}: sha256 mismatch: manifest.json says {}, the downloaded file has {}",
                          Name(name), d->sha256, hash.first));
        }
      } else if (!warned) {
        warned = true;
        log_(fmt::format(
            "warning: {} lists no checksums (written by an older `lote data prepare`); data.idx "
            "and data.bin are checked by size only. Prepare the dataset again to get sha256 checks",
            Name(data::kManifestName)));
      }
      RETURN_IF_ERROR(SyncPath(path));
      base += size;
      if (options_.progress) options_.progress(base, total);
    }
    return Status::Ok();
  }

  const FetchOptions& options_;
  objstore::ObjectStore* store_;
  std::string root_;
  std::function<void(std::string_view)> log_;
  std::string manifest_text_;
  data::DatasetManifest manifest_;
  std::vector<uint64_t> expected_;  // sizes, in kDataFiles order
};

}  // namespace

std::string DefaultDatasetCacheRoot() {
  if (std::string dir = Env("LOTE_CACHE_DIR"); !dir.empty()) return dir;
  if (std::string xdg = Env("XDG_CACHE_HOME"); !xdg.empty()) return xdg + "/lote/datasets";
  return HomeDir() + "/.cache/lote/datasets";
}

Result<FetchedDataset> FetchDataset(const std::string& uri_or_path, const FetchOptions& options) {
  if (uri_or_path.empty()) return Status::InvalidArgument("no dataset given (a folder or a URI)");
  ASSIGN_OR_RETURN(objstore::Uri uri, objstore::ParseUri(uri_or_path));
  if (uri.scheme == "file") return UseLocal(uri.key);

  auto opened =
      options.open_store ? options.open_store(uri_or_path) : objstore::OpenObjectStore(uri_or_path);
  if (!opened.ok()) return opened.status().WithContext("opening " + uri_or_path);
  std::unique_ptr<objstore::ObjectStore> store = std::move(*opened);
  std::string cache_root =
      options.cache_root.empty() ? DefaultDatasetCacheRoot() : options.cache_root;
  std::error_code ec;
  cache_root = fs::absolute(cache_root, ec).lexically_normal().string();
  while (cache_root.size() > 1 && cache_root.back() == '/') cache_root.pop_back();
  Fetcher fetcher(options, store.get(), store->RootUri());
  return fetcher.Run(uri, cache_root);
}

}  // namespace lote::engine
