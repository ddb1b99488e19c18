#include "server/server.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>

#include "api/credentials_file.h"
#include "common/files.h"

namespace lote::server {
namespace {

TEST(LoteServerTest, StartsOnAnyPortWritesCredentialsAndServerJson) {
  char tmpl[] = "/tmp/lote_server_test_XXXXXX";
  std::string home = mkdtemp(tmpl);
  ServerOptions options;
  options.home = home + "/state";
  options.port = 0;
  options.region = "eu-west-1";
  auto server = LoteServer::Start(options, SystemClock::Default());
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  EXPECT_NE((*server)->endpoint(), "http://127.0.0.1:0");
  struct stat st {};
  ASSERT_EQ(stat((options.home + "/credentials").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  std::string env = EnvScript(options.home);
  EXPECT_NE(env.find("export AWS_ENDPOINT_URL_BATCH='" + (*server)->endpoint() + "'"),
            std::string::npos);
  EXPECT_NE(env.find("AWS_DEFAULT_REGION='eu-west-1'"), std::string::npos);
  EXPECT_NE(env.find("AWS_PROFILE=lote"), std::string::npos);
  auto creds = api::ReadCredentialsProfile(options.home + "/credentials", "lote");
  ASSERT_TRUE(creds.ok());
  (*server)->Stop();
  // A second start keeps the same key pair.
  auto again = LoteServer::Start(options, SystemClock::Default());
  ASSERT_TRUE(again.ok());
  auto creds2 = api::ReadCredentialsProfile(options.home + "/credentials", "lote");
  EXPECT_EQ(creds->access_key_id, creds2->access_key_id);
  (*again)->Stop();
  std::filesystem::remove_all(home);
}

TEST(LoteServerTest, ExtensionsRegisterOperationsAndStopWithTheServer) {
  char tmpl[] = "/tmp/lote_server_test_XXXXXX";
  std::string home = mkdtemp(tmpl);
  ServerOptions options;
  options.home = home;
  options.port = 0;
  auto destroyed = std::make_shared<bool>(false);
  std::vector<std::string> seen_ops;
  options.extensions.push_back([&, destroyed](ServerContext& ctx) -> Result<std::shared_ptr<void>> {
    api::JsonService svc;
    svc.target_prefix = "Test_1";
    svc.signing_service = "test";
    svc.operations["Ping"] = [](const Json&) -> Result<Json> { return Json{{"pong", true}}; };
    ctx.router->RegisterJsonService(std::move(svc));
    seen_ops = ctx.router->OperationNames();
    EXPECT_NE(ctx.control, nullptr);
    EXPECT_NE(ctx.store, nullptr);
    return std::shared_ptr<void>(nullptr, [destroyed](void*) { *destroyed = true; });
  });
  auto server = LoteServer::Start(options, SystemClock::Default());
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  EXPECT_NE(std::find(seen_ops.begin(), seen_ops.end(), "Test_1.Ping"), seen_ops.end());
  EXPECT_NE(std::find(seen_ops.begin(), seen_ops.end(), "Batch.CreateJobQueue"), seen_ops.end());
  EXPECT_FALSE(*destroyed);
  (*server)->Stop();
  EXPECT_TRUE(*destroyed);
  std::filesystem::remove_all(home);
}

TEST(LoteServerTest, FailingExtensionFailsStart) {
  char tmpl[] = "/tmp/lote_server_test_XXXXXX";
  std::string home = mkdtemp(tmpl);
  ServerOptions options;
  options.home = home;
  options.port = 0;
  options.extensions.push_back([](ServerContext&) -> Result<std::shared_ptr<void>> {
    return Status::FailedPrecondition("log folder missing");
  });
  auto server = LoteServer::Start(options, SystemClock::Default());
  ASSERT_FALSE(server.ok());
  EXPECT_NE(server.status().message().find("log folder missing"), std::string::npos);
  std::filesystem::remove_all(home);
}

TEST(LoteServerTest, DefaultHomeFollowsLoteHome) {
  setenv("LOTE_HOME", "/tmp/some-lote-home", 1);
  EXPECT_EQ(DefaultHome(), "/tmp/some-lote-home");
  unsetenv("LOTE_HOME");
  EXPECT_EQ(DefaultHome(), HomeDir() + "/.lote");
}

}  // namespace
}  // namespace lote::server
