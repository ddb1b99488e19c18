#include "iam/authorize.h"

#include <strings.h>

#include <string_view>

namespace lote::iam {

namespace {

bool UsesResourceTags(const User& user) {
  for (const Policy& policy : user.policies) {
    for (const Statement& statement : policy.statements) {
      for (const Condition& c : statement.conditions) {
        if (c.key.size() >= 16 && strncasecmp(c.key.c_str(), "aws:ResourceTag/", 16) == 0)
          return true;
      }
    }
  }
  return false;
}

Request BaseRequest(const User& user, const RequiredAccess& access) {
  Request r;
  r.context["aws:username"] = {user.name};
  r.context["aws:userid"] = {user.user_id};
  r.context["aws:PrincipalArn"] = {user.arn};
  for (const auto& [k, v] : access.request_tags) r.context["aws:RequestTag/" + k] = {v};
  if (!access.tag_keys.empty()) r.context["aws:TagKeys"] = access.tag_keys;
  return r;
}

Decision Decide(const User& user, Request request, const Permission& permission,
                const ResourceTagLookup& resource_tags, bool with_resource_tags) {
  request.action = permission.action;
  request.resource = permission.resource;
  if (with_resource_tags && resource_tags && permission.resource != "*") {
    for (const auto& [k, v] : resource_tags(permission.resource))
      request.context["aws:ResourceTag/" + k] = {v};
  }
  return Evaluate(request, user.policies);
}

// The operations on one job that its owner may also run with the permission
// on the job's queue (IsJobControlOperation).
bool IsJobControl(std::string_view action) {
  constexpr std::string_view kBatch = "batch:";
  return action.starts_with(kBatch) && IsJobControlOperation(action.substr(kBatch.size()));
}

}  // namespace

std::string DeniedMessage(const std::string& user_arn, const Permission& permission,
                          const Decision& decision) {
  std::string message = "User: " + user_arn +
                        " is not authorized to perform: " + permission.action +
                        " on resource: " + permission.resource;
  if (decision.outcome == Decision::Outcome::kExplicitDeny)
    return message + " with an explicit deny in an identity-based policy";
  return message + " because no identity-based policy allows the " + permission.action + " action";
}

std::optional<Refusal> Authorize(const User& user, const RequiredAccess& access,
                                 const ResourceTagLookup& resource_tags,
                                 const std::optional<JobOwner>& job_owner) {
  if (access.always_allowed) return std::nullopt;
  const Request base = BaseRequest(user, access);
  const bool with_tags = UsesResourceTags(user);
  for (const Permission& permission : access.permissions) {
    Decision decision = Decide(user, base, permission, resource_tags, with_tags);
    if (decision.outcome == Decision::Outcome::kImplicitDeny && IsJobControl(permission.action) &&
        job_owner && job_owner->principal == user.name) {
      const Permission by_queue{permission.action, job_owner->queue_arn};
      if (Decision queue = Decide(user, base, by_queue, resource_tags, with_tags);
          queue.allowed()) {
        decision = queue;
      }
    }
    if (!decision.allowed()) {
      return Refusal{permission, decision, DeniedMessage(user.arn, permission, decision)};
    }
  }
  return std::nullopt;
}

bool MayReadJob(const User& user, const std::string& action, const std::string& job_arn,
                const std::string& queue_arn, const ResourceTagLookup& resource_tags) {
  const Request base = BaseRequest(user, RequiredAccess{});
  const bool with_tags = UsesResourceTags(user);
  const Decision on_job = Decide(user, base, Permission{action, job_arn}, resource_tags, with_tags);
  if (on_job.outcome == Decision::Outcome::kExplicitDeny) return false;
  const Decision on_queue =
      Decide(user, base, Permission{action, queue_arn}, resource_tags, with_tags);
  if (on_queue.outcome == Decision::Outcome::kExplicitDeny) return false;
  return on_job.allowed() || on_queue.allowed();
}

}  // namespace lote::iam
