// Small file helpers with Status errors. Writes are atomic and durable:
// write to a temporary file in the same folder, fsync, rename, fsync the folder.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace lote {

Result<std::string> ReadFile(const std::string& path);
// Atomically replaces `path` with `data`; the file has `mode` permissions.
Status WriteFileAtomic(const std::string& path, std::string_view data, int mode = 0644);
// Creates `path` (it must not exist: AlreadyExists when it does) holding `data`,
// with `mode` permissions; not synced (for a file in a folder that is itself made
// or listed only afterwards).
Status WriteNewFile(const std::string& path, std::string_view data, int mode = 0644);
// Writes all of `data` to `fd`, retrying short writes and EINTR (`path`
// names it in the error).
Status WriteAll(int fd, std::string_view data, const std::string& path);
// mkdir -p
Status MakeDirs(const std::string& path, int mode = 0755);
// mkdir of one folder whose parent exists; an existing folder is fine.
Status MakeDir(const std::string& path, int mode = 0755);
bool FileExists(const std::string& path);
// An absolute `path` as the host resolves it: the symbolic links and ".." of
// its longest existing prefix resolved (realpath), the rest appended lexically
// normal; a path nothing of which exists, lexically normal.
std::string CanonicalPath(const std::string& path);
// fsync a file or directory by path.
Status SyncPath(const std::string& path);
// "$HOME" or "/root".
std::string HomeDir();

// Removes a folder and everything in it when destroyed, unless Release()d (staging
// folders that must not outlive a failed step). An empty path is nothing to remove.
class DirGuard {
 public:
  explicit DirGuard(std::string path = "") : path_(std::move(path)) {}
  ~DirGuard();
  DirGuard(const DirGuard&) = delete;
  DirGuard& operator=(const DirGuard&) = delete;
  void Reset(std::string path) { path_ = std::move(path); }
  void Release() { path_.clear(); }

 private:
  std::string path_;
};

// `s` in single quotes for sh/bash ('it'\''s'), safe in any command line.
std::string ShellQuote(std::string_view s);

}  // namespace lote
