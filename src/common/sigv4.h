// AWS Signature Version 4: one implementation for both signing (the S3 client,
// test tools) and verification (the server). Pure functions; thread safe.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace lote::sigv4 {

struct Credentials {
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;  // optional
};

// An HTTP request as it is sent on the wire.
struct Request {
  std::string method;  // "GET", "POST", ...
  std::string
      raw_path;  // path exactly as sent, still percent-encoded, e.g. "/v1/tags/arn%3Aaws..."
  std::string raw_query;  // query string as sent, without '?', may be empty
  std::vector<std::pair<std::string, std::string>> headers;  // any case, in order
  std::string payload_sha256_hex;  // hex SHA-256 of the body, or "UNSIGNED-PAYLOAD"
};

// RFC 3986 encoding as SigV4 wants it: unreserved characters kept, the rest %XX
// (uppercase). '/' is kept unless encode_slash.
std::string UriEncode(std::string_view s, bool encode_slash);
// Percent-decoding; '+' is left as is.
std::string UriDecode(std::string_view s);

// The canonical URI: S3 uses the path as sent; every other service encodes the
// sent path once more (so "%3A" becomes "%253A"), as botocore does.
std::string CanonicalUri(std::string_view raw_path, bool s3);
// Parameters decoded, re-encoded strictly, sorted by name then value.
std::string CanonicalQueryString(std::string_view raw_query);
// "name:value\n" lines for the signed headers (lowercase, trimmed, inner runs of
// spaces folded, repeated headers joined with ',').
std::string CanonicalHeaders(const Request& request,
                             const std::vector<std::string>& signed_headers);

std::string CanonicalRequest(const Request& request, const std::vector<std::string>& signed_headers,
                             bool s3);
// scope = "<yyyymmdd>/<region>/<service>/aws4_request"
std::string StringToSign(std::string_view amz_date, std::string_view scope,
                         std::string_view canonical_request);
std::string SigningKey(std::string_view secret, std::string_view date, std::string_view region,
                       std::string_view service);  // raw 32 bytes
std::string ComputeSignature(const Request& request, const std::vector<std::string>& signed_headers,
                             std::string_view secret, std::string_view amz_date,
                             std::string_view region, std::string_view service);  // hex

// Adds x-amz-date, x-amz-content-sha256 (s3 only), x-amz-security-token (when
// set) and Authorization, signing host and every x-amz-* header present plus
// content-type. amz_date is "YYYYMMDDTHHMMSSZ".
void SignRequest(Request* request, const Credentials& creds, std::string_view region,
                 std::string_view service, std::string_view amz_date);

// "20150830T123600Z" for a Unix time in milliseconds.
std::string FormatAmzDate(int64_t unix_millis);
// Parses "YYYYMMDDTHHMMSSZ" to Unix milliseconds.
Result<int64_t> ParseAmzDate(std::string_view amz_date);

// The fields of "AWS4-HMAC-SHA256 Credential=AKID/20150830/us-east-1/iam/aws4_request,
// SignedHeaders=host;x-amz-date, Signature=...".
struct Authorization {
  std::string access_key_id;
  std::string date;  // yyyymmdd
  std::string region;
  std::string service;
  std::vector<std::string> signed_headers;
  std::string signature;
  std::string Scope() const { return date + "/" + region + "/" + service + "/aws4_request"; }
};
// InvalidArgument with a message naming the defect when malformed.
Result<Authorization> ParseAuthorization(std::string_view header);

}  // namespace lote::sigv4
