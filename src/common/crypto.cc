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

Result<std::string> SealAes256Gcm(std::string_view key, std::string_view plain) {
  if (key.size() != 32) return Status::InvalidArgument("an AES-256 key is 32 bytes");
  const std::string nonce = RandomBytes(12);
  std::string out(plain.size() + 16, '\0');
  EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
  int len = 0, total = 0;
  bool ok = ctx != nullptr &&
            EVP_EncryptInit_ex(ctx, EVP_aes_256_gcm(), nullptr,
                               reinterpret_cast<const unsigned char*>(key.data()),
                               reinterpret_cast<const unsigned char*>(nonce.data())) == 1 &&
            EVP_EncryptUpdate(ctx, reinterpret_cast<unsigned char*>(out.data()), &len,
                              reinterpret_cast<const unsigned char*>(plain.data()),
                              static_cast<int>(plain.size())) == 1;
  total = len;
  ok = ok &&
       EVP_EncryptFinal_ex(ctx, reinterpret_cast<unsigned char*>(out.data()) + total, &len) == 1;
  total += len;
  ok = ok && EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, 16, out.data() + total) == 1;
  EVP_CIPHER_CTX_free(ctx);
  if (!ok) return Status::Internal("could not encrypt a value with AES-256-GCM");
  out.resize(static_cast<size_t>(total) + 16);
  return Base64Encode(nonce + out);
}

Result<std::string> OpenAes256Gcm(std::string_view key, std::string_view sealed) {
  if (key.size() != 32) return Status::InvalidArgument("an AES-256 key is 32 bytes");
  std::string raw;
  if (!Base64Decode(sealed, &raw) || raw.size() < 28)
    return Status::DataLoss("a sealed value is damaged (too short or not base64)");
  const std::string nonce = raw.substr(0, 12);
  const std::string tag = raw.substr(raw.size() - 16);
  const std::string cipher = raw.substr(12, raw.size() - 28);
  std::string out(cipher.size(), '\0');
  EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
  int len = 0;
  bool ok = ctx != nullptr &&
            EVP_DecryptInit_ex(ctx, EVP_aes_256_gcm(), nullptr,
                               reinterpret_cast<const unsigned char*>(key.data()),
                               reinterpret_cast<const unsigned char*>(nonce.data())) == 1 &&
            EVP_DecryptUpdate(ctx, reinterpret_cast<unsigned char*>(out.data()), &len,
                              reinterpret_cast<const unsigned char*>(cipher.data()),
                              static_cast<int>(cipher.size())) == 1;
  std::string tag_copy = tag;
  ok = ok && EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, 16, tag_copy.data()) == 1;
  int fin = 0;
  ok =
      ok && EVP_DecryptFinal_ex(ctx, reinterpret_cast<unsigned char*>(out.data()) + len, &fin) == 1;
  EVP_CIPHER_CTX_free(ctx);
  if (!ok)
    return Status::DataLoss(
        "a sealed value does not decrypt with this key (damaged, or sealed under another key)");
  return out;
}

}  // namespace lote
