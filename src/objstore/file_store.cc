#include "objstore/file_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "common/crypto.h"
#include "common/files.h"

namespace lote::objstore {
namespace {

namespace fs = std::filesystem;

Status ErrnoStatus(std::string_view what, const std::string& path, int err) {
  std::string msg = std::string(what) + " " + path + ": " + std::strerror(err);
  if (err == ENOENT) return Status::NotFound(msg);
  if (err == EACCES || err == EPERM) return Status::PermissionDenied(msg);
  if (err == ENOSPC || err == EDQUOT) return Status::ResourceExhausted(msg);
  return Status::Internal(msg);
}

constexpr std::string_view kTmpPrefix = ".lote-tmp-";

std::string TempPathBeside(const std::string& path) {
  fs::path p(path);
  return (p.parent_path() / (std::string(kTmpPrefix) + HexEncode(RandomBytes(8)))).string();
}

Status WriteAll(int fd, const char* data, size_t n, const std::string& path) {
  size_t done = 0;
  while (done < n) {
    ssize_t w = ::write(fd, data + done, n - done);
    if (w < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("cannot write", path, errno);
    }
    done += static_cast<size_t>(w);
  }
  return Status::Ok();
}

// Writes what `fill` produces into a temporary file beside dst, then renames it.
template <typename Fill>
Status WriteAtomically(const std::string& dst, Fill fill) {
  std::string dir = fs::path(dst).parent_path().string();
  if (!dir.empty()) RETURN_IF_ERROR(MakeDirs(dir));
  std::string tmp = TempPathBeside(dst);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoStatus("cannot create", tmp, errno);
  Status st = fill(fd, tmp);
  if (st.ok() && ::fsync(fd) != 0) st = ErrnoStatus("cannot fsync", tmp, errno);
  ::close(fd);
  if (st.ok() && ::rename(tmp.c_str(), dst.c_str()) != 0)
    st = ErrnoStatus("cannot rename to", dst, errno);
  if (!st.ok()) {
    ::unlink(tmp.c_str());
    return st;
  }
  return SyncPath(dir.empty() ? "." : dir);
}

}  // namespace

Status CopyFileAtomic(const std::string& src, const std::string& dst, const ProgressFn& progress) {
  int in = ::open(src.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0) return ErrnoStatus("cannot open", src, errno);
  struct stat st;
  if (::fstat(in, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(in);
    return Status::InvalidArgument("not a regular file: " + src);
  }
  const uint64_t total = static_cast<uint64_t>(st.st_size);
  Status result = WriteAtomically(dst, [&](int out, const std::string& tmp) -> Status {
    std::vector<char> buf(1 << 20);
    uint64_t done = 0;
    for (;;) {
      ssize_t n = ::read(in, buf.data(), buf.size());
      if (n < 0) {
        if (errno == EINTR) continue;
        return ErrnoStatus("cannot read", src, errno);
      }
      if (n == 0) break;
      RETURN_IF_ERROR(WriteAll(out, buf.data(), static_cast<size_t>(n), tmp));
      done += static_cast<uint64_t>(n);
      if (progress) progress(done, total);
    }
    if (done != total) return Status::DataLoss(src + " changed size while it was copied");
    return Status::Ok();
  });
  ::close(in);
  return result;
}

Result<std::unique_ptr<FileStore>> FileStore::Open(const std::string& root) {
  if (root.empty()) return Status::InvalidArgument("empty local store path");
  std::error_code ec;
  fs::path abs = fs::absolute(root, ec);
  if (ec) return Status::InvalidArgument("bad local path " + root + ": " + ec.message());
  std::string s = abs.lexically_normal().string();
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  if (fs::exists(s, ec) && !fs::is_directory(s, ec)) {
    return Status::InvalidArgument("store root " + s + " exists and is not a directory");
  }
  RETURN_IF_ERROR(MakeDirs(s));
  return std::unique_ptr<FileStore>(new FileStore(s));
}

Status FileStore::PutBytes(const std::string& key, std::string_view data) {
  RETURN_IF_ERROR(ValidateKey(key));
  return WriteAtomically(PathOf(key), [&](int fd, const std::string& tmp) {
    return WriteAll(fd, data.data(), data.size(), tmp);
  });
}

Status FileStore::PutFile(const std::string& key, const std::string& local_path,
                          const ProgressFn& progress) {
  RETURN_IF_ERROR(ValidateKey(key));
  return CopyFileAtomic(local_path, PathOf(key), progress);
}

Result<std::string> FileStore::GetBytes(const std::string& key) {
  RETURN_IF_ERROR(ValidateKey(key));
  std::string path = PathOf(key);
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return Status::NotFound("no object " + key + " in " + RootUri());
  }
  return ReadFile(path);
}

Result<std::string> FileStore::GetRange(const std::string& key, uint64_t offset, uint64_t length) {
  RETURN_IF_ERROR(ValidateKey(key));
  const std::string path = PathOf(key);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || ::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    if (fd >= 0) ::close(fd);
    return Status::NotFound("no object " + key + " in " + RootUri());
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  const uint64_t n = offset >= size ? 0 : std::min(length, size - offset);
  std::string out(static_cast<size_t>(n), '\0');
  size_t done = 0;
  while (done < out.size()) {
    ssize_t r =
        ::pread(fd, out.data() + done, out.size() - done, static_cast<off_t>(offset + done));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      ::close(fd);
      return Status::DataLoss("cannot read " + path + " (did it shrink?)");
    }
    done += static_cast<size_t>(r);
  }
  ::close(fd);
  return out;
}

Status FileStore::GetFile(const std::string& key, const std::string& local_path,
                          const ProgressFn& progress) {
  RETURN_IF_ERROR(ValidateKey(key));
  std::string path = PathOf(key);
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return Status::NotFound("no object " + key + " in " + RootUri());
  }
  return CopyFileAtomic(path, local_path, progress);
}

Result<ObjectInfo> FileStore::Head(const std::string& key) {
  RETURN_IF_ERROR(ValidateKey(key));
  struct stat st;
  std::string path = PathOf(key);
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return Status::NotFound("no object " + key + " in " + RootUri());
  }
  ObjectInfo info;
  info.key = key;
  info.size = static_cast<uint64_t>(st.st_size);
  info.mtime_millis = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000 + st.st_mtim.tv_nsec / 1000000;
  return info;
}

Result<std::vector<ObjectInfo>> FileStore::List(const std::string& prefix) {
  std::vector<ObjectInfo> out;
  std::error_code ec;
  fs::recursive_directory_iterator it(root_, ec), end;
  if (ec) return Status::Internal("cannot list " + root_ + ": " + ec.message());
  for (; it != end; it.increment(ec)) {
    if (ec) return Status::Internal("cannot list " + root_ + ": " + ec.message());
    if (!it->is_regular_file(ec)) continue;
    std::string name = it->path().filename().string();
    if (name.rfind(kTmpPrefix, 0) == 0) continue;
    std::string key = it->path().string().substr(root_.size() + 1);
    if (key.rfind(prefix, 0) != 0) continue;
    ASSIGN_OR_RETURN(ObjectInfo info, Head(key));
    out.push_back(std::move(info));
  }
  std::sort(out.begin(), out.end(),
            [](const ObjectInfo& a, const ObjectInfo& b) { return a.key < b.key; });
  return out;
}

Status FileStore::Delete(const std::string& key) {
  RETURN_IF_ERROR(ValidateKey(key));
  std::string path = PathOf(key);
  if (::unlink(path.c_str()) != 0 && errno != ENOENT)
    return ErrnoStatus("cannot delete", path, errno);
  return Status::Ok();
}

}  // namespace lote::objstore
