#include "iam/job_keys.h"

#include <cctype>

#include "common/crypto.h"

namespace lote::iam {
namespace {

constexpr size_t kUuidHex = 32;

bool IsHex(char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; }

}  // namespace

std::string JobKeyId(std::string_view job_id, int32_t attempt) {
  if (job_id.size() != 36 || attempt < 1) return "";
  std::string hex;
  for (size_t i = 0; i < job_id.size(); ++i) {
    const char c = job_id[i];
    const bool dash_place = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash_place != (c == '-')) return "";
    if (dash_place) continue;
    if (!IsHex(c)) return "";
    hex += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  }
  return std::string(kJobKeyPrefix) + hex + "A" + std::to_string(attempt);
}

bool ParseJobKeyId(std::string_view key_id, std::string* job_id, int32_t* attempt) {
  if (key_id.substr(0, kJobKeyPrefix.size()) != kJobKeyPrefix) return false;
  const std::string_view rest = key_id.substr(kJobKeyPrefix.size());
  if (rest.size() < kUuidHex + 2 || rest[kUuidHex] != 'A') return false;
  std::string id;
  for (size_t i = 0; i < kUuidHex; ++i) {
    const char c = rest[i];
    if (!IsHex(c) || std::islower(static_cast<unsigned char>(c))) return false;
    if (i == 8 || i == 12 || i == 16 || i == 20) id += '-';
    id += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  const std::string_view number = rest.substr(kUuidHex + 1);
  if (number.empty() || number.size() > 6 || number[0] == '0') return false;
  int32_t n = 0;
  for (char c : number) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
    n = n * 10 + (c - '0');
  }
  *job_id = std::move(id);
  *attempt = n;
  return true;
}

std::string JobKeySecret(std::string_view server_key, std::string_view key_id) {
  return HexEncode(HmacSha256(server_key, "lote job key\n" + std::string(key_id)));
}

}  // namespace lote::iam
