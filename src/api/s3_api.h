// S3Api: lote's S3 endpoint (the REST-XML protocol) on the API's own port,
// over the bucket folders of objstore::Buckets (docs/api.md, "S3").
//
// Which requests are S3's (Claims): those signed for service "s3" (the
// Authorization header's scope or a presigned URL's X-Amz-Credential), and
// those addressed to a bucket's virtual host ("<bucket>.s3.<anything>" in
// Host) or to "s3.<anything>". The bucket is the virtual host's, else the
// path's first segment (path style).
//
// Authentication: SigV4 with the payload hash S3 sends in
// x-amz-content-sha256 (a hex SHA-256, checked against the body;
// UNSIGNED-PAYLOAD; the aws-chunked STREAMING-* forms, each chunk's
// signature checked), or a presigned URL. Authorization: the router's
// AccessControl with S3's IAM actions on arn:aws:s3:::BUCKET[/KEY]
// (iam/actions.h). Errors are S3's XML <Error> with its codes.
//
// Object bodies are streamed (BodySinkFor) into a pending file in the
// bucket's folder while MD5, SHA-256 and any additional checksum are
// computed; GetObject answers with a file body. Neither holds an object in
// memory.
// Thread safety: Handle, BodySinkFor and TransportError are safe to call
// concurrently once constructed.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "api/access_control.h"
#include "api/auth.h"
#include "api/http_types.h"
#include "common/clock.h"
#include "common/json.h"
#include "objstore/buckets.h"

namespace lote::api {

struct S3Options {
  objstore::Buckets* buckets = nullptr;  // not owned
  const Authenticator* auth = nullptr;   // null: no authentication (--insecure-no-auth)
  const AccessControl* access = nullptr;
  const Clock* clock = nullptr;
  std::string region = "us-east-1";
  std::string account_id = "000000000000";
  uint64_t max_object_bytes = 5ull << 30;  // S3's limit for one PUT and one part
};

class S3Api {
 public:
  explicit S3Api(S3Options options);

  bool Claims(const HttpRequest& request) const;
  // `verify`: check the signature (false: the caller authenticated `key`).
  HttpResponse Handle(const HttpRequest& request, const std::string& request_id, bool verify,
                      const std::string& key) const;
  // PutObject and UploadPart stream their bodies into the bucket's folder.
  std::shared_ptr<BodySink> BodySinkFor(const HttpRequest& head) const;
  HttpResponse TransportError(const HttpRequest& request, int http_status,
                              const Status& status) const;

 private:
  struct Call;
  // Runs `body` for operation `op` (its request members for IAM) once the
  // access control allows it, and tells the access control how it ended.
  using Authorize = std::function<HttpResponse(const std::string& op, Json request,
                                               const std::function<HttpResponse()>& body)>;
  HttpResponse Dispatch(Call& call) const;
  HttpResponse CreateBucket(Call& call, const Authorize& authorize) const;
  HttpResponse ListObjects(Call& call, const Authorize& authorize) const;
  HttpResponse DeleteObjects(Call& call, const Authorize& authorize) const;
  HttpResponse PutObject(Call& call, const Authorize& authorize) const;
  HttpResponse GetObject(Call& call, const Authorize& authorize) const;
  HttpResponse CopyObject(Call& call, const Authorize& authorize) const;
  HttpResponse UploadPartCopy(Call& call, const Authorize& authorize) const;
  HttpResponse CreateUpload(Call& call, const Authorize& authorize) const;
  HttpResponse CompleteUpload(Call& call, const Authorize& authorize) const;
  HttpResponse ListParts(Call& call, const Authorize& authorize) const;
  HttpResponse ListUploads(Call& call, const Authorize& authorize) const;
  S3Options options_;
};

}  // namespace lote::api
