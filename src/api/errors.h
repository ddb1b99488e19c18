// AWS error shapes. An ApiError is what a client sees: HTTP status, the AWS
// error code (botocore's `Error.Code`) and a message. Each protocol maps
// lote::Status codes to its service's error codes.
#pragma once

#include <functional>
#include <string>

#include "common/status.h"

namespace lote::api {

struct ApiError {
  int http_status = 400;
  std::string code;  // "ClientException", "ResourceNotFoundException", ...
  std::string message;
};

// Maps a non-OK Status to the error a service returns.
using ErrorMapper = std::function<ApiError(const Status&)>;

// AWS Batch: every caller fault (InvalidArgument, NotFound, AlreadyExists,
// FailedPrecondition, ResourceExhausted, ...) is 400 ClientException; our own
// faults (Internal, DataLoss, Unavailable, ...) are 500 ServerException.
ApiError BatchErrorFromStatus(const Status& status);

// CloudWatch Logs (json protocol): NotFound → ResourceNotFoundException,
// AlreadyExists → ResourceAlreadyExistsException, InvalidArgument →
// InvalidParameterException, ResourceExhausted → LimitExceededException,
// FailedPrecondition → InvalidOperationException, DataLoss →
// DataAlreadyAcceptedException (a rejected duplicate batch), Unavailable →
// ServiceUnavailableException (500), anything else → ServiceUnavailableException (500).
ApiError LogsErrorFromStatus(const Status& status);

}  // namespace lote::api
