#include "api/ssm_api.h"

namespace lote::api {

ApiError SsmErrorFromStatus(const Status& status) {
  switch (status.code()) {
    case StatusCode::kNotFound:
      return {400, "ParameterNotFound", status.message()};
    case StatusCode::kAlreadyExists:
      return {400, "ParameterAlreadyExists", status.message()};
    case StatusCode::kFailedPrecondition:
      return {400, "ParameterVersionNotFound", status.message()};
    case StatusCode::kResourceExhausted:
      return {400, "ParameterLimitExceeded", status.message()};
    case StatusCode::kInvalidArgument:
    case StatusCode::kUnimplemented:
      return {400, "ValidationException", status.message()};
    case StatusCode::kUnauthenticated:
    case StatusCode::kPermissionDenied:
      return {400, "AccessDeniedException", status.message()};
    default:
      return {500, "InternalServerError", status.message()};
  }
}

void RegisterSsm(ApiRouter* router, control::ControlPlane* cp) {
  JsonService ssm;
  ssm.target_prefix = "AmazonSSM";
  ssm.signing_service = "ssm";
  ssm.map_error = SsmErrorFromStatus;
  ssm.operations = {
      {"PutParameter", [cp](const Json& r) { return cp->PutParameter(r); }},
      {"GetParameter", [cp](const Json& r) { return cp->GetParameter(r); }},
      {"GetParameters", [cp](const Json& r) { return cp->GetParameters(r); }},
      {"GetParametersByPath", [cp](const Json& r) { return cp->GetParametersByPath(r); }},
      {"DeleteParameter", [cp](const Json& r) { return cp->DeleteParameters(r); }},
      {"DeleteParameters", [cp](const Json& r) { return cp->DeleteParameters(r); }},
      {"DescribeParameters", [cp](const Json& r) { return cp->DescribeParameters(r); }},
  };
  router->RegisterJsonService(std::move(ssm));
}

}  // namespace lote::api
