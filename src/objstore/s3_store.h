// S3Store: an ObjectStore over any S3-compatible endpoint (s3://bucket/prefix).
//
// Path-style addressing (<endpoint>/<bucket>/<key>), SigV4 signing
// (common/sigv4.h), libcurl transport. Objects of at least
// S3Config::multipart_threshold bytes are uploaded in parts of
// S3Config::part_size, up to S3Config::max_parallel_parts at once (aborted on
// failure, so nothing partial remains; progress is still reported from the
// calling thread).
// Every request is retried with exponential backoff and jitter on network
// errors, timeouts, HTTP 5xx and 429, up to S3Config::max_attempts.
// Integrity: uploads send Content-MD5 for every body and compare the returned
// ETag with the MD5 of what was sent (for multipart, MD5 of the part MD5s plus
// "-N"); downloads compare size and, for single-part objects, the MD5 of the
// received bytes with the ETag. A mismatch is DataLoss.
// Thread safety: safe for concurrent use; each call uses its own connection.
#pragma once

#include <string>

#include "objstore/aws_config.h"
#include "objstore/objstore.h"

namespace lote::objstore {

class S3Store final : public ObjectStore {
 public:
  // `prefix` is the key prefix under the bucket (may be empty), without
  // leading or trailing '/'.
  static Result<std::unique_ptr<S3Store>> Open(const std::string& bucket, const std::string& prefix,
                                               S3Config config);

  std::string RootUri() const override;
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

  // Creates the bucket (for tests and first-time setup); OK if it exists and
  // is owned by the caller.
  Status CreateBucket();

  // How many HTTP requests were retried since Open (for tests and logs).
  int64_t retries() const;

 private:
  struct Impl;
  explicit S3Store(std::unique_ptr<Impl> impl);

 public:
  ~S3Store() override;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace lote::objstore
