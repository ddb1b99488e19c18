// SigV4 against AWS's published examples (the "get-vanilla" suite case and the
// IAM ListUsers walk-through from the Signature Version 4 documentation).
#include "common/sigv4.h"

#include <gtest/gtest.h>

#include <array>
#include <set>

#include "common/crypto.h"

namespace lote::sigv4 {
namespace {

constexpr char kSecret[] = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";
constexpr char kEmptySha[] = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

TEST(SigV4Test, IamListUsersExample) {
  Request r;
  r.method = "GET";
  r.raw_path = "/";
  r.raw_query = "Action=ListUsers&Version=2010-05-08";
  r.headers = {{"Content-Type", "application/x-www-form-urlencoded; charset=utf-8"},
               {"Host", "iam.amazonaws.com"},
               {"X-Amz-Date", "20150830T123600Z"}};
  r.payload_sha256_hex = kEmptySha;
  std::vector<std::string> signed_headers = {"content-type", "host", "x-amz-date"};
  std::string canonical = CanonicalRequest(r, signed_headers, false);
  EXPECT_EQ(Sha256Hex(canonical),
            "f536975d06c0309214f805bb90ccff089219ecd68b2577efef23edd43b7e1a59");
  EXPECT_EQ(HexEncode(SigningKey(kSecret, "20150830", "us-east-1", "iam")),
            "c4afb1cc5771d871763a393e44b703571b55cc28424d1a5e86da6ed3c154a4b9");
  EXPECT_EQ(ComputeSignature(r, signed_headers, kSecret, "20150830T123600Z", "us-east-1", "iam"),
            "5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a6f2b5d7");
}

// The request of the suite's "get-vanilla" case.
Request GetVanillaRequest() {
  Request r;
  r.method = "GET";
  r.raw_path = "/";
  r.headers = {{"Host", "example.amazonaws.com"}, {"X-Amz-Date", "20150830T123600Z"}};
  r.payload_sha256_hex = kEmptySha;
  return r;
}

TEST(SigV4Test, GetVanilla) {
  const Request r = GetVanillaRequest();
  EXPECT_EQ(ComputeSignature(r, {"host", "x-amz-date"}, kSecret, "20150830T123600Z", "us-east-1",
                             "service"),
            "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31");
}

TEST(SigV4Test, EachSecretDayRegionAndServiceGetsItsOwnKey) {
  // The signing key is kept per thread between requests: a request with
  // another secret, day, region or service must never be signed with it.
  const Request r = GetVanillaRequest();
  const std::vector<std::string> headers = {"host", "x-amz-date"};
  auto fresh = [&](std::string_view secret, std::string_view date, std::string_view region,
                   std::string_view service) {
    const std::string scope = std::string(date.substr(0, 8)) + "/" + std::string(region) + "/" +
                              std::string(service) + "/aws4_request";
    return HexEncode(HmacSha256(SigningKey(secret, date.substr(0, 8), region, service),
                                StringToSign(date, scope, CanonicalRequest(r, headers, false))));
  };
  const std::vector<std::array<std::string, 4>> cases = {
      {kSecret, "20150830T123600Z", "us-east-1", "service"},
      {"another-secret", "20150830T123600Z", "us-east-1", "service"},
      {kSecret, "20150831T123600Z", "us-east-1", "service"},
      {kSecret, "20150830T123600Z", "eu-west-1", "service"},
      {kSecret, "20150830T123600Z", "us-east-1", "batch"},
      {kSecret, "20150830T123600Z", "us-east-1", "service"}};
  std::set<std::string> seen;
  for (const auto& [secret, date, region, service] : cases) {
    const std::string sig = ComputeSignature(r, headers, secret, date, region, service);
    EXPECT_EQ(sig, fresh(secret, date, region, service))
        << secret << " " << date << " " << region << " " << service;
    seen.insert(sig);
  }
  EXPECT_EQ(seen.size(), 5u);  // the first and the last case are the same request
  EXPECT_EQ(ComputeSignature(r, headers, kSecret, "20150830T123600Z", "us-east-1", "service"),
            "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31");
}

TEST(SigV4Test, SignThenVerifyRoundTrip) {
  Request r;
  r.method = "POST";
  r.raw_path = "/v1/tags/arn%3Aaws%3Abatch%3Aus-east-1%3A123%3Ajob-queue%2Fq";
  r.headers = {{"Host", "127.0.0.1:7480"}, {"Content-Type", "application/json"}};
  r.payload_sha256_hex = Sha256Hex("{}");
  SignRequest(&r, {"AKIDEXAMPLE", kSecret, ""}, "us-east-1", "batch", "20260101T000000Z");
  std::string header;
  for (auto& [k, v] : r.headers)
    if (k == "Authorization") header = v;
  auto auth = ParseAuthorization(header);
  ASSERT_TRUE(auth.ok()) << auth.status().ToString();
  EXPECT_EQ(auth->access_key_id, "AKIDEXAMPLE");
  EXPECT_EQ(auth->service, "batch");
  EXPECT_EQ(auth->signed_headers, (std::vector<std::string>{"content-type", "host", "x-amz-date"}));
  EXPECT_EQ(
      ComputeSignature(r, auth->signed_headers, kSecret, "20260101T000000Z", "us-east-1", "batch"),
      auth->signature);
  // A changed body no longer verifies.
  r.payload_sha256_hex = Sha256Hex("{ }");
  EXPECT_NE(
      ComputeSignature(r, auth->signed_headers, kSecret, "20260101T000000Z", "us-east-1", "batch"),
      auth->signature);
}

TEST(SigV4Test, CanonicalPieces) {
  EXPECT_EQ(CanonicalQueryString("b=2&a=1&a=0&c"), "a=0&a=1&b=2&c=");
  EXPECT_EQ(CanonicalQueryString("x=a%20b&y=~"), "x=a%20b&y=~");
  EXPECT_EQ(CanonicalUri("/v1/tags/arn%3Aaws", false), "/v1/tags/arn%253Aaws");
  EXPECT_EQ(CanonicalUri("/bucket/a%20b", true), "/bucket/a%20b");
  EXPECT_EQ(UriDecode("a%2Fb%zz"), "a/b%zz");
}

TEST(SigV4Test, AmzDate) {
  auto ms = ParseAmzDate("20150830T123600Z");
  ASSERT_TRUE(ms.ok());
  EXPECT_EQ(*ms, 1440938160000);
  EXPECT_EQ(FormatAmzDate(*ms), "20150830T123600Z");
  EXPECT_FALSE(ParseAmzDate("2015-08-30").ok());
}

TEST(SigV4Test, ParseAuthorizationErrors) {
  EXPECT_FALSE(ParseAuthorization("Basic abc").ok());
  EXPECT_FALSE(
      ParseAuthorization("AWS4-HMAC-SHA256 Credential=AK/2015/us-east-1/batch/aws4_request").ok());
  EXPECT_FALSE(
      ParseAuthorization("AWS4-HMAC-SHA256 Credential=AK/x, SignedHeaders=host, Signature=ab")
          .ok());
}

}  // namespace
}  // namespace lote::sigv4
