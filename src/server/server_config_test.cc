#include "server/server_config.h"

#include <gtest/gtest.h>

namespace lote::server {
namespace {

TEST(ServerConfig, KeyValueLinesCommentsAndQuotes) {
  auto entries = ParseServerConfig(
      "# a comment\n\nlisten = 0.0.0.0:7480\n  home=\"/var/lib/lote\"  \ninsecure-no-auth = "
      "false\n",
      "server.conf");
  ASSERT_TRUE(entries.ok()) << entries.status().ToString();
  ASSERT_EQ(entries->size(), 3u);
  EXPECT_EQ((*entries)[0].key, "listen");
  EXPECT_EQ((*entries)[0].value, "0.0.0.0:7480");
  EXPECT_EQ((*entries)[0].line, 3);
  EXPECT_EQ((*entries)[1].value, "/var/lib/lote");
  EXPECT_EQ((*entries)[2].key, "insecure-no-auth");
}

TEST(ServerConfig, BadLinesNameFileAndLine) {
  auto no_equals = ParseServerConfig("listen 1\n", "/etc/lote/server.conf");
  ASSERT_FALSE(no_equals.ok());
  EXPECT_EQ(no_equals.status().message(),
            "/etc/lote/server.conf:1: expected `key = value`, got 'listen 1'");
  auto twice = ParseServerConfig("region = a\nregion = b\n", "c");
  ASSERT_FALSE(twice.ok());
  EXPECT_EQ(twice.status().message(), "c:2: 'region' is set twice");
  EXPECT_FALSE(ParseServerConfig("--listen = x\n", "c").ok());
  EXPECT_FALSE(ParseServerConfig(" = x\n", "c").ok());
}

}  // namespace
}  // namespace lote::server
