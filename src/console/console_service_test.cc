#include "console/console_service.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "api/auth.h"
#include "logs/test_util.h"

namespace lote::console {
namespace {

class ConsoleServiceTest : public ::testing::Test {
 protected:
  ConsoleServiceTest()
      : auth_(&clock_, "us-east-1"),
        router_(&auth_),
        sessions_(&clock_),
        history_(nullptr),
        console_(&router_, &sessions_, &history_, &clock_, ConsoleOptions{100, 10}) {
    auth_.AddKey("AKIDLOTE", "secret-secret");
    sessions_.AddKey("AKIDLOTE", "secret-secret");
    router_.RegisterRestOperation(
        {"DescribeJobs", "POST", "/v1/describejobs", {}, [](const Json& r) -> Result<Json> {
           if (!r.contains("jobs")) return Status::InvalidArgument("jobs is required");
           return Json{
               {"jobs",
                {{{"jobId", "j1"},
                  {"status", "RUNNING"},
                  {"container", {{"environment", {{{"name", "TOKEN"}, {"value", "hunter2"}}}}}}}}}};
         }});
    router_.RegisterRestOperation(
        {"TerminateJob", "POST", "/v1/terminatejob", {}, [this](const Json& r) -> Result<Json> {
           terminated_.push_back(r.value("jobId", ""));
           return Json::object();
         }});
    router_.RegisterRestOperation(
        {"ReleaseNode", "POST", "/v1/releasenode", {}, [this](const Json& r) -> Result<Json> {
           const std::string node = r.value("node", "");
           if (node != "i-0001")
             return Status::InvalidArgument("node " + node + " is not quarantined");
           released_.push_back(node);
           return Json{{"node", node}, {"released", true}};
         }});
  }

  api::HttpRequest Request(const std::string& method, const std::string& path,
                           const std::string& body = "") {
    api::HttpRequest r;
    r.method = method;
    r.raw_path = path;
    r.body = body;
    if (method == "POST") r.headers.emplace_back("Content-Type", "application/json");
    return r;
  }
  static std::string Header(const api::HttpResponse& r, const std::string& name) {
    for (const auto& [k, v] : r.headers)
      if (k == name) return v;
    return "";
  }
  // Signs in; returns the cookie header value and sets csrf_.
  std::string SignIn() {
    api::HttpResponse r =
        console_.Handle(Request("POST", "/console/api/signin",
                                R"({"accessKeyId":"AKIDLOTE","secretAccessKey":"secret-secret"})"));
    EXPECT_EQ(r.status, 200) << r.body;
    csrf_ = Json::parse(r.body)["csrfToken"];
    const std::string cookie = Header(r, "Set-Cookie");
    return cookie.substr(0, cookie.find(';'));
  }

  FakeClock clock_;
  api::Authenticator auth_;
  api::ApiRouter router_;
  SessionManager sessions_;
  logs::ProgressHistory history_;
  ConsoleService console_;
  std::vector<std::string> terminated_;
  std::vector<std::string> released_;
  std::string csrf_;
};

TEST_F(ConsoleServiceTest, TheCookieIsHttpOnlyStrictAndExpires) {
  api::HttpResponse r =
      console_.Handle(Request("POST", "/console/api/signin",
                              R"({"accessKeyId":"AKIDLOTE","secretAccessKey":"secret-secret"})"));
  ASSERT_EQ(r.status, 200);
  const std::string cookie = Header(r, "Set-Cookie");
  EXPECT_NE(cookie.find("HttpOnly"), std::string::npos);
  EXPECT_NE(cookie.find("SameSite=Strict"), std::string::npos);
  EXPECT_NE(cookie.find("Max-Age=43200"), std::string::npos);
  EXPECT_NE(cookie.find("Path=/console"), std::string::npos);
}

TEST_F(ConsoleServiceTest, NothingWithoutASessionAndAWrongSecretIsRefused) {
  api::HttpResponse denied =
      console_.Handle(Request("POST", "/console/api/signin",
                              R"({"accessKeyId":"AKIDLOTE","secretAccessKey":"secret-secreT"})"));
  EXPECT_EQ(denied.status, 401);
  EXPECT_EQ(Header(denied, "Set-Cookie"), "");
  EXPECT_EQ(console_.Handle(Request("GET", "/console/api/session")).status, 401);
  api::HttpRequest jobs = Request("POST", "/console/api/batch/DescribeJobs", R"({"jobs":["j1"]})");
  EXPECT_EQ(console_.Handle(jobs).status, 401);
  jobs.headers.emplace_back("Cookie", "lote_console=0123");
  EXPECT_EQ(console_.Handle(jobs).status, 401);
  // The page itself is served (it holds no data).
  api::HttpResponse page = console_.Handle(Request("GET", "/console/"));
  EXPECT_EQ(page.status, 200);
  EXPECT_NE(Header(page, "Content-Security-Policy").find("default-src 'self'"), std::string::npos);
}

TEST_F(ConsoleServiceTest, MutationsNeedTheCsrfToken) {
  const std::string cookie = SignIn();
  api::HttpRequest terminate =
      Request("POST", "/console/api/batch/TerminateJob", R"({"jobId":"j1","reason":"test"})");
  terminate.headers.emplace_back("Cookie", cookie);
  EXPECT_EQ(console_.Handle(terminate).status, 403);
  terminate.headers.emplace_back("X-CSRF-Token", "not-it");
  EXPECT_EQ(console_.Handle(terminate).status, 403);
  EXPECT_TRUE(terminated_.empty());
  terminate.headers.back().second = csrf_;
  EXPECT_EQ(console_.Handle(terminate).status, 200);
  EXPECT_EQ(terminated_, std::vector<std::string>{"j1"});
  // A form post (not JSON) is refused before anything else.
  api::HttpRequest form = terminate;
  form.headers[0].second = "application/x-www-form-urlencoded";
  EXPECT_EQ(console_.Handle(form).status, 415);
}

// The overview's Release button: lote's ReleaseNode through the signed API
// path, a mutation (CSRF token), its errors as the API gives them.
TEST_F(ConsoleServiceTest, ReleaseNodeIsAMutationCalledThroughTheApi) {
  const std::string cookie = SignIn();
  api::HttpRequest release =
      Request("POST", "/console/api/batch/ReleaseNode", R"({"node":"i-0001"})");
  release.headers.emplace_back("Cookie", cookie);
  EXPECT_EQ(console_.Handle(release).status, 403);  // no CSRF token
  EXPECT_TRUE(released_.empty());
  release.headers.emplace_back("X-CSRF-Token", csrf_);
  api::HttpResponse r = console_.Handle(release);
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Json::parse(r.body)["released"], true);
  EXPECT_EQ(released_, std::vector<std::string>{"i-0001"});
  release.body = R"({"node":"i-0002"})";
  r = console_.Handle(release);
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(Json::parse(r.body)["__type"], "ClientException");
  EXPECT_EQ(Json::parse(r.body)["message"], "node i-0002 is not quarantined");
}

TEST_F(ConsoleServiceTest, CallsGoThroughTheApiOperationsWithTheirErrors) {
  const std::string cookie = SignIn();
  api::HttpRequest bad = Request("POST", "/console/api/batch/DescribeJobs", "{}");
  bad.headers.emplace_back("Cookie", cookie);
  bad.headers.emplace_back("X-CSRF-Token", csrf_);
  api::HttpResponse r = console_.Handle(bad);
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(Json::parse(r.body)["__type"], "ClientException");
  EXPECT_EQ(Json::parse(r.body)["message"], "jobs is required");
  // Only the console's list of operations.
  api::HttpRequest other = bad;
  other.raw_path = "/console/api/batch/DeleteJobQueue";
  EXPECT_EQ(console_.Handle(other).status, 404);
  // The API port still demands SigV4.
  api::HttpRequest unsigned_call = Request("POST", "/v1/describejobs", R"({"jobs":["j1"]})");
  EXPECT_EQ(router_.Handle(unsigned_call).status, 403);
}

TEST_F(ConsoleServiceTest, EnvironmentValuesAreMaskedUnlessRevealed) {
  const std::string cookie = SignIn();
  api::HttpRequest describe =
      Request("POST", "/console/api/batch/DescribeJobs", R"({"jobs":["j1"]})");
  describe.headers.emplace_back("Cookie", cookie);
  describe.headers.emplace_back("X-CSRF-Token", csrf_);
  api::HttpResponse masked = console_.Handle(describe);
  ASSERT_EQ(masked.status, 200);
  EXPECT_EQ(masked.body.find("hunter2"), std::string::npos);
  Json env = Json::parse(masked.body)["jobs"][0]["container"]["environment"][0];
  EXPECT_EQ(env["name"], "TOKEN");
  EXPECT_EQ(env["masked"], true);
  describe.body = R"({"jobs":["j1"],"reveal":true})";
  api::HttpResponse revealed = console_.Handle(describe);
  ASSERT_EQ(revealed.status, 200);
  EXPECT_NE(revealed.body.find("hunter2"), std::string::npos);
}

// GET `path`?`query` on a console whose DescribeJobs answers `job`, signed in.
api::HttpResponse GetWithJob(const Json& job, logs::ProgressHistory* history,
                             const std::string& path, const std::string& query) {
  FakeClock clock;
  api::ApiRouter router(nullptr);
  router.RegisterRestOperation(
      {"DescribeJobs", "POST", "/v1/describejobs", {}, [job](const Json&) -> Result<Json> {
         return Json{{"jobs", {job}}};
       }});
  SessionManager sessions(&clock);
  sessions.AddKey("AKID", "secret");
  ConsoleService console(&router, &sessions, history, &clock);
  Result<Session> session = sessions.SignIn("AKID", "secret");
  EXPECT_TRUE(session.ok());
  api::HttpRequest r;
  r.method = "GET";
  r.raw_path = path;
  r.raw_query = query;
  r.headers.emplace_back("Cookie", "lote_console=" + session->id);
  return console.Handle(r);
}

// The progress history of every attempt, as columns aligned with `step`.
TEST(ConsoleProgressTest, EveryAttemptAsColumns) {
  logs::testing::TempDir dir;
  logs::LogStoreOptions options;
  options.root = dir.path();
  Result<std::unique_ptr<logs::LogStore>> store = logs::LogStore::Open(options);
  ASSERT_TRUE(store.ok());
  logs::ProgressHistory history(store->get());
  ASSERT_TRUE(history.Record("j1", 1, 0, {1, Json{{"step", 1}, {"loss", 3.0}}}).ok());
  ASSERT_TRUE(history.Record("j1", 1, 0, {2, Json{{"step", 2}, {"loss", 2.5}}}).ok());
  ASSERT_TRUE(history.Record("j1", 2, 0, {3, Json{{"step", 2}, {"loss", 2.4}}}).ok());
  ASSERT_TRUE(
      history.Record("j1", 2, 0, {4, Json{{"step", 3}, {"loss", 2.0}, {"val_loss", 2.2}}}).ok());
  const Json job = {{"jobId", "j1"}, {"status", "RUNNING"}, {"attempts", {Json::object()}}};
  api::HttpResponse answer = GetWithJob(job, &history, "/console/api/progress", "jobId=j1");
  ASSERT_EQ(answer.status, 200) << answer.body;
  Json j = Json::parse(answer.body);
  ASSERT_EQ(j["attempts"].size(), 2u);
  EXPECT_EQ(j["attempts"][0]["step"], Json::array({1, 2}));
  EXPECT_EQ(j["attempts"][1]["attempt"], 2);
  EXPECT_EQ(j["attempts"][1]["step"], Json::array({2, 3}));
  EXPECT_EQ(j["attempts"][1]["series"]["loss"], Json::array({2.4, 2.0}));
  EXPECT_EQ(j["attempts"][1]["series"]["val_loss"], Json::array({nullptr, 2.2}));
  EXPECT_EQ(GetWithJob(job, &history, "/console/api/progress", "").status, 400);
}

// Checkpoints: the step folders under the job's --checkpoint-uri.
TEST(ConsoleCheckpointsTest, ListsStepFoldersAndTheirManifests) {
  logs::testing::TempDir dir;
  const std::string base = "file://" + dir.path() + "/ckpt";
  for (const char* rel :
       {"j1/step_4/manifest.json", "j1/step_4/model-tp0.safetensors",
        "j1/step_8/model-tp0.safetensors", "j1/notes.txt", "j2/step_1/manifest.json"}) {
    std::filesystem::create_directories(
        std::filesystem::path(dir.path() + "/ckpt/" + std::string(rel)).parent_path());
    std::FILE* f = std::fopen((dir.path() + "/ckpt/" + std::string(rel)).c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs("12345", f);
    std::fclose(f);
  }
  const Json job = {
      {"jobId", "j1"},
      {"container", {{"command", {"lote", "train", "--checkpoint-uri", base + "/"}}}}};
  logs::ProgressHistory history(nullptr);
  api::HttpResponse answer = GetWithJob(job, &history, "/console/api/checkpoints", "jobId=j1");
  ASSERT_EQ(answer.status, 200) << answer.body;
  Json j = Json::parse(answer.body);
  EXPECT_EQ(j["uri"], base + "/j1/");
  ASSERT_EQ(j["checkpoints"].size(), 2u) << j.dump();
  EXPECT_EQ(j["checkpoints"][0]["step"], 4);
  EXPECT_EQ(j["checkpoints"][0]["complete"], true);
  EXPECT_EQ(j["checkpoints"][0]["objects"], 2);
  EXPECT_EQ(j["checkpoints"][0]["bytes"], 10);
  EXPECT_EQ(j["checkpoints"][1]["step"], 8);
  EXPECT_EQ(j["checkpoints"][1]["complete"], false);
}

}  // namespace
}  // namespace lote::console
