#include "api/auth.h"

#include <algorithm>

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

std::optional<ApiError> Authenticator::Verify(const HttpRequest& request, std::string_view service,
                                              std::string* access_key_id) const {
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
  std::optional<std::string> secret;
  if (auto fixed = secrets_.find(auth->access_key_id); fixed != secrets_.end()) {
    secret = fixed->second;
  } else if (key_source_) {
    secret = key_source_(auth->access_key_id);
  }
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
  canonical.payload_sha256_hex = Sha256Hex(request.body);
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

}  // namespace lote::api
