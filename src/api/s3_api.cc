#include "api/s3_api.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <spdlog/spdlog.h>
#include <strings.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "api/http_server.h"
#include "api/router.h"
#include "api/s3_chunked.h"
#include "api/s3_digest.h"
#include "api/s3_xml.h"
#include "common/crypto.h"
#include "common/sigv4.h"

namespace lote::api {

using objstore::ObjectMeta;
using objstore::S3Error;
using objstore::S3ErrorCode;

namespace {

constexpr char kXmlHeader[] = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
constexpr char kNs[] = " xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"";
constexpr std::string_view kStreamingSigned = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD";
constexpr std::string_view kStreamingPrefix = "STREAMING-";

// The HTTP status of each S3 error code lote answers.
int HttpStatusOf(std::string_view code) {
  static const std::map<std::string, int, std::less<>> kStatus = {
      {"AccessDenied", 403},
      {"AuthorizationHeaderMalformed", 400},
      {"AuthorizationQueryParametersError", 400},
      {"BadDigest", 400},
      {"BucketAlreadyExists", 409},
      {"BucketAlreadyOwnedByYou", 409},
      {"BucketNotEmpty", 409},
      {"EntityTooLarge", 400},
      {"EntityTooSmall", 400},
      {"IllegalLocationConstraintException", 400},
      {"IncompleteBody", 400},
      {"InternalError", 500},
      {"InvalidAccessKeyId", 403},
      {"InvalidArgument", 400},
      {"InvalidBucketName", 400},
      {"InvalidChunkSizeError", 403},
      {"InvalidDigest", 400},
      {"InvalidPart", 400},
      {"InvalidPartOrder", 400},
      {"InvalidRange", 416},
      {"InvalidRequest", 400},
      {"KeyTooLongError", 400},
      {"MalformedXML", 400},
      {"MethodNotAllowed", 405},
      {"MissingContentLength", 411},
      {"NoSuchBucket", 404},
      {"NoSuchKey", 404},
      {"NoSuchUpload", 404},
      {"NotImplemented", 501},
      {"PreconditionFailed", 412},
      {"RequestTimeTooSkewed", 403},
      {"RequestTimeout", 400},
      {"ServiceUnavailable", 503},
      {"SignatureDoesNotMatch", 403},
      {"XAmzContentSHA256Mismatch", 400},
  };
  auto it = kStatus.find(code);
  return it == kStatus.end() ? 400 : it->second;
}

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::string Upper(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return s;
}

bool IsHex64(std::string_view s) {
  return s.size() == 64 && std::all_of(s.begin(), s.end(), [](unsigned char c) {
           return std::isdigit(c) || (c >= 'a' && c <= 'f');
         });
}

// "2026-12-06T02:30:00.000Z", as S3's XML writes times.
std::string XmlTime(int64_t millis) {
  std::string t = Iso8601Utc(millis);
  char ms[8];
  std::snprintf(ms, sizeof ms, ".%03d", static_cast<int>(((millis % 1000) + 1000) % 1000));
  t.insert(t.size() - 1, ms);
  return t;
}

std::string Quoted(const std::string& etag) { return "\"" + etag + "\""; }

std::string Unquoted(std::string etag) {
  if (etag.size() >= 2 && etag.front() == '"' && etag.back() == '"')
    etag = etag.substr(1, etag.size() - 2);
  return etag;
}

// An element with escaped text.
std::string El(std::string_view name, std::string_view text) {
  std::string out = "<";
  out.append(name).append(">").append(XmlEscape(text)).append("</").append(name).append(">");
  return out;
}

// S3's URL encoding of keys in listings (encoding-type=url).
std::string UrlEncodeKey(std::string_view key) { return sigv4::UriEncode(key, false); }

std::string HostWithoutPort(std::string host) {
  if (!host.empty() && host.front() == '[') return host.substr(0, host.find(']') + 1);
  if (size_t colon = host.rfind(':'); colon != std::string::npos) host.resize(colon);
  return Lower(host);
}

// The bucket of a virtual-hosted request ("b.s3.localhost" → "b"), "" for
// "s3.<...>" (path style), nullopt when the host names no S3 endpoint.
std::optional<std::string> VirtualBucket(const HttpRequest& request) {
  const std::string host = HostWithoutPort(request.Header("host"));
  if (StartsWith(host, "s3.") || StartsWith(host, "s3-")) return std::string();
  if (size_t at = host.find(".s3."); at != std::string::npos && at > 0) return host.substr(0, at);
  // What SDKs make of an endpoint http://localhost:PORT (virtual-host style).
  constexpr std::string_view kLocal = ".localhost";
  if (host.size() > kLocal.size() && host.ends_with(kLocal))
    return host.substr(0, host.size() - kLocal.size());
  return std::nullopt;
}

// Query parameters, decoded, in order.
std::vector<std::pair<std::string, std::string>> ParseQuery(std::string_view raw) {
  std::vector<std::pair<std::string, std::string>> out;
  size_t start = 0;
  while (start <= raw.size()) {
    size_t amp = raw.find('&', start);
    if (amp == std::string_view::npos) amp = raw.size();
    std::string_view part = raw.substr(start, amp - start);
    start = amp + 1;
    if (part.empty()) continue;
    size_t eq = part.find('=');
    out.emplace_back(sigv4::UriDecode(part.substr(0, eq)),
                     eq == std::string_view::npos ? "" : sigv4::UriDecode(part.substr(eq + 1)));
  }
  return out;
}

// Sub-resources lote does not implement: a request naming one is answered
// NotImplemented rather than taken for the plain operation.
bool IsUnimplementedSubresource(std::string_view name) {
  static const std::vector<std::string_view> kNames = {"accelerate",
                                                       "acl",
                                                       "analytics",
                                                       "attributes",
                                                       "cors",
                                                       "encryption",
                                                       "intelligent-tiering",
                                                       "inventory",
                                                       "legal-hold",
                                                       "lifecycle",
                                                       "logging",
                                                       "metrics",
                                                       "notification",
                                                       "object-lock",
                                                       "ownershipControls",
                                                       "policy",
                                                       "policyStatus",
                                                       "publicAccessBlock",
                                                       "replication",
                                                       "requestPayment",
                                                       "restore",
                                                       "retention",
                                                       "select",
                                                       "session",
                                                       "tagging",
                                                       "torrent",
                                                       "versions",
                                                       "website",
                                                       "renameObject"};
  return std::find(kNames.begin(), kNames.end(), name) != kNames.end();
}

// The request's checksum algorithm and the value the client sent (a header,
// or "" when it comes as a trailer or not at all).
struct ChecksumAsk {
  std::string algorithm;  // "CRC32", ... or ""
  std::string header_value;
  bool trailer = false;
};

ChecksumAsk ChecksumOf(const HttpRequest& request) {
  ChecksumAsk ask;
  for (const char* alg : {"crc32", "crc32c", "sha1", "sha256", "crc64nvme"}) {
    const std::string value = request.Header(std::string("x-amz-checksum-") + alg);
    if (!value.empty()) {
      ask.algorithm = Upper(alg);
      ask.header_value = value;
      return ask;
    }
  }
  const std::string trailer = Lower(request.Header("x-amz-trailer"));
  if (StartsWith(trailer, "x-amz-checksum-")) {
    ask.algorithm = Upper(trailer.substr(std::string_view("x-amz-checksum-").size()));
    ask.trailer = true;
    return ask;
  }
  ask.algorithm = Upper(request.Header("x-amz-sdk-checksum-algorithm"));
  return ask;
}

// The stored metadata a PUT, a CreateMultipartUpload or a REPLACE copy
// gives: Content-Type, the response headers S3 keeps and x-amz-meta-*.
ObjectMeta MetaFromHeaders(const HttpRequest& request) {
  ObjectMeta meta;
  meta.content_type = request.Header("content-type");
  for (const char* name : {"Content-Disposition", "Content-Language", "Cache-Control", "Expires"}) {
    if (std::string v = request.Header(name); !v.empty()) meta.headers[name] = v;
  }
  // aws-chunked is the transfer's encoding, not the object's.
  std::string encoding = request.Header("content-encoding");
  std::string kept;
  size_t start = 0;
  while (start <= encoding.size()) {
    size_t comma = encoding.find(',', start);
    if (comma == std::string::npos) comma = encoding.size();
    std::string part = encoding.substr(start, comma - start);
    start = comma + 1;
    part.erase(0, part.find_first_not_of(' '));
    part.erase(part.find_last_not_of(' ') + 1);
    if (part.empty() || Lower(part) == "aws-chunked") continue;
    kept += (kept.empty() ? "" : ",") + part;
  }
  if (!kept.empty()) meta.headers["Content-Encoding"] = kept;
  for (const auto& [name, value] : request.headers) {
    std::string lower = Lower(name);
    if (StartsWith(lower, "x-amz-meta-")) meta.user[lower.substr(11)] = value;
  }
  return meta;
}

// The object's headers on GetObject and HeadObject.
void AddObjectHeaders(const ObjectMeta& meta, HttpResponse* r) {
  r->headers.emplace_back("ETag", Quoted(meta.etag));
  r->headers.emplace_back("Last-Modified", HttpDate(meta.mtime_millis));
  r->headers.emplace_back("Accept-Ranges", "bytes");
  r->headers.emplace_back("Content-Type",
                          meta.content_type.empty() ? "binary/octet-stream" : meta.content_type);
  for (const auto& [name, value] : meta.headers) r->headers.emplace_back(name, value);
  for (const auto& [name, value] : meta.user) r->headers.emplace_back("x-amz-meta-" + name, value);
}

Result<int64_t> ParseHttpDate(const std::string& text) {
  struct tm tm {};
  for (const char* format : {"%a, %d %b %Y %H:%M:%S GMT", "%A, %d-%b-%y %H:%M:%S GMT",
                             "%a %b %d %H:%M:%S %Y", "%Y-%m-%dT%H:%M:%SZ"}) {
    tm = {};
    const char* end = strptime(text.c_str(), format, &tm);
    if (end != nullptr && *end == '\0') return static_cast<int64_t>(timegm(&tm)) * 1000;
  }
  return Status::InvalidArgument("not an HTTP date: " + text);
}

// True when one of the comma-separated ETags (quoted or not, or "*")
// matches.
bool EtagMatches(const std::string& list, const std::string& etag) {
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    if (comma == std::string::npos) comma = list.size();
    std::string one = list.substr(start, comma - start);
    start = comma + 1;
    one.erase(0, one.find_first_not_of(' '));
    one.erase(one.find_last_not_of(' ') + 1);
    if (StartsWith(one, "W/")) one = one.substr(2);
    if (one == "*" || Unquoted(one) == etag) return true;
  }
  return false;
}

}  // namespace

// A PutObject's or UploadPart's body on its way to disk: decoded (aws-chunked
// or plain), hashed, written to a pending file in the bucket's folder. A
// request refused at its head (no such bucket, bad signature, denied) keeps
// the refusal and stores nothing.
class S3ObjectSink : public BodySink {
 public:
  ~S3ObjectSink() override { FinishHashing(); }

  Status Refusal() const override { return refusal; }

  Status Write(std::string_view bytes) override {
    if (!refusal.ok()) return refusal;
    if (chunked) {
      return decoder.Feed(bytes, [this](std::string_view data) { return Take(data); });
    }
    return Take(bytes);
  }

  Status Take(std::string_view data) {
    received += data.size();
    if (received > limit) {
      return Status::ResourceExhausted(
          "EntityTooLarge: Your proposed upload exceeds the maximum "
          "allowed size of " +
          std::to_string(limit) + " bytes");
    }
    Hash(data);
    return file->Append(data);
  }

  // The digests of a large body are computed on a thread of their own while
  // this one receives and writes (one core hashes, the other moves bytes):
  // the first MiB inline, then by 1 MiB pieces through a queue of at most
  // kQueued of them (bounded memory).
  void Hash(std::string_view data) {
    if (inline_only_ || (!hasher_.joinable() && received <= kInlineBytes)) {
      digest->Update(data);
      return;
    }
    if (!hasher_.joinable()) {
      try {
        hasher_ = std::thread([this] { HashLoop(); });
      } catch (const std::system_error&) {  // no thread to be had: hash here
        digest->Update(data);
        inline_only_ = true;
        return;
      }
    }
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return queue_.size() < kQueued; });
    queue_.emplace_back(data);
    cv_.notify_all();
  }

  // Waits until every byte taken is hashed (then the digests may be read).
  void FinishHashing() {
    if (!hasher_.joinable()) return;
    {
      std::lock_guard lock(mu_);
      closing_ = true;
    }
    cv_.notify_all();
    hasher_.join();
  }

  Status refusal;
  std::string operation;  // "PutObject" or "UploadPart"
  std::string bucket;
  std::string key;
  std::string upload_id;
  int32_t part_number = 0;
  std::string access_key;  // the verified signer ("" when not verified here)
  bool verified = false;
  bool chunked = false;
  bool signed_chunks = false;
  std::string seed_signature;
  std::string signing_key;
  std::string amz_date;
  std::string scope;
  AwsChunkedDecoder decoder;
  ChecksumAsk checksum;
  std::unique_ptr<BodyDigest> digest;
  std::unique_ptr<objstore::PendingFile> file;
  uint64_t received = 0;
  uint64_t limit = 0;

 private:
  static constexpr uint64_t kInlineBytes = 1 << 20;
  static constexpr size_t kQueued = 8;

  void HashLoop() {
    for (;;) {
      std::string piece;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return !queue_.empty() || closing_; });
        if (queue_.empty()) return;
        piece = std::move(queue_.front());
        queue_.pop_front();
      }
      cv_.notify_all();
      digest->Update(piece);
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> queue_;
  bool closing_ = false;
  bool inline_only_ = false;  // a hashing thread could not be started
  std::thread hasher_;
};

struct S3Api::Call {
  const HttpRequest& request;
  std::string request_id;
  std::string bucket;  // "" for the service (ListBuckets)
  std::string key;     // "" for a bucket
  std::vector<std::pair<std::string, std::string>> query;
  std::string access_key;
  std::shared_ptr<S3ObjectSink> sink;

  bool Has(std::string_view name) const {
    return std::any_of(query.begin(), query.end(), [&](const auto& p) { return p.first == name; });
  }
  std::string Param(std::string_view name) const {
    for (const auto& [k, v] : query)
      if (k == name) return v;
    return "";
  }
  std::string Resource() const { return "/" + bucket + (key.empty() ? "" : "/" + key); }
};

namespace {

// Splits the request into bucket and key (decoded).
void Address(const HttpRequest& request, std::string* bucket, std::string* key) {
  const std::string path = sigv4::UriDecode(request.raw_path);
  std::string rest = path.empty() || path[0] != '/' ? path : path.substr(1);
  if (std::optional<std::string> vhost = VirtualBucket(request); vhost && !vhost->empty()) {
    *bucket = *vhost;
    *key = rest;
    return;
  }
  size_t slash = rest.find('/');
  *bucket = rest.substr(0, slash);
  *key = slash == std::string::npos ? "" : rest.substr(slash + 1);
}

// What the Authenticator's codes are in S3's vocabulary.
ApiError S3AuthError(ApiError e) {
  if (e.code == "MissingAuthenticationTokenException") {
    return {403, "AccessDenied",
            "Access Denied: the request is not signed (anonymous requests are refused); sign it "
            "with lote's credentials (eval \"$(lote env)\")"};
  }
  if (e.code == "IncompleteSignatureException")
    return {400, "AuthorizationHeaderMalformed", e.message};
  if (e.code == "UnrecognizedClientException") return {403, "InvalidAccessKeyId", e.message};
  if (e.code == "InvalidSignatureException") {
    if (e.message.find("Signature expired") != std::string::npos ||
        e.message.find("not yet current") != std::string::npos) {
      return {403, "RequestTimeTooSkewed", e.message};
    }
    if (e.message.find("Credential should be scoped") != std::string::npos)
      return {400, "AuthorizationHeaderMalformed", e.message};
    return {403, "SignatureDoesNotMatch", e.message};
  }
  return e;
}

// A presigned URL of signature version 2 (AWSAccessKeyId, Expires,
// Signature: what botocore's `generate_presigned_url` and `aws s3 presign`
// make by default in us-east-1): base64(HMAC-SHA1(secret, method "\n"
// Content-MD5 "\n" Content-Type "\n" Expires "\n" x-amz-* headers
// "/bucket/path" [?sub-resources])).
bool IsPresignedV2(const HttpRequest& request) {
  const std::string& q = request.raw_query;
  return q.find("AWSAccessKeyId=") != std::string::npos &&
         q.find("Signature=") != std::string::npos && q.find("Expires=") != std::string::npos &&
         q.find("X-Amz-Signature=") == std::string::npos;
}

std::optional<ApiError> VerifyPresignedV2(const HttpRequest& request, const Authenticator& auth,
                                          const Clock& clock, std::string* access_key) {
  static const std::vector<std::string_view> kSubresources = {"acl",
                                                              "cors",
                                                              "delete",
                                                              "lifecycle",
                                                              "location",
                                                              "logging",
                                                              "notification",
                                                              "partNumber",
                                                              "policy",
                                                              "requestPayment",
                                                              "response-cache-control",
                                                              "response-content-disposition",
                                                              "response-content-encoding",
                                                              "response-content-language",
                                                              "response-content-type",
                                                              "response-expires",
                                                              "restore",
                                                              "tagging",
                                                              "torrent",
                                                              "uploadId",
                                                              "uploads",
                                                              "versionId",
                                                              "versioning",
                                                              "versions",
                                                              "website"};
  std::string key_id, signature, expires;
  std::vector<std::pair<std::string, std::string>> sub;
  for (auto& [name, value] : ParseQuery(request.raw_query)) {
    if (name == "AWSAccessKeyId")
      key_id = value;
    else if (name == "Signature")
      signature = value;
    else if (name == "Expires")
      expires = value;
    else if (std::find(kSubresources.begin(), kSubresources.end(), name) != kSubresources.end())
      sub.emplace_back(name, value);
  }
  std::optional<std::string> secret = auth.SecretOf(key_id);
  if (!secret) {
    return ApiError{403, "InvalidAccessKeyId",
                    "The AWS Access Key Id you provided does not exist in our records: " + key_id +
                        " is not a key of this lote server"};
  }
  char* end = nullptr;
  const long long expires_at = std::strtoll(expires.c_str(), &end, 10);
  if (expires.empty() || *end != '\0') {
    return ApiError{403, "AccessDenied", "Expires must be a number of seconds since 1970"};
  }
  if (clock.NowMillis() / 1000 > expires_at) {
    return ApiError{403, "AccessDenied",
                    "Request has expired (Expires " + expires + " is in the past)"};
  }
  std::string to_sign = request.method + "\n" + request.Header("content-md5") + "\n" +
                        request.Header("content-type") + "\n" + expires + "\n";
  std::map<std::string, std::string> amz;
  for (const auto& [name, value] : request.headers) {
    std::string lower = Lower(name);
    if (StartsWith(lower, "x-amz-")) amz[lower] += (amz[lower].empty() ? "" : ",") + value;
  }
  for (const auto& [name, value] : amz) to_sign += name + ":" + value + "\n";
  if (std::optional<std::string> vhost = VirtualBucket(request); vhost && !vhost->empty())
    to_sign += "/" + *vhost;
  to_sign += request.raw_path;
  std::sort(sub.begin(), sub.end());
  for (size_t i = 0; i < sub.size(); ++i) {
    to_sign += (i == 0 ? "?" : "&") + sub[i].first;
    if (!sub[i].second.empty()) to_sign += "=" + sub[i].second;
  }
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int mac_len = 0;
  HMAC(EVP_sha1(), secret->data(), static_cast<int>(secret->size()),
       reinterpret_cast<const unsigned char*>(to_sign.data()), to_sign.size(), mac, &mac_len);
  const std::string expected =
      Base64Encode(std::string_view(reinterpret_cast<const char*>(mac), mac_len));
  if (!ConstantTimeEquals(expected, signature)) {
    return ApiError{403, "SignatureDoesNotMatch",
                    "The request signature we calculated does not match the signature you "
                    "provided (presigned URL, signature version 2): it was changed, or signed "
                    "with another key"};
  }
  *access_key = key_id;
  return std::nullopt;
}

Status ToStatus(const ApiError& e) { return Status::InvalidArgument(e.code + ": " + e.message); }

HttpResponse Xml(int status, std::string body, const std::string& request_id) {
  HttpResponse r;
  r.status = status;
  r.headers.emplace_back("Content-Type", "application/xml");
  r.headers.emplace_back("x-amz-request-id", request_id);
  r.headers.emplace_back("x-amz-id-2", request_id);
  r.body = kXmlHeader + std::move(body);
  return r;
}

HttpResponse Empty(int status, const std::string& request_id) {
  HttpResponse r;
  r.status = status;
  r.headers.emplace_back("x-amz-request-id", request_id);
  r.headers.emplace_back("x-amz-id-2", request_id);
  return r;
}

HttpResponse ErrorXml(const std::string& code, const std::string& message,
                      const std::string& resource, const std::string& request_id,
                      const std::string& extra = "") {
  return Xml(HttpStatusOf(code),
             "<Error>" + El("Code", code) + El("Message", message) +
                 (resource.empty() ? "" : El("Resource", resource)) + extra +
                 El("RequestId", request_id) + "</Error>",
             request_id);
}

// The error of a failed Status: its S3 code (Buckets' "Code: message"), or
// one by the Status's kind.
HttpResponse ErrorOf(const Status& status, const std::string& resource,
                     const std::string& request_id) {
  std::string code = S3ErrorCode(status);
  std::string message = status.message();
  if (code != "InternalError" || StartsWith(message, "InternalError: ")) {
    message = message.substr(code.size() + 2);
  } else {
    switch (status.code()) {
      case StatusCode::kInvalidArgument:
        code = "InvalidArgument";
        break;
      case StatusCode::kNotFound:
        code = "NoSuchKey";
        break;
      case StatusCode::kPermissionDenied:
        code = "AccessDenied";
        break;
      case StatusCode::kResourceExhausted:
        code = "EntityTooLarge";
        break;
      case StatusCode::kFailedPrecondition:
        code = "PreconditionFailed";
        break;
      default:
        break;
    }
  }
  if (code == "InternalError") {
    spdlog::error("s3 request {} on {}: {}", request_id, resource, status.ToString());
    message = "We encountered an internal error (request id " + request_id +
              "); see the lote server's log";
  }
  return ErrorXml(code, message, resource, request_id);
}

// S3's 412 naming the condition that did not hold.
HttpResponse PreconditionFailed(const std::string& condition, const std::string& resource,
                                const std::string& id) {
  return ErrorXml("PreconditionFailed",
                  "At least one of the pre-conditions you specified did not hold", resource, id,
                  El("Condition", condition));
}

// CopyObject's and UploadPartCopy's conditions on the source's ETag; the
// answer when one does not hold.
std::optional<HttpResponse> CopySourceConditions(const HttpRequest& req, const std::string& etag,
                                                 const std::string& resource,
                                                 const std::string& id) {
  if (std::string m = req.Header("x-amz-copy-source-if-match");
      !m.empty() && !EtagMatches(m, etag)) {
    return PreconditionFailed("x-amz-copy-source-If-Match", resource, id);
  }
  if (std::string m = req.Header("x-amz-copy-source-if-none-match");
      !m.empty() && EtagMatches(m, etag)) {
    return PreconditionFailed("x-amz-copy-source-If-None-Match", resource, id);
  }
  return std::nullopt;
}

// x-amz-copy-source ("/bucket/key" or "bucket/key", percent-encoded, an
// optional "?versionId=null") into bucket and key; the error answer otherwise.
std::optional<HttpResponse> ParseCopySource(const HttpRequest& req, const std::string& resource,
                                            const std::string& id, std::string* bucket,
                                            std::string* key) {
  std::string source = req.Header("x-amz-copy-source");
  if (size_t q = source.find('?'); q != std::string::npos) {
    const std::string version = source.substr(q + 1);
    source.resize(q);
    if (version != "versionId=null" && !version.empty()) {
      return ErrorXml("NotImplemented", "lote's S3 keeps no object versions", resource, id);
    }
  }
  source = sigv4::UriDecode(source);
  if (!source.empty() && source[0] == '/') source = source.substr(1);
  const size_t slash = source.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == source.size()) {
    return ErrorXml("InvalidArgument",
                    "Copy Source must mention the source bucket and key: sourcebucket/sourcekey",
                    resource, id);
  }
  *bucket = source.substr(0, slash);
  *key = source.substr(slash + 1);
  return std::nullopt;
}

}  // namespace

S3Api::S3Api(S3Options options) : options_(std::move(options)) {}

bool S3Api::Claims(const HttpRequest& request) const {
  if (VirtualBucket(request)) return true;
  const std::string auth = request.Header("authorization");
  if (auth.find("/s3/aws4_request") != std::string::npos) return true;
  if (IsPresignedV2(request)) return true;
  const std::string& q = request.raw_query;
  if (q.find("X-Amz-Credential=") != std::string::npos &&
      (q.find("%2Fs3%2Faws4_request") != std::string::npos ||
       q.find("/s3/aws4_request") != std::string::npos)) {
    return true;
  }
  return false;
}

HttpResponse S3Api::TransportError(const HttpRequest& request, int http_status,
                                   const Status& status) const {
  const std::string id = ApiRouter::NewRequestId();
  std::string bucket, key;
  Address(request, &bucket, &key);
  const std::string resource = "/" + bucket + (key.empty() ? "" : "/" + key);
  if (S3ErrorCode(status) != "InternalError") return ErrorOf(status, resource, id);
  std::string code = "InvalidRequest";
  if (http_status == 413) code = "EntityTooLarge";
  if (http_status == 408) code = "RequestTimeout";
  if (http_status == 503) code = "ServiceUnavailable";
  if (http_status >= 500 && http_status != 503) code = "InternalError";
  HttpResponse r = ErrorXml(code, status.message(), resource, id);
  r.status = http_status;
  return r;
}

std::shared_ptr<BodySink> S3Api::BodySinkFor(const HttpRequest& head) const {
  if (head.method != "PUT" || head.HasHeader("x-amz-copy-source")) return nullptr;
  auto sink = std::make_shared<S3ObjectSink>();
  Address(head, &sink->bucket, &sink->key);
  if (sink->bucket.empty() || sink->key.empty()) return nullptr;
  const auto query = ParseQuery(head.raw_query);
  for (const auto& [name, value] : query) {
    if (IsUnimplementedSubresource(name)) return nullptr;
    if (name == "partNumber") sink->part_number = std::atoi(value.c_str());
    if (name == "uploadId") sink->upload_id = value;
  }
  sink->operation = sink->upload_id.empty() ? "PutObject" : "UploadPart";
  const std::string request_id = ApiRouter::NewRequestId();
  auto refuse = [&](const Status& st) {
    sink->refusal = st;
    return sink;
  };
  const std::string content_sha = head.Header("x-amz-content-sha256");
  const bool presigned = head.raw_query.find("X-Amz-Signature=") != std::string::npos;
  if (options_.auth != nullptr) {
    std::optional<ApiError> denied;
    if (presigned) {
      denied = options_.auth->VerifyPresigned(head, "s3", &sink->access_key);
    } else if (IsPresignedV2(head)) {
      denied = VerifyPresignedV2(head, *options_.auth, *options_.clock, &sink->access_key);
    } else if (content_sha.empty() && head.HasHeader("authorization")) {
      denied = ApiError{400, "InvalidRequest",
                        "Missing required header for this request: x-amz-content-sha256"};
    } else {
      denied = options_.auth->Verify(head, "s3", &sink->access_key, &content_sha);
    }
    if (denied) {
      ApiError e = S3AuthError(*denied);
      Status st =
          e.http_status == 403 ? Status::PermissionDenied(e.code + ": " + e.message) : ToStatus(e);
      return refuse(st);
    }
    sink->verified = true;
  }
  if (StartsWith(content_sha, kStreamingPrefix)) {
    sink->chunked = true;
    if (StartsWith(content_sha, kStreamingSigned) && options_.auth != nullptr && !presigned) {
      Result<sigv4::Authorization> auth = sigv4::ParseAuthorization(head.Header("authorization"));
      std::optional<std::string> secret =
          auth.ok() ? options_.auth->SecretOf(auth->access_key_id) : std::nullopt;
      if (!secret) return refuse(Status::PermissionDenied("SignatureDoesNotMatch: unknown key"));
      sink->signed_chunks = true;
      sink->seed_signature = auth->signature;
      sink->amz_date = head.Header("x-amz-date");
      sink->scope = auth->Scope();
      sink->signing_key = sigv4::SigningKey(*secret, auth->date, auth->region, auth->service);
    }
  } else if (Lower(head.Header("content-encoding")).find("aws-chunked") != std::string::npos) {
    sink->chunked = true;
  }
  sink->decoder.set_hash_chunks(sink->signed_chunks);
  if (options_.access != nullptr) {
    Json request = {{"Bucket", sink->bucket}, {"Key", sink->key}};
    std::optional<std::string> refusal = options_.access->Authorize(
        ApiCall{"s3", sink->operation, sink->access_key, request_id}, request);
    SetCurrentCaller(nullptr);
    if (refusal) return refuse(Status::PermissionDenied("AccessDenied: " + *refusal));
  }
  sink->limit = options_.max_object_bytes;
  const std::string declared =
      head.Header(sink->chunked ? "x-amz-decoded-content-length" : "content-length");
  if (!declared.empty() && std::strtoull(declared.c_str(), nullptr, 10) > sink->limit) {
    return refuse(Status::ResourceExhausted(
        "EntityTooLarge: Your proposed upload exceeds the maximum allowed size of " +
        std::to_string(sink->limit) + " bytes"));
  }
  sink->checksum = ChecksumOf(head);
  if (!sink->checksum.algorithm.empty() && !IsS3ChecksumAlgorithm(sink->checksum.algorithm)) {
    return refuse(Status::InvalidArgument("InvalidRequest: lote does not compute the " +
                                          sink->checksum.algorithm +
                                          " checksum (CRC32, CRC32C, SHA1 and SHA256 it does)"));
  }
  sink->digest = std::make_unique<BodyDigest>(IsHex64(content_sha), sink->checksum.algorithm);
  if (sink->operation == "UploadPart") {
    if (sink->part_number < 1 || sink->part_number > objstore::Buckets::kMaxParts) {
      return refuse(Status::InvalidArgument(
          "InvalidArgument: Part number must be an integer between 1 and 10000, inclusive"));
    }
    Result<objstore::UploadInfo> upload =
        options_.buckets->GetUpload(sink->bucket, sink->upload_id);
    if (!upload.ok()) return refuse(upload.status());
    if (upload->key != sink->key) {
      return refuse(
          Status::NotFound("NoSuchUpload: The specified upload does not exist for this key"));
    }
  }
  Result<std::unique_ptr<objstore::PendingFile>> file =
      options_.buckets->NewPendingFile(sink->bucket);
  if (!file.ok()) return refuse(file.status());
  sink->file = std::move(*file);
  return sink;
}

HttpResponse S3Api::Handle(const HttpRequest& request, const std::string& request_id, bool verify,
                           const std::string& key) const {
  Call call{request, request_id, "", "", ParseQuery(request.raw_query), key, nullptr};
  Address(request, &call.bucket, &call.key);
  call.sink = std::dynamic_pointer_cast<S3ObjectSink>(request.body_sink);
  try {
    if (call.sink) {
      if (!call.sink->refusal.ok()) return ErrorOf(call.sink->refusal, call.Resource(), request_id);
      call.access_key = call.sink->access_key;
    } else if (verify && options_.auth != nullptr) {
      std::optional<ApiError> denied;
      if (request.raw_query.find("X-Amz-Signature=") != std::string::npos) {
        denied = options_.auth->VerifyPresigned(request, "s3", &call.access_key);
      } else if (IsPresignedV2(request)) {
        denied = VerifyPresignedV2(request, *options_.auth, *options_.clock, &call.access_key);
      } else {
        const std::string content_sha = request.Header("x-amz-content-sha256");
        if (IsHex64(content_sha) && content_sha != Sha256Hex(request.body)) {
          return ErrorXml("XAmzContentSHA256Mismatch",
                          "The provided 'x-amz-content-sha256' header does not match what was "
                          "computed.",
                          call.Resource(), request_id);
        }
        if (content_sha.empty() && request.HasHeader("authorization")) {
          return ErrorXml("InvalidRequest",
                          "Missing required header for this request: x-amz-content-sha256",
                          call.Resource(), request_id);
        }
        denied = options_.auth->Verify(request, "s3", &call.access_key, &content_sha);
      }
      if (denied) {
        ApiError e = S3AuthError(*denied);
        HttpResponse r = ErrorXml(e.code, e.message, call.Resource(), request_id);
        r.status = e.http_status;
        return r;
      }
    }
    HttpResponse r = Dispatch(call);
    // An answer without a body of its own is not JSON (the server's default type).
    const bool typed = std::any_of(r.headers.begin(), r.headers.end(), [](const auto& h) {
      return strcasecmp(h.first.c_str(), "content-type") == 0;
    });
    if (!typed) r.headers.emplace_back("Content-Type", "application/xml");
    return r;
  } catch (const std::exception& e) {
    spdlog::error("s3 request {}: {} {}: internal error: {}", request_id, request.method,
                  request.raw_path, e.what());
    return ErrorXml("InternalError",
                    "We encountered an internal error (request id " + request_id +
                        "); see the lote server's log",
                    call.Resource(), request_id);
  }
}

HttpResponse S3Api::Dispatch(Call& call) const {
  const HttpRequest& req = call.request;
  const std::string& id = call.request_id;
  objstore::Buckets& buckets = *options_.buckets;
  const std::string resource = call.Resource();

  for (const auto& [name, _] : call.query) {
    if (IsUnimplementedSubresource(name)) {
      return ErrorXml("NotImplemented",
                      "lote's S3 does not implement the '" + name +
                          "' sub-resource (docs/api.md, \"S3\" lists what it does)",
                      resource, id);
    }
  }
  const Authorize authorize = [&](const std::string& op, Json request,
                                  const std::function<HttpResponse()>& body) -> HttpResponse {
    const ApiCall api_call{"s3", op, call.access_key, id};
    struct ResetCaller {
      ~ResetCaller() { SetCurrentCaller(nullptr); }
    } reset;
    if (options_.access != nullptr) {
      if (std::optional<std::string> refusal = options_.access->Authorize(api_call, request)) {
        options_.access->Completed(api_call, request, nullptr, "AccessDenied");
        return ErrorXml("AccessDenied", *refusal, resource, id);
      }
    }
    HttpResponse r = body();
    if (options_.access != nullptr) {
      const bool ok = r.status < 300 || r.status == 304;
      const Json done = Json::object();
      options_.access->Completed(api_call, request, ok ? &done : nullptr,
                                 ok ? "" : std::to_string(r.status));
    }
    return r;
  };
  const Json bucket_req = {{"Bucket", call.bucket}};
  const Json object_req = {{"Bucket", call.bucket}, {"Key", call.key}};

  // The service: ListBuckets.
  if (call.bucket.empty()) {
    if (req.method != "GET") {
      return ErrorXml("MethodNotAllowed",
                      "The specified method is not allowed against this resource.", "/", id);
    }
    return authorize("ListBuckets", Json::object(), [&] {
      Result<std::vector<objstore::BucketInfo>> list = buckets.ListBuckets();
      if (!list.ok()) return ErrorOf(list.status(), "/", id);
      std::string xml = std::string("<ListAllMyBucketsResult") + kNs + "><Owner>" +
                        El("ID", options_.account_id) + El("DisplayName", "lote") +
                        "</Owner><Buckets>";
      for (const objstore::BucketInfo& b : *list) {
        xml += "<Bucket>" + El("Name", b.name) + El("CreationDate", XmlTime(b.created_millis)) +
               El("BucketRegion", options_.region) + "</Bucket>";
      }
      xml += "</Buckets></ListAllMyBucketsResult>";
      return Xml(200, std::move(xml), id);
    });
  }

  // Bucket operations.
  if (call.key.empty()) {
    if (req.method == "PUT") return CreateBucket(call, authorize);
    if (req.method == "HEAD") {
      return authorize("HeadBucket", bucket_req, [&] {
        Result<objstore::BucketInfo> info = buckets.HeadBucket(call.bucket);
        if (!info.ok()) return ErrorOf(info.status(), resource, id);
        HttpResponse r = Empty(200, id);
        r.headers.emplace_back("x-amz-bucket-region", options_.region);
        return r;
      });
    }
    if (req.method == "DELETE") {
      return authorize("DeleteBucket", bucket_req, [&] {
        Status st = buckets.DeleteBucket(call.bucket);
        return st.ok() ? Empty(204, id) : ErrorOf(st, resource, id);
      });
    }
    if (req.method == "POST" && call.Has("delete")) return DeleteObjects(call, authorize);
    if (req.method == "GET") {
      if (call.Has("location")) {
        return authorize("GetBucketLocation", bucket_req, [&] {
          Result<objstore::BucketInfo> info = buckets.HeadBucket(call.bucket);
          if (!info.ok()) return ErrorOf(info.status(), resource, id);
          const std::string region = options_.region == "us-east-1" ? "" : options_.region;
          return Xml(200,
                     std::string("<LocationConstraint") + kNs + ">" + XmlEscape(region) +
                         "</LocationConstraint>",
                     id);
        });
      }
      if (call.Has("versioning")) {
        return authorize("GetBucketVersioning", bucket_req, [&] {
          Result<objstore::BucketInfo> info = buckets.HeadBucket(call.bucket);
          if (!info.ok()) return ErrorOf(info.status(), resource, id);
          return Xml(200, std::string("<VersioningConfiguration") + kNs + "/>", id);
        });
      }
      if (call.Has("uploads")) return ListUploads(call, authorize);
      return ListObjects(call, authorize);
    }
    return ErrorXml("MethodNotAllowed",
                    "The specified method is not allowed against this resource.", resource, id);
  }

  // Object operations.
  if (req.method == "PUT") {
    if (req.HasHeader("x-amz-copy-source")) {
      if (call.Has("uploadId")) return UploadPartCopy(call, authorize);
      return CopyObject(call, authorize);
    }
    if (!call.sink) {
      return ErrorXml("InternalError", "the upload's body was not received", resource, id);
    }
    return PutObject(call, authorize);
  }
  if (req.method == "GET" || req.method == "HEAD") {
    if (req.method == "GET" && call.Has("uploadId")) return ListParts(call, authorize);
    return GetObject(call, authorize);
  }
  if (req.method == "DELETE") {
    if (call.Has("uploadId")) {
      return authorize("AbortMultipartUpload", object_req, [&] {
        Result<objstore::UploadInfo> upload =
            buckets.GetUpload(call.bucket, call.Param("uploadId"));
        if (upload.ok() && upload->key != call.key) {
          return ErrorXml("NoSuchUpload", "The specified upload does not exist for this key.",
                          resource, id);
        }
        Status st = buckets.AbortUpload(call.bucket, call.Param("uploadId"));
        return st.ok() ? Empty(204, id) : ErrorOf(st, resource, id);
      });
    }
    return authorize("DeleteObject", object_req, [&] {
      Status st = buckets.DeleteObject(call.bucket, call.key);
      return st.ok() ? Empty(204, id) : ErrorOf(st, resource, id);
    });
  }
  if (req.method == "POST") {
    if (call.Has("uploads")) return CreateUpload(call, authorize);
    if (call.Has("uploadId")) return CompleteUpload(call, authorize);
  }
  return ErrorXml("MethodNotAllowed", "The specified method is not allowed against this resource.",
                  resource, id);
}

HttpResponse S3Api::CreateBucket(Call& call, const Authorize& authorize) const {
  const std::string& id = call.request_id;
  const std::string resource = call.Resource();
  if (!call.request.body.empty()) {
    Result<XmlElement> config = ParseXml(call.request.body);
    if (!config.ok()) return ErrorXml("MalformedXML", config.status().message(), resource, id);
    const XmlElement* location = config->Child("LocationConstraint");
    // us-east-1 is named by no constraint; another region only by its own name.
    if (location != nullptr && !location->text.empty() &&
        (location->text != options_.region || options_.region == "us-east-1")) {
      return ErrorXml("IllegalLocationConstraintException",
                      "The " + location->text +
                          " location constraint is incompatible for the region specific "
                          "endpoint this request was sent to (this lote server is " +
                          options_.region + ")",
                      resource, id);
    }
  }
  return authorize("CreateBucket", Json{{"Bucket", call.bucket}}, [&] {
    Status st = options_.buckets->CreateBucket(call.bucket, options_.clock->NowMillis());
    // In us-east-1, creating a bucket you own again succeeds (AWS's legacy rule).
    if (!st.ok() &&
        !(S3ErrorCode(st) == "BucketAlreadyOwnedByYou" && options_.region == "us-east-1")) {
      return ErrorOf(st, resource, id);
    }
    HttpResponse r = Empty(200, id);
    r.headers.emplace_back("Location", "/" + call.bucket);
    return r;
  });
}

HttpResponse S3Api::ListObjects(Call& call, const Authorize& authorize) const {
  const std::string& id = call.request_id;
  const std::string resource = call.Resource();
  const bool v2 = call.Param("list-type") == "2";
  const std::string encoding = call.Param("encoding-type");
  if (!encoding.empty() && encoding != "url") {
    return ErrorXml("InvalidArgument", "Invalid Encoding Method specified in Request", resource,
                    id);
  }
  objstore::ListRequest list;
  list.prefix = call.Param("prefix");
  list.delimiter = call.Param("delimiter");
  if (call.Has("max-keys")) {
    const std::string text = call.Param("max-keys");
    char* end = nullptr;
    const long long n = std::strtoll(text.c_str(), &end, 10);
    if (text.empty() || *end != '\0' || n < 0) {
      return ErrorXml("InvalidArgument", "Provided max-keys not an integer or within integer range",
                      resource, id);
    }
    list.max_keys = static_cast<int32_t>(std::min<long long>(n, 1000));
  }
  std::string token;
  if (v2) {
    list.start_after = call.Param("start-after");
    token = call.Param("continuation-token");
    if (call.Has("continuation-token")) {
      std::string after;
      if (token.empty() || !Base64Decode(token, &after) || !StartsWith(after, "lote1:")) {
        return ErrorXml("InvalidArgument", "The continuation token provided is incorrect", resource,
                        id);
      }
      after = after.substr(6);
      if (after > list.start_after) list.start_after = after;
    }
  } else {
    list.start_after = call.Param("marker");
  }
  return authorize(v2 ? "ListObjectsV2" : "ListObjects", Json{{"Bucket", call.bucket}}, [&] {
    Result<objstore::ListResult> result = options_.buckets->List(call.bucket, list);
    if (!result.ok()) return ErrorOf(result.status(), resource, id);
    const bool url = encoding == "url";
    auto enc = [&](const std::string& text) { return url ? UrlEncodeKey(text) : text; };
    std::string xml = std::string("<ListBucketResult") + kNs + ">" + El("Name", call.bucket) +
                      El("Prefix", enc(list.prefix));
    if (v2) {
      xml +=
          El("KeyCount", std::to_string(result->objects.size() + result->common_prefixes.size()));
      if (call.Has("continuation-token")) xml += El("ContinuationToken", token);
      if (result->truncated) {
        xml += El("NextContinuationToken", Base64Encode("lote1:" + result->last));
      }
      if (call.Has("start-after")) xml += El("StartAfter", enc(call.Param("start-after")));
    } else {
      xml += El("Marker", enc(call.Param("marker")));
      if (result->truncated) xml += El("NextMarker", enc(result->last));
    }
    xml += El("MaxKeys", std::to_string(list.max_keys));
    if (!list.delimiter.empty()) xml += El("Delimiter", enc(list.delimiter));
    if (url) xml += El("EncodingType", "url");
    xml += El("IsTruncated", result->truncated ? "true" : "false");
    const bool owner = !v2 || call.Param("fetch-owner") == "true";
    for (const objstore::ListedObject& o : result->objects) {
      xml += "<Contents>" + El("Key", enc(o.key)) +
             El("LastModified", XmlTime(o.meta.mtime_millis)) + El("ETag", Quoted(o.meta.etag)) +
             El("Size", std::to_string(o.meta.size));
      if (owner) {
        xml += "<Owner>" + El("ID", options_.account_id) + El("DisplayName", "lote") + "</Owner>";
      }
      for (const auto& [algorithm, _] : o.meta.checksums) xml += El("ChecksumAlgorithm", algorithm);
      xml += El("StorageClass", "STANDARD") + "</Contents>";
    }
    for (const std::string& p : result->common_prefixes) {
      xml += "<CommonPrefixes>" + El("Prefix", enc(p)) + "</CommonPrefixes>";
    }
    xml += "</ListBucketResult>";
    return Xml(200, std::move(xml), id);
  });
}

HttpResponse S3Api::DeleteObjects(Call& call, const Authorize& authorize) const {
  const std::string& id = call.request_id;
  const std::string resource = call.Resource();
  const HttpRequest& req = call.request;
  if (std::string md5 = req.Header("content-md5"); !md5.empty()) {
    std::string want;
    BodyDigest digest(false, "");
    digest.Update(req.body);
    if (!Base64Decode(md5, &want) || HexEncode(want) != digest.Md5Hex()) {
      return ErrorXml("BadDigest", "The Content-MD5 you specified did not match what we received.",
                      resource, id);
    }
  }
  Result<XmlElement> doc = ParseXml(req.body);
  if (!doc.ok()) return ErrorXml("MalformedXML", doc.status().message(), resource, id);
  if (doc->name != "Delete") {
    return ErrorXml("MalformedXML",
                    "The XML you provided was not well-formed or did not validate against our "
                    "published schema (expected <Delete>)",
                    resource, id);
  }
  std::vector<std::string> keys;
  for (const XmlElement& child : doc->children) {
    if (child.name != "Object") continue;
    const XmlElement* k = child.Child("Key");
    if (k == nullptr) {
      return ErrorXml("MalformedXML", "an <Object> of <Delete> has no <Key>", resource, id);
    }
    keys.push_back(k->text);
  }
  if (keys.empty() || keys.size() > 1000) {
    return ErrorXml("MalformedXML",
                    "<Delete> must name 1 to 1000 objects; it names " + std::to_string(keys.size()),
                    resource, id);
  }
  const XmlElement* quiet_el = doc->Child("Quiet");
  const bool quiet = quiet_el != nullptr && quiet_el->text == "true";
  Result<objstore::BucketInfo> info = options_.buckets->HeadBucket(call.bucket);
  if (!info.ok()) return ErrorOf(info.status(), resource, id);
  std::string xml = std::string("<DeleteResult") + kNs + ">";
  for (const std::string& key : keys) {
    // Each key is its own s3:DeleteObject, allowed or refused alone (S3's rule).
    HttpResponse one = authorize("DeleteObject", Json{{"Bucket", call.bucket}, {"Key", key}}, [&] {
      Status st = options_.buckets->DeleteObject(call.bucket, key);
      if (st.ok()) return Empty(204, id);
      HttpResponse err = ErrorOf(st, resource, id);
      err.headers.emplace_back("x-lote-code", S3ErrorCode(st));
      err.headers.emplace_back("x-lote-message", st.message());
      return err;
    });
    if (one.status == 204) {
      if (!quiet) xml += "<Deleted>" + El("Key", key) + "</Deleted>";
      continue;
    }
    std::string code = "AccessDenied", message = "Access Denied";
    for (const auto& [name, value] : one.headers) {
      if (name == "x-lote-code") code = value;
      if (name == "x-lote-message") message = value;
    }
    xml += "<Error>" + El("Key", key) + El("Code", code) + El("Message", message) + "</Error>";
  }
  xml += "</DeleteResult>";
  return Xml(200, std::move(xml), id);
}

HttpResponse S3Api::PutObject(Call& call, const Authorize& authorize) const {
  const std::string& id = call.request_id;
  const std::string resource = call.Resource();
  const HttpRequest& req = call.request;
  S3ObjectSink& sink = *call.sink;
  sink.FinishHashing();
  if (sink.chunked && !sink.decoder.done()) {
    return ErrorXml("IncompleteBody",
                    "You did not provide the number of bytes specified by the aws-chunked "
                    "encoding (the final chunk never came)",
                    resource, id);
  }
  if (sink.chunked && req.HasHeader("x-amz-decoded-content-length") &&
      std::strtoull(req.Header("x-amz-decoded-content-length").c_str(), nullptr, 10) !=
          sink.received) {
    return ErrorXml("IncompleteBody",
                    "You did not provide the number of bytes specified by "
                    "x-amz-decoded-content-length (" +
                        req.Header("x-amz-decoded-content-length") + "; " +
                        std::to_string(sink.received) + " came)",
                    resource, id);
  }
  const std::string content_sha = req.Header("x-amz-content-sha256");
  if (IsHex64(content_sha) && sink.digest->Sha256Hex() != content_sha) {
    return ErrorXml("XAmzContentSHA256Mismatch",
                    "The provided 'x-amz-content-sha256' header does not match what was computed.",
                    resource, id);
  }
  if (sink.signed_chunks) {
    Status st = VerifyChunkSignatures(sink.decoder.chunks(), sink.seed_signature, sink.signing_key,
                                      sink.amz_date, sink.scope);
    if (!st.ok()) return ErrorOf(st, resource, id);
  }
  const std::string md5_hex = sink.digest->Md5Hex();
  if (std::string md5 = req.Header("content-md5"); !md5.empty()) {
    std::string want;
    if (!Base64Decode(md5, &want) || want.size() != 16) {
      return ErrorXml("InvalidDigest", "The Content-MD5 you specified was invalid.", resource, id);
    }
    if (HexEncode(want) != md5_hex) {
      return ErrorXml("BadDigest", "The Content-MD5 you specified did not match what we received.",
                      resource, id);
    }
  }
  ObjectMeta meta = MetaFromHeaders(req);
  meta.etag = md5_hex;
  const std::string checksum = sink.digest->ChecksumBase64();
  if (!sink.checksum.algorithm.empty()) {
    std::string sent = sink.checksum.header_value;
    if (sink.checksum.trailer) {
      auto it = sink.decoder.trailers().find("x-amz-checksum-" + Lower(sink.checksum.algorithm));
      if (it == sink.decoder.trailers().end()) {
        return ErrorXml("InvalidRequest",
                        "x-amz-trailer names " + req.Header("x-amz-trailer") +
                            " but the body's trailers do not carry it",
                        resource, id);
      }
      sent = it->second;
    }
    if (!sent.empty() && sent != checksum) {
      return ErrorXml("BadDigest",
                      "The " + sink.checksum.algorithm +
                          " you specified did not match the calculated checksum.",
                      resource, id);
    }
    meta.checksums[sink.checksum.algorithm] = checksum;
  }
  Json request = {{"Bucket", call.bucket}, {"Key", call.key}};
  if (sink.operation == "UploadPart") {
    return authorize("UploadPart", request, [&] {
      objstore::PartInfo part;
      part.number = sink.part_number;
      part.etag = md5_hex;
      part.checksums = meta.checksums;
      Result<objstore::PartInfo> stored = options_.buckets->PutPart(
          call.bucket, sink.upload_id, std::move(sink.file), std::move(part));
      if (!stored.ok()) return ErrorOf(stored.status(), resource, id);
      HttpResponse r = Empty(200, id);
      r.headers.emplace_back("ETag", Quoted(stored->etag));
      for (const auto& [alg, value] : stored->checksums)
        r.headers.emplace_back("x-amz-checksum-" + Lower(alg), value);
      return r;
    });
  }
  return authorize("PutObject", request, [&] {
    const std::string if_none = req.Header("if-none-match");
    if (!if_none.empty() && if_none != "*") {
      return ErrorXml("NotImplemented",
                      "If-None-Match on PutObject takes only '*' (create the key only if it does "
                      "not exist)",
                      resource, id);
    }
    if (std::string if_match = req.Header("if-match"); !if_match.empty()) {
      // S3's conditional write: the key must exist with this ETag.
      Result<ObjectMeta> current = options_.buckets->HeadObject(call.bucket, call.key);
      if (!current.ok() && S3ErrorCode(current.status()) != "NoSuchKey") {
        return ErrorOf(current.status(), resource, id);
      }
      if (!current.ok()) {
        return ErrorXml("NoSuchKey", "The specified key does not exist.", resource, id);
      }
      if (!EtagMatches(if_match, current->etag)) {
        return PreconditionFailed("If-Match", resource, id);
      }
    }
    Result<ObjectMeta> stored = options_.buckets->PutObject(
        call.bucket, call.key, std::move(sink.file), std::move(meta), if_none == "*");
    if (!stored.ok()) return ErrorOf(stored.status(), resource, id);
    HttpResponse r = Empty(200, id);
    r.headers.emplace_back("ETag", Quoted(stored->etag));
    for (const auto& [alg, value] : stored->checksums)
      r.headers.emplace_back("x-amz-checksum-" + Lower(alg), value);
    return r;
  });
}

HttpResponse S3Api::GetObject(Call& call, const Authorize& authorize) const {
  const std::string& id = call.request_id;
  const std::string resource = call.Resource();
  const HttpRequest& req = call.request;
  const bool head = req.method == "HEAD";
  return authorize(
      head ? "HeadObject" : "GetObject", Json{{"Bucket", call.bucket}, {"Key", call.key}},
      [&]() -> HttpResponse {
        Result<objstore::OpenObject> object = options_.buckets->GetObject(call.bucket, call.key);
        if (!object.ok()) return ErrorOf(object.status(), resource, id);
        const ObjectMeta& meta = object->meta;
        // Conditions, in S3's order (RFC 7232).
        const std::string if_match = req.Header("if-match");
        const std::string if_none = req.Header("if-none-match");
        auto not_modified = [&] {
          HttpResponse r = Empty(304, id);
          r.headers.emplace_back("ETag", Quoted(meta.etag));
          r.headers.emplace_back("Last-Modified", HttpDate(meta.mtime_millis));
          return r;
        };
        auto failed = [&](const char* condition) {
          return PreconditionFailed(condition, resource, id);
        };
        if (!if_match.empty() && !EtagMatches(if_match, meta.etag)) return failed("If-Match");
        if (if_match.empty()) {
          if (std::string since = req.Header("if-unmodified-since"); !since.empty()) {
            Result<int64_t> t = ParseHttpDate(since);
            if (t.ok() && meta.mtime_millis / 1000 > *t / 1000)
              return failed("If-Unmodified-Since");
          }
        }
        if (!if_none.empty() && EtagMatches(if_none, meta.etag)) return not_modified();
        if (if_none.empty()) {
          if (std::string since = req.Header("if-modified-since"); !since.empty()) {
            Result<int64_t> t = ParseHttpDate(since);
            if (t.ok() && meta.mtime_millis / 1000 <= *t / 1000) return not_modified();
          }
        }
        // partNumber: a single-part object is its own part 1 (as S3 answers);
        // a multipart object's parts are not kept apart once completed.
        if (call.Has("partNumber")) {
          if (call.Param("partNumber") != "1" || meta.parts > 0) {
            return ErrorXml("NotImplemented",
                            "lote's S3 answers GetObject/HeadObject by partNumber only for part 1 "
                            "of a single-part object; read multipart objects by Range",
                            resource, id);
          }
        }
        uint64_t first = 0;
        uint64_t length = meta.size;
        bool partial = false;
        if (std::string range = req.Header("range");
            StartsWith(range, "bytes=") && range.find(',') == std::string::npos) {
          const std::string spec = range.substr(6);
          const size_t dash = spec.find('-');
          const std::string a = spec.substr(0, dash);
          const std::string b = dash == std::string::npos ? "" : spec.substr(dash + 1);
          auto digits = [](const std::string& s) {
            return !s.empty() && s.size() < 20 &&
                   std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
          };
          bool valid = dash != std::string::npos && (digits(a) || digits(b)) &&
                       (a.empty() || digits(a)) && (b.empty() || digits(b));
          if (valid) {
            uint64_t start = 0, end = 0;
            if (a.empty()) {  // the last N bytes
              const uint64_t n = std::stoull(b);
              if (n == 0 || meta.size == 0) valid = false;
              start = meta.size > n ? meta.size - n : 0;
              end = meta.size == 0 ? 0 : meta.size - 1;
            } else {
              start = std::stoull(a);
              end = b.empty() ? (meta.size == 0 ? 0 : meta.size - 1)
                              : std::min<uint64_t>(std::stoull(b), meta.size - 1);
              if (!b.empty() && std::stoull(b) < start)
                valid = false;  // ignored, as RFC 7233 says
              else if (start >= meta.size) {
                return ErrorXml("InvalidRange", "The requested range is not satisfiable", resource,
                                id,
                                El("RangeRequested", range) +
                                    El("ActualObjectSize", std::to_string(meta.size)));
              }
            }
            if (valid && meta.size > 0) {
              first = start;
              length = end - start + 1;
              partial = true;
            } else if (a.empty() && meta.size == 0) {
              return ErrorXml("InvalidRange", "The requested range is not satisfiable", resource,
                              id, El("RangeRequested", range) + El("ActualObjectSize", "0"));
            }
          }
        }
        HttpResponse r = Empty(partial ? 206 : 200, id);
        AddObjectHeaders(meta, &r);
        if (partial) {
          r.headers.emplace_back("Content-Range", "bytes " + std::to_string(first) + "-" +
                                                      std::to_string(first + length - 1) + "/" +
                                                      std::to_string(meta.size));
        }
        if (!partial && Upper(req.Header("x-amz-checksum-mode")) == "ENABLED") {
          for (const auto& [alg, value] : meta.checksums)
            r.headers.emplace_back("x-amz-checksum-" + Lower(alg), value);
        }
        // response-* parameters override the stored headers (GET only in S3; HEAD too here).
        static const std::pair<const char*, const char*> kOverrides[] = {
            {"response-content-type", "Content-Type"},
            {"response-content-language", "Content-Language"},
            {"response-expires", "Expires"},
            {"response-cache-control", "Cache-Control"},
            {"response-content-disposition", "Content-Disposition"},
            {"response-content-encoding", "Content-Encoding"}};
        for (const auto& [param, header] : kOverrides) {
          if (!call.Has(param)) continue;
          const std::string value = call.Param(param);
          if (value.find_first_of(std::string("\r\n\0", 3)) != std::string::npos) {
            return ErrorXml("InvalidArgument",
                            std::string(param) + " must not hold a line break or NUL", resource,
                            id);
          }
          std::string_view name = header;
          r.headers.erase(std::remove_if(r.headers.begin(), r.headers.end(),
                                         [&](const auto& h) {
                                           return strcasecmp(h.first.c_str(), name.data()) == 0;
                                         }),
                          r.headers.end());
          r.headers.emplace_back(header, value);
        }
        r.file = FileBody{object->fd, first, length};
        return r;
      });
}

HttpResponse S3Api::CopyObject(Call& call, const Authorize& authorize) const {
  const std::string& id = call.request_id;
  const std::string resource = call.Resource();
  const HttpRequest& req = call.request;
  std::string src_bucket, src_key;
  if (std::optional<HttpResponse> bad = ParseCopySource(req, resource, id, &src_bucket, &src_key))
    return *bad;
  const std::string directive = req.Header("x-amz-metadata-directive");
  if (!directive.empty() && directive != "COPY" && directive != "REPLACE") {
    return ErrorXml("InvalidArgument", "Unknown metadata directive.", resource, id);
  }
  const bool replace = directive == "REPLACE";
  if (src_bucket == call.bucket && src_key == call.key && !replace) {
    return ErrorXml("InvalidRequest",
                    "This copy request is illegal because it is trying to copy an object to "
                    "itself without changing the object's metadata, storage class, website "
                    "redirect location or encryption attributes.",
                    resource, id);
  }
  Json request = {{"Bucket", call.bucket},
                  {"Key", call.key},
                  {"CopySourceBucket", src_bucket},
                  {"CopySourceKey", src_key}};
  return authorize("CopyObject", request, [&] {
    Result<ObjectMeta> current = options_.buckets->HeadObject(src_bucket, src_key);
    if (!current.ok()) return ErrorOf(current.status(), "/" + src_bucket + "/" + src_key, id);
    if (std::optional<HttpResponse> failed = CopySourceConditions(req, current->etag, resource, id))
      return *failed;
    std::optional<ObjectMeta> meta;
    if (replace) meta = MetaFromHeaders(req);
    Result<ObjectMeta> copied =
        options_.buckets->CopyObject(src_bucket, src_key, call.bucket, call.key, meta);
    if (!copied.ok()) return ErrorOf(copied.status(), resource, id);
    return Xml(200,
               std::string("<CopyObjectResult") + kNs + ">" +
                   El("LastModified", XmlTime(copied->mtime_millis)) +
                   El("ETag", Quoted(copied->etag)) + "</CopyObjectResult>",
               id);
  });
}

HttpResponse S3Api::CreateUpload(Call& call, const Authorize& authorize) const {
  const std::string& id = call.request_id;
  const std::string resource = call.Resource();
  return authorize("CreateMultipartUpload", Json{{"Bucket", call.bucket}, {"Key", call.key}}, [&] {
    Result<std::string> upload = options_.buckets->CreateUpload(
        call.bucket, call.key, MetaFromHeaders(call.request), options_.clock->NowMillis());
    if (!upload.ok()) return ErrorOf(upload.status(), resource, id);
    return Xml(200,
               std::string("<InitiateMultipartUploadResult") + kNs + ">" +
                   El("Bucket", call.bucket) + El("Key", call.key) + El("UploadId", *upload) +
                   "</InitiateMultipartUploadResult>",
               id);
  });
}

HttpResponse S3Api::CompleteUpload(Call& call, const Authorize& authorize) const {
  const std::string& id = call.request_id;
  const std::string resource = call.Resource();
  Result<XmlElement> doc = ParseXml(call.request.body);
  if (!doc.ok()) return ErrorXml("MalformedXML", doc.status().message(), resource, id);
  std::vector<std::pair<int32_t, std::string>> parts;
  for (const XmlElement& child : doc->children) {
    if (child.name != "Part") continue;
    const XmlElement* number = child.Child("PartNumber");
    const XmlElement* etag = child.Child("ETag");
    if (number == nullptr || etag == nullptr) {
      return ErrorXml("MalformedXML", "each <Part> needs a <PartNumber> and an <ETag>", resource,
                      id);
    }
    parts.emplace_back(std::atoi(number->text.c_str()), Unquoted(etag->text));
  }
  if (doc->name != "CompleteMultipartUpload" || parts.empty()) {
    return ErrorXml("MalformedXML",
                    "The XML you provided was not well-formed or did not validate against our "
                    "published schema (a <CompleteMultipartUpload> naming at least one <Part>)",
                    resource, id);
  }
  const std::string upload_id = call.Param("uploadId");
  return authorize(
      "CompleteMultipartUpload", Json{{"Bucket", call.bucket}, {"Key", call.key}}, [&] {
        Result<objstore::UploadInfo> upload = options_.buckets->GetUpload(call.bucket, upload_id);
        if (!upload.ok()) return ErrorOf(upload.status(), resource, id);
        if (upload->key != call.key) {
          return ErrorXml("NoSuchUpload", "The specified upload does not exist for this key.",
                          resource, id);
        }
        Result<ObjectMeta> done = options_.buckets->CompleteUpload(call.bucket, upload_id, parts);
        if (!done.ok()) return ErrorOf(done.status(), resource, id);
        const std::string host = call.request.Header("host");
        return Xml(200,
                   std::string("<CompleteMultipartUploadResult") + kNs + ">" +
                       El("Location",
                          "http://" + host + "/" + call.bucket + "/" + UrlEncodeKey(call.key)) +
                       El("Bucket", call.bucket) + El("Key", call.key) +
                       El("ETag", Quoted(done->etag)) + "</CompleteMultipartUploadResult>",
                   id);
      });
}

HttpResponse S3Api::UploadPartCopy(Call& call, const Authorize& authorize) const {
  const std::string& id = call.request_id;
  const std::string resource = call.Resource();
  const HttpRequest& req = call.request;
  std::string src_bucket, src_key;
  if (std::optional<HttpResponse> bad = ParseCopySource(req, resource, id, &src_bucket, &src_key))
    return *bad;
  const std::string upload_id = call.Param("uploadId");
  const int32_t number = std::atoi(call.Param("partNumber").c_str());
  if (number < 1 || number > objstore::Buckets::kMaxParts) {
    return ErrorXml("InvalidArgument",
                    "Part number must be an integer between 1 and 10000, inclusive", resource, id);
  }
  Json request = {{"Bucket", call.bucket},
                  {"Key", call.key},
                  {"CopySourceBucket", src_bucket},
                  {"CopySourceKey", src_key}};
  return authorize("UploadPartCopy", request, [&] {
    Result<objstore::UploadInfo> upload = options_.buckets->GetUpload(call.bucket, upload_id);
    if (!upload.ok()) return ErrorOf(upload.status(), resource, id);
    if (upload->key != call.key) {
      return ErrorXml("NoSuchUpload", "The specified upload does not exist for this key.", resource,
                      id);
    }
    Result<objstore::OpenObject> source = options_.buckets->GetObject(src_bucket, src_key);
    if (!source.ok()) return ErrorOf(source.status(), "/" + src_bucket + "/" + src_key, id);
    const ObjectMeta& meta = source->meta;
    if (std::optional<HttpResponse> failed = CopySourceConditions(req, meta.etag, resource, id))
      return *failed;
    uint64_t first = 0;
    uint64_t length = meta.size;
    if (std::string range = req.Header("x-amz-copy-source-range"); !range.empty()) {
      unsigned long long a = 0, b = 0;
      char tail = 0;
      if (std::sscanf(range.c_str(), "bytes=%llu-%llu%c", &a, &b, &tail) != 2 || a > b) {
        return ErrorXml("InvalidArgument",
                        "The x-amz-copy-source-range value must be of the form bytes=first-last "
                        "where first and last are the zero-based offsets of the first and last "
                        "bytes to copy",
                        resource, id);
      }
      if (b >= meta.size) {
        return ErrorXml("InvalidRange",
                        "The requested range is not satisfiable (the source is " +
                            std::to_string(meta.size) + " bytes)",
                        resource, id);
      }
      first = a;
      length = b - a + 1;
    }
    if (length > options_.max_object_bytes) {
      return ErrorXml("EntityTooLarge",
                      "Your proposed upload exceeds the maximum allowed size of " +
                          std::to_string(options_.max_object_bytes) + " bytes",
                      resource, id);
    }
    Result<std::unique_ptr<objstore::PendingFile>> file =
        options_.buckets->NewPendingFile(call.bucket);
    if (!file.ok()) return ErrorOf(file.status(), resource, id);
    BodyDigest digest(false, "");
    std::string buffer(std::min<uint64_t>(length, 1 << 20), '\0');
    for (uint64_t done = 0; done < length;) {
      const size_t want = static_cast<size_t>(std::min<uint64_t>(length - done, buffer.size()));
      const ssize_t n = ::pread(*source->fd, buffer.data(), want, static_cast<off_t>(first + done));
      if (n <= 0) {
        return ErrorOf(Status::Internal("cannot read /" + src_bucket + "/" + src_key +
                                        (n < 0 ? std::string(": ") + std::strerror(errno)
                                               : std::string(": it shrank while being copied"))),
                       resource, id);
      }
      const std::string_view bytes(buffer.data(), static_cast<size_t>(n));
      digest.Update(bytes);
      if (Status st = (*file)->Append(bytes); !st.ok()) return ErrorOf(st, resource, id);
      done += static_cast<uint64_t>(n);
    }
    objstore::PartInfo part;
    part.number = number;
    part.etag = digest.Md5Hex();
    Result<objstore::PartInfo> stored =
        options_.buckets->PutPart(call.bucket, upload_id, std::move(*file), std::move(part));
    if (!stored.ok()) return ErrorOf(stored.status(), resource, id);
    return Xml(200,
               std::string("<CopyPartResult") + kNs + ">" +
                   El("LastModified", XmlTime(stored->mtime_millis)) +
                   El("ETag", Quoted(stored->etag)) + "</CopyPartResult>",
               id);
  });
}

HttpResponse S3Api::ListParts(Call& call, const Authorize& authorize) const {
  const std::string& id = call.request_id;
  const std::string resource = call.Resource();
  const std::string upload_id = call.Param("uploadId");
  int32_t max_parts = 1000;
  if (call.Has("max-parts"))
    max_parts = std::clamp(std::atoi(call.Param("max-parts").c_str()), 1, 1000);
  const int32_t marker = std::atoi(call.Param("part-number-marker").c_str());
  return authorize("ListParts", Json{{"Bucket", call.bucket}, {"Key", call.key}}, [&] {
    Result<objstore::UploadInfo> upload = options_.buckets->GetUpload(call.bucket, upload_id);
    if (!upload.ok()) return ErrorOf(upload.status(), resource, id);
    if (upload->key != call.key) {
      return ErrorXml("NoSuchUpload", "The specified upload does not exist for this key.", resource,
                      id);
    }
    Result<std::vector<objstore::PartInfo>> parts =
        options_.buckets->ListParts(call.bucket, upload_id);
    if (!parts.ok()) return ErrorOf(parts.status(), resource, id);
    std::string body;
    int32_t shown = 0, last = marker;
    bool truncated = false;
    for (const objstore::PartInfo& p : *parts) {
      if (p.number <= marker) continue;
      if (shown == max_parts) {
        truncated = true;
        break;
      }
      body += "<Part>" + El("PartNumber", std::to_string(p.number)) +
              El("LastModified", XmlTime(p.mtime_millis)) + El("ETag", Quoted(p.etag)) +
              El("Size", std::to_string(p.size));
      for (const auto& [alg, value] : p.checksums) body += El("Checksum" + alg, value);
      body += "</Part>";
      last = p.number;
      ++shown;
    }
    const std::string owner = El("ID", options_.account_id) + El("DisplayName", "lote");
    return Xml(200,
               std::string("<ListPartsResult") + kNs + ">" + El("Bucket", call.bucket) +
                   El("Key", call.key) + El("UploadId", upload_id) + "<Initiator>" + owner +
                   "</Initiator><Owner>" + owner + "</Owner>" + El("StorageClass", "STANDARD") +
                   El("PartNumberMarker", std::to_string(marker)) +
                   El("NextPartNumberMarker", std::to_string(last)) +
                   El("MaxParts", std::to_string(max_parts)) +
                   El("IsTruncated", truncated ? "true" : "false") + body + "</ListPartsResult>",
               id);
  });
}

HttpResponse S3Api::ListUploads(Call& call, const Authorize& authorize) const {
  const std::string& id = call.request_id;
  const std::string resource = call.Resource();
  const std::string prefix = call.Param("prefix");
  const std::string key_marker = call.Param("key-marker");
  const std::string upload_id_marker = call.Param("upload-id-marker");
  int32_t max_uploads = 1000;
  if (call.Has("max-uploads"))
    max_uploads = std::clamp(std::atoi(call.Param("max-uploads").c_str()), 0, 1000);
  return authorize("ListMultipartUploads", Json{{"Bucket", call.bucket}}, [&] {
    Result<std::vector<objstore::UploadInfo>> uploads =
        options_.buckets->ListUploads(call.bucket, prefix);
    if (!uploads.ok()) return ErrorOf(uploads.status(), resource, id);
    std::string body;
    int32_t shown = 0;
    bool truncated = false;
    std::string next_key, next_id;
    bool passed_marker = false;
    const std::string owner = El("ID", options_.account_id) + El("DisplayName", "lote");
    for (const objstore::UploadInfo& u : *uploads) {
      // After the markers: keys past key-marker, and on key-marker itself the
      // uploads after upload-id-marker (in ListUploads' order).
      if (!key_marker.empty() && u.key < key_marker) continue;
      if (!key_marker.empty() && u.key == key_marker) {
        if (upload_id_marker.empty()) continue;
        if (!passed_marker) {
          passed_marker = u.upload_id == upload_id_marker;
          continue;
        }
      }
      if (shown == max_uploads) {
        truncated = true;
        break;
      }
      body += "<Upload>" + El("Key", u.key) + El("UploadId", u.upload_id) + "<Initiator>" + owner +
              "</Initiator><Owner>" + owner + "</Owner>" + El("StorageClass", "STANDARD") +
              El("Initiated", XmlTime(u.initiated_millis)) + "</Upload>";
      next_key = u.key;
      next_id = u.upload_id;
      ++shown;
    }
    return Xml(200,
               std::string("<ListMultipartUploadsResult") + kNs + ">" + El("Bucket", call.bucket) +
                   El("KeyMarker", key_marker) + El("UploadIdMarker", upload_id_marker) +
                   El("NextKeyMarker", truncated ? next_key : "") +
                   El("NextUploadIdMarker", truncated ? next_id : "") +
                   (prefix.empty() ? "" : El("Prefix", prefix)) +
                   El("MaxUploads", std::to_string(max_uploads)) +
                   El("IsTruncated", truncated ? "true" : "false") + body +
                   "</ListMultipartUploadsResult>",
               id);
  });
}

}  // namespace lote::api
