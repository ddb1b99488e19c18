#include "common/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace lote {
namespace {
Status Errno(std::string_view what, const std::string& path) {
  return Status::Internal(std::string(what) + " " + path + ": " + std::strerror(errno));
}

}  // namespace

Status WriteAll(int fd, std::string_view data, const std::string& path) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Errno("cannot write", path);
    }
    done += static_cast<size_t>(n);
  }
  return Status::Ok();
}

Result<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (errno == ENOENT) return Status::NotFound("no such file: " + path);
    return Errno("cannot open", path);
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Status SyncPath(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Errno("cannot open", path);
  int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) return Errno("cannot fsync", path);
  return Status::Ok();
}

Status WriteFileAtomic(const std::string& path, std::string_view data, int mode) {
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return Errno("cannot create", tmp);
  if (Status wrote = WriteAll(fd, data, tmp); !wrote.ok()) {
    ::close(fd);
    return wrote;
  }
  if (::fchmod(fd, static_cast<mode_t>(mode)) != 0 || ::fsync(fd) != 0) {
    ::close(fd);
    return Errno("cannot sync", tmp);
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) return Errno("cannot rename to", path);
  std::string dir = std::filesystem::path(path).parent_path().string();
  return SyncPath(dir.empty() ? "." : dir);
}

Status WriteNewFile(const std::string& path, std::string_view data, int mode) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0) {
    if (errno == EEXIST) return Status::AlreadyExists(path + " exists");
    return Errno("cannot create", path);
  }
  Status wrote = WriteAll(fd, data, path);
  ::close(fd);
  return wrote;
}

Status MakeDir(const std::string& path, int mode) {
  if (::mkdir(path.c_str(), static_cast<mode_t>(mode)) == 0 || errno == EEXIST) return Status::Ok();
  return Errno("cannot create", path);
}

Status MakeDirs(const std::string& path, int mode) {
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec) return Status::Internal("cannot create directory " + path + ": " + ec.message());
  return Status::Ok();
}

bool FileExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

std::string CanonicalPath(const std::string& path) {
  namespace fs = std::filesystem;
  const fs::path normal = fs::path(path).lexically_normal();
  fs::path existing = normal;
  fs::path rest;
  while (true) {
    char resolved[PATH_MAX];
    if (::realpath(existing.c_str(), resolved) != nullptr) {
      fs::path out = fs::path(resolved) / rest;
      std::string s = out.lexically_normal().string();
      while (s.size() > 1 && s.back() == '/') s.pop_back();
      return s;
    }
    if (!existing.has_relative_path()) return normal.string();
    rest = existing.filename() / rest;
    existing = existing.parent_path();
  }
}

std::string HomeDir() {
  const char* home = std::getenv("HOME");
  return home && *home ? home : "/root";
}

DirGuard::~DirGuard() {
  if (path_.empty()) return;
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string ShellQuote(std::string_view s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

}  // namespace lote
