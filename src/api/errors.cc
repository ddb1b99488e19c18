#include "api/errors.h"

namespace lote::api {

ApiError BatchErrorFromStatus(const Status& status) {
  switch (status.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kNotFound:
    case StatusCode::kAlreadyExists:
    case StatusCode::kFailedPrecondition:
    case StatusCode::kResourceExhausted:
    case StatusCode::kUnimplemented:
    case StatusCode::kCancelled:
    case StatusCode::kPermissionDenied:
    case StatusCode::kUnauthenticated:
      return {400, "ClientException", status.message()};
    default:
      return {500, "ServerException", status.message()};
  }
}

ApiError LogsErrorFromStatus(const Status& status) {
  switch (status.code()) {
    case StatusCode::kNotFound:
      return {400, "ResourceNotFoundException", status.message()};
    case StatusCode::kAlreadyExists:
      return {400, "ResourceAlreadyExistsException", status.message()};
    case StatusCode::kInvalidArgument:
      return {400, "InvalidParameterException", status.message()};
    case StatusCode::kResourceExhausted:
      return {400, "LimitExceededException", status.message()};
    case StatusCode::kFailedPrecondition:
      return {400, "InvalidOperationException", status.message()};
    case StatusCode::kDataLoss:
      return {400, "DataAlreadyAcceptedException", status.message()};
    case StatusCode::kUnimplemented:
      return {400, "InvalidOperationException", status.message()};
    default:
      return {500, "ServiceUnavailableException", status.message()};
  }
}

}  // namespace lote::api
