#include "common/crypto.h"

#include <gtest/gtest.h>

namespace lote {
namespace {

TEST(CryptoTest, Sha256KnownValues) {
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  Sha256Hasher h;
  h.Update("a");
  h.Update("bc");
  EXPECT_EQ(h.FinishHex(), Sha256Hex("abc"));
}

TEST(CryptoTest, HmacRfc4231Case2) {
  EXPECT_EQ(HexEncode(HmacSha256("Jefe", "what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

TEST(CryptoTest, Base64RoundTrip) {
  for (std::string s : {"", "f", "fo", "foo", "foob", "fooba", "foobar"}) {
    std::string decoded;
    ASSERT_TRUE(Base64Decode(Base64Encode(s), &decoded));
    EXPECT_EQ(decoded, s);
  }
  EXPECT_EQ(Base64Encode("foobar"), "Zm9vYmFy");
  std::string out;
  EXPECT_FALSE(Base64Decode("abc", &out));
}

TEST(CryptoTest, ConstantTimeEquals) {
  EXPECT_TRUE(ConstantTimeEquals("abc", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abd"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abcd"));
}

TEST(CryptoTest, Aes256GcmSealsAndOpens) {
  const std::string key = RandomBytes(32);
  Result<std::string> sealed = SealAes256Gcm(key, "secret value");
  ASSERT_TRUE(sealed.ok()) << sealed.status().ToString();
  EXPECT_EQ(sealed->find("secret"), std::string::npos);
  EXPECT_NE(*SealAes256Gcm(key, "secret value"), *sealed);  // a fresh nonce each time
  Result<std::string> opened = OpenAes256Gcm(key, *sealed);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  EXPECT_EQ(*opened, "secret value");
  EXPECT_EQ(OpenAes256Gcm(RandomBytes(32), *sealed).status().code(), StatusCode::kDataLoss);
  std::string tampered = *sealed;
  tampered[20] = tampered[20] == 'A' ? 'B' : 'A';
  EXPECT_EQ(OpenAes256Gcm(key, tampered).status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(SealAes256Gcm("short", "x").status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace lote
