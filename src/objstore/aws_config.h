// Resolution of S3 endpoint, region and credentials from the standard AWS
// environment variables and shared files, as the AWS CLI does:
//   endpoint:    AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, `endpoint_url` in the
//                profile of the config file, else https://s3.<region>.amazonaws.com
//   region:      AWS_REGION, AWS_DEFAULT_REGION, `region` in the config file
//                profile, else us-east-1
//   credentials: AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY (+ AWS_SESSION_TOKEN),
//                else the profile (AWS_PROFILE, else AWS_DEFAULT_PROFILE, else
//                "default") of the shared credentials file
//                (AWS_SHARED_CREDENTIALS_FILE, else ~/.aws/credentials), then of
//                the config file (AWS_CONFIG_FILE, else ~/.aws/config).
// Pure functions of an injected environment lookup; thread safe.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>

#include "common/sigv4.h"
#include "common/status.h"

namespace lote::objstore {

// Returns the value of an environment variable, or nullopt when unset.
using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;
EnvLookup ProcessEnv();

struct S3Config {
  std::string endpoint;  // "http://127.0.0.1:5000", no trailing '/'
  std::string region;
  sigv4::Credentials credentials;
  int max_attempts = 5;                        // per request, on 5xx/429/network errors
  int64_t initial_backoff_ms = 200;            // doubled per retry (with jitter)
  uint64_t multipart_threshold = 64ull << 20;  // objects at least this big use multipart
  uint64_t part_size = 16ull << 20;            // bytes per part (S3 minimum 5 MiB)
  int max_parallel_parts = 4;  // parts uploaded at once (each holds a part in memory)
  int64_t connect_timeout_ms = 10'000;
  int64_t low_speed_timeout_s = 60;  // abort when < 1 byte/s for this long
};

// Parses an INI file ("[section]" and "key = value" lines) into sections.
std::map<std::string, std::map<std::string, std::string>> ParseIni(const std::string& text);

// Builds the config from the environment and the shared files. Unauthenticated
// with a message naming where credentials were looked for when none are found.
Result<S3Config> ResolveS3Config(const EnvLookup& env);

}  // namespace lote::objstore
