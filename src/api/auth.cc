#include "api/auth.h"

#include <algorithm>
#include <cstdlib>
#include <map>

#include "common/crypto.h"
#include "common/sigv4.h"

namespace lote::api {

namespace {

ApiError Denied(std::string code, std::string message) {
  return ApiError{403, std::move(code), std::move(message)};
}

}  // namespace

Authenticator::Authenticator(const Clock* clock, std::string region)
    : clock_(clock), region_(std::move(region)) {}

void Authenticator::AddKey(const std::string& access_key_id, const std::string& secret) {
  secrets_[access_key_id] = secret;
}

void Authenticator::SetKeySource(KeySource source) { key_source_ = std::move(source); }

std::optional<std::string> Authenticator::SecretOf(const std::string& access_key_id) const {
  if (auto fixed = secrets_.find(access_key_id); fixed != secrets_.end()) return fixed->second;
  if (key_source_) {
    if (std::optional<std::string> secret = key_source_(access_key_id)) return secret;
  }
  if (extra_key_source_) return extra_key_source_(access_key_id);
  return std::nullopt;
}

std::optional<ApiError> Authenticator::Verify(const HttpRequest& request, std::string_view service,
                                              std::string* access_key_id,
                                              const std::string* payload_sha256_hex) const {
  const std::string header = request.Header("authorization");
  if (header.empty()) {
    return Denied("MissingAuthenticationTokenException",
                  "Missing Authentication Token: the request has no SigV4 Authorization header. "
                  "Sign requests with the lote credentials (eval \"$(lote env)\" sets them up for "
                  "the aws CLI and SDKs)");
  }
  Result<sigv4::Authorization> auth = sigv4::ParseAuthorization(header);
  if (!auth.ok()) {
    return Denied("IncompleteSignatureException",
                  "The Authorization header is not a valid AWS Signature Version 4 header: " +
                      auth.status().message());
  }
  const std::string amz_date = request.Header("x-amz-date");
  if (amz_date.empty()) {
    return Denied("IncompleteSignatureException",
                  "Authorization header requires the 'X-Amz-Date' header; add it (AWS SDKs do)");
  }
  Result<int64_t> signed_at = sigv4::ParseAmzDate(amz_date);
  if (!signed_at.ok()) {
    return Denied("IncompleteSignatureException",
                  "X-Amz-Date '" + amz_date + "' is not in the form YYYYMMDDTHHMMSSZ");
  }
  // The headers that choose what a request does must be covered by its
  // signature, or they could be changed in flight: Host, X-Amz-Date, and where
  // present X-Amz-Target (the operation of a json-protocol call) and
  // Content-Type (when there is a body to type).
  auto is_signed = [&](std::string_view name) {
    return std::find(auth->signed_headers.begin(), auth->signed_headers.end(), name) !=
           auth->signed_headers.end();
  };
  for (const char* name : {"host", "x-amz-date", "x-amz-target", "content-type"}) {
    const std::string_view n = name;
    const bool required = n == "host" || n == "x-amz-date" ||
                          (n == "x-amz-target" && request.HasHeader(n)) ||
                          (n == "content-type" && request.HasHeader(n) && !request.body.empty());
    if (required && !is_signed(n)) {
      return Denied("IncompleteSignatureException",
                    "SignedHeaders must include '" + std::string(n) +
                        "' (host and x-amz-date always, x-amz-target and content-type when "
                        "sent); sign the " +
                        std::string(n) + " header");
    }
  }
  std::optional<std::string> secret = SecretOf(auth->access_key_id);
  if (!secret) {
    return Denied("UnrecognizedClientException",
                  "The security token included in the request is invalid: access key " +
                      auth->access_key_id +
                      " is not known to this lote server (never created, rotated or deleted). Use "
                      "a key of yours (`lote keys create`), or the administrator's key pair in "
                      "the server's credentials file ($LOTE_HOME/credentials, profile lote)");
  }
  if (auth->service != service) {
    return Denied("InvalidSignatureException",
                  "Credential should be scoped to correct service: '" + std::string(service) +
                      "' (the request is signed for '" + auth->service + "')");
  }
  if (auth->region != region_) {
    return Denied("InvalidSignatureException",
                  "Credential should be scoped to a valid region, not '" + auth->region +
                      "'. This lote server is region '" + region_ +
                      "'; set AWS_DEFAULT_REGION/AWS_REGION (or --region) to it");
  }
  if (amz_date.substr(0, 8) != auth->date) {
    return Denied("InvalidSignatureException", "Date in Credential scope (" + auth->date +
                                                   ") does not match the date of X-Amz-Date (" +
                                                   amz_date.substr(0, 8) + ")");
  }
  const int64_t now = clock_->NowMillis();
  if (*signed_at < now - kMaxSkewMillis) {
    return Denied("InvalidSignatureException",
                  "Signature expired: " + amz_date + " is now earlier than " +
                      sigv4::FormatAmzDate(now - kMaxSkewMillis) +
                      " (15 minutes before the server's time " + sigv4::FormatAmzDate(now) +
                      "); check the client's clock");
  }
  if (*signed_at > now + kMaxSkewMillis) {
    return Denied("InvalidSignatureException",
                  "Signature not yet current: " + amz_date + " is still later than " +
                      sigv4::FormatAmzDate(now + kMaxSkewMillis) +
                      " (15 minutes after the server's time " + sigv4::FormatAmzDate(now) +
                      "); check the client's clock");
  }
  sigv4::Request canonical;
  canonical.method = request.method;
  canonical.raw_path = request.raw_path;
  canonical.raw_query = request.raw_query;
  canonical.headers = request.headers;
  canonical.payload_sha256_hex = payload_sha256_hex ? *payload_sha256_hex : Sha256Hex(request.body);
  const std::string expected = sigv4::ComputeSignature(canonical, auth->signed_headers, *secret,
                                                       amz_date, auth->region, auth->service);
  if (!ConstantTimeEquals(expected, auth->signature)) {
    return Denied("InvalidSignatureException",
                  "The request signature we calculated does not match the signature you "
                  "provided. Check your AWS Secret Access Key and signing method (the secret for "
                  "key " +
                      auth->access_key_id + " is in the lote credentials file)");
  }
  if (access_key_id) *access_key_id = auth->access_key_id;
  return std::nullopt;
}

std::optional<ApiError> Authenticator::VerifyPresigned(const HttpRequest& request,
                                                       std::string_view service,
                                                       std::string* access_key_id) const {
  std::map<std::string, std::string> params;
  std::string unsigned_query;  // every parameter but the signature, as sent
  size_t start = 0;
  const std::string& q = request.raw_query;
  while (start <= q.size()) {
    size_t amp = q.find('&', start);
    if (amp == std::string::npos) amp = q.size();
    const std::string part = q.substr(start, amp - start);
    start = amp + 1;
    if (part.empty()) continue;
    const size_t eq = part.find('=');
    const std::string name = sigv4::UriDecode(part.substr(0, eq));
    const std::string value = eq == std::string::npos ? "" : sigv4::UriDecode(part.substr(eq + 1));
    params[name] = value;
    if (name == "X-Amz-Signature") continue;
    if (!unsigned_query.empty()) unsigned_query += '&';
    unsigned_query += part;
  }
  for (const char* name : {"X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Date", "X-Amz-Expires",
                           "X-Amz-SignedHeaders", "X-Amz-Signature"}) {
    if (params[name].empty()) {
      return ApiError{400, "AuthorizationQueryParametersError",
                      std::string("a presigned URL needs the query parameter ") + name};
    }
  }
  if (params["X-Amz-Algorithm"] != "AWS4-HMAC-SHA256") {
    return ApiError{400, "AuthorizationQueryParametersError",
                    "X-Amz-Algorithm must be AWS4-HMAC-SHA256"};
  }
  // The same checks as a header signature, on a header built from the query.
  Result<sigv4::Authorization> auth =
      sigv4::ParseAuthorization("AWS4-HMAC-SHA256 Credential=" + params["X-Amz-Credential"] +
                                ", SignedHeaders=" + params["X-Amz-SignedHeaders"] +
                                ", Signature=" + params["X-Amz-Signature"]);
  if (!auth.ok()) {
    return ApiError{400, "AuthorizationQueryParametersError",
                    "the presigned URL's credential is malformed: " + auth.status().message()};
  }
  std::optional<std::string> secret = SecretOf(auth->access_key_id);
  if (!secret) {
    return Denied("InvalidAccessKeyId",
                  "The AWS Access Key Id you provided does not exist in our records: " +
                      auth->access_key_id + " is not a key of this lote server");
  }
  if (auth->service != service || auth->region != region_) {
    return ApiError{400, "AuthorizationQueryParametersError",
                    "the presigned URL is scoped to " + auth->region + "/" + auth->service +
                        "; this lote server is " + region_ + "/" + std::string(service)};
  }
  const std::string& amz_date = params["X-Amz-Date"];
  Result<int64_t> signed_at = sigv4::ParseAmzDate(amz_date);
  char* end = nullptr;
  const long long expires = std::strtoll(params["X-Amz-Expires"].c_str(), &end, 10);
  if (!signed_at.ok() || *end != '\0' || expires < 1 || expires > 604800) {
    return ApiError{400, "AuthorizationQueryParametersError",
                    "X-Amz-Date must be YYYYMMDDTHHMMSSZ and X-Amz-Expires 1..604800 seconds"};
  }
  const int64_t now = clock_->NowMillis();
  if (now > *signed_at + expires * 1000) {
    return Denied("AccessDenied", "Request has expired: the URL was signed at " + amz_date +
                                      " for " + std::to_string(expires) + " seconds");
  }
  if (*signed_at > now + kMaxSkewMillis) {
    return Denied("AccessDenied", "Request is not yet valid: X-Amz-Date " + amz_date +
                                      " is in the future; check the client's clock");
  }
  sigv4::Request canonical;
  canonical.method = request.method;
  canonical.raw_path = request.raw_path;
  canonical.raw_query = unsigned_query;
  canonical.headers = request.headers;
  canonical.payload_sha256_hex = "UNSIGNED-PAYLOAD";
  const std::string expected = sigv4::ComputeSignature(canonical, auth->signed_headers, *secret,
                                                       amz_date, auth->region, auth->service);
  if (!ConstantTimeEquals(expected, auth->signature)) {
    return Denied("SignatureDoesNotMatch",
                  "The request signature we calculated does not match the signature you "
                  "provided (presigned URL): it was changed, or signed with another key");
  }
  if (access_key_id) *access_key_id = auth->access_key_id;
  return std::nullopt;
}

}  // namespace lote::api
