#include "api/credentials_file.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>

#include "common/files.h"

namespace lote::api {
namespace {

TEST(CredentialsFileTest, CreatesOnceWithMode0600AndRereads) {
  char tmpl[] = "/tmp/lote_creds_test_XXXXXX";
  std::string dir = mkdtemp(tmpl);
  std::string path = dir + "/credentials";
  auto first = EnsureCredentialsFile(path, "lote");
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto second = EnsureCredentialsFile(path, "lote");
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(first->access_key_id, second->access_key_id);
  EXPECT_EQ(first->secret_access_key, second->secret_access_key);
  EXPECT_EQ(first->access_key_id.size(), 20u);
  auto other = ReadCredentialsProfile(path, "default");
  EXPECT_TRUE(other.status().IsNotFound());
  std::filesystem::remove_all(dir);
}

TEST(CredentialsFileTest, ParsesProfilesAmongOthers) {
  char tmpl[] = "/tmp/lote_creds_test_XXXXXX";
  std::string dir = mkdtemp(tmpl);
  std::string path = dir + "/credentials";
  ASSERT_TRUE(
      WriteFileAtomic(path,
                      "[default]\naws_access_key_id=A\naws_secret_access_key=B\n\n"
                      "# comment\n[dev]\n aws_access_key_id = C \naws_secret_access_key = D\n"
                      "aws_session_token = T\n")
          .ok());
  auto dev = ReadCredentialsProfile(path, "dev");
  ASSERT_TRUE(dev.ok());
  EXPECT_EQ(dev->access_key_id, "C");
  EXPECT_EQ(dev->secret_access_key, "D");
  EXPECT_EQ(dev->session_token, "T");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace lote::api
