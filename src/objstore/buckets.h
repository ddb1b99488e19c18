// Buckets: the files behind lote's own S3 endpoint (api/s3_api.h), one folder
// per bucket under a root (the server's <home>/s3).
//
// Layout (so that file://<root>/<bucket>/<key> and s3://<bucket>/<key> name
// the same bytes):
//   <root>/<bucket>/<key>                    the object's bytes, a plain file
//   <root>/<bucket>/.lote-s3/bucket.json     {"created": millis}
//   <root>/<bucket>/.lote-s3/meta/<key>.meta the object's metadata (JSON), stamped
//                                            with the data file's inode, size and
//                                            mtime: a stamp that does not match
//                                            (a crash between the two renames, a
//                                            file replaced through file://) is
//                                            ignored and the ETag recomputed (MD5)
//   <root>/<bucket>/.lote-s3/uploads/<id>/   a multipart upload: upload.json and
//                                            part files with their own .meta
//   .lote-tmp-<random>                       files being written (never listed)
// Keys are '/'-separated paths: a key that is not a relative path without
// empty, "." or ".." segments, a key whose path collides with another's (key
// "a" beside key "a/b"), and keys under ".lote-s3" or with a ".lote-tmp-"
// segment are refused with InvalidArgument (S3 code "InvalidArgument" or
// "KeyTooLongError" for > 1024 bytes). A key ending in '/' (a "folder"
// marker, size 0) is kept as <key>/.lote-s3-folder.
//
// Durability: an object or part committed is fsynced (file, then its folder)
// before the call returns; a reader sees the old object or the new one, never
// a partial one; a crash leaves only .lote-tmp- files, which Open removes.
//
// Errors: every failure is a Status whose message begins with S3's error code
// and ": " ("NoSuchBucket: the bucket b does not exist"); S3ErrorCode() reads
// it back. Codes used: NoSuchBucket, NoSuchKey, NoSuchUpload,
// BucketAlreadyOwnedByYou, BucketNotEmpty, InvalidBucketName, InvalidArgument,
// KeyTooLongError, InvalidPart, InvalidPartOrder, EntityTooSmall,
// PreconditionFailed, InternalError (I/O).
//
// Thread safety: safe for concurrent use; commits of one key are serialized
// (a per-bucket mutex around the rename and the If-None-Match check).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace lote::objstore {

// S3's error code at the start of a Buckets status message ("NoSuchKey"), or
// "InternalError" when there is none.
std::string S3ErrorCode(const Status& status);
// The status for an S3 error code and message (the code goes first).
Status S3Error(const Status& kind, std::string_view code, std::string_view message);

struct ObjectMeta {
  std::string etag;  // without quotes: MD5 hex, or MD5 of the parts' MD5s + "-N"
  uint64_t size = 0;
  int64_t mtime_millis = 0;
  std::string content_type;  // as given; empty: the API answers binary/octet-stream
  // Stored response headers by their canonical names: Content-Encoding,
  // Content-Disposition, Content-Language, Cache-Control, Expires.
  std::map<std::string, std::string> headers;
  std::map<std::string, std::string> user;       // x-amz-meta-NAME (lowercase NAME) → value
  std::map<std::string, std::string> checksums;  // "CRC32" | "CRC32C" | "SHA256" → base64
  int32_t parts = 0;                             // a multipart object's part count; 0 otherwise
};

struct BucketInfo {
  std::string name;
  int64_t created_millis = 0;
};

// A file being received (an object's or a part's bytes) in the bucket's
// folder; removed unless committed. Not thread safe (one writer).
class PendingFile {
 public:
  ~PendingFile();
  PendingFile(const PendingFile&) = delete;
  PendingFile& operator=(const PendingFile&) = delete;
  Status Append(std::string_view bytes);
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  friend class Buckets;
  PendingFile(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  int fd_;
  std::string path_;
  uint64_t size_ = 0;
  bool committed_ = false;
};

// An object opened for reading: its metadata and a descriptor (closed by the
// destructor) that keeps the bytes readable even if the key is replaced.
struct OpenObject {
  ObjectMeta meta;
  std::shared_ptr<int> fd;  // the descriptor; the deleter closes it
};

struct ListRequest {
  std::string prefix;
  std::string delimiter;    // empty: none
  std::string start_after;  // keys (and common prefixes) after this one
  int32_t max_keys = 1000;  // 0..1000
};

struct ListedObject {
  std::string key;
  ObjectMeta meta;
};

struct ListResult {
  std::vector<ListedObject> objects;         // in UTF-8 byte order
  std::vector<std::string> common_prefixes;  // with a delimiter: each once, in order
  bool truncated = false;
  // The last key or common prefix returned (where the next page starts after).
  std::string last;
};

struct PartInfo {
  int32_t number = 0;
  std::string etag;  // MD5 hex of the part
  uint64_t size = 0;
  int64_t mtime_millis = 0;
  std::map<std::string, std::string> checksums;
};

struct UploadInfo {
  std::string upload_id;
  std::string key;
  int64_t initiated_millis = 0;
  ObjectMeta meta;  // what CreateMultipartUpload was given (type, headers, user metadata)
};

class Buckets {
 public:
  // Opens (and creates) the root; removes .lote-tmp- files a crash left.
  static Result<std::unique_ptr<Buckets>> Open(std::string root);
  const std::string& root() const { return root_; }

  // InvalidBucketName (S3's rules: 3-63 of a-z 0-9 . -, starts and ends with a
  // letter or digit, no "..", not an IP address), BucketAlreadyOwnedByYou.
  Status CreateBucket(const std::string& bucket, int64_t now_millis);
  // NoSuchBucket; BucketNotEmpty while it holds an object or an upload.
  Status DeleteBucket(const std::string& bucket);
  Result<BucketInfo> HeadBucket(const std::string& bucket) const;
  // Sorted by name. A folder under the root without .lote-s3/bucket.json is a
  // bucket too (made through file://), created at its folder's mtime.
  Result<std::vector<BucketInfo>> ListBuckets() const;

  // A new file in the bucket's folder for an object's or part's bytes.
  Result<std::unique_ptr<PendingFile>> NewPendingFile(const std::string& bucket);

  // Makes `file` the object `key` (fsync, metadata, rename, folder fsync).
  // meta.size and meta.mtime_millis are set here; meta.etag must be set (the
  // caller hashed the bytes). if_none_match: PreconditionFailed when the key
  // exists (checked under the bucket's lock, so two such writers never both win).
  Result<ObjectMeta> PutObject(const std::string& bucket, const std::string& key,
                               std::unique_ptr<PendingFile> file, ObjectMeta meta,
                               bool if_none_match = false);
  Result<OpenObject> GetObject(const std::string& bucket, const std::string& key) const;
  Result<ObjectMeta> HeadObject(const std::string& bucket, const std::string& key) const;
  // A missing key is not an error (S3). NoSuchBucket.
  Status DeleteObject(const std::string& bucket, const std::string& key);
  // Copies bytes and metadata (or `replace` as the new metadata, its etag
  // ignored); the copy's ETag is the source's unless the source was multipart
  // (then the MD5 of the bytes). Copying a key onto itself with replace is a
  // metadata update.
  Result<ObjectMeta> CopyObject(const std::string& src_bucket, const std::string& src_key,
                                const std::string& dst_bucket, const std::string& dst_key,
                                const std::optional<ObjectMeta>& replace);
  Result<ListResult> List(const std::string& bucket, const ListRequest& request) const;

  // Multipart uploads.
  Result<std::string> CreateUpload(const std::string& bucket, const std::string& key,
                                   ObjectMeta meta, int64_t now_millis);
  // Part numbers 1..10000; a part sent again replaces the earlier one.
  // part.etag must be set (MD5 hex of the bytes). NoSuchUpload.
  Result<PartInfo> PutPart(const std::string& bucket, const std::string& upload_id,
                           std::unique_ptr<PendingFile> file, PartInfo part);
  Result<UploadInfo> GetUpload(const std::string& bucket, const std::string& upload_id) const;
  Result<std::vector<PartInfo>> ListParts(const std::string& bucket,
                                          const std::string& upload_id) const;
  // The parts named (number, etag without quotes), ascending: InvalidPartOrder
  // otherwise; InvalidPart for an unknown part or a wrong ETag; EntityTooSmall
  // for a part under 5 MiB that is not the last. Concatenates them into the
  // object (no full copy in memory), ETag MD5(part MD5s)-N, removes the upload.
  Result<ObjectMeta> CompleteUpload(const std::string& bucket, const std::string& upload_id,
                                    const std::vector<std::pair<int32_t, std::string>>& parts);
  Status AbortUpload(const std::string& bucket, const std::string& upload_id);
  // Sorted by key, then initiation time.
  Result<std::vector<UploadInfo>> ListUploads(const std::string& bucket,
                                              const std::string& prefix) const;

  static constexpr uint64_t kMinPartBytes = 5ull << 20;
  static constexpr int32_t kMaxParts = 10'000;

 private:
  explicit Buckets(std::string root) : root_(std::move(root)) {}
  std::mutex& LockOf(const std::string& bucket) const;

  std::string root_;
  mutable std::mutex locks_mu_;
  mutable std::map<std::string, std::unique_ptr<std::mutex>> locks_;  // by bucket
};

}  // namespace lote::objstore
