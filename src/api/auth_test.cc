#include "api/auth.h"

#include <gtest/gtest.h>

#include "common/crypto.h"
#include "common/sigv4.h"

namespace lote::api {
namespace {

constexpr int64_t kNow = 1'700'000'000'000;

class AuthTest : public ::testing::Test {
 protected:
  AuthTest() : clock_(kNow), auth_(&clock_, "us-east-1") { auth_.AddKey("AKIDLOTE", "s3cret"); }

  // A request signed the way botocore signs rest-json calls.
  HttpRequest Signed(const std::string& key, const std::string& secret, int64_t at_ms,
                     const std::string& region = "us-east-1",
                     const std::string& service = "batch") {
    sigv4::Request r;
    r.method = "POST";
    r.raw_path = "/v1/tags/arn%3Aaws%3Abatch%3Aus-east-1%3A0%3Ajob-queue%2Fq";
    r.headers = {{"Host", "127.0.0.1:7480"}, {"Content-Type", "application/json"}};
    std::string body = R"({"tags":{"a":"b"}})";
    r.payload_sha256_hex = Sha256Hex(body);
    sigv4::SignRequest(&r, sigv4::Credentials{key, secret, ""}, region, service,
                       sigv4::FormatAmzDate(at_ms));
    HttpRequest out;
    out.method = r.method;
    out.raw_path = r.raw_path;
    out.headers = r.headers;
    out.body = body;
    return out;
  }

  FakeClock clock_;
  Authenticator auth_;
};

TEST_F(AuthTest, AcceptsAValidSignature) {
  EXPECT_FALSE(auth_.Verify(Signed("AKIDLOTE", "s3cret", kNow), "batch").has_value());
  // Skew within 15 minutes is fine.
  EXPECT_FALSE(auth_.Verify(Signed("AKIDLOTE", "s3cret", kNow - 14 * 60 * 1000), "batch"));
}

TEST_F(AuthTest, MissingAuthorization) {
  HttpRequest r = Signed("AKIDLOTE", "s3cret", kNow);
  r.headers.erase(std::remove_if(r.headers.begin(), r.headers.end(),
                                 [](auto& h) { return h.first == "Authorization"; }),
                  r.headers.end());
  auto err = auth_.Verify(r, "batch");
  ASSERT_TRUE(err);
  EXPECT_EQ(err->code, "MissingAuthenticationTokenException");
  EXPECT_EQ(err->http_status, 403);
}

TEST_F(AuthTest, MalformedAuthorization) {
  HttpRequest r = Signed("AKIDLOTE", "s3cret", kNow);
  for (auto& [k, v] : r.headers) {
    if (k == "Authorization") v = "AWS4-HMAC-SHA256 garbage";
  }
  auto err = auth_.Verify(r, "batch");
  ASSERT_TRUE(err);
  EXPECT_EQ(err->code, "IncompleteSignatureException");
}

TEST_F(AuthTest, UnknownKey) {
  auto err = auth_.Verify(Signed("AKIDOTHER", "s3cret", kNow), "batch");
  ASSERT_TRUE(err);
  EXPECT_EQ(err->code, "UnrecognizedClientException");
  EXPECT_NE(err->message.find("AKIDOTHER"), std::string::npos);
}

TEST_F(AuthTest, WrongSecret) {
  auto err = auth_.Verify(Signed("AKIDLOTE", "wrong", kNow), "batch");
  ASSERT_TRUE(err);
  EXPECT_EQ(err->code, "InvalidSignatureException");
  EXPECT_NE(err->message.find("does not match"), std::string::npos);
}

TEST_F(AuthTest, TamperedBodyOrPath) {
  HttpRequest body = Signed("AKIDLOTE", "s3cret", kNow);
  body.body = R"({"tags":{"a":"c"}})";
  EXPECT_EQ(auth_.Verify(body, "batch")->code, "InvalidSignatureException");
  HttpRequest path = Signed("AKIDLOTE", "s3cret", kNow);
  path.raw_path = "/v1/tags/arn:aws:batch:us-east-1:0:job-queue/q";  // decoded differs
  EXPECT_EQ(auth_.Verify(path, "batch")->code, "InvalidSignatureException");
}

TEST_F(AuthTest, StaleAndFutureSignatures) {
  auto stale = auth_.Verify(Signed("AKIDLOTE", "s3cret", kNow - 16 * 60 * 1000), "batch");
  ASSERT_TRUE(stale);
  EXPECT_EQ(stale->code, "InvalidSignatureException");
  EXPECT_NE(stale->message.find("Signature expired"), std::string::npos);
  auto future = auth_.Verify(Signed("AKIDLOTE", "s3cret", kNow + 16 * 60 * 1000), "batch");
  ASSERT_TRUE(future);
  EXPECT_NE(future->message.find("not yet current"), std::string::npos);
  // Both name the server's time, so a client can see its skew.
  const std::string server_time = sigv4::FormatAmzDate(kNow);
  EXPECT_NE(stale->message.find(server_time), std::string::npos) << stale->message;
  EXPECT_NE(future->message.find(server_time), std::string::npos) << future->message;
}

TEST_F(AuthTest, HeadersThatChooseTheOperationMustBeSigned) {
  // Content-Type sent with a body but left out of SignedHeaders.
  HttpRequest r = Signed("AKIDLOTE", "s3cret", kNow);
  for (auto& [k, v] : r.headers) {
    if (k == "Authorization") {
      size_t at = v.find("content-type;");
      ASSERT_NE(at, std::string::npos) << v;
      v.erase(at, std::string("content-type;").size());
    }
  }
  auto unsigned_type = auth_.Verify(r, "batch");
  ASSERT_TRUE(unsigned_type);
  EXPECT_EQ(unsigned_type->code, "IncompleteSignatureException");
  EXPECT_NE(unsigned_type->message.find("content-type"), std::string::npos);
  // X-Amz-Target added after signing.
  HttpRequest t = Signed("AKIDLOTE", "s3cret", kNow);
  t.headers.emplace_back("X-Amz-Target", "Logs_20140328.DeleteLogGroup");
  auto unsigned_target = auth_.Verify(t, "batch");
  ASSERT_TRUE(unsigned_target);
  EXPECT_NE(unsigned_target->message.find("x-amz-target"), std::string::npos);
}

TEST_F(AuthTest, WrongRegionOrService) {
  auto region = auth_.Verify(Signed("AKIDLOTE", "s3cret", kNow, "eu-west-1"), "batch");
  ASSERT_TRUE(region);
  EXPECT_NE(region->message.find("eu-west-1"), std::string::npos);
  auto service = auth_.Verify(Signed("AKIDLOTE", "s3cret", kNow, "us-east-1", "logs"), "batch");
  ASSERT_TRUE(service);
  EXPECT_EQ(service->code, "InvalidSignatureException");
}

}  // namespace
}  // namespace lote::api
