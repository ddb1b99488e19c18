// Identifiers and ARNs in AWS form.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace lote {

// A random UUID v4, lowercase, e.g. "3f2b...-..."; AWS Batch job ids look like this.
std::string NewUuid();
// A UUID v7 (RFC 9562): the first 48 bits are `unix_ms`, the rest random, so ids
// made later sort later. Job ids are these: the store's indexes keyed by a job's
// id then grow at their end, and a commit of new jobs rewrites a few pages of
// each instead of one page per job (a v4 id lands on a random page).
std::string NewTimeOrderedUuid(int64_t unix_ms);
// A random string of n characters from [A-Z0-9] (access key ids) or base64-ish (secrets).
std::string RandomUpperAlnum(size_t n);
std::string RandomSecret(size_t n);

// arn:<partition>:<service>:<region>:<account>:<resource>
struct Arn {
  std::string partition = "aws";
  std::string service;
  std::string region;
  std::string account;
  std::string resource;  // e.g. "job-queue/my-queue", "job-definition/train:3", "job/<id>"

  std::string ToString() const;
  static Result<Arn> Parse(std::string_view text);
  // "job-queue" for "job-queue/name"; empty if no '/'.
  std::string ResourceType() const;
  // "name" for "job-queue/name".
  std::string ResourceName() const;
};

}  // namespace lote
