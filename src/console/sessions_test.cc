#include "console/sessions.h"

#include <gtest/gtest.h>

namespace lote::console {
namespace {

class SessionsTest : public ::testing::Test {
 protected:
  SessionsTest() : sessions_(&clock_, SessionOptions{60'000, 100}) {
    sessions_.AddKey("AKIDLOTE", "s3cret-s3cret");
  }
  FakeClock clock_;
  SessionManager sessions_;
};

TEST_F(SessionsTest, SignInWithTheKeyPairStartsASessionThatExpires) {
  Result<Session> s = sessions_.SignIn("AKIDLOTE", "s3cret-s3cret");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->principal, "AKIDLOTE");
  EXPECT_EQ(s->id.size(), 64u);
  EXPECT_EQ(s->csrf.size(), 64u);
  EXPECT_NE(s->id, s->csrf);
  ASSERT_TRUE(sessions_.Find(s->id).ok());
  clock_.AdvanceMillis(59'999);
  EXPECT_TRUE(sessions_.Find(s->id).ok());
  clock_.AdvanceMillis(1);
  EXPECT_EQ(sessions_.Find(s->id).status().code(), StatusCode::kUnauthenticated);
}

// The server's users sign in with their own keys (the key source) and by
// one-time token; a key the source no longer holds is refused.
TEST_F(SessionsTest, KeySourceUsersSignInAsThemselves) {
  std::map<std::string, std::string> keys = {{"AKIAALICE", "alice-secret"}};
  sessions_.SetKeySource([&keys](const std::string& id) -> std::optional<std::string> {
    auto it = keys.find(id);
    if (it == keys.end()) return std::nullopt;
    return it->second;
  });
  Result<Session> alice = sessions_.SignIn("AKIAALICE", "alice-secret");
  ASSERT_TRUE(alice.ok()) << alice.status().ToString();
  EXPECT_EQ(alice->principal, "AKIAALICE");
  EXPECT_FALSE(sessions_.SignIn("AKIAALICE", "alice-secreT").ok());
  EXPECT_TRUE(sessions_.SignIn("AKIDLOTE", "s3cret-s3cret").ok());  // fixed keys still work
  const std::string token = SessionManager::MakeSignInToken(
      "AKIAALICE", "alice-secret", clock_.NowMillis() + 60'000, "nonce-0123456789abcdef");
  Result<Session> by_token = sessions_.SignInWithToken(token);
  ASSERT_TRUE(by_token.ok()) << by_token.status().ToString();
  EXPECT_EQ(by_token->principal, "AKIAALICE");
  keys.clear();
  EXPECT_FALSE(sessions_.SignIn("AKIAALICE", "alice-secret").ok());
}

TEST_F(SessionsTest, WrongCredentialsAreRefusedWithOneMessage) {
  Result<Session> wrong_secret = sessions_.SignIn("AKIDLOTE", "s3cret-s3creT");
  Result<Session> wrong_id = sessions_.SignIn("AKIDLOTF", "s3cret-s3cret");
  Result<Session> empty = sessions_.SignIn("", "");
  ASSERT_FALSE(wrong_secret.ok());
  ASSERT_FALSE(wrong_id.ok());
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(wrong_secret.status().code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(wrong_secret.status().message(), wrong_id.status().message());
  EXPECT_FALSE(sessions_.Find("").ok());
  EXPECT_FALSE(sessions_.Find("deadbeef").ok());
}

TEST_F(SessionsTest, CsrfTokenMustMatchTheSession) {
  Result<Session> a = sessions_.SignIn("AKIDLOTE", "s3cret-s3cret");
  Result<Session> b = sessions_.SignIn("AKIDLOTE", "s3cret-s3cret");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_TRUE(SessionManager::CheckCsrf(*a, a->csrf));
  EXPECT_FALSE(SessionManager::CheckCsrf(*a, b->csrf));
  EXPECT_FALSE(SessionManager::CheckCsrf(*a, ""));
  EXPECT_FALSE(SessionManager::CheckCsrf(*a, a->csrf.substr(1)));
}

TEST_F(SessionsTest, SignOutEndsTheSession) {
  Result<Session> s = sessions_.SignIn("AKIDLOTE", "s3cret-s3cret");
  ASSERT_TRUE(s.ok());
  sessions_.SignOut(s->id);
  EXPECT_FALSE(sessions_.Find(s->id).ok());
}

TEST_F(SessionsTest, OneTimeTokenWorksOnceAndOnlyUnaltered) {
  const int64_t expires = clock_.NowMillis() + 60'000;
  const std::string token =
      SessionManager::MakeSignInToken("AKIDLOTE", "s3cret-s3cret", expires, "0123456789abcdef");
  std::string altered = token;
  altered.back() = altered.back() == '0' ? '1' : '0';
  EXPECT_FALSE(sessions_.SignInWithToken(altered).ok());
  EXPECT_FALSE(sessions_.SignInWithToken("").ok());
  EXPECT_FALSE(sessions_.SignInWithToken("zz.zz").ok());
  ASSERT_TRUE(sessions_.SignInWithToken(token).ok());
  EXPECT_FALSE(sessions_.SignInWithToken(token).ok());  // used
  // Signed with another secret, expired, or too far ahead: refused.
  EXPECT_FALSE(sessions_
                   .SignInWithToken(SessionManager::MakeSignInToken("AKIDLOTE", "other", expires,
                                                                    "fedcba9876543210"))
                   .ok());
  const std::string later =
      SessionManager::MakeSignInToken("AKIDLOTE", "s3cret-s3cret", expires, "aaaaaaaaaaaaaaaa");
  clock_.AdvanceMillis(60'000);
  EXPECT_FALSE(sessions_.SignInWithToken(later).ok());
  EXPECT_FALSE(
      sessions_
          .SignInWithToken(SessionManager::MakeSignInToken(
              "AKIDLOTE", "s3cret-s3cret",
              clock_.NowMillis() + SessionManager::kMaxTokenLifetimeMs + 1, "bbbbbbbbbbbbbbbb"))
          .ok());
}

TEST_F(SessionsTest, AtMostMaxSessionsAreKept) {
  std::string first;
  for (int i = 0; i < 150; ++i) {
    Result<Session> s = sessions_.SignIn("AKIDLOTE", "s3cret-s3cret");
    ASSERT_TRUE(s.ok());
    if (i == 0) first = s->id;
    clock_.AdvanceMillis(1);
  }
  EXPECT_FALSE(sessions_.Find(first).ok());
}

}  // namespace
}  // namespace lote::console
