// IamAccessControl: the router's AccessControl over lote's IAM: the signer's
// user from the directory, the call's permissions from iam::Access, the
// decision from iam::Authorize (resource tags and job owners looked up here),
// every mutation and every refusal written to the audit log, and the
// principal of each submitted job recorded in the job owners.
//
// SubmitJob is also refused when the job would run as a Unix user the
// principal is not allowed (iam/unix_users.h). A call signed by a key the
// directory does not hold (a fixed key added to the Authenticator) is refused.
// Thread safety: as AccessControl (every collaborator is thread safe).
#pragma once

#include <functional>
#include <string>

#include "api/access_control.h"
#include "iam/actions.h"
#include "iam/audit_log.h"
#include "iam/authorize.h"
#include "iam/directory.h"
#include "iam/job_owners.h"
#include "iam/unix_users.h"

namespace lote::api {

struct IamAccessOptions {
  const iam::Directory* directory = nullptr;
  iam::JobOwners* job_owners = nullptr;
  iam::AuditLog* audit = nullptr;
  iam::ArnScope scope;
  iam::ResourceTagLookup resource_tags;  // may be empty: no resource tags
  // A job definition by SubmitJob's reference (name, name:revision or ARN);
  // empty or NotFound: SubmitJob's own error answers.
  std::function<Result<Json>(const std::string& reference)> job_definition;
  std::string server_user;  // who a job definition without `user` runs as
};

class IamAccessControl final : public AccessControl {
 public:
  explicit IamAccessControl(IamAccessOptions options) : options_(std::move(options)) {}

  std::optional<std::string> Authorize(const ApiCall& call, const Json& request) const override;
  void Completed(const ApiCall& call, const Json& request, const Json* response,
                 const std::string& error_code) const override;

 private:
  void Audit(const ApiCall& call, const std::string& principal, const iam::RequiredAccess& access,
             const std::string& result) const;
  // SubmitJob: the job definition's Unix users against the principal's.
  std::optional<std::string> CheckUnixUsers(const iam::User& user, const Json& request) const;

  IamAccessOptions options_;
};

}  // namespace lote::api
