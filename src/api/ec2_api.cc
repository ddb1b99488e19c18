#include "api/ec2_api.h"

namespace lote::api {

namespace {

constexpr const char* kEc2Namespace = "http://ec2.amazonaws.com/doc/2016-11-15/";

bool IsPlacementGroupAction(const std::string& action) {
  return action.find("PlacementGroup") != std::string::npos;
}

}  // namespace

ApiError Ec2ErrorFromStatus(const std::string& action, const Status& status) {
  const bool pg = IsPlacementGroupAction(action);
  const bool by_id = status.message().find("ID") != std::string::npos;
  switch (status.code()) {
    case StatusCode::kNotFound:
      if (pg) return {400, "InvalidPlacementGroup.Unknown", status.message()};
      if (action == "DescribeInstanceTypes") return {400, "InvalidInstanceType", status.message()};
      if (status.message().rfind("Could not find launch template version", 0) == 0)
        return {400, "InvalidLaunchTemplateId.VersionNotFound", status.message()};
      return {400,
              by_id ? "InvalidLaunchTemplateId.NotFound"
                    : "InvalidLaunchTemplateName.NotFoundException",
              status.message()};
    case StatusCode::kAlreadyExists:
      return {400,
              pg ? "InvalidPlacementGroup.Duplicate"
                 : "InvalidLaunchTemplateName.AlreadyExistsException",
              status.message()};
    case StatusCode::kFailedPrecondition:
      return {400, pg ? "InvalidPlacementGroup.InUse" : "IncorrectState", status.message()};
    case StatusCode::kResourceExhausted:
      return {400, pg ? "MaxPlacementGroupsExceeded" : "LaunchTemplateLimitExceeded",
              status.message()};
    case StatusCode::kInvalidArgument:
      if (action == "DescribeInstanceTypes") return {400, "InvalidInstanceType", status.message()};
      return {400,
              status.message().find("is required") != std::string::npos ? "MissingParameter"
                                                                        : "InvalidParameterValue",
              status.message()};
    case StatusCode::kUnauthenticated:
      return {401, "AuthFailure", status.message()};
    case StatusCode::kPermissionDenied:
      return {403, "UnauthorizedOperation", status.message()};
    default:
      return {500, "InternalError", status.message()};
  }
}

void RegisterEc2(ApiRouter* router, control::ControlPlane* cp) {
  QueryService ec2;
  ec2.signing_service = "ec2";
  ec2.xml_namespace = kEc2Namespace;
  ec2.map_error = Ec2ErrorFromStatus;
  ec2.ec2_style = true;
  using Mutation = Result<Json> (control::ControlPlane::*)(const Json&);
  using Read = Result<Json> (control::ControlPlane::*)(const Json&) const;
  const std::pair<const char*, Mutation> mutations[] = {
      {"CreatePlacementGroup", &control::ControlPlane::CreatePlacementGroup},
      {"DeletePlacementGroup", &control::ControlPlane::DeletePlacementGroup},
      {"CreateLaunchTemplate", &control::ControlPlane::CreateLaunchTemplate},
      {"CreateLaunchTemplateVersion", &control::ControlPlane::CreateLaunchTemplateVersion},
      {"DescribeLaunchTemplateVersions", &control::ControlPlane::DescribeLaunchTemplateVersions},
      {"DeleteLaunchTemplate", &control::ControlPlane::DeleteLaunchTemplate},
  };
  const std::pair<const char*, Read> reads[] = {
      {"DescribePlacementGroups", &control::ControlPlane::DescribePlacementGroups},
      {"DescribeLaunchTemplates", &control::ControlPlane::DescribeLaunchTemplates},
      {"DescribeInstanceTypes", &control::ControlPlane::DescribeInstanceTypes},
  };
  for (const auto& [name, m] : mutations)
    ec2.operations[name] = [cp, m = m](const Json& r) { return (cp->*m)(r); };
  for (const auto& [name, m] : reads)
    ec2.operations[name] = [cp, m = m](const Json& r) { return (cp->*m)(r); };
  router->RegisterQueryService(std::move(ec2));
}

}  // namespace lote::api
