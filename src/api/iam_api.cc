#include "api/iam_api.h"

namespace lote::api {

namespace {

std::string Str(const Json& r, const char* key) {
  auto it = r.find(key);
  return it != r.end() && it->is_string() ? it->get<std::string>() : "";
}

Result<std::string> Required(const Json& r, const char* key) {
  std::string value = Str(r, key);
  if (value.empty()) return Status::InvalidArgument(std::string(key) + " is required");
  return value;
}

double Seconds(int64_t ms) { return static_cast<double>(ms) / 1000.0; }

Json UserJson(const iam::User& user, bool detail) {
  Json j = {{"UserName", user.name},
            {"UserId", user.user_id},
            {"Arn", user.arn},
            {"CreateDate", Seconds(user.created_ms)}};
  if (!detail) return j;
  j["Policies"] = Json::object();
  for (const auto& [name, doc] : user.policy_documents) j["Policies"][name] = doc;
  j["UnixUsers"] = user.unix_users;
  j["AccessKeys"] = Json::array();
  for (const iam::AccessKey& key : user.keys) {
    j["AccessKeys"].push_back(
        {{"AccessKeyId", key.id}, {"Status", "Active"}, {"CreateDate", Seconds(key.created_ms)}});
  }
  return j;
}

Json KeyJson(const std::string& user, const iam::AccessKey& key) {
  return {{"AccessKey",
           {{"UserName", user},
            {"AccessKeyId", key.id},
            {"SecretAccessKey", key.secret},
            {"Status", "Active"},
            {"CreateDate", Seconds(key.created_ms)}}}};
}

Result<std::vector<std::string>> UnixUsers(const Json& r) {
  std::vector<std::string> out;
  auto it = r.find("UnixUsers");
  if (it == r.end()) return out;
  if (!it->is_array()) return Status::InvalidArgument("UnixUsers must be a list of names");
  for (const Json& v : *it) {
    if (!v.is_string()) return Status::InvalidArgument("UnixUsers must be a list of names");
    out.push_back(v.get<std::string>());
  }
  return out;
}

Result<Json> CreateUser(iam::Directory* d, const Json& r) {
  ASSIGN_OR_RETURN(std::string name, Required(r, "UserName"));
  ASSIGN_OR_RETURN(std::vector<std::string> unix_users, UnixUsers(r));
  // Checked before the user exists, so a bad document creates nothing.
  const std::string policy = Str(r, "PolicyDocument");
  const std::string policy_name = Str(r, "PolicyName").empty() ? "inline" : Str(r, "PolicyName");
  if (!policy.empty()) RETURN_IF_ERROR(iam::ParsePolicyDocument(policy_name, policy).status());
  ASSIGN_OR_RETURN(std::shared_ptr<const iam::User> user, d->CreateUser(name));
  if (!policy.empty()) RETURN_IF_ERROR(d->PutUserPolicy(name, policy_name, policy));
  if (!unix_users.empty()) RETURN_IF_ERROR(d->SetUnixUsers(name, unix_users));
  return Json{{"User", UserJson(*d->FindUser(name), false)}};
}

Result<Json> GetUser(iam::Directory* d, const Json& r) {
  ASSIGN_OR_RETURN(std::string name, Required(r, "UserName"));
  std::shared_ptr<const iam::User> user = d->FindUser(name);
  if (!user) return Status::NotFound("The user with name " + name + " cannot be found.");
  return Json{{"User", UserJson(*user, true)}};
}

Result<Json> ListUsers(iam::Directory* d, const Json&) {
  Json users = Json::array();
  for (const auto& user : d->Users()) users.push_back(UserJson(*user, false));
  return Json{{"Users", users}, {"IsTruncated", false}};
}

Result<Json> LookupEvents(iam::AuditLog* audit, const Json& r) {
  store::AuditQuery query;
  query.principal = Str(r, "Username");
  if (r.contains("StartTime") && r["StartTime"].is_number())
    query.since_ms = static_cast<int64_t>(r["StartTime"].get<double>() * 1000.0);
  if (std::string token = Str(r, "NextToken"); !token.empty()) {
    try {
      query.after_seq = std::stoll(token);
    } catch (const std::exception&) {
      return Status::InvalidArgument("NextToken '" + token + "' is not one this server returned");
    }
  }
  if (r.contains("MaxResults") && r["MaxResults"].is_number_integer()) {
    query.limit = r["MaxResults"].get<int64_t>();
    if (query.limit < 1 || query.limit > 1000)
      return Status::InvalidArgument("MaxResults must be between 1 and 1000");
  }
  ASSIGN_OR_RETURN(std::vector<store::AuditRow> rows, audit->Query(query));
  Json events = Json::array();
  for (const store::AuditRow& row : rows) {
    events.push_back({{"EventId", std::to_string(row.seq)},
                      {"EventTime", Seconds(row.time_ms)},
                      {"Username", row.principal},
                      {"EventName", row.operation},
                      {"Resources", row.resource},
                      {"Result", row.result},
                      {"RequestId", row.request_id}});
  }
  Json out = {{"Events", events}};
  if (static_cast<int64_t>(rows.size()) == query.limit)
    out["NextToken"] = std::to_string(rows.back().seq);
  return out;
}

}  // namespace

ApiError IamErrorFromStatus(const Status& status) {
  switch (status.code()) {
    case StatusCode::kNotFound:
      return {404, "NoSuchEntityException", status.message()};
    case StatusCode::kAlreadyExists:
      return {409, "EntityAlreadyExistsException", status.message()};
    case StatusCode::kResourceExhausted:
      return {409, "LimitExceededException", status.message()};
    case StatusCode::kFailedPrecondition:
      return {409, "DeleteConflictException", status.message()};
    case StatusCode::kInvalidArgument:
    case StatusCode::kUnimplemented:
      if (status.message().rfind("PolicyDocument", 0) == 0) {
        return {400, "MalformedPolicyDocumentException", status.message()};
      }
      return {400, "ValidationException", status.message()};
    case StatusCode::kUnauthenticated:
    case StatusCode::kPermissionDenied:
      return {403, "AccessDeniedException", status.message()};
    default:
      return {500, "ServiceFailureException", status.message()};
  }
}

void RegisterIam(ApiRouter* router, iam::Directory* d, iam::AuditLog* audit) {
  JsonService svc;
  svc.target_prefix = kIamTargetPrefix;
  svc.signing_service = "iam";
  svc.map_error = IamErrorFromStatus;
  auto ok = [](Status st) -> Result<Json> {
    RETURN_IF_ERROR(st);
    return Json::object();
  };
  svc.operations = {
      {"CreateUser", [d](const Json& r) { return CreateUser(d, r); }},
      {"GetUser", [d](const Json& r) { return GetUser(d, r); }},
      {"ListUsers", [d](const Json& r) { return ListUsers(d, r); }},
      {"DeleteUser",
       [d, ok](const Json& r) -> Result<Json> {
         ASSIGN_OR_RETURN(std::string name, Required(r, "UserName"));
         return ok(d->DeleteUser(name));
       }},
      {"PutUserPolicy",
       [d, ok](const Json& r) -> Result<Json> {
         ASSIGN_OR_RETURN(std::string name, Required(r, "UserName"));
         ASSIGN_OR_RETURN(std::string policy, Required(r, "PolicyName"));
         ASSIGN_OR_RETURN(std::string doc, Required(r, "PolicyDocument"));
         return ok(d->PutUserPolicy(name, policy, doc));
       }},
      {"DeleteUserPolicy",
       [d, ok](const Json& r) -> Result<Json> {
         ASSIGN_OR_RETURN(std::string name, Required(r, "UserName"));
         ASSIGN_OR_RETURN(std::string policy, Required(r, "PolicyName"));
         return ok(d->DeleteUserPolicy(name, policy));
       }},
      {"SetUnixUsers",
       [d, ok](const Json& r) -> Result<Json> {
         ASSIGN_OR_RETURN(std::string name, Required(r, "UserName"));
         ASSIGN_OR_RETURN(std::vector<std::string> users, UnixUsers(r));
         return ok(d->SetUnixUsers(name, users));
       }},
      {"CreateAccessKey",
       [d](const Json& r) -> Result<Json> {
         ASSIGN_OR_RETURN(std::string name, Required(r, "UserName"));
         ASSIGN_OR_RETURN(iam::AccessKey key, d->CreateAccessKey(name));
         return KeyJson(name, key);
       }},
      {"RotateAccessKey",
       [d](const Json& r) -> Result<Json> {
         ASSIGN_OR_RETURN(std::string name, Required(r, "UserName"));
         ASSIGN_OR_RETURN(std::string id, Required(r, "AccessKeyId"));
         ASSIGN_OR_RETURN(iam::AccessKey key, d->RotateAccessKey(name, id));
         return KeyJson(name, key);
       }},
      {"DeleteAccessKey",
       [d, ok](const Json& r) -> Result<Json> {
         ASSIGN_OR_RETURN(std::string name, Required(r, "UserName"));
         ASSIGN_OR_RETURN(std::string id, Required(r, "AccessKeyId"));
         return ok(d->DeleteAccessKey(name, id));
       }},
      {"LookupEvents", [audit](const Json& r) { return LookupEvents(audit, r); }},
  };
  router->RegisterJsonService(std::move(svc));
}

}  // namespace lote::api
