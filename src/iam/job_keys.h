// Job keys: the access keys a job attempt's nodes are given (docs/api.md, "Job
// credentials"), AWS's job role as lote has it. The key id names the job and
// the attempt; the secret is an HMAC of the key id under the server's key, so
// nothing is stored and a restarted server knows a running job's key again.
// The server honours a job key only while its attempt is STARTING or RUNNING,
// with exactly the permissions of the principal who submitted the job.
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace lote::iam {

inline constexpr std::string_view kJobKeyPrefix = "LOTEJOB";

// "LOTEJOB" + the job id's 32 hex digits (uppercase, no dashes) + "A" + the
// attempt: an id the SDKs take (letters and digits, 16..128 characters).
// Empty when job_id is not a UUID.
std::string JobKeyId(std::string_view job_id, int32_t attempt);
// The job id (lowercase UUID) and attempt of a job key id; false for any
// other id.
bool ParseJobKeyId(std::string_view key_id, std::string* job_id, int32_t* attempt);
// The key's secret: hex of HMAC-SHA256(server_key, "lote job key\n" key_id).
std::string JobKeySecret(std::string_view server_key, std::string_view key_id);

}  // namespace lote::iam
