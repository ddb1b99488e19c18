#include "common/sigv4.h"

#include <algorithm>
#include <cctype>
#include <ctime>
#include <map>

#include "common/clock.h"
#include "common/crypto.h"

namespace lote::sigv4 {
namespace {

bool IsUnreserved(unsigned char c) {
  return std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~';
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::string FoldSpaces(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  bool prev_space = false;
  for (char c : Trim(s)) {
    bool space = c == ' ' || c == '\t';
    if (space && prev_space) continue;
    out.push_back(space ? ' ' : c);
    prev_space = space;
  }
  return out;
}

}  // namespace

std::string UriEncode(std::string_view s, bool encode_slash) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size() * 3);
  for (unsigned char c : s) {
    if (IsUnreserved(c) || (c == '/' && !encode_slash)) {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

std::string UriDecode(std::string_view s) {
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && hex(s[i + 1]) >= 0 && hex(s[i + 2]) >= 0) {
      out.push_back(static_cast<char>(hex(s[i + 1]) * 16 + hex(s[i + 2])));
      i += 2;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

std::string CanonicalUri(std::string_view raw_path, bool s3) {
  if (raw_path.empty()) return "/";
  if (s3) return std::string(raw_path);
  return UriEncode(raw_path, /*encode_slash=*/false);
}

std::string CanonicalQueryString(std::string_view raw_query) {
  std::vector<std::pair<std::string, std::string>> params;
  size_t start = 0;
  while (start <= raw_query.size() && !raw_query.empty()) {
    size_t end = raw_query.find('&', start);
    if (end == std::string_view::npos) end = raw_query.size();
    std::string_view part = raw_query.substr(start, end - start);
    if (!part.empty()) {
      size_t eq = part.find('=');
      std::string key(part.substr(0, eq));
      std::string value = eq == std::string_view::npos ? "" : std::string(part.substr(eq + 1));
      params.emplace_back(UriEncode(UriDecode(key), true), UriEncode(UriDecode(value), true));
    }
    start = end + 1;
  }
  std::sort(params.begin(), params.end());
  std::string out;
  for (size_t i = 0; i < params.size(); ++i) {
    if (i) out.push_back('&');
    out += params[i].first + "=" + params[i].second;
  }
  return out;
}

std::string CanonicalHeaders(const Request& request,
                             const std::vector<std::string>& signed_headers) {
  std::map<std::string, std::string> values;
  for (const auto& [name, value] : request.headers) {
    std::string key = Lower(name);
    auto it = values.find(key);
    if (it == values.end()) {
      values.emplace(key, FoldSpaces(value));
    } else {
      it->second += "," + FoldSpaces(value);
    }
  }
  std::string out;
  for (const auto& name : signed_headers) {
    auto it = values.find(name);
    out += name + ":" + (it == values.end() ? "" : it->second) + "\n";
  }
  return out;
}

static std::string JoinSigned(const std::vector<std::string>& signed_headers) {
  std::string out;
  for (size_t i = 0; i < signed_headers.size(); ++i) {
    if (i) out.push_back(';');
    out += signed_headers[i];
  }
  return out;
}

std::string CanonicalRequest(const Request& request, const std::vector<std::string>& signed_headers,
                             bool s3) {
  return request.method + "\n" + CanonicalUri(request.raw_path, s3) + "\n" +
         CanonicalQueryString(request.raw_query) + "\n" +
         CanonicalHeaders(request, signed_headers) + "\n" + JoinSigned(signed_headers) + "\n" +
         request.payload_sha256_hex;
}

std::string StringToSign(std::string_view amz_date, std::string_view scope,
                         std::string_view canonical_request) {
  return "AWS4-HMAC-SHA256\n" + std::string(amz_date) + "\n" + std::string(scope) + "\n" +
         Sha256Hex(canonical_request);
}

std::string SigningKey(std::string_view secret, std::string_view date, std::string_view region,
                       std::string_view service) {
  std::string k = HmacSha256("AWS4" + std::string(secret), date);
  k = HmacSha256(k, region);
  k = HmacSha256(k, service);
  return HmacSha256(k, "aws4_request");
}

namespace {

// SigningKey for the last secret, day, region and service this thread signed
// or checked with: four HMACs that every request of a day repeats otherwise.
const std::string& CachedSigningKey(std::string_view secret, std::string_view date,
                                    std::string_view region, std::string_view service) {
  thread_local std::string last_secret, last_date, last_region, last_service, key;
  if (key.empty() || secret != last_secret || date != last_date || region != last_region ||
      service != last_service) {
    key = SigningKey(secret, date, region, service);
    last_secret = secret;
    last_date = date;
    last_region = region;
    last_service = service;
  }
  return key;
}

}  // namespace

std::string ComputeSignature(const Request& request, const std::vector<std::string>& signed_headers,
                             std::string_view secret, std::string_view amz_date,
                             std::string_view region, std::string_view service) {
  std::string date(amz_date.substr(0, 8));
  std::string scope =
      date + "/" + std::string(region) + "/" + std::string(service) + "/aws4_request";
  bool s3 = service == "s3";
  std::string sts = StringToSign(amz_date, scope, CanonicalRequest(request, signed_headers, s3));
  return HexEncode(HmacSha256(CachedSigningKey(secret, date, region, service), sts));
}

void SignRequest(Request* request, const Credentials& creds, std::string_view region,
                 std::string_view service, std::string_view amz_date) {
  auto& h = request->headers;
  auto erase = [&h](std::string_view name) {
    h.erase(
        std::remove_if(h.begin(), h.end(), [&](const auto& kv) { return Lower(kv.first) == name; }),
        h.end());
  };
  erase("authorization");
  erase("x-amz-date");
  h.emplace_back("x-amz-date", std::string(amz_date));
  if (service == "s3") {
    erase("x-amz-content-sha256");
    h.emplace_back("x-amz-content-sha256", request->payload_sha256_hex);
  }
  if (!creds.session_token.empty()) {
    erase("x-amz-security-token");
    h.emplace_back("x-amz-security-token", creds.session_token);
  }
  std::vector<std::string> signed_headers;
  for (const auto& [name, value] : h) {
    std::string key = Lower(name);
    if (key == "host" || key == "content-type" || key == "content-md5" ||
        key.rfind("x-amz-", 0) == 0) {
      signed_headers.push_back(key);
    }
  }
  std::sort(signed_headers.begin(), signed_headers.end());
  signed_headers.erase(std::unique(signed_headers.begin(), signed_headers.end()),
                       signed_headers.end());
  std::string signature = ComputeSignature(*request, signed_headers, creds.secret_access_key,
                                           amz_date, region, service);
  std::string date(amz_date.substr(0, 8));
  h.emplace_back("Authorization", "AWS4-HMAC-SHA256 Credential=" + creds.access_key_id + "/" +
                                      date + "/" + std::string(region) + "/" +
                                      std::string(service) + "/aws4_request, SignedHeaders=" +
                                      JoinSigned(signed_headers) + ", Signature=" + signature);
}

std::string FormatAmzDate(int64_t unix_millis) { return FormatUtc(unix_millis, "%Y%m%dT%H%M%SZ"); }

Result<int64_t> ParseAmzDate(std::string_view amz_date) {
  if (amz_date.size() != 16 || amz_date[8] != 'T' || amz_date[15] != 'Z') {
    return Status::InvalidArgument("X-Amz-Date '" + std::string(amz_date) +
                                   "' is not in the form YYYYMMDDTHHMMSSZ");
  }
  for (size_t i = 0; i < 15; ++i) {
    if (i != 8 && !std::isdigit(static_cast<unsigned char>(amz_date[i]))) {
      return Status::InvalidArgument("X-Amz-Date '" + std::string(amz_date) +
                                     "' is not in the form YYYYMMDDTHHMMSSZ");
    }
  }
  auto num = [&](size_t pos, size_t len) {
    return std::stoi(std::string(amz_date.substr(pos, len)));
  };
  std::tm tm{};
  tm.tm_year = num(0, 4) - 1900;
  tm.tm_mon = num(4, 2) - 1;
  tm.tm_mday = num(6, 2);
  tm.tm_hour = num(9, 2);
  tm.tm_min = num(11, 2);
  tm.tm_sec = num(13, 2);
  return static_cast<int64_t>(timegm(&tm)) * 1000;
}

Result<Authorization> ParseAuthorization(std::string_view header) {
  constexpr std::string_view kAlgo = "AWS4-HMAC-SHA256";
  header = Trim(header);
  if (header.substr(0, kAlgo.size()) != kAlgo) {
    return Status::InvalidArgument("Authorization header must start with AWS4-HMAC-SHA256");
  }
  header.remove_prefix(kAlgo.size());
  Authorization auth;
  bool have_cred = false, have_signed = false, have_sig = false;
  size_t start = 0;
  while (start < header.size()) {
    size_t end = header.find(',', start);
    if (end == std::string_view::npos) end = header.size();
    std::string_view part = Trim(header.substr(start, end - start));
    start = end + 1;
    if (part.empty()) continue;
    size_t eq = part.find('=');
    if (eq == std::string_view::npos) {
      return Status::InvalidArgument("Authorization component '" + std::string(part) +
                                     "' is not of the form key=value");
    }
    std::string_view key = part.substr(0, eq), value = part.substr(eq + 1);
    if (key == "Credential") {
      std::vector<std::string> f;
      size_t s = 0;
      while (true) {
        size_t slash = value.find('/', s);
        f.emplace_back(value.substr(s, slash == std::string_view::npos ? value.npos : slash - s));
        if (slash == std::string_view::npos) break;
        s = slash + 1;
      }
      if (f.size() != 5 || f[4] != "aws4_request" || f[0].empty()) {
        return Status::InvalidArgument(
            "Credential should be scoped to a valid region: expected "
            "<access key>/<yyyymmdd>/<region>/<service>/aws4_request, got '" +
            std::string(value) + "'");
      }
      auth.access_key_id = f[0];
      auth.date = f[1];
      auth.region = f[2];
      auth.service = f[3];
      have_cred = true;
    } else if (key == "SignedHeaders") {
      size_t s = 0;
      while (s <= value.size()) {
        size_t semi = value.find(';', s);
        if (semi == std::string_view::npos) semi = value.size();
        if (semi > s) auth.signed_headers.emplace_back(value.substr(s, semi - s));
        s = semi + 1;
      }
      have_signed = !auth.signed_headers.empty();
    } else if (key == "Signature") {
      auth.signature = std::string(value);
      have_sig = !auth.signature.empty();
    }
  }
  if (!have_cred)
    return Status::InvalidArgument("Authorization header requires 'Credential' parameter");
  if (!have_signed)
    return Status::InvalidArgument("Authorization header requires 'SignedHeaders' parameter");
  if (!have_sig)
    return Status::InvalidArgument("Authorization header requires 'Signature' parameter");
  return auth;
}

}  // namespace lote::sigv4
