#include "objstore/objstore.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>

#include "common/files.h"
#include "objstore/aws_config.h"
#include "objstore/file_store.h"

namespace lote::objstore {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() /
            ("lote-objstore-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter_++));
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string path() const { return path_.string(); }

 private:
  static inline int counter_ = 0;
  fs::path path_;
};

TEST(UriTest, ParsesSchemes) {
  auto s3 = ParseUri("s3://bucket/a/b/");
  ASSERT_TRUE(s3.ok());
  EXPECT_EQ(s3->scheme, "s3");
  EXPECT_EQ(s3->bucket, "bucket");
  EXPECT_EQ(s3->key, "a/b");
  auto f = ParseUri("file:///tmp/x");
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->scheme, "file");
  EXPECT_EQ(f->key, "/tmp/x");
  auto plain = ParseUri("rel/dir");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->scheme, "file");
  EXPECT_EQ(plain->key, "rel/dir");
  EXPECT_TRUE(ParseUri("gs://b/k").status().IsInvalidArgument());
  EXPECT_TRUE(ParseUri("s3:///k").status().IsInvalidArgument());
  EXPECT_TRUE(ParseUri("file://relative").status().IsInvalidArgument());
  EXPECT_EQ(JoinKey("s3://b/p/", "/k"), "s3://b/p/k");
}

TEST(UriTest, ValidatesKeys) {
  EXPECT_TRUE(ValidateKey("a/b.bin").ok());
  EXPECT_FALSE(ValidateKey("").ok());
  EXPECT_FALSE(ValidateKey("/abs").ok());
  EXPECT_FALSE(ValidateKey("a/../b").ok());
  EXPECT_FALSE(ValidateKey("a//b").ok());
}

TEST(AwsConfigTest, EnvironmentWins) {
  std::map<std::string, std::string> vars = {{"AWS_ACCESS_KEY_ID", "AK"},
                                             {"AWS_SECRET_ACCESS_KEY", "SK"},
                                             {"AWS_SESSION_TOKEN", "TOK"},
                                             {"AWS_ENDPOINT_URL", "http://generic:1"},
                                             {"AWS_ENDPOINT_URL_S3", "http://127.0.0.1:9000/"},
                                             {"AWS_DEFAULT_REGION", "eu-west-1"},
                                             {"HOME", "/nonexistent"}};
  auto env = [&](const std::string& k) -> std::optional<std::string> {
    auto it = vars.find(k);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
  auto cfg = ResolveS3Config(env);
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  EXPECT_EQ(cfg->endpoint, "http://127.0.0.1:9000");
  EXPECT_EQ(cfg->region, "eu-west-1");
  EXPECT_EQ(cfg->credentials.access_key_id, "AK");
  EXPECT_EQ(cfg->credentials.secret_access_key, "SK");
  EXPECT_EQ(cfg->credentials.session_token, "TOK");
}

TEST(AwsConfigTest, SharedFilesAndProfile) {
  TempDir dir;
  ASSERT_TRUE(WriteFileAtomic(dir.path() + "/credentials",
                              "[default]\naws_access_key_id = D\naws_secret_access_key = DS\n"
                              "[lote]\naws_access_key_id=L\naws_secret_access_key=LS\n")
                  .ok());
  ASSERT_TRUE(WriteFileAtomic(dir.path() + "/config",
                              "[profile lote]\nregion = ap-south-1\nendpoint_url = http://h:7\n")
                  .ok());
  std::map<std::string, std::string> vars = {
      {"AWS_SHARED_CREDENTIALS_FILE", dir.path() + "/credentials"},
      {"AWS_CONFIG_FILE", dir.path() + "/config"},
      {"AWS_PROFILE", "lote"}};
  auto env = [&](const std::string& k) -> std::optional<std::string> {
    auto it = vars.find(k);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
  auto cfg = ResolveS3Config(env);
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  EXPECT_EQ(cfg->credentials.access_key_id, "L");
  EXPECT_EQ(cfg->credentials.secret_access_key, "LS");
  EXPECT_EQ(cfg->region, "ap-south-1");
  EXPECT_EQ(cfg->endpoint, "http://h:7");

  vars["AWS_PROFILE"] = "missing";
  auto none = ResolveS3Config(env);
  EXPECT_EQ(none.status().code(), StatusCode::kUnauthenticated);
  EXPECT_NE(none.status().message().find("missing"), std::string::npos);
}

TEST(FileStoreTest, PutGetListDelete) {
  TempDir dir;
  auto store = OpenObjectStore("file://" + dir.path() + "/root");
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  ObjectStore& s = **store;
  ASSERT_TRUE(s.PutBytes("a/one.txt", "hello").ok());
  ASSERT_TRUE(s.PutBytes("a/two.txt", "world!").ok());
  ASSERT_TRUE(s.PutBytes("b.txt", "x").ok());
  auto got = s.GetBytes("a/one.txt");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, "hello");
  auto head = s.Head("a/two.txt");
  ASSERT_TRUE(head.ok());
  EXPECT_EQ(head->size, 6u);
  auto list = s.List("a/");
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].key, "a/one.txt");
  EXPECT_EQ((*list)[1].key, "a/two.txt");
  EXPECT_EQ(s.List("")->size(), 3u);
  // Ranges: inside, cut at the end, past the end, missing object.
  EXPECT_EQ(*s.GetRange("a/two.txt", 1, 3), "orl");
  EXPECT_EQ(*s.GetRange("a/two.txt", 4, 100), "d!");
  EXPECT_EQ(*s.GetRange("a/two.txt", 6, 4), "");
  EXPECT_TRUE(s.GetRange("a/none.txt", 0, 4).status().IsNotFound());

  // Files: put with progress, get back atomically.
  std::string src = dir.path() + "/src.bin";
  std::string big(3 << 20, 'z');
  big[12345] = 'q';
  ASSERT_TRUE(WriteFileAtomic(src, big).ok());
  uint64_t last = 0, total = 0;
  ASSERT_TRUE(s.PutFile("c/big.bin", src, [&](uint64_t d, uint64_t t) {
                 EXPECT_GE(d, last);
                 last = d;
                 total = t;
               }).ok());
  EXPECT_EQ(last, big.size());
  EXPECT_EQ(total, big.size());
  ASSERT_TRUE(s.GetFile("c/big.bin", dir.path() + "/out/big.bin").ok());
  EXPECT_EQ(*ReadFile(dir.path() + "/out/big.bin"), big);

  ASSERT_TRUE(s.Delete("a/one.txt").ok());
  EXPECT_FALSE(*s.Exists("a/one.txt"));
  EXPECT_TRUE(*s.Exists("a/two.txt"));
  EXPECT_TRUE(s.Delete("a/one.txt").ok());  // idempotent
  EXPECT_TRUE(s.GetBytes("a/one.txt").status().IsNotFound());
  EXPECT_TRUE(s.Head("nope").status().IsNotFound());
  EXPECT_TRUE(s.PutBytes("../escape", "x").IsInvalidArgument());
}

TEST(FileStoreTest, FailedPutLeavesNothing) {
  TempDir dir;
  auto store = FileStore::Open(dir.path());
  ASSERT_TRUE(store.ok());
  Status st = (*store)->PutFile("k", dir.path() + "/does-not-exist");
  EXPECT_TRUE(st.IsNotFound()) << st.ToString();
  EXPECT_FALSE(*(*store)->Exists("k"));
  // No temporary files remain in the folder.
  for (const auto& e : fs::directory_iterator(dir.path()))
    ADD_FAILURE() << "left behind: " << e.path();
  EXPECT_TRUE((*store)->GetFile("k", dir.path() + "/x").IsNotFound());
  EXPECT_FALSE(FileExists(dir.path() + "/x"));
}

}  // namespace
}  // namespace lote::objstore
