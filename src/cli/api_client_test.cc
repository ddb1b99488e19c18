#include "cli/api_client.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>

#include "cli/test_server.h"

namespace lote::cli {
namespace {

class ApiClientTest : public ServerTest {
 protected:
  std::unique_ptr<ApiClient> Client(sigv4::Credentials creds) {
    return std::move(*ApiClient::Create(Options(creds)));
  }
};

TEST_F(ApiClientTest, SignedCallsSucceedAndErrorsCarryAwsCodes) {
  auto client = Client(creds_);
  auto empty = client->Batch("POST", "/v1/describejobqueues", Json::object());
  ASSERT_TRUE(empty.ok()) << empty.status().ToString();
  EXPECT_TRUE((*empty)["jobQueues"].empty());
  auto created = client->Batch("POST", "/v1/createcomputeenvironment",
                               Json{{"computeEnvironmentName", "ce"}, {"type", "UNMANAGED"}});
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  // The ARN travels percent-encoded in the path and must verify.
  auto tags = client->Batch(
      "GET", "/v1/tags/arn%3Aaws%3Abatch%3Aus-east-1%3A000000000000%3Acompute-environment%2Fce",
      Json::object());
  ASSERT_TRUE(tags.ok()) << tags.status().ToString();
  auto bad = client->Batch("POST", "/v1/deletejobqueue", Json{{"jobQueue", "missing"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message().rfind("ClientException: ", 0), 0u);
}

TEST_F(ApiClientTest, WrongSecretIsRejected) {
  auto client = Client({creds_.access_key_id, "not-the-secret", ""});
  auto r = client->Batch("POST", "/v1/describejobqueues", Json::object());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(r.status().message().find("InvalidSignatureException"), std::string::npos);
}

TEST_F(ApiClientTest, UnreachableServerNamesTheEndpoint) {
  ClientOptions o;
  o.endpoint = "http://127.0.0.1:1";
  o.credentials = creds_;
  auto client = ApiClient::Create(o);
  ASSERT_TRUE(client.ok());
  auto r = (*client)->Batch("POST", "/v1/describejobqueues", Json::object());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(r.status().message().find("127.0.0.1:1"), std::string::npos);
}

TEST(ResolveTest, EndpointPrecedence) {
  setenv("LOTE_ENDPOINT", "http://a:1", 1);
  setenv("AWS_ENDPOINT_URL_BATCH", "http://b:2", 1);
  EXPECT_EQ(ResolveEndpoint("http://flag:3"), "http://flag:3");
  EXPECT_EQ(ResolveEndpoint(""), "http://a:1");
  unsetenv("LOTE_ENDPOINT");
  EXPECT_EQ(ResolveEndpoint(""), "http://b:2");
  unsetenv("AWS_ENDPOINT_URL_BATCH");
  EXPECT_EQ(ResolveEndpoint(""), "http://127.0.0.1:7480");
}

TEST(ResolveTest, CredentialsFromEnvironmentFirst) {
  setenv("AWS_ACCESS_KEY_ID", "AKIDENV", 1);
  setenv("AWS_SECRET_ACCESS_KEY", "sek", 1);
  auto c = ResolveCredentials();
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->access_key_id, "AKIDENV");
  unsetenv("AWS_ACCESS_KEY_ID");
  unsetenv("AWS_SECRET_ACCESS_KEY");
}

}  // namespace
}  // namespace lote::cli
