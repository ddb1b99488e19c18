// iam::Authorize: IAM's decision for one API call of one user, as a pure
// function of the user's policies, the call's RequiredAccess and the tags of
// the resources it names, with AWS's refusal message:
//   "User: arn:aws:iam::ACCOUNT:user/NAME is not authorized to perform:
//    batch:SubmitJob on resource: ARN because no identity-based policy allows
//    the batch:SubmitJob action"   (or "... with an explicit deny in an
//    identity-based policy").
//
// Context keys set for conditions and policy variables: aws:username,
// aws:userid, aws:PrincipalArn, aws:RequestTag/KEY, aws:TagKeys,
// aws:ResourceTag/KEY (from `resource_tags`, asked only when a policy of the
// user has a condition on resource tags).
//
// A principal's own job: the operations on one job (IsJobControlOperation:
// CancelJob, TerminateJob, InjectFault, DumpJob) are evaluated on the job's
// ARN, and, for the job's submitter, also on the queue it was submitted to
// (a policy that lets a user work in a queue lets it cancel its own jobs
// there); an explicit Deny on the job's ARN still wins.
// MayReadJob is DescribeJobs' and ListJobs' filter: the jobs a principal is
// shown are those it may read (see its comment).
// Thread safety: pure.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>

#include "iam/actions.h"
#include "iam/directory.h"
#include "iam/policy.h"

namespace lote::iam {

// Who submitted a job (control::Job::owner) and the queue it went to.
struct JobOwner {
  std::string principal;
  std::string queue_arn;
};

using ResourceTagLookup = std::function<std::map<std::string, std::string>(const std::string& arn)>;

struct Refusal {
  Permission permission;  // the first one refused
  Decision decision;
  std::string message;  // AWS's message
};

std::optional<Refusal> Authorize(const User& user, const RequiredAccess& access,
                                 const ResourceTagLookup& resource_tags,
                                 const std::optional<JobOwner>& job_owner);

// Whether `user` may see the job `job_arn` of `queue_arn` in the answer of
// DescribeJobs or ListJobs (`action`, "batch:DescribeJobs" or
// "batch:ListJobs"): the action allowed on the job's ARN or on its queue's,
// and explicitly denied on neither.
bool MayReadJob(const User& user, const std::string& action, const std::string& job_arn,
                const std::string& queue_arn, const ResourceTagLookup& resource_tags);

// AWS's AccessDenied message for `permission` refused by `decision`.
std::string DeniedMessage(const std::string& user_arn, const Permission& permission,
                          const Decision& decision);

}  // namespace lote::iam
