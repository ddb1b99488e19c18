#include "api/sts_api.h"

namespace lote::api {

void RegisterSts(ApiRouter* router, std::string account_id, const iam::Directory* directory) {
  QueryService sts;
  sts.signing_service = "sts";
  sts.xml_namespace = "https://sts.amazonaws.com/doc/2011-06-15/";
  sts.ec2_style = false;
  sts.map_error = [](const std::string&, const Status& status) -> ApiError {
    if (status.IsInvalidArgument()) return {400, "InvalidParameterValue", status.message()};
    return {500, "InternalFailure", status.message()};
  };
  sts.operations["GetCallerIdentity"] = [account_id, directory](const Json& r) -> Result<Json> {
    const std::string key = r.value("@accessKeyId", "");
    if (directory != nullptr) {
      if (std::optional<iam::KeyOwner> owner = directory->FindKey(key)) {
        return Json{
            {"Arn", owner->user->arn}, {"UserId", owner->user->user_id}, {"Account", account_id}};
      }
    }
    return Json{{"Arn", "arn:aws:iam::" + account_id + ":user/lote"},
                {"UserId", key.empty() ? std::string("anonymous") : key},
                {"Account", account_id}};
  };
  router->RegisterQueryService(std::move(sts));
}

}  // namespace lote::api
