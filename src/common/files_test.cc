#include "common/files.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>

namespace lote {
namespace {

TEST(FilesTest, WriteNewFileCreatesOnceWithItsMode) {
  char tmpl[] = "/tmp/lote-files-test-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string path = std::string(tmpl) + "/spec.json";
  ASSERT_TRUE(WriteNewFile(path, "{\"a\":1}\n", 0600).ok());
  auto read = ReadFile(path);
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(*read, "{\"a\":1}\n");
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  // A second writer finds it and changes nothing.
  Status again = WriteNewFile(path, "other", 0644);
  EXPECT_TRUE(again.IsAlreadyExists()) << again.ToString();
  EXPECT_EQ(*ReadFile(path), "{\"a\":1}\n");
  EXPECT_FALSE(WriteNewFile(std::string(tmpl) + "/no/such/folder", "x").ok());
  std::filesystem::remove_all(tmpl);
}

TEST(FilesTest, MakeDirMakesOneFolderAndAcceptsAnExistingOne) {
  char tmpl[] = "/tmp/lote-files-test-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = std::string(tmpl) + "/job";
  ASSERT_TRUE(MakeDir(dir, 0711).ok());
  struct stat st {};
  ASSERT_EQ(::stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0711u);
  EXPECT_TRUE(MakeDir(dir, 0711).ok());                 // there already
  EXPECT_FALSE(MakeDir(dir + "/no/such/parent").ok());  // one level only
  std::filesystem::remove_all(tmpl);
}

TEST(FilesTest, CanonicalPathFollowsLinksOfTheExistingPrefix) {
  char tmpl[] = "/tmp/lote-files-test-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string base = std::filesystem::canonical(tmpl).string();
  ASSERT_TRUE(MakeDir(base + "/data").ok());
  ASSERT_TRUE(MakeDir(base + "/secret").ok());
  std::filesystem::create_symlink(base + "/secret", base + "/data/link");
  EXPECT_EQ(CanonicalPath(base + "/data/./set/"), base + "/data/set");
  EXPECT_EQ(CanonicalPath(base + "/data/link"), base + "/secret");
  // Not there yet: the part that exists is resolved, the rest kept.
  EXPECT_EQ(CanonicalPath(base + "/data/link/new/x"), base + "/secret/new/x");
  EXPECT_EQ(CanonicalPath(base + "/data/../secret/y"), base + "/secret/y");
  EXPECT_EQ(CanonicalPath("/"), "/");
  std::filesystem::remove_all(tmpl);
}

}  // namespace
}  // namespace lote
