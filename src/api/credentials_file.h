// AWS shared credentials files (INI: "[profile]" sections with
// aws_access_key_id / aws_secret_access_key / aws_session_token lines).
// Used by the server (its key pair in $LOTE_HOME/credentials, profile lote)
// and by lote's client (the standard AWS credential chain).
#pragma once

#include <string>

#include "common/sigv4.h"
#include "common/status.h"

namespace lote::api {

inline constexpr const char* kLoteProfile = "lote";

// The profile's keys from a credentials file; NotFound if the file or
// profile is missing, InvalidArgument if the profile lacks a key.
Result<sigv4::Credentials> ReadCredentialsProfile(const std::string& path,
                                                  const std::string& profile);

// Creates `path` (mode 0600) with a new random key pair under `profile`, or
// returns the existing pair when the file already has that profile.
Result<sigv4::Credentials> EnsureCredentialsFile(const std::string& path,
                                                 const std::string& profile);

// The server's secret key (32 random bytes, base64 in `path`, mode 0600),
// made on first use: the key that seals SSM SecureString values.
Result<std::string> EnsureSecretKeyFile(const std::string& path);

}  // namespace lote::api
