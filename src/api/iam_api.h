// lote's own user API (docs/api.md, "Users, keys and audit"): IAM-like user,
// inline-policy and access-key operations plus the audit trail, over the json
// protocol (X-Amz-Target LoteIam_20261201.<Operation>, SigV4 service "iam").
// Authorized like every other call: iam:<Operation> on the user's ARN,
// cloudtrail:LookupEvents for the audit.
#pragma once

#include "api/router.h"
#include "iam/audit_log.h"
#include "iam/directory.h"

namespace lote::api {

inline constexpr const char* kIamTargetPrefix = "LoteIam_20261201";

// NotFound → NoSuchEntityException (404), AlreadyExists →
// EntityAlreadyExistsException (409), ResourceExhausted →
// LimitExceededException (409), FailedPrecondition → DeleteConflictException
// (409), InvalidArgument → MalformedPolicyDocumentException for policy
// documents, else ValidationException (400), our faults ServiceFailureException
// (500).
ApiError IamErrorFromStatus(const Status& status);

// Both must outlive the router.
void RegisterIam(ApiRouter* router, iam::Directory* directory, iam::AuditLog* audit);

}  // namespace lote::api
