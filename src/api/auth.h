// SigV4 verification of incoming requests.
//
// Contract: Verify() accepts a request only if it carries an AWS Signature
// Version 4 Authorization header for a known access key, scoped to this
// server's region and the expected service, dated within 15 minutes of the
// injected clock, whose signature matches (compared in constant time). Each
// rejection carries the error code AWS returns for that case:
//   no Authorization header          → 403 MissingAuthenticationTokenException
//   malformed header / no X-Amz-Date → 403 IncompleteSignatureException
//   unknown access key               → 403 UnrecognizedClientException
//   wrong scope (region/service/day) → 403 InvalidSignatureException
//   clock skew over 15 minutes       → 403 InvalidSignatureException ("Signature expired")
//   signature mismatch               → 403 InvalidSignatureException
// Keys come from AddKey (fixed, added before serving) and from the key source
// (the IAM directory: keys created, rotated and deleted while serving, each
// change seen by the next request).
// Thread safety: AddKey and SetKeySource before serving; Verify is then const
// and safe to call concurrently (the key source must be thread safe).
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "api/errors.h"
#include "api/http_types.h"
#include "common/clock.h"

namespace lote::api {

class Authenticator {
 public:
  Authenticator(const Clock* clock, std::string region);

  void AddKey(const std::string& access_key_id, const std::string& secret_access_key);
  // The secret of an access key id, nullopt for an unknown key.
  using KeySource = std::function<std::optional<std::string>(const std::string& access_key_id)>;
  void SetKeySource(KeySource source);
  // Asked for keys neither AddKey nor the key source knows (the jobs layer's
  // job keys, iam/job_keys.h). Set before serving.
  void SetExtraKeySource(KeySource source) { extra_key_source_ = std::move(source); }

  // nullopt when the request is authentic; then *access_key_id (when not
  // null) is the key that signed it.
  // `payload_sha256_hex`: the payload hash to sign with (S3's
  // x-amz-content-sha256, which the caller checks against the body); null:
  // the SHA-256 of request.body.
  std::optional<ApiError> Verify(const HttpRequest& request, std::string_view service,
                                 std::string* access_key_id = nullptr,
                                 const std::string* payload_sha256_hex = nullptr) const;
  // A presigned URL's query signature (X-Amz-Algorithm, X-Amz-Credential,
  // X-Amz-Date, X-Amz-Expires, X-Amz-SignedHeaders, X-Amz-Signature; the
  // payload UNSIGNED-PAYLOAD), with the codes of Verify plus
  // "AccessDenied" ("Request has expired") after X-Amz-Expires seconds.
  std::optional<ApiError> VerifyPresigned(const HttpRequest& request, std::string_view service,
                                          std::string* access_key_id = nullptr) const;
  // The secret of an access key (fixed or from the key source), nullopt for
  // an unknown one: S3's streaming uploads sign each chunk with it.
  std::optional<std::string> SecretOf(const std::string& access_key_id) const;

  static constexpr int64_t kMaxSkewMillis = 15 * 60 * 1000;

 private:
  const Clock* clock_;
  std::string region_;
  std::map<std::string, std::string, std::less<>> secrets_;  // access key id → secret
  KeySource key_source_;
  KeySource extra_key_source_;
};

}  // namespace lote::api
