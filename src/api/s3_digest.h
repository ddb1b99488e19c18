// Digests of an S3 body as it streams in: MD5 (the ETag), SHA-256 (the
// signed payload hash) and one of S3's additional checksums (CRC32, CRC32C,
// SHA1, SHA256), each computed in one pass over the bytes.
// Thread safety: one writer.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace lote::api {

// The S3 checksum algorithms lote computes: "CRC32", "CRC32C", "SHA1", "SHA256".
bool IsS3ChecksumAlgorithm(std::string_view algorithm);
// CRC-32C (Castagnoli), continuing from `crc` (0 to start).
uint32_t Crc32c(uint32_t crc, std::string_view bytes);

class BodyDigest {
 public:
  // `sha256`: also hash for the payload hash; `checksum`: an algorithm above
  // or empty.
  BodyDigest(bool sha256, std::string checksum);
  ~BodyDigest();
  BodyDigest(const BodyDigest&) = delete;
  BodyDigest& operator=(const BodyDigest&) = delete;

  void Update(std::string_view bytes);
  // After the last Update (each once).
  std::string Md5Hex();
  std::string Sha256Hex();
  // The checksum as S3 sends it (base64 of the big-endian value or digest);
  // empty when none was asked for.
  std::string ChecksumBase64();
  const std::string& checksum_algorithm() const { return checksum_; }

 private:
  struct Contexts;
  std::unique_ptr<Contexts> ctx_;
  std::string checksum_;
  uint32_t crc_ = 0;
};

}  // namespace lote::api
