// Hashes and MACs (OpenSSL), hex/base64, constant-time comparison, randomness.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace lote {

std::string Sha256(std::string_view data);                            // 32 raw bytes
std::string Sha256Hex(std::string_view data);                         // 64 lowercase hex chars
std::string HmacSha256(std::string_view key, std::string_view data);  // 32 raw bytes
std::string HexEncode(std::string_view bytes);                        // lowercase
std::string Base64Encode(std::string_view bytes);
bool Base64Decode(std::string_view text, std::string* out);
// Equal strings in time independent of where they differ.
bool ConstantTimeEquals(std::string_view a, std::string_view b);
// Cryptographically random bytes.
std::string RandomBytes(size_t n);

// AES-256-GCM under a 32-byte key: base64(nonce (12) || ciphertext || tag (16)),
// a fresh random nonce per call. What seals SSM SecureString values and IAM
// secret access keys under the server's key ($LOTE_HOME/secrets.key).
Result<std::string> SealAes256Gcm(std::string_view key, std::string_view plain);
// The plain text of SealAes256Gcm's output; DataLoss when `sealed` is damaged
// or was sealed under another key.
Result<std::string> OpenAes256Gcm(std::string_view key, std::string_view sealed);

// Incremental SHA-256 for files and streams.
class Sha256Hasher {
 public:
  Sha256Hasher();
  ~Sha256Hasher();
  Sha256Hasher(const Sha256Hasher&) = delete;
  Sha256Hasher& operator=(const Sha256Hasher&) = delete;
  void Update(std::string_view data);
  std::string FinishHex();

 private:
  void* ctx_;
};

}  // namespace lote
