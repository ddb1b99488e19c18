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
    RegisterBatchSharedOperations(router_.get(), control_.get(), /*jobs=*/nullptr);
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
    HttpRequest out{r.method, r.raw_path, r.raw_query, r.headers, body, nullptr};
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

TEST_F(RouterTest, ErrorMessageHeaderIsShortPrintableAsciiAndTheBodyExact) {
  // A message that echoes an oversized, non-ASCII name: HTTP clients refuse
  // header lines over 64 KiB, so the header carries a bounded copy.
  const std::string name = std::string(100000, 'x') + "\u00e9\n";
  HttpResponse bad = router_->Handle(Signed(
      "POST", "/v1/createjobqueue", R"({"jobQueueName": ")" + name + R"(", "priority": 1})"));
  EXPECT_EQ(bad.status, 400);
  const std::string header = Header(bad, "x-amzn-ErrorMessage");
  EXPECT_FALSE(header.empty());
  EXPECT_LE(header.size(), 1024u);
  for (char c : header) {
    EXPECT_TRUE(c >= 0x20 && c < 0x7f) << static_cast<int>(static_cast<unsigned char>(c));
  }
  const std::string message = Body(bad)["message"].get<std::string>();
  EXPECT_GT(message.size(), header.size());
  EXPECT_EQ(message.substr(0, 100), header.substr(0, 100));
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
  HttpRequest unsigned_req{"POST", "/v1/describejobqueues", "", {{"Host", "x"}}, "{}", nullptr};
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

TEST_F(RouterTest, EveryResponseHasARequestId) {
  HttpResponse ok = router_->Handle(Signed("POST", "/v1/describejobqueues", "{}"));
  HttpResponse bad = router_->Handle(Signed("POST", "/v1/nosuchthing", "{}"));
  EXPECT_EQ(Header(ok, "x-amzn-RequestId").size(), 36u);
  EXPECT_EQ(Header(bad, "x-amzn-RequestId").size(), 36u);
  EXPECT_NE(Header(ok, "x-amzn-RequestId"), Header(bad, "x-amzn-RequestId"));
}

TEST_F(RouterTest, DeepNestingIsAClientErrorNotACrash) {
  std::string deep =
      R"({"jobQueueName": )" + std::string(100000, '[') + std::string(100000, ']') + "}";
  HttpResponse r = router_->Handle(Signed("POST", "/v1/createjobqueue", deep));
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(Body(r)["__type"], "ClientException");
  EXPECT_NE(Body(r)["message"].get<std::string>().find("deeper than 64"), std::string::npos);
  // Brackets inside strings do not count.
  std::string in_string = R"({"jobQueues": [")" + std::string(1000, '[') + R"("]})";
  EXPECT_EQ(router_->Handle(Signed("POST", "/v1/describejobqueues", in_string)).status, 400);
  EXPECT_EQ(Body(router_->Handle(Signed("POST", "/v1/describejobqueues", in_string)))["message"]
                .get<std::string>()
                .find("deeper"),
            std::string::npos);
}

TEST_F(RouterTest, HostileValuesNameTheirField) {
  struct Case {
    std::string body;
    std::string field;
  };
  const Case cases[] = {
      {R"({"jobQueueName": "q", "priority": 1e400})", "priority"},
      {R"({"jobQueueName": "q", "priority": 99999999999999999999})", "priority"},
      {R"({"jobQueueName": "q", "priority": 18446744073709551615})", "priority"},
      {R"({"jobQueueName": "caf\u00e9", "priority": 1})", "jobQueueName"},
      {R"({"jobQueueName": "q\u0000", "priority": 1})", "jobQueueName"},
      {R"({"jobQueueName": "q", "priority": 1, "tags": {"k": "v\u0000"}})", "tags.k"},
      {R"({"jobQueueName": "q", "priority": 1, "computeEnvironmentOrder": [{"order": 1,
          "computeEnvironment": "c\u00e9"}]})",
       "computeEnvironmentOrder[0].computeEnvironment"},
  };
  for (const Case& c : cases) {
    HttpResponse r = router_->Handle(Signed("POST", "/v1/createjobqueue", c.body));
    EXPECT_EQ(r.status, 400) << c.body;
    EXPECT_EQ(Body(r)["__type"], "ClientException") << c.body;
    EXPECT_NE(Body(r)["message"].get<std::string>().find(c.field), std::string::npos)
        << c.body << " → " << r.body;
  }
  // A raw 0xff byte is not JSON (the parser refuses invalid UTF-8).
  HttpResponse ff =
      router_->Handle(Signed("POST", "/v1/createjobqueue", "{\"jobQueueName\": \"\xff\"}"));
  EXPECT_EQ(ff.status, 400);
  // Percent-encoded invalid UTF-8 in the path.
  HttpResponse path = router_->Handle(Signed("GET", "/v1/tags/arn%FF%FE", ""));
  EXPECT_EQ(path.status, 400);
  EXPECT_NE(Body(path)["message"].get<std::string>().find("resourceArn"), std::string::npos);
  HttpResponse query = router_->Handle(Signed("DELETE", "/v1/tags/arn?tagKeys=%C3", ""));
  EXPECT_EQ(query.status, 400);
  EXPECT_NE(Body(query)["message"].get<std::string>().find("UTF-8"), std::string::npos);
  // Unicode tag values are fine (AWS allows them).
  std::string create = R"({"computeEnvironmentName": "ce", "type": "UNMANAGED"})";
  ASSERT_EQ(router_->Handle(Signed("POST", "/v1/createcomputeenvironment", create)).status, 200);
  std::string arn_enc = "arn%3Aaws%3Abatch%3Aus-east-1%3A000000000000%3Acompute-environment%2Fce";
  HttpResponse tag =
      router_->Handle(Signed("POST", "/v1/tags/" + arn_enc, R"({"tags": {"team": "caf\u00e9"}})"));
  EXPECT_EQ(tag.status, 200) << tag.body;
}

TEST_F(RouterTest, SubmitJobIsCappedAtTheAwsJobPayloadQuota) {
  std::string big = R"({"jobName": "j", "jobQueue": "q", "jobDefinition": "d",
    "containerOverrides": {"environment": [{"name": "X", "value": ")" +
                    std::string(kMaxSubmitJobBytes, 'x') + R"("}]}})";
  HttpResponse r = router_->Handle(Signed("POST", "/v1/submitjob", big));
  EXPECT_EQ(r.status, 413);
  EXPECT_EQ(Body(r)["__type"], "ClientException");
  EXPECT_NE(Body(r)["message"].get<std::string>().find("30720"), std::string::npos);
}

TEST_F(RouterTest, OperationChoosingHeadersMustBeSigned) {
  JsonService logs;
  logs.target_prefix = "Logs_20140328";
  logs.signing_service = "logs";
  logs.operations["DeleteLogGroup"] = [](const Json&) -> Result<Json> { return Json::object(); };
  logs.operations["CreateLogGroup"] = [](const Json&) -> Result<Json> { return Json::object(); };
  router_->RegisterJsonService(std::move(logs));
  // Signed without X-Amz-Target, which is added afterwards: refused.
  HttpRequest req = Signed("POST", "/", R"({"logGroupName": "g"})", "logs");
  req.headers.emplace_back("X-Amz-Target", "Logs_20140328.DeleteLogGroup");
  HttpResponse r = router_->Handle(req);
  EXPECT_EQ(r.status, 403);
  EXPECT_EQ(Body(r)["__type"], "IncompleteSignatureException");
  EXPECT_NE(Body(r)["message"].get<std::string>().find("x-amz-target"), std::string::npos);
  // Content-Type added after signing a request with a body: refused.
  HttpRequest typed = Signed("POST", "/v1/describejobqueues", "{}");
  typed.headers.emplace_back("Content-Type", "application/json");
  EXPECT_EQ(Body(router_->Handle(typed))["__type"], "IncompleteSignatureException");
}

TEST_F(RouterTest, TransportErrorsAreShapedForTheAddressedService) {
  JsonService logs;
  logs.target_prefix = "Logs_20140328";
  logs.signing_service = "logs";
  router_->RegisterJsonService(std::move(logs));
  HttpRequest logs_req{"POST", "/",    "", {{"X-Amz-Target", "Logs_20140328.PutLogEvents"}},
                       "",     nullptr};
  HttpResponse a = router_->TransportError(logs_req, 413, Status::InvalidArgument("too big"));
  EXPECT_EQ(a.status, 413);
  EXPECT_EQ(Header(a, "x-amzn-ErrorType"), "InvalidParameterException");
  EXPECT_EQ(Header(a, "Content-Type"), "application/x-amz-json-1.1");
  HttpRequest batch_req{"POST", "/v1/submitjob", "", {}, "", nullptr};
  HttpResponse b = router_->TransportError(batch_req, 408, Status::InvalidArgument("slow"));
  EXPECT_EQ(b.status, 408);
  EXPECT_EQ(Body(b)["__type"], "ClientException");
  HttpResponse c = router_->TransportError(batch_req, 503, Status::Unavailable("full"));
  EXPECT_EQ(c.status, 503);
  EXPECT_EQ(Body(c)["__type"], "ServerException");
  EXPECT_EQ(Header(c, "x-amzn-RequestId").size(), 36u);
}

}  // namespace
}  // namespace lote::api
