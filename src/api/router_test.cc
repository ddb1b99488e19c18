#include "api/router.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>

#include "api/batch_api.h"
#include "common/crypto.h"
#include "common/sigv4.h"

namespace lote::api {
namespace {

constexpr int64_t kNow = 1'700'000'000'000;

class RouterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/lote_router_test_XXXXXX";
    dir_ = mkdtemp(tmpl);
    store_ = std::move(*store::Store::Open(dir_ + "/lote.db"));
    control_ = std::move(*control::ControlPlane::Open(store_.get(), &clock_, {}));
    auth_.AddKey("AKID", "secret");
    router_ = std::make_unique<ApiRouter>(&auth_);
    RegisterBatchControlPlane(router_.get(), control_.get());
  }
  void TearDown() override {
    router_.reset();
    control_.reset();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }

  HttpRequest Signed(std::string method, std::string raw_path, std::string body,
                     std::string service = "batch", std::string target = "") {
    sigv4::Request r;
    r.method = method;
    size_t q = raw_path.find('?');
    r.raw_path = raw_path.substr(0, q);
    r.raw_query = q == std::string::npos ? "" : raw_path.substr(q + 1);
    r.headers = {{"Host", "localhost"}};
    if (!target.empty()) r.headers.emplace_back("X-Amz-Target", target);
    r.payload_sha256_hex = Sha256Hex(body);
    sigv4::SignRequest(&r, {"AKID", "secret", ""}, "us-east-1", service,
                       sigv4::FormatAmzDate(kNow));
    HttpRequest out{r.method, r.raw_path, r.raw_query, r.headers, body};
    return out;
  }

  static Json Body(const HttpResponse& r) { return ParseJson(r.body).value(); }
  static std::string Header(const HttpResponse& r, const std::string& name) {
    for (auto& [k, v] : r.headers) {
      if (k == name) return v;
    }
    return "";
  }

  std::string dir_;
  FakeClock clock_{kNow};
  Authenticator auth_{&clock_, "us-east-1"};
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<control::ControlPlane> control_;
  std::unique_ptr<ApiRouter> router_;
};

TEST_F(RouterTest, RoutesRestJsonAndShapesClientErrors) {
  HttpResponse ok = router_->Handle(Signed("POST", "/v1/describejobqueues", "{}"));
  EXPECT_EQ(ok.status, 200);
  EXPECT_TRUE(Body(ok)["jobQueues"].is_array());
  HttpResponse bad = router_->Handle(
      Signed("POST", "/v1/createjobqueue", R"({"jobQueueName": "bad name", "priority": 1})"));
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(Header(bad, "x-amzn-ErrorType"), "ClientException");
  EXPECT_EQ(Body(bad)["__type"], "ClientException");
  EXPECT_NE(Body(bad)["message"].get<std::string>().find("jobQueueName"), std::string::npos);
}

TEST_F(RouterTest, TagPathsCarryTheEncodedArn) {
  std::string create = R"({"computeEnvironmentName": "ce", "type": "UNMANAGED"})";
  ASSERT_EQ(router_->Handle(Signed("POST", "/v1/createcomputeenvironment", create)).status, 200);
  std::string arn_enc = "arn%3Aaws%3Abatch%3Aus-east-1%3A000000000000%3Acompute-environment%2Fce";
  HttpResponse tag =
      router_->Handle(Signed("POST", "/v1/tags/" + arn_enc, R"({"tags": {"k": "v", "x": "y"}})"));
  ASSERT_EQ(tag.status, 200) << tag.body;
  HttpResponse untag = router_->Handle(Signed("DELETE", "/v1/tags/" + arn_enc + "?tagKeys=x", ""));
  ASSERT_EQ(untag.status, 200) << untag.body;
  HttpResponse list = router_->Handle(Signed("GET", "/v1/tags/" + arn_enc, ""));
  ASSERT_EQ(list.status, 200);
  EXPECT_EQ(Body(list)["tags"], (Json{{"k", "v"}}));
}

TEST_F(RouterTest, UnknownPathsAndStubs) {
  HttpResponse none = router_->Handle(Signed("POST", "/v1/nosuchthing", "{}"));
  EXPECT_EQ(none.status, 404);
  EXPECT_EQ(Body(none)["__type"], "UnknownOperationException");
  HttpResponse stub = router_->Handle(Signed("POST", "/v1/submitjob", "{}"));
  EXPECT_EQ(stub.status, 400);
  EXPECT_NE(Body(stub)["message"].get<std::string>().find("SubmitJob"), std::string::npos);
}

TEST_F(RouterTest, RejectsUnsignedAndInvalidJson) {
  HttpRequest unsigned_req{"POST", "/v1/describejobqueues", "", {{"Host", "x"}}, "{}"};
  HttpResponse r = router_->Handle(unsigned_req);
  EXPECT_EQ(r.status, 403);
  EXPECT_EQ(Header(r, "x-amzn-ErrorType"), "MissingAuthenticationTokenException");
  HttpResponse bad_json = router_->Handle(Signed("POST", "/v1/describejobqueues", "{nope"));
  EXPECT_EQ(bad_json.status, 400);
  EXPECT_NE(Body(bad_json)["message"].get<std::string>().find("not valid JSON"), std::string::npos);
}

TEST_F(RouterTest, JsonTargetServicesPlugIn) {
  JsonService logs;
  logs.target_prefix = "Logs_20140328";
  logs.signing_service = "logs";
  logs.operations["CreateLogGroup"] = [](const Json& r) -> Result<Json> {
    if (r.value("logGroupName", "") == "exists") return Status::AlreadyExists("group exists");
    return Json::object();
  };
  router_->RegisterJsonService(std::move(logs));
  HttpResponse ok = router_->Handle(
      Signed("POST", "/", R"({"logGroupName": "g"})", "logs", "Logs_20140328.CreateLogGroup"));
  EXPECT_EQ(ok.status, 200);
  EXPECT_EQ(Header(ok, "Content-Type"), "application/x-amz-json-1.1");
  HttpResponse dup = router_->Handle(
      Signed("POST", "/", R"({"logGroupName": "exists"})", "logs", "Logs_20140328.CreateLogGroup"));
  EXPECT_EQ(dup.status, 400);
  EXPECT_EQ(Body(dup)["__type"], "ResourceAlreadyExistsException");
  HttpResponse unknown_op =
      router_->Handle(Signed("POST", "/", "{}", "logs", "Logs_20140328.DeleteEverything"));
  EXPECT_EQ(Body(unknown_op)["__type"], "UnknownOperationException");
  HttpResponse unknown_svc = router_->Handle(Signed("POST", "/", "{}", "logs", "Nope_1.X"));
  EXPECT_EQ(Body(unknown_svc)["__type"], "UnknownOperationException");
  // Signed for batch but sent to logs: wrong service scope.
  HttpResponse wrong_scope =
      router_->Handle(Signed("POST", "/", "{}", "batch", "Logs_20140328.CreateLogGroup"));
  EXPECT_EQ(Body(wrong_scope)["__type"], "InvalidSignatureException");
}

}  // namespace
}  // namespace lote::api
