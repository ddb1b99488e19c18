// IamAccessControl: the router's AccessControl over lote's IAM: the signer's
// user from the directory, the call's permissions from iam::Access, the
// decision from iam::Authorize (resource tags and job owners looked up here),
// every mutation and every refusal written to the audit log. An allowed
// call's user is the thread's CurrentCaller() while its handler runs (the
// server records it as the owner of the job SubmitJob makes).
//
// SubmitJob is also refused when the job would run as a Unix user the
// principal is not allowed (iam/unix_users.h), or when its definition's
// secrets name SSM parameters the principal may not ssm:GetParameters.
// RegisterJobDefinition and SubmitJob are refused when the definition sets
// something that is root on the host (iam/job_privileges.h) and the principal
// may not run jobs as root. A call
// signed by a key the directory does not hold (a fixed key added to the
// Authenticator) is refused.
// Thread safety: as AccessControl (every collaborator is thread safe);
// SetJobOwnerLookup only before the server serves.
#pragma once

#include <functional>
#include <string>

#include "api/access_control.h"
#include "iam/actions.h"
#include "iam/audit_log.h"
#include "iam/authorize.h"
#include "iam/directory.h"
#include "iam/job_privileges.h"
#include "iam/unix_users.h"

namespace lote::api {

struct IamAccessOptions {
  const iam::Directory* directory = nullptr;
  iam::AuditLog* audit = nullptr;
  iam::ArnScope scope;
  iam::ResourceTagLookup resource_tags;  // may be empty: no resource tags
  // A job definition by SubmitJob's reference (name, name:revision or ARN);
  // empty or NotFound: SubmitJob's own error answers.
  std::function<Result<Json>(const std::string& reference)> job_definition;
  std::string server_user;  // who a job definition without `user` runs as
  // Root-equivalent settings (iam/job_privileges.h): what the host lets any
  // principal's jobs have.
  iam::HostAllowances host;
};

// Who submitted a job and to which queue (the job's own record); nullopt: no
// such job.
using JobOwnerLookup = std::function<std::optional<iam::JobOwner>(const std::string& job_id)>;
// The owner of an access key the directory does not hold (a job key: the
// principal who submitted the job); nullopt: unknown or no longer valid.
using KeyOwnerLookup = std::function<std::optional<iam::KeyOwner>(const std::string& key_id)>;

class IamAccessControl final : public AccessControl {
 public:
  explicit IamAccessControl(IamAccessOptions options) : options_(std::move(options)) {}

  std::optional<std::string> Authorize(const ApiCall& call, const Json& request) const override;
  void Completed(const ApiCall& call, const Json& request, const Json* response,
                 const std::string& error_code) const override;

  // CancelJob/TerminateJob ask it for the job's owner (set by the jobs layer).
  void SetJobOwnerLookup(JobOwnerLookup lookup) { job_owner_ = std::move(lookup); }
  // Keys beyond the directory's (set by the jobs layer before serving).
  void SetExtraKeyOwners(KeyOwnerLookup lookup) { extra_key_owners_ = std::move(lookup); }
  // DescribeJobs/ListJobs' filter for the CurrentCaller() (iam::MayReadJob);
  // true when there is none (the router has no AccessControl).
  bool MayReadJob(const std::string& action, const std::string& job_arn,
                  const std::string& queue_arn) const;

 private:
  void Audit(const ApiCall& call, const std::string& principal, const iam::RequiredAccess& access,
             const std::string& result) const;
  // SubmitJob: the job definition's Unix users against the principal's.
  std::optional<std::string> CheckUnixUsers(const iam::User& user, const Json& definition,
                                            const std::string& reference) const;
  // SubmitJob: ssm:GetParameters on every parameter the definition's secrets name.
  std::optional<std::string> CheckSecrets(const iam::User& user, const Json& definition) const;
  std::optional<std::string> CheckSubmit(const iam::User& user, const Json& request) const;

  std::optional<iam::KeyOwner> FindKey(const std::string& key_id) const;

  IamAccessOptions options_;
  JobOwnerLookup job_owner_;
  KeyOwnerLookup extra_key_owners_;
};

}  // namespace lote::api
