// Sign-in sessions of the web console, and their CSRF tokens.
//
// Contract:
// - A session starts from an access key id and secret (SignIn): a fixed key
//   (AddKey) or one of the key source (the server's users), or
//   from a one-time sign-in token (SignInWithToken) that `lote console` makes
//   with the same secret: "<payload>.<mac>", payload = hex of
//   "<access key id>\n<expiry ms>\n<nonce>", mac = hex HMAC-SHA256(secret,
//   "lote-console-signin\n" + payload). A token is accepted once, before its
//   expiry, and never more than kMaxTokenLifetimeMs ahead of the clock.
// - A session id (the cookie value) and its CSRF token are 256 random bits
//   each, hex. A session expires `session_ttl_ms` after sign-in; Find() of an
//   expired or unknown id is Unauthenticated. Secrets and tokens are compared
//   in constant time. Wrong credentials are Unauthenticated with one message
//   for every case (no hint which part was wrong).
// - Sessions live in memory: a server restart signs everyone out.
// - A session acts as the user of its key (the router authorizes each call);
//   a key deleted or rotated since sign-in makes every call of its sessions
//   refused.
// Thread safety: every method is safe from any thread (AddKey and
// SetKeySource before use; the key source must be thread safe).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "common/clock.h"
#include "common/status.h"

namespace lote::console {

struct Session {
  std::string id;         // cookie value
  std::string csrf;       // required in X-CSRF-Token on every mutation
  std::string principal;  // the access key id it signed in with
  int64_t expires_ms = 0;
};

struct SessionOptions {
  int64_t session_ttl_ms = 12LL * 3600 * 1000;
  size_t max_sessions = 10'000;  // beyond: the oldest is signed out
};

class SessionManager {
 public:
  static constexpr int64_t kMaxTokenLifetimeMs = 15 * 60 * 1000;

  explicit SessionManager(const Clock* clock, SessionOptions options = {});

  void AddKey(const std::string& access_key_id, const std::string& secret);
  // The secret of an access key id (nullopt: unknown), asked after the fixed keys.
  using KeySource = std::function<std::optional<std::string>(const std::string& access_key_id)>;
  void SetKeySource(KeySource source);

  Result<Session> SignIn(std::string_view access_key_id, std::string_view secret);
  Result<Session> SignInWithToken(std::string_view token);
  Result<Session> Find(std::string_view session_id) const;
  void SignOut(std::string_view session_id);
  // True when `token` is the session's CSRF token.
  static bool CheckCsrf(const Session& session, std::string_view token);

  // A one-time sign-in token (what `lote console` prints in its URL).
  static std::string MakeSignInToken(const std::string& access_key_id, const std::string& secret,
                                     int64_t expires_ms, const std::string& nonce);

 private:
  Result<Session> StartLocked(const std::string& principal, int64_t now);
  // The secret of a fixed key or the key source's; called with mu_ held.
  std::optional<std::string> SecretLocked(const std::string& access_key_id) const;
  void SweepLocked(int64_t now);

  const Clock* clock_;
  const SessionOptions options_;
  mutable std::mutex mu_;
  std::map<std::string, std::string, std::less<>> secrets_;  // guarded by mu_
  KeySource key_source_;
  std::map<std::string, Session, std::less<>> sessions_;  // by id, guarded by mu_
  std::map<std::string, int64_t> used_nonces_;            // nonce -> expiry, guarded by mu_
};

}  // namespace lote::console
