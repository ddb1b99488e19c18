#include "api/iam_access.h"

#include "iam/job_secrets.h"

namespace lote::api {

namespace {

std::string Resources(const iam::RequiredAccess& access) {
  std::string out;
  for (const iam::Permission& p : access.permissions) out += (out.empty() ? "" : ",") + p.resource;
  return out.empty() ? "*" : out;
}

std::string Action(const ApiCall& call, const iam::RequiredAccess& access) {
  return access.permissions.empty() ? call.service + ":" + call.operation
                                    : access.permissions[0].action;
}

}  // namespace

void IamAccessControl::Audit(const ApiCall& call, const std::string& principal,
                             const iam::RequiredAccess& access, const std::string& result) const {
  if (options_.audit == nullptr) return;
  store::AuditRow row;
  row.principal = principal;
  row.operation = Action(call, access);
  row.resource = Resources(access);
  row.result = result;
  row.request_id = call.request_id;
  options_.audit->Record(std::move(row));
}

std::optional<std::string> IamAccessControl::CheckUnixUsers(const iam::User& user,
                                                            const Json& definition,
                                                            const std::string& reference) const {
  return iam::CheckJobUsers(user, iam::JobDefinitionUsers(definition), options_.server_user,
                            reference);
}

std::optional<std::string> IamAccessControl::CheckSecrets(const iam::User& user,
                                                          const Json& definition) const {
  const std::vector<std::string> secrets = iam::JobDefinitionSecrets(definition);
  if (secrets.empty()) return std::nullopt;
  const iam::RequiredAccess access =
      iam::Access("ssm", "GetParameters", Json{{"Names", secrets}}, options_.scope);
  std::optional<iam::Refusal> refusal =
      iam::Authorize(user, access, options_.resource_tags, std::nullopt);
  if (!refusal) return std::nullopt;
  return refusal->message + " (the job definition's secrets name this parameter)";
}

std::optional<std::string> IamAccessControl::CheckSubmit(const iam::User& user,
                                                         const Json& request) const {
  if (!options_.job_definition || !request.contains("jobDefinition") ||
      !request["jobDefinition"].is_string()) {
    return std::nullopt;
  }
  const std::string reference = request["jobDefinition"].get<std::string>();
  Result<Json> definition = options_.job_definition(reference);
  if (!definition.ok()) return std::nullopt;  // SubmitJob answers the unknown definition
  if (auto refused = CheckUnixUsers(user, *definition, reference)) return refused;
  const std::string arn = definition->value("jobDefinitionArn", reference);
  if (auto refused =
          iam::CheckRootEquivalent(user, "batch:SubmitJob", arn, *definition, options_.host))
    return refused;
  return CheckSecrets(user, *definition);
}

bool IamAccessControl::MayReadJob(const std::string& action, const std::string& job_arn,
                                  const std::string& queue_arn) const {
  const iam::User* user = CurrentCaller();
  if (user == nullptr) return true;
  return iam::MayReadJob(*user, action, job_arn, queue_arn, options_.resource_tags);
}

std::optional<iam::KeyOwner> IamAccessControl::FindKey(const std::string& key_id) const {
  if (std::optional<iam::KeyOwner> owner = options_.directory->FindKey(key_id)) return owner;
  if (extra_key_owners_) return extra_key_owners_(key_id);
  return std::nullopt;
}

std::optional<std::string> IamAccessControl::Authorize(const ApiCall& call,
                                                       const Json& request) const {
  const iam::RequiredAccess access =
      iam::Access(call.service, call.operation, request, options_.scope);
  std::optional<iam::KeyOwner> owner = FindKey(call.access_key_id);
  if (!owner) {
    const std::string message =
        "The security token included in the request is invalid: access "
        "key " +
        call.access_key_id + " belongs to no user of this server";
    Audit(call, "unknown:" + call.access_key_id, access, "AccessDenied");
    return message;
  }
  std::optional<iam::JobOwner> job_owner;
  if (iam::IsJobControlOperation(call.operation) && job_owner_ && request.contains("jobId") &&
      request["jobId"].is_string()) {
    job_owner = job_owner_(request["jobId"].get<std::string>());
  }
  std::optional<iam::Refusal> refusal =
      iam::Authorize(*owner->user, access, options_.resource_tags, job_owner);
  std::optional<std::string> message;
  if (refusal) {
    message = refusal->message;
  } else if (call.service == "batch" && call.operation == "SubmitJob") {
    message = CheckSubmit(*owner->user, request);
  } else if (call.service == "batch" && call.operation == "RegisterJobDefinition") {
    message = iam::CheckRootEquivalent(*owner->user, Action(call, access), Resources(access),
                                       request, options_.host);
  }
  if (!message) {
    SetCurrentCaller(owner->user);
    return std::nullopt;
  }
  Audit(call, owner->user->name, access, "AccessDenied");
  return message;
}

void IamAccessControl::Completed(const ApiCall& call, const Json& request, const Json* response,
                                 const std::string& error_code) const {
  if (call.service != "sts" && iam::IsReadOperation(call.operation)) return;  // not audited
  const iam::RequiredAccess access =
      iam::Access(call.service, call.operation, request, options_.scope);
  if (!access.mutation) return;
  std::optional<iam::KeyOwner> owner = FindKey(call.access_key_id);
  // A key deleted by this very call (DeleteAccessKey of one's own) has no
  // owner any more: the audit names the key.
  const std::string principal = owner ? owner->user->name : "key:" + call.access_key_id;
  Audit(call, principal, access, response ? "Allowed" : error_code);
}

}  // namespace lote::api
