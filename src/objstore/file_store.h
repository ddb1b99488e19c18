// FileStore: an ObjectStore over a local directory (file:// URIs).
//
// Keys map to paths under the root; Put writes "<dir>/.lote-tmp-<random>",
// fsyncs it and renames it over the target, so readers see the old object or
// the new one, never a partial one. Temporary files are hidden from List.
// Thread safety: safe for concurrent use (no shared mutable state).
#pragma once

#include <string>

#include "objstore/objstore.h"

namespace lote::objstore {

class FileStore final : public ObjectStore {
 public:
  // `root` is a local directory path; it is created when missing.
  static Result<std::unique_ptr<FileStore>> Open(const std::string& root);

  std::string RootUri() const override { return "file://" + root_; }
  Status PutBytes(const std::string& key, std::string_view data) override;
  Status PutFile(const std::string& key, const std::string& local_path,
                 const ProgressFn& progress = nullptr) override;
  Result<std::string> GetBytes(const std::string& key) override;
  Status GetFile(const std::string& key, const std::string& local_path,
                 const ProgressFn& progress = nullptr) override;
  Result<std::string> GetRange(const std::string& key, uint64_t offset, uint64_t length) override;
  Result<ObjectInfo> Head(const std::string& key) override;
  Result<std::vector<ObjectInfo>> List(const std::string& prefix) override;
  Status Delete(const std::string& key) override;

 private:
  explicit FileStore(std::string root) : root_(std::move(root)) {}
  std::string PathOf(const std::string& key) const { return root_ + "/" + key; }
  std::string root_;  // absolute, no trailing '/'
};

// Copies `src` to `dst` atomically (temporary file beside dst, fsync, rename),
// reporting progress. Used by FileStore and by tools.
Status CopyFileAtomic(const std::string& src, const std::string& dst, const ProgressFn& progress);

}  // namespace lote::objstore
