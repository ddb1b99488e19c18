#include "objstore/objstore.h"

#include "objstore/file_store.h"
#include "objstore/s3_store.h"

namespace lote::objstore {

std::string Uri::ToString() const {
  if (scheme == "s3") return "s3://" + bucket + (key.empty() ? "" : "/" + key);
  return "file://" + key;
}

Result<Uri> ParseUri(std::string_view uri) {
  Uri out;
  size_t sep = uri.find("://");
  if (sep == std::string_view::npos) {
    if (uri.empty()) return Status::InvalidArgument("empty URI");
    out.scheme = "file";
    out.key = std::string(uri);
    return out;
  }
  out.scheme = std::string(uri.substr(0, sep));
  std::string_view rest = uri.substr(sep + 3);
  if (out.scheme == "file") {
    if (rest.empty() || rest[0] != '/') {
      return Status::InvalidArgument("file URI must be absolute (file:///path): " +
                                     std::string(uri));
    }
    out.key = std::string(rest);
    return out;
  }
  if (out.scheme == "s3") {
    size_t slash = rest.find('/');
    out.bucket = std::string(rest.substr(0, slash));
    if (out.bucket.empty())
      return Status::InvalidArgument("s3 URI without a bucket: " + std::string(uri));
    if (slash != std::string_view::npos) out.key = std::string(rest.substr(slash + 1));
    while (!out.key.empty() && out.key.back() == '/') out.key.pop_back();
    return out;
  }
  return Status::InvalidArgument("unsupported URI scheme '" + out.scheme + "' in " +
                                 std::string(uri) + " (use file:// or s3://)");
}

std::string JoinKey(std::string_view root, std::string_view key) {
  std::string out(root);
  while (!out.empty() && out.back() == '/') out.pop_back();
  while (!key.empty() && key.front() == '/') key.remove_prefix(1);
  if (out.empty()) return std::string(key);
  if (key.empty()) return out;
  return out + "/" + std::string(key);
}

Status ValidateKey(std::string_view key) {
  if (key.empty()) return Status::InvalidArgument("empty object key");
  if (key.front() == '/')
    return Status::InvalidArgument("object key must be relative: " + std::string(key));
  size_t start = 0;
  while (start <= key.size()) {
    size_t end = key.find('/', start);
    if (end == std::string_view::npos) end = key.size();
    std::string_view seg = key.substr(start, end - start);
    if (seg.empty() || seg == "." || seg == "..") {
      return Status::InvalidArgument("bad object key '" + std::string(key) +
                                     "': empty, '.' or '..' path segments are not allowed");
    }
    start = end + 1;
  }
  return Status::Ok();
}

Result<std::string> ObjectStore::GetRange(const std::string& key, uint64_t offset,
                                          uint64_t length) {
  ASSIGN_OR_RETURN(std::string all, GetBytes(key));
  if (offset >= all.size()) return std::string();
  return all.substr(static_cast<size_t>(offset), static_cast<size_t>(length));
}

Result<bool> ObjectStore::Exists(const std::string& key) {
  auto r = Head(key);
  if (r.ok()) return true;
  if (r.status().IsNotFound()) return false;
  return r.status();
}

Result<std::unique_ptr<ObjectStore>> OpenObjectStore(std::string_view root_uri) {
  ASSIGN_OR_RETURN(Uri uri, ParseUri(root_uri));
  if (uri.scheme == "file") {
    ASSIGN_OR_RETURN(auto store, FileStore::Open(uri.key));
    return std::unique_ptr<ObjectStore>(std::move(store));
  }
  ASSIGN_OR_RETURN(S3Config config, ResolveS3Config(ProcessEnv()));
  ASSIGN_OR_RETURN(auto store, S3Store::Open(uri.bucket, uri.key, std::move(config)));
  return std::unique_ptr<ObjectStore>(std::move(store));
}

}  // namespace lote::objstore
