#include "console/sessions.h"

#include <vector>

#include "common/crypto.h"

namespace lote::console {
namespace {

constexpr const char* kWrongCredentials =
    "sign-in refused: the access key id and secret do not match this server's (see "
    "$LOTE_HOME/credentials, profile lote), or the sign-in link is used, expired or altered";

bool HexDecode(std::string_view hex, std::string* out) {
  if (hex.size() % 2 != 0) return false;
  out->clear();
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  for (size_t i = 0; i < hex.size(); i += 2) {
    int hi = nibble(hex[i]), lo = nibble(hex[i + 1]);
    if (hi < 0 || lo < 0) return false;
    out->push_back(static_cast<char>(hi * 16 + lo));
  }
  return true;
}

std::string Mac(std::string_view secret, std::string_view payload) {
  return HexEncode(HmacSha256(secret, std::string("lote-console-signin\n") + std::string(payload)));
}

}  // namespace

SessionManager::SessionManager(const Clock* clock, SessionOptions options)
    : clock_(clock), options_(options) {}

void SessionManager::AddKey(const std::string& access_key_id, const std::string& secret) {
  std::lock_guard<std::mutex> lock(mu_);
  secrets_[access_key_id] = secret;
}

std::string SessionManager::MakeSignInToken(const std::string& access_key_id,
                                            const std::string& secret, int64_t expires_ms,
                                            const std::string& nonce) {
  const std::string payload =
      HexEncode(access_key_id + "\n" + std::to_string(expires_ms) + "\n" + nonce);
  return payload + "." + Mac(secret, payload);
}

void SessionManager::SweepLocked(int64_t now) {
  std::erase_if(sessions_, [now](const auto& kv) { return kv.second.expires_ms <= now; });
  std::erase_if(used_nonces_, [now](const auto& kv) { return kv.second <= now; });
  while (sessions_.size() >= options_.max_sessions) {
    auto oldest = sessions_.begin();
    for (auto it = sessions_.begin(); it != sessions_.end(); ++it)
      if (it->second.expires_ms < oldest->second.expires_ms) oldest = it;
    sessions_.erase(oldest);
  }
}

Result<Session> SessionManager::StartLocked(const std::string& principal, int64_t now) {
  SweepLocked(now);
  Session s;
  s.id = HexEncode(RandomBytes(32));
  s.csrf = HexEncode(RandomBytes(32));
  s.principal = principal;
  s.expires_ms = now + options_.session_ttl_ms;
  sessions_[s.id] = s;
  return s;
}

void SessionManager::SetKeySource(KeySource source) {
  std::lock_guard<std::mutex> lock(mu_);
  key_source_ = std::move(source);
}

std::optional<std::string> SessionManager::SecretLocked(const std::string& access_key_id) const {
  if (auto it = secrets_.find(access_key_id); it != secrets_.end()) return it->second;
  if (key_source_) return key_source_(access_key_id);
  return std::nullopt;
}

Result<Session> SessionManager::SignIn(std::string_view access_key_id, std::string_view secret) {
  std::lock_guard<std::mutex> lock(mu_);
  // Compare against every key so the time does not tell which part is wrong.
  bool ok = false;
  std::string principal;
  for (const auto& [id, s] : secrets_) {
    const bool match = ConstantTimeEquals(id, access_key_id) & ConstantTimeEquals(s, secret);
    if (match) {
      ok = true;
      principal = id;
    }
  }
  if (!ok && key_source_) {
    if (std::optional<std::string> known = key_source_(std::string(access_key_id))) {
      ok = ConstantTimeEquals(*known, secret);
      principal = std::string(access_key_id);
    }
  }
  if (!ok || secret.empty()) return Status::Unauthenticated(kWrongCredentials);
  return StartLocked(principal, clock_->NowMillis());
}

Result<Session> SessionManager::SignInWithToken(std::string_view token) {
  const size_t dot = token.find('.');
  std::string decoded;
  if (dot == std::string_view::npos || !HexDecode(token.substr(0, dot), &decoded))
    return Status::Unauthenticated(kWrongCredentials);
  const std::string_view payload = token.substr(0, dot);
  const std::string_view mac = token.substr(dot + 1);
  const size_t nl1 = decoded.find('\n');
  const size_t nl2 = nl1 == std::string::npos ? std::string::npos : decoded.find('\n', nl1 + 1);
  if (nl2 == std::string::npos) return Status::Unauthenticated(kWrongCredentials);
  const std::string key_id = decoded.substr(0, nl1);
  const std::string expiry_text = decoded.substr(nl1 + 1, nl2 - nl1 - 1);
  const std::string nonce = decoded.substr(nl2 + 1);
  int64_t expires = 0;
  try {
    size_t used = 0;
    expires = std::stoll(expiry_text, &used);
    if (used != expiry_text.size()) return Status::Unauthenticated(kWrongCredentials);
  } catch (const std::exception&) {
    return Status::Unauthenticated(kWrongCredentials);
  }
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t now = clock_->NowMillis();
  const std::optional<std::string> secret = SecretLocked(key_id);
  if (!secret || nonce.size() < 16 || !ConstantTimeEquals(Mac(*secret, payload), mac) ||
      expires <= now || expires > now + kMaxTokenLifetimeMs || used_nonces_.count(nonce)) {
    return Status::Unauthenticated(kWrongCredentials);
  }
  used_nonces_[nonce] = expires;
  return StartLocked(key_id, now);
}

Result<Session> SessionManager::Find(std::string_view session_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sessions_.find(session_id);
  if (it == sessions_.end() || session_id.empty())
    return Status::Unauthenticated("not signed in: sign in at /console/ first");
  if (it->second.expires_ms <= clock_->NowMillis())
    return Status::Unauthenticated("the session has expired: sign in again");
  return it->second;
}

void SessionManager::SignOut(std::string_view session_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sessions_.find(session_id);
  if (it != sessions_.end()) sessions_.erase(it);
}

bool SessionManager::CheckCsrf(const Session& session, std::string_view token) {
  return !token.empty() && ConstantTimeEquals(session.csrf, token);
}

}  // namespace lote::console
