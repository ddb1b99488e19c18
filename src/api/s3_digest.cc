#include "api/s3_digest.h"

#include <openssl/evp.h>
#include <zlib.h>

#include <algorithm>
#include <array>

#include "common/crypto.h"

namespace lote::api {
namespace {

// The reflected CRC-32C table (polynomial 0x82F63B78), built once.
const std::array<uint32_t, 256>& Crc32cTable() {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  return table;
}

std::string BigEndian32(uint32_t v) {
  std::string out(4, '\0');
  for (int i = 0; i < 4; ++i)
    out[static_cast<size_t>(i)] = static_cast<char>((v >> (24 - 8 * i)) & 0xff);
  return out;
}

std::string Final(EVP_MD_CTX* ctx) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_DigestFinal_ex(ctx, out, &n);
  return std::string(reinterpret_cast<char*>(out), n);
}

}  // namespace

bool IsS3ChecksumAlgorithm(std::string_view a) {
  return a == "CRC32" || a == "CRC32C" || a == "SHA1" || a == "SHA256";
}

uint32_t Crc32c(uint32_t crc, std::string_view bytes) {
  const auto& table = Crc32cTable();
  crc = ~crc;
  for (unsigned char b : bytes) crc = table[(crc ^ b) & 0xff] ^ (crc >> 8);
  return ~crc;
}

struct BodyDigest::Contexts {
  EVP_MD_CTX* md5 = nullptr;
  EVP_MD_CTX* sha256 = nullptr;
  EVP_MD_CTX* checksum = nullptr;  // SHA1 or SHA256 checksums
  ~Contexts() {
    EVP_MD_CTX_free(md5);
    EVP_MD_CTX_free(sha256);
    EVP_MD_CTX_free(checksum);
  }
};

BodyDigest::BodyDigest(bool sha256, std::string checksum)
    : ctx_(std::make_unique<Contexts>()), checksum_(std::move(checksum)) {
  ctx_->md5 = EVP_MD_CTX_new();
  EVP_DigestInit_ex(ctx_->md5, EVP_md5(), nullptr);
  if (sha256) {
    ctx_->sha256 = EVP_MD_CTX_new();
    EVP_DigestInit_ex(ctx_->sha256, EVP_sha256(), nullptr);
  }
  if (checksum_ == "SHA1" || checksum_ == "SHA256") {
    ctx_->checksum = EVP_MD_CTX_new();
    EVP_DigestInit_ex(ctx_->checksum, checksum_ == "SHA1" ? EVP_sha1() : EVP_sha256(), nullptr);
  }
}

BodyDigest::~BodyDigest() = default;

void BodyDigest::Update(std::string_view bytes) {
  EVP_DigestUpdate(ctx_->md5, bytes.data(), bytes.size());
  if (ctx_->sha256) EVP_DigestUpdate(ctx_->sha256, bytes.data(), bytes.size());
  if (ctx_->checksum) EVP_DigestUpdate(ctx_->checksum, bytes.data(), bytes.size());
  if (checksum_ == "CRC32") {
    // zlib takes at most uInt bytes at a time.
    while (!bytes.empty()) {
      const size_t n = std::min<size_t>(bytes.size(), 1u << 30);
      crc_ = static_cast<uint32_t>(
          crc32(crc_, reinterpret_cast<const Bytef*>(bytes.data()), static_cast<uInt>(n)));
      bytes.remove_prefix(n);
    }
  } else if (checksum_ == "CRC32C") {
    crc_ = Crc32c(crc_, bytes);
  }
}

std::string BodyDigest::Md5Hex() { return HexEncode(Final(ctx_->md5)); }

std::string BodyDigest::Sha256Hex() { return ctx_->sha256 ? HexEncode(Final(ctx_->sha256)) : ""; }

std::string BodyDigest::ChecksumBase64() {
  if (checksum_ == "CRC32" || checksum_ == "CRC32C") return Base64Encode(BigEndian32(crc_));
  if (ctx_->checksum) return Base64Encode(Final(ctx_->checksum));
  return "";
}

}  // namespace lote::api
