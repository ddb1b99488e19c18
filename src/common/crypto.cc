#include "common/crypto.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#include "common/status.h"

namespace lote {

std::string Sha256(std::string_view data) {
  unsigned char out[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), out);
  return std::string(reinterpret_cast<char*>(out), sizeof(out));
}

std::string Sha256Hex(std::string_view data) { return HexEncode(Sha256(data)); }

std::string HmacSha256(std::string_view key, std::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), out, &len);
  return std::string(reinterpret_cast<char*>(out), len);
}

std::string HexEncode(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(bytes.size() * 2, '0');
  for (size_t i = 0; i < bytes.size(); ++i) {
    auto b = static_cast<unsigned char>(bytes[i]);
    out[2 * i] = kDigits[b >> 4];
    out[2 * i + 1] = kDigits[b & 15];
  }
  return out;
}

std::string Base64Encode(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(bytes.data()),
                          static_cast<int>(bytes.size()));
  out.resize(n);
  return out;
}

bool Base64Decode(std::string_view text, std::string* out) {
  std::string clean;
  clean.reserve(text.size());
  for (char c : text) {
    if (c != '\n' && c != '\r' && c != ' ') clean.push_back(c);
  }
  if (clean.size() % 4 != 0) return false;
  out->assign(3 * clean.size() / 4 + 1, '\0');
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out->data()),
                          reinterpret_cast<const unsigned char*>(clean.data()),
                          static_cast<int>(clean.size()));
  if (n < 0) return false;
  size_t pad = 0;
  if (!clean.empty() && clean.back() == '=') ++pad;
  if (clean.size() > 1 && clean[clean.size() - 2] == '=') ++pad;
  out->resize(static_cast<size_t>(n) - pad);
  return true;
}

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::string RandomBytes(size_t n) {
  std::string out(n, '\0');
  LOTE_CHECK(RAND_bytes(reinterpret_cast<unsigned char*>(out.data()), static_cast<int>(n)) == 1);
  return out;
}

Sha256Hasher::Sha256Hasher() : ctx_(EVP_MD_CTX_new()) {
  EVP_DigestInit_ex(static_cast<EVP_MD_CTX*>(ctx_), EVP_sha256(), nullptr);
}
Sha256Hasher::~Sha256Hasher() { EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(ctx_)); }
void Sha256Hasher::Update(std::string_view data) {
  EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(ctx_), data.data(), data.size());
}
std::string Sha256Hasher::FinishHex() {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(static_cast<EVP_MD_CTX*>(ctx_), out, &len);
  return HexEncode(std::string_view(reinterpret_cast<char*>(out), len));
}

}  // namespace lote
