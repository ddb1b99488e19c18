// iam::RequiredAccess: what an API operation asks of IAM, as a pure table
// from (service, operation, request) to IAM actions and resource ARNs, the
// request's tags and whether the call changes anything (which the audit
// records).
//
// Resources follow AWS's ARN formats:
//   batch  compute-environment/NAME, job-queue/NAME, job-definition/NAME[:REV],
//          scheduling-policy/NAME, job/ID (arn:aws:batch:REGION:ACCOUNT:...)
//   logs   log-group:GROUP and log-group:GROUP:log-stream:STREAM
//   ecr    repository/NAME;  ssm  parameter/NAME (without its leading "/")
//   iam    user/NAME (lote's own user API)
//   s3     arn:aws:s3:::BUCKET and arn:aws:s3:::BUCKET/KEY (S3 ARNs name no
//          region or account); S3's action names (HeadObject is s3:GetObject)
// Name-or-ARN members take an ARN as given and build one from a name.
// Operations that name no resource (Describe*/List* of many, every EC2
// action) ask for "*". STS GetCallerIdentity needs no permission, as in AWS.
//
// Thread safety: pure functions.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/json.h"

namespace lote::iam {

struct Permission {
  std::string action;    // "batch:SubmitJob"
  std::string resource;  // an ARN or "*"
};

struct RequiredAccess {
  std::vector<Permission> permissions;  // every one must be allowed
  std::map<std::string, std::string> request_tags;
  std::vector<std::string> tag_keys;  // aws:TagKeys: request tags' keys and removed keys
  bool mutation = false;
  bool always_allowed = false;
};

struct ArnScope {
  std::string region = "us-east-1";
  std::string account_id = "000000000000";
};

// `service` is the SigV4 signing service ("batch", "logs", "ecr", "ssm",
// "ec2", "sts", "iam"); `operation` the operation or Query Action name.
RequiredAccess Access(std::string_view service, const std::string& operation, const Json& request,
                      const ArnScope& scope);

// The ARN of a Batch job.
std::string JobArn(const ArnScope& scope, const std::string& job_id);

// True for operations that only read (Describe*, List*, Get*, ...).
bool IsReadOperation(std::string_view operation);

// True for the Batch operations on one job by its jobId (CancelJob,
// TerminateJob, lote's InjectFault and DumpJob): authorized on the job's ARN,
// and for the job's owner also on its queue (authorize.h).
bool IsJobControlOperation(std::string_view operation);

}  // namespace lote::iam
