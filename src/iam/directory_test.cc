#include "iam/directory.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/crypto.h"

namespace lote::iam {
namespace {

class DirectoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/lote_iam_test_XXXXXX";
    dir_ = mkdtemp(tmpl);
    options_.secret_key = RandomBytes(32);
    Reopen();
  }
  void TearDown() override {
    directory_.reset();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }
  void Reopen() {
    directory_.reset();
    store_.reset();
    store_ = std::move(*store::Store::Open(dir_ + "/lote.db"));
    auto d = Directory::Open(store_.get(), &clock_, options_);
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    directory_ = std::move(*d);
  }
  std::string DatabaseBytes() {
    std::string all;
    for (const char* suffix : {"", "-wal"}) {
      std::ifstream in(dir_ + "/lote.db" + suffix, std::ios::binary);
      std::stringstream ss;
      ss << in.rdbuf();
      all += ss.str();
    }
    return all;
  }

  std::string dir_;
  FakeClock clock_{1'700'000'000'000};
  DirectoryOptions options_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<Directory> directory_;
};

TEST_F(DirectoryTest, BootstrapOnceThenKeysSurviveReopenSealed) {
  ASSERT_TRUE(directory_->Bootstrap("admin", "LOTEKEY1", "admin-secret-value-0123456789").ok());
  ASSERT_TRUE(directory_->Bootstrap("other", "LOTEKEY2", "x").ok());  // not the first start
  EXPECT_FALSE(directory_->FindUser("other"));
  ASSERT_TRUE(directory_->CreateUser("alice").ok());
  Result<AccessKey> key = directory_->CreateAccessKey("alice");
  ASSERT_TRUE(key.ok()) << key.status().ToString();
  EXPECT_EQ(key->id.substr(0, 4), "AKIA");
  Reopen();
  auto admin = directory_->FindKey("LOTEKEY1");
  ASSERT_TRUE(admin);
  EXPECT_EQ(admin->user->name, "admin");
  EXPECT_EQ(admin->secret, "admin-secret-value-0123456789");
  auto alice = directory_->FindKey(key->id);
  ASSERT_TRUE(alice);
  EXPECT_EQ(alice->secret, key->secret);
  EXPECT_EQ(alice->user->arn, "arn:aws:iam::000000000000:user/alice");
  // Secrets are sealed in the database, never written in plain text.
  const std::string bytes = DatabaseBytes();
  EXPECT_EQ(bytes.find(key->secret), std::string::npos);
  EXPECT_EQ(bytes.find("admin-secret-value-0123456789"), std::string::npos);
}

TEST_F(DirectoryTest, RotateAndDeleteStopKeysAtOnce) {
  ASSERT_TRUE(directory_->CreateUser("bob").ok());
  AccessKey first = *directory_->CreateAccessKey("bob");
  AccessKey rotated = *directory_->RotateAccessKey("bob", first.id);
  EXPECT_FALSE(directory_->FindKey(first.id));
  ASSERT_TRUE(directory_->FindKey(rotated.id));
  ASSERT_TRUE(directory_->CreateAccessKey("bob").ok());
  EXPECT_EQ(directory_->CreateAccessKey("bob").status().code(), StatusCode::kResourceExhausted);
  ASSERT_TRUE(directory_->DeleteAccessKey("bob", rotated.id).ok());
  EXPECT_FALSE(directory_->FindKey(rotated.id));
  EXPECT_EQ(directory_->DeleteAccessKey("bob", rotated.id).code(), StatusCode::kNotFound);
  ASSERT_TRUE(directory_->DeleteUser("bob").ok());
  EXPECT_TRUE(directory_->Users().empty());
}

TEST_F(DirectoryTest, PoliciesValidatedAndLastAdministratorKept) {
  ASSERT_TRUE(directory_->Bootstrap("admin", "LOTEKEY1", "s").ok());
  ASSERT_TRUE(directory_->CreateUser("alice").ok());
  EXPECT_EQ(directory_->CreateUser("alice").status().code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(directory_->CreateUser("bad name").status().code(), StatusCode::kInvalidArgument);
  Status bad = directory_->PutUserPolicy("alice", "p", R"({"Statement":[{"Effect":"Maybe"}]})");
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("Effect"), std::string::npos) << bad.message();
  ASSERT_TRUE(
      directory_
          ->PutUserPolicy("alice", "p",
                          R"({"Statement":[{"Effect":"Allow","Action":"batch:*","Resource":"*"}]})")
          .ok());
  EXPECT_EQ(directory_->FindUser("alice")->policies.size(), 1u);
  EXPECT_EQ(directory_->DeleteUser("admin").code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(directory_->SetUnixUsers("alice", {"nobody"}).ok());
  EXPECT_EQ(directory_->SetUnixUsers("alice", {"no body"}).code(), StatusCode::kInvalidArgument);
  Reopen();
  EXPECT_EQ(directory_->FindUser("alice")->unix_users, std::vector<std::string>{"nobody"});
  ASSERT_TRUE(directory_->DeleteUserPolicy("alice", "p").ok());
  EXPECT_TRUE(directory_->FindUser("alice")->policies.empty());
}

}  // namespace
}  // namespace lote::iam
