// Names AWS Batch uses for job logs, which lote follows.
//
// AWS Batch writes every job's output to log group "/aws/batch/job", one
// stream per container: "<jobDefinitionName>/default/<ECS task id>", the task
// id being 32 lowercase hex characters. lote makes one stream per node per
// attempt, each with a fresh task id, so earlier attempts keep their streams.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace lote::logs {

inline constexpr std::string_view kBatchJobLogGroup = "/aws/batch/job";

// A fresh task id: 32 random lowercase hex characters.
std::string NewTaskId();
// "<job_definition_name>/default/<task_id>". InvalidArgument if the result is
// not a valid stream name (empty parts, ':' or '*', over 512 characters).
Result<std::string> BatchLogStreamName(std::string_view job_definition_name,
                                       std::string_view task_id);

// Validation of CloudWatch Logs names (botocore's logs model): a group name is
// 1..512 of [.-_/#A-Za-z0-9]; a stream name is 1..512 characters without ':' or '*'.
Status ValidateLogGroupName(std::string_view name, std::string_view field = "logGroupName");
Status ValidateLogStreamName(std::string_view name, std::string_view field = "logStreamName");

}  // namespace lote::logs
