// Request validation helpers shared by every control-plane operation. Each
// returns InvalidArgument (HTTP 400 ClientException) with a message naming the
// field, what is wrong and what would be accepted. Pure functions.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/json.h"
#include "common/status.h"

namespace lote::control {

// AWS Batch limits that lote enforces as AWS does.
inline constexpr size_t kMaxNameLength = 128;
inline constexpr size_t kMaxComputeEnvironmentsPerQueue = 3;
inline constexpr size_t kMaxJobQueues = 50;
inline constexpr size_t kMaxComputeEnvironments = 50;
inline constexpr size_t kMaxJobDefinitionBytes = 24 * 1024;
inline constexpr size_t kMaxTagsPerResource = 50;
inline constexpr int64_t kMaxPageSize = 100;

using TagMap = std::map<std::string, std::string>;

// Names of compute environments, queues, job definitions and scheduling
// policies: 1..128 characters of letters, digits, hyphens and underscores.
// `field` is the request field named in the error ("jobQueueName").
Status ValidateName(std::string_view field, std::string_view name);

// Field readers. `path` is the field's full name in messages, e.g.
// "computeResources.maxvCpus". Absent or null fields give std::nullopt.
Status ExpectObject(const Json& value, std::string_view path);
Result<std::optional<std::string>> OptString(const Json& obj, std::string_view key,
                                             std::string_view path);
Result<std::string> ReqString(const Json& obj, std::string_view key, std::string_view path);
Result<std::optional<int64_t>> OptInt(const Json& obj, std::string_view key, std::string_view path,
                                      int64_t min, int64_t max);
Result<int64_t> ReqInt(const Json& obj, std::string_view key, std::string_view path, int64_t min,
                       int64_t max);
Result<std::optional<bool>> OptBool(const Json& obj, std::string_view key, std::string_view path);
Result<std::optional<std::vector<std::string>>> OptStringList(const Json& obj, std::string_view key,
                                                              std::string_view path,
                                                              size_t max_items);
// One of `allowed` (exact match); the message lists them.
Status ExpectEnum(std::string_view value, std::string_view path,
                  const std::vector<std::string_view>& allowed);

// Tags as AWS defines them: keys 1..128 characters, values 0..256, at most 50,
// and no key with the reserved "aws:" prefix.
Result<TagMap> ReadTags(const Json& obj, std::string_view key, std::string_view path);
Status ValidateTagKey(std::string_view key);

// Pagination over a sorted list of keys: nextToken is opaque to clients (the
// last key returned, encoded). Returns the index of the first item to return.
Result<size_t> PageStart(const std::vector<std::string>& sorted_keys,
                         const std::optional<std::string>& next_token);
std::string MakeNextToken(const std::string& last_key);

}  // namespace lote::control
