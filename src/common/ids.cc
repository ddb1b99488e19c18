#include "common/ids.h"

#include <cstdio>
#include <utility>

#include "common/crypto.h"

namespace lote {

namespace {

// 16 bytes as a UUID of `version` (RFC 9562 variant): 8-4-4-4-12 lowercase hex.
std::string UuidText(std::string b, int version) {
  b[6] = static_cast<char>((b[6] & 0x0f) | (version << 4));
  b[8] = static_cast<char>((b[8] & 0x3f) | 0x80);
  std::string hex = HexEncode(b);
  return hex.substr(0, 8) + "-" + hex.substr(8, 4) + "-" + hex.substr(12, 4) + "-" +
         hex.substr(16, 4) + "-" + hex.substr(20, 12);
}

}  // namespace

std::string NewUuid() { return UuidText(RandomBytes(16), 4); }

std::string NewTimeOrderedUuid(int64_t unix_ms) {
  std::string b = RandomBytes(16);
  const uint64_t ms = static_cast<uint64_t>(unix_ms < 0 ? 0 : unix_ms);
  for (int i = 0; i < 6; ++i) b[i] = static_cast<char>((ms >> (8 * (5 - i))) & 0xff);
  return UuidText(std::move(b), 7);
}

std::string RandomUpperAlnum(size_t n) {
  static constexpr char kChars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
  std::string b = RandomBytes(n), out(n, 'A');
  for (size_t i = 0; i < n; ++i) out[i] = kChars[static_cast<unsigned char>(b[i]) % 32];
  return out;
}

std::string RandomSecret(size_t n) {
  static constexpr char kChars[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string b = RandomBytes(n), out(n, 'A');
  for (size_t i = 0; i < n; ++i) out[i] = kChars[static_cast<unsigned char>(b[i]) % 64];
  return out;
}

std::string Arn::ToString() const {
  return "arn:" + partition + ":" + service + ":" + region + ":" + account + ":" + resource;
}

Result<Arn> Arn::Parse(std::string_view text) {
  Arn arn;
  std::string_view rest = text;
  std::string* fields[] = {nullptr, &arn.partition, &arn.service, &arn.region, &arn.account};
  for (int i = 0; i < 5; ++i) {
    size_t colon = rest.find(':');
    if (colon == std::string_view::npos) {
      return Status::InvalidArgument(
          "'" + std::string(text) +
          "' is not an ARN (expected arn:partition:service:region:account:resource)");
    }
    if (i == 0 && rest.substr(0, colon) != "arn") {
      return Status::InvalidArgument("'" + std::string(text) +
                                     "' is not an ARN (must start with 'arn:')");
    }
    if (fields[i]) *fields[i] = std::string(rest.substr(0, colon));
    rest.remove_prefix(colon + 1);
  }
  arn.resource = std::string(rest);
  if (arn.service.empty() || arn.resource.empty()) {
    return Status::InvalidArgument("'" + std::string(text) +
                                   "' is not an ARN (empty service or resource)");
  }
  return arn;
}

std::string Arn::ResourceType() const {
  size_t slash = resource.find('/');
  return slash == std::string::npos ? "" : resource.substr(0, slash);
}

std::string Arn::ResourceName() const {
  size_t slash = resource.find('/');
  return slash == std::string::npos ? resource : resource.substr(slash + 1);
}

}  // namespace lote
