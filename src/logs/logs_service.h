// LogsService: the CloudWatch Logs API (botocore's logs/2014-03-28 model) as
// plain functions of JSON, over a LogStore.
//
// Call(operation, request) takes the operation name (the part after
// "Logs_20140328." in X-Amz-Target) and the parsed request body, and returns
// the response body. Errors are Status values the api layer maps to AWS
// error codes:
//   NotFound          -> ResourceNotFoundException
//   AlreadyExists     -> ResourceAlreadyExistsException
//   InvalidArgument   -> InvalidParameterException
//   ResourceExhausted -> LimitExceededException
//   Unimplemented     -> an operation lote does not provide
//   others            -> ServiceUnavailableException (internal faults)
//
// Token formats (opaque to clients, documented in docs/logs.md):
//   GetLogEvents       "f/<20-digit sequence>" (forward: events from that
//                      sequence on), "b/<20-digit sequence>" (backward: events
//                      before it); the request's token is returned unchanged
//                      when there is nothing new in that direction.
//   FilterLogEvents    base64 of {"t":timestamp,"s":stream,"q":sequence}, the
//                      last event scanned; the next page starts after it.
//   DescribeLog*       base64 of the position in the sorted listing.
//
// Thread safety: safe for concurrent calls (the store is thread-safe; the
// service holds only immutable options).
#pragma once

#include <string>
#include <string_view>

#include "common/clock.h"
#include "common/json.h"
#include "common/status.h"
#include "logs/log_store.h"

namespace lote::logs {

struct LogsServiceOptions {
  std::string region = "us-east-1";
  std::string account_id = "000000000000";
  size_t max_log_groups = 1'000'000;  // CreateLogGroup beyond this: LimitExceeded
};

class LogsService {
 public:
  // `store` and `clock` must outlive the service; clock nullptr: the store's.
  LogsService(LogStore* store, const Clock* clock, LogsServiceOptions options = {});

  // Runs one operation. Unknown operations: Unimplemented.
  Result<Json> Call(std::string_view operation, const Json& request);
  // True for the operations Call implements.
  static bool Supports(std::string_view operation);

  Result<Json> CreateLogGroup(const Json& request);
  Result<Json> DeleteLogGroup(const Json& request);
  Result<Json> DescribeLogGroups(const Json& request);
  Result<Json> CreateLogStream(const Json& request);
  Result<Json> DeleteLogStream(const Json& request);
  Result<Json> DescribeLogStreams(const Json& request);
  Result<Json> PutLogEvents(const Json& request);
  Result<Json> GetLogEvents(const Json& request);
  Result<Json> FilterLogEvents(const Json& request);
  Result<Json> PutRetentionPolicy(const Json& request);
  Result<Json> DeleteRetentionPolicy(const Json& request);

  // "arn:aws:logs:<region>:<account>:log-group:<name>" (+ ":*" in `arn`).
  std::string GroupArn(std::string_view group) const;
  std::string StreamArn(std::string_view group, std::string_view stream) const;

 private:
  Result<std::string> GroupFrom(const Json& request) const;

  LogStore* store_;
  const Clock* clock_;
  LogsServiceOptions options_;
};

}  // namespace lote::logs
