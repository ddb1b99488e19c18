// For the cli tests: a real in-process `lote server` on a free port with its
// own home, and its credentials (profile lote).
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <string>

#include "api/credentials_file.h"
#include "cli/api_client.h"
#include "server/jobs_service.h"
#include "server/server.h"

namespace lote::cli {

class ServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/lote_cli_test_XXXXXX";
    home_ = mkdtemp(tmpl);
    server::ServerOptions options;
    options.home = home_;
    options.port = 0;
    // The job operations, tags and DeleteJobQueue are the jobs service's (the
    // lote binary links it in through a static registrar; a test names it).
    options.extensions.push_back(server::JobsExtension());
    auto s = server::LoteServer::Start(options, SystemClock::Default());
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    server_ = std::move(*s);
    creds_ = *api::ReadCredentialsProfile(home_ + "/credentials", "lote");
  }
  void TearDown() override {
    server_.reset();
    std::filesystem::remove_all(home_);
  }
  ClientOptions Options(sigv4::Credentials creds) const {
    ClientOptions o;
    o.endpoint = server_->endpoint();
    o.region = "us-east-1";
    o.credentials = creds;
    return o;
  }
  std::string home_;
  std::unique_ptr<server::LoteServer> server_;
  sigv4::Credentials creds_;
};

}  // namespace lote::cli
