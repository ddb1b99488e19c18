// Create/Describe/List/Update/DeleteSchedulingPolicy (fair-share policies).
#include <set>

#include "control/control_plane.h"

namespace lote::control {

using store::ResourceKind;
using store::WriteBatch;

Result<Json> ControlPlane::ValidateFairsharePolicy(const Json& policy) const {
  RETURN_IF_ERROR(ExpectObject(policy, "fairsharePolicy"));
  Json out = Json::object();
  ASSIGN_OR_RETURN(
      std::optional<int64_t> decay,
      OptInt(policy, "shareDecaySeconds", "fairsharePolicy.shareDecaySeconds", 0, 604800));
  ASSIGN_OR_RETURN(
      std::optional<int64_t> reservation,
      OptInt(policy, "computeReservation", "fairsharePolicy.computeReservation", 0, 99));
  out["shareDecaySeconds"] = decay.value_or(0);
  out["computeReservation"] = reservation.value_or(0);
  Json shares = Json::array();
  if (policy.contains("shareDistribution") && !policy["shareDistribution"].is_null()) {
    const Json& dist = policy["shareDistribution"];
    if (!dist.is_array()) {
      return Status::InvalidArgument(
          "fairsharePolicy.shareDistribution must be a list of "
          "{\"shareIdentifier\": id, \"weightFactor\": w}");
    }
    if (dist.size() > 500) {
      return Status::InvalidArgument("fairsharePolicy.shareDistribution has " +
                                     std::to_string(dist.size()) + " entries; at most 500");
    }
    std::set<std::string> seen;
    for (const Json& s : dist) {
      RETURN_IF_ERROR(ExpectObject(s, "fairsharePolicy.shareDistribution[]"));
      ASSIGN_OR_RETURN(
          std::string id,
          ReqString(s, "shareIdentifier", "fairsharePolicy.shareDistribution[].shareIdentifier"));
      if (id.empty() || id.size() > 255) {
        return Status::InvalidArgument("shareIdentifier '" + id.substr(0, 40) +
                                       "' must be 1 to 255 characters");
      }
      for (size_t i = 0; i < id.size(); ++i) {
        char c = id[i];
        bool ok = std::isalnum(static_cast<unsigned char>(c)) || c == '_' ||
                  (c == '*' && i + 1 == id.size());
        if (!ok) {
          return Status::InvalidArgument("shareIdentifier '" + id +
                                         "' may contain only letters, digits and underscores, "
                                         "with an optional trailing '*' wildcard");
        }
      }
      if (!seen.insert(id).second) {
        return Status::InvalidArgument("shareIdentifier '" + id +
                                       "' appears twice in shareDistribution; list each once");
      }
      double weight = 1.0;
      if (s.contains("weightFactor") && !s["weightFactor"].is_null()) {
        if (!s["weightFactor"].is_number()) {
          return Status::InvalidArgument("weightFactor of share '" + id + "' must be a number");
        }
        weight = s["weightFactor"].get<double>();
        if (weight < 0.0001 || weight > 999.9999) {
          return Status::InvalidArgument("weightFactor of share '" + id + "' is " +
                                         std::to_string(weight) +
                                         "; it must be between 0.0001 and 999.9999");
        }
      }
      shares.push_back({{"shareIdentifier", id}, {"weightFactor", weight}});
    }
  }
  out["shareDistribution"] = std::move(shares);
  return out;
}

namespace {

bool Given(const Json& request, const char* key) {
  return request.contains(key) && !request[key].is_null();
}

// quotaSharePolicy: {idleResourceAssignmentStrategy: FIFO} (the model's only value).
Result<Json> ValidateQuotaSharePolicy(const Json& policy) {
  RETURN_IF_ERROR(ExpectObject(policy, "quotaSharePolicy"));
  ASSIGN_OR_RETURN(std::string strategy,
                   ReqString(policy, "idleResourceAssignmentStrategy",
                             "quotaSharePolicy.idleResourceAssignmentStrategy"));
  RETURN_IF_ERROR(
      ExpectEnum(strategy, "quotaSharePolicy.idleResourceAssignmentStrategy", {"FIFO"}));
  return Json{{"idleResourceAssignmentStrategy", strategy}};
}

}  // namespace

bool ControlPlane::IsQuotaSharePolicyLocked(const std::string& arn) const {
  for (const auto& [name, doc] : scheduling_policies_)
    if (doc.value("arn", "") == arn) return doc.contains("quotaSharePolicy");
  return false;
}

Result<Json> ControlPlane::CreateSchedulingPolicy(const Json& request) {
  RETURN_IF_ERROR(ExpectObject(request, "request body"));
  ASSIGN_OR_RETURN(std::string name, ReqString(request, "name", "name"));
  RETURN_IF_ERROR(ValidateName("name", name));
  if (Given(request, "quotaSharePolicy") && Given(request, "fairsharePolicy")) {
    return Status::InvalidArgument(
        "a scheduling policy is either a fair-share policy or a quota-share policy: give "
        "fairsharePolicy or quotaSharePolicy, not both");
  }
  ASSIGN_OR_RETURN(TagMap tags, ReadTags(request, "tags", "tags"));
  const std::string arn = MakeArn("scheduling-policy/" + name);
  Json doc = {{"name", name}, {"arn", arn}};
  if (Given(request, "quotaSharePolicy")) {
    ASSIGN_OR_RETURN(doc["quotaSharePolicy"],
                     ValidateQuotaSharePolicy(request["quotaSharePolicy"]));
  } else {
    Json fairshare = {
        {"shareDecaySeconds", 0}, {"computeReservation", 0}, {"shareDistribution", Json::array()}};
    if (Given(request, "fairsharePolicy")) {
      ASSIGN_OR_RETURN(fairshare, ValidateFairsharePolicy(request["fairsharePolicy"]));
    }
    doc["fairsharePolicy"] = std::move(fairshare);
  }
  std::unique_lock<std::mutex> lock(mu_);
  if (scheduling_policies_.count(name)) {
    return Status::AlreadyExists("scheduling policy " + name +
                                 " already exists; choose another name or update it with "
                                 "UpdateSchedulingPolicy");
  }
  WriteBatch batch;
  PutResource(&batch, ResourceKind::kSchedulingPolicy, doc, arn, name, 0);
  for (const auto& [k, v] : tags) batch.PutTag(arn, k, v);
  scheduling_policies_[name] = doc;
  if (!tags.empty()) tags_[arn] = tags;
  RETURN_IF_ERROR(CommitLocked(lock, std::move(batch)));
  return Json{{"name", name}, {"arn", arn}};
}

Result<Json> ControlPlane::DescribeSchedulingPolicies(const Json& request) {
  RETURN_IF_ERROR(ExpectObject(request, "request body"));
  ASSIGN_OR_RETURN(std::optional<std::vector<std::string>> arns,
                   OptStringList(request, "arns", "arns", 100));
  if (!arns || arns->empty()) {
    return Status::InvalidArgument(
        "arns is required; list 1 to 100 scheduling policy ARNs "
        "(ListSchedulingPolicies gives them)");
  }
  std::vector<std::string> names;
  for (const std::string& a : *arns) {
    ASSIGN_OR_RETURN(std::string n, NameFromReference(a, "scheduling-policy", "arns"));
    names.push_back(n);
  }
  std::lock_guard<std::mutex> lock(mu_);
  Json list = Json::array();
  for (const std::string& n : names) {
    auto it = scheduling_policies_.find(n);
    if (it != scheduling_policies_.end()) list.push_back(WithTags(it->second, it->second["arn"]));
  }
  return Json{{"schedulingPolicies", std::move(list)}};
}

Result<Json> ControlPlane::ListSchedulingPolicies(const Json& request) {
  RETURN_IF_ERROR(ExpectObject(request, "request body"));
  ASSIGN_OR_RETURN(std::optional<int64_t> max_results,
                   OptInt(request, "maxResults", "maxResults", 1, 1000));
  ASSIGN_OR_RETURN(std::optional<std::string> token, OptString(request, "nextToken", "nextToken"));
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> keys;
  for (const auto& [n, _] : scheduling_policies_) keys.push_back(n);
  return Page(keys, token, max_results, "schedulingPolicies", [&](size_t i) {
    return Json{{"arn", scheduling_policies_.at(keys[i])["arn"]}};
  });
}

Result<Json> ControlPlane::UpdateSchedulingPolicy(const Json& request) {
  RETURN_IF_ERROR(ExpectObject(request, "request body"));
  ASSIGN_OR_RETURN(std::string ref, ReqString(request, "arn", "arn"));
  ASSIGN_OR_RETURN(std::string name, NameFromReference(ref, "scheduling-policy", "arn"));
  std::optional<Json> fairshare;
  if (Given(request, "fairsharePolicy")) {
    ASSIGN_OR_RETURN(fairshare, ValidateFairsharePolicy(request["fairsharePolicy"]));
  }
  std::optional<Json> quota;
  if (Given(request, "quotaSharePolicy")) {
    ASSIGN_OR_RETURN(quota, ValidateQuotaSharePolicy(request["quotaSharePolicy"]));
  }
  std::unique_lock<std::mutex> lock(mu_);
  auto it = scheduling_policies_.find(name);
  if (it == scheduling_policies_.end()) {
    return Status::NotFound("scheduling policy " + ref +
                            " does not exist; check the ARN with ListSchedulingPolicies");
  }
  Json doc = it->second;
  const bool is_quota = doc.contains("quotaSharePolicy");
  if ((fairshare && is_quota) || (quota && !is_quota)) {
    return Status::InvalidArgument("scheduling policy " + name + " is a " +
                                   (is_quota ? "quota-share" : "fair-share") +
                                   " policy and cannot become the other kind; create a new "
                                   "policy instead");
  }
  if (fairshare) doc["fairsharePolicy"] = *fairshare;
  if (quota) doc["quotaSharePolicy"] = *quota;
  WriteBatch batch;
  PutResource(&batch, ResourceKind::kSchedulingPolicy, doc, doc["arn"], name, 0);
  it->second = std::move(doc);
  RETURN_IF_ERROR(CommitLocked(lock, std::move(batch)));
  return Json::object();
}

Result<Json> ControlPlane::DeleteSchedulingPolicy(const Json& request) {
  RETURN_IF_ERROR(ExpectObject(request, "request body"));
  ASSIGN_OR_RETURN(std::string ref, ReqString(request, "arn", "arn"));
  ASSIGN_OR_RETURN(std::string name, NameFromReference(ref, "scheduling-policy", "arn"));
  std::unique_lock<std::mutex> lock(mu_);
  auto it = scheduling_policies_.find(name);
  if (it == scheduling_policies_.end()) {
    return Status::NotFound("scheduling policy " + ref +
                            " does not exist; check the ARN with ListSchedulingPolicies");
  }
  const std::string arn = it->second["arn"];
  for (const auto& [qname, q] : job_queues_) {
    if (q.value("schedulingPolicyArn", "") == arn) {
      return Status::FailedPrecondition("scheduling policy " + name + " is used by job queue " +
                                        qname + "; delete that queue first");
    }
  }
  WriteBatch batch;
  batch.DeleteResource(ResourceKind::kSchedulingPolicy, arn);
  batch.DeleteAllTags(arn);
  scheduling_policies_.erase(it);
  tags_.erase(arn);
  RETURN_IF_ERROR(CommitLocked(lock, std::move(batch)));
  return Json::object();
}

}  // namespace lote::control
