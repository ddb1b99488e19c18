// ObjectStore: one small interface over object-store URIs, used for datasets
// and checkpoints.
//
//   file:///abs/dir, /abs/dir, rel/dir   a local directory (the default scheme)
//   s3://bucket/prefix                   any S3-compatible endpoint (see s3_store.h)
//
// A store is opened at a root URI; keys are relative to it and use '/' as the
// separator ("step_10/model.safetensors"). Keys must not be empty, start with
// '/', or contain "." / ".." segments.
//
// Contract (both backends):
// - Put is all-or-nothing: a reader never sees a partial object (file:// writes
//   a temporary file and renames it; s3:// is atomic per object). After a
//   successful Put the written bytes were checked (s3: Content-MD5 and ETag).
// - Get to a file is atomic too (temporary file in the target's folder, then
//   rename); a failed Get leaves no file behind.
// - Delete of a missing key succeeds (as S3 does). Head of a missing key is
//   NotFound.
// - List returns every key that starts with `prefix` (no delimiter), sorted.
// - Errors are values: NotFound, InvalidArgument (bad URI/key), Unauthenticated/
//   PermissionDenied (credentials), Unavailable (network/5xx after retries),
//   DataLoss (integrity check failed), Internal.
// Thread safety: an ObjectStore may be used from several threads at once.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace lote::objstore {

// Called with (bytes done, bytes total) as a transfer advances; total is 0 when
// unknown. Called from the calling thread; must not throw.
using ProgressFn = std::function<void(uint64_t done, uint64_t total)>;

struct ObjectInfo {
  std::string key;           // relative to the store's root
  uint64_t size = 0;         // bytes
  std::string etag;          // without quotes; file:// leaves it empty
  int64_t mtime_millis = 0;  // last modified, Unix milliseconds
};

// A parsed URI. For file:// `bucket` is empty and `key` is the local path.
struct Uri {
  std::string scheme;  // "file" or "s3"
  std::string bucket;  // s3 only
  std::string key;     // s3: key or prefix without leading '/'; file: path
  std::string ToString() const;
};
// "s3://b/k" -> {s3, b, k}; "file:///x" and "/x" -> {file, "", /x}. InvalidArgument
// for unknown schemes or an s3 URI without a bucket.
Result<Uri> ParseUri(std::string_view uri);
// Joins a root URI or path and a relative key with exactly one '/'.
std::string JoinKey(std::string_view root, std::string_view key);
// InvalidArgument when a key is empty, absolute or has "."/".." segments.
Status ValidateKey(std::string_view key);

class ObjectStore {
 public:
  virtual ~ObjectStore() = default;

  // The root URI this store was opened at.
  virtual std::string RootUri() const = 0;

  virtual Status PutBytes(const std::string& key, std::string_view data) = 0;
  virtual Status PutFile(const std::string& key, const std::string& local_path,
                         const ProgressFn& progress = nullptr) = 0;
  virtual Result<std::string> GetBytes(const std::string& key) = 0;
  virtual Status GetFile(const std::string& key, const std::string& local_path,
                         const ProgressFn& progress = nullptr) = 0;
  // Up to `length` bytes of the object from `offset` (fewer at its end; empty
  // when offset is at or past the end). The default reads the whole object;
  // file:// and s3:// (HTTP Range) read only the range.
  virtual Result<std::string> GetRange(const std::string& key, uint64_t offset, uint64_t length);
  virtual Result<ObjectInfo> Head(const std::string& key) = 0;
  virtual Result<std::vector<ObjectInfo>> List(const std::string& prefix) = 0;
  virtual Status Delete(const std::string& key) = 0;

  // True when Head finds the key, false on NotFound, the error otherwise.
  Result<bool> Exists(const std::string& key);
};

// Opens the store for a root URI: file:// (or a plain path) or s3:// (endpoint
// and credentials from the standard AWS variables and files, see s3_store.h).
// A file:// root directory is created if missing.
Result<std::unique_ptr<ObjectStore>> OpenObjectStore(std::string_view root_uri);

}  // namespace lote::objstore
