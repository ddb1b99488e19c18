// Create/Describe/Update/Delete/ListQuotaShares: AWS Batch's quota shares,
// virtual queues of a SAGEMAKER_TRAINING job queue with a quota-share
// scheduling policy, each with its own capacity in instance types and a
// sharing strategy (RESERVE, LEND, LEND_AND_BORROW). This file is the
// resource model; docs/api.md says what is scheduled.
#include <set>

#include "control/control_plane.h"

namespace lote::control {

using store::ResourceKind;
using store::WriteBatch;

namespace {

constexpr size_t kMaxQuotaSharesPerQueue = 20;
constexpr const char* kSharePart = "/quota-share/";

std::string Key(const std::string& queue, const std::string& share) { return queue + "/" + share; }

Result<Json> ValidateShareLimits(const Json& limits) {
  if (!limits.is_array() || limits.empty() || limits.size() > 5) {
    return Status::InvalidArgument(
        "capacityLimits must list 1 to 5 {\"maxCapacity\": N, \"capacityUnit\": instance type}");
  }
  Json out = Json::array();
  std::set<std::string> units;
  for (size_t i = 0; i < limits.size(); ++i) {
    const std::string at = "capacityLimits[" + std::to_string(i) + "]";
    RETURN_IF_ERROR(ExpectObject(limits[i], at));
    ASSIGN_OR_RETURN(int64_t max, ReqInt(limits[i], "maxCapacity", at + ".maxCapacity", 1,
                                         std::numeric_limits<int32_t>::max()));
    ASSIGN_OR_RETURN(std::string unit, ReqString(limits[i], "capacityUnit", at + ".capacityUnit"));
    if (unit.rfind("ml.", 0) != 0) {
      return Status::InvalidArgument(at + ".capacityUnit '" + unit +
                                     "' is not a SageMaker instance type (ml.m5.large, ...): "
                                     "quota shares count instances per type");
    }
    if (!units.insert(unit).second) {
      return Status::InvalidArgument("capacityLimits names " + unit +
                                     " twice; list each instance type once");
    }
    out.push_back({{"maxCapacity", max}, {"capacityUnit", unit}});
  }
  return out;
}

Result<Json> ValidateSharing(const Json& sharing) {
  RETURN_IF_ERROR(ExpectObject(sharing, "resourceSharingConfiguration"));
  ASSIGN_OR_RETURN(std::string strategy,
                   ReqString(sharing, "strategy", "resourceSharingConfiguration.strategy"));
  RETURN_IF_ERROR(ExpectEnum(strategy, "resourceSharingConfiguration.strategy",
                             {"RESERVE", "LEND", "LEND_AND_BORROW"}));
  ASSIGN_OR_RETURN(std::optional<int64_t> borrow,
                   OptInt(sharing, "borrowLimit", "resourceSharingConfiguration.borrowLimit", -1,
                          std::numeric_limits<int32_t>::max()));
  if (borrow && strategy != "LEND_AND_BORROW") {
    return Status::InvalidArgument(
        "resourceSharingConfiguration.borrowLimit applies only to strategy LEND_AND_BORROW");
  }
  Json out = {{"strategy", strategy}};
  if (strategy == "LEND_AND_BORROW") out["borrowLimit"] = borrow.value_or(-1);
  return out;
}

Result<Json> ValidatePreemption(const Json& preemption) {
  RETURN_IF_ERROR(ExpectObject(preemption, "preemptionConfiguration"));
  ASSIGN_OR_RETURN(std::string in_share, ReqString(preemption, "inSharePreemption",
                                                   "preemptionConfiguration.inSharePreemption"));
  RETURN_IF_ERROR(
      ExpectEnum(in_share, "preemptionConfiguration.inSharePreemption", {"ENABLED", "DISABLED"}));
  return Json{{"inSharePreemption", in_share}};
}

}  // namespace

Result<std::string> ControlPlane::QuotaShareKeyOfArn(const std::string& arn) const {
  // arn:aws:batch:R:A:job-queue/QUEUE/quota-share/NAME
  const std::string prefix = MakeArn("job-queue/");
  const size_t at = arn.find(kSharePart);
  if (arn.rfind(prefix, 0) != 0 || at == std::string::npos || at < prefix.size()) {
    return Status::InvalidArgument("quotaShareArn '" + arn + "' is not a quota share ARN (" +
                                   prefix + "QUEUE/quota-share/NAME)");
  }
  const std::string queue = arn.substr(prefix.size(), at - prefix.size());
  const std::string share = arn.substr(at + std::string(kSharePart).size());
  RETURN_IF_ERROR(ValidateName("quotaShareArn's job queue", queue));
  RETURN_IF_ERROR(ValidateName("quotaShareArn's quota share name", share));
  return Key(queue, share);
}

Status ControlPlane::CheckQuotaShareUnitsLocked(const std::string& queue,
                                                const Json& limits) const {
  // Every unit must be one the queue's service environments count in.
  auto q = job_queues_.find(queue);
  std::set<std::string> known_units;
  if (q != job_queues_.end()) {
    for (const Json& o : q->second.value("serviceEnvironmentOrder", Json::array())) {
      for (const auto& [se_name, se] : service_environments_) {
        if (se.value("serviceEnvironmentArn", "") != o.value("serviceEnvironment", "")) continue;
        for (const Json& l : se.value("capacityLimits", Json::array()))
          known_units.insert(l.value("capacityUnit", ""));
      }
    }
  }
  for (const Json& l : limits) {
    const std::string unit = l["capacityUnit"];
    if (!known_units.count(unit)) {
      return Status::InvalidArgument("capacityUnit " + unit + " is not one of job queue " + queue +
                                     "'s service environment limits; quota shares divide the "
                                     "instance types their service environment lists");
    }
  }
  return Status::Ok();
}

Result<Json> ControlPlane::CreateQuotaShare(const Json& request) {
  RETURN_IF_ERROR(ExpectObject(request, "request body"));
  ASSIGN_OR_RETURN(std::string name, ReqString(request, "quotaShareName", "quotaShareName"));
  RETURN_IF_ERROR(ValidateName("quotaShareName", name));
  ASSIGN_OR_RETURN(std::string queue_ref, ReqString(request, "jobQueue", "jobQueue"));
  ASSIGN_OR_RETURN(std::string queue, NameFromReference(queue_ref, "job-queue", "jobQueue"));
  ASSIGN_OR_RETURN(Json limits, ValidateShareLimits(request.value("capacityLimits", Json())));
  if (!request.contains("resourceSharingConfiguration"))
    return Status::InvalidArgument("resourceSharingConfiguration is required");
  ASSIGN_OR_RETURN(Json sharing, ValidateSharing(request["resourceSharingConfiguration"]));
  if (!request.contains("preemptionConfiguration"))
    return Status::InvalidArgument("preemptionConfiguration is required");
  ASSIGN_OR_RETURN(Json preemption, ValidatePreemption(request["preemptionConfiguration"]));
  ASSIGN_OR_RETURN(std::optional<std::string> state, OptString(request, "state", "state"));
  if (state) RETURN_IF_ERROR(ExpectEnum(*state, "state", {"ENABLED", "DISABLED"}));
  ASSIGN_OR_RETURN(TagMap tags, ReadTags(request, "tags", "tags"));

  std::unique_lock<std::mutex> lock(mu_);
  auto q = job_queues_.find(queue);
  if (q == job_queues_.end()) {
    return Status::NotFound("job queue " + queue_ref +
                            " does not exist; create a SAGEMAKER_TRAINING queue first");
  }
  const Json& qdoc = q->second;
  if (qdoc.value("status", "") != "VALID") {
    return Status::FailedPrecondition("job queue " + queue + " is " + qdoc.value("status", "") +
                                      "; quota shares can be added once it is VALID");
  }
  if (qdoc.value("jobQueueType", "ECS") != "SAGEMAKER_TRAINING") {
    return Status::InvalidArgument("job queue " + queue +
                                   " is not a SAGEMAKER_TRAINING queue: quota shares divide "
                                   "the capacity of service environments");
  }
  const std::string policy_arn = qdoc.value("schedulingPolicyArn", "");
  auto policy = scheduling_policies_.end();
  for (auto it = scheduling_policies_.begin(); it != scheduling_policies_.end(); ++it)
    if (it->second.value("arn", "") == policy_arn) policy = it;
  if (policy == scheduling_policies_.end() || !policy->second.contains("quotaSharePolicy")) {
    return Status::InvalidArgument("job queue " + queue +
                                   " has no quota-share scheduling policy; create the queue "
                                   "with a schedulingPolicyArn whose policy has quotaSharePolicy");
  }
  RETURN_IF_ERROR(CheckQuotaShareUnitsLocked(queue, limits));
  const std::string key = Key(queue, name);
  if (quota_shares_.count(key)) {
    return Status::AlreadyExists("quota share " + name + " already exists in job queue " + queue +
                                 "; choose another name or update it with UpdateQuotaShare");
  }
  size_t in_queue = 0;
  for (const auto& [k, doc] : quota_shares_)
    if (k.rfind(queue + "/", 0) == 0) ++in_queue;
  if (in_queue >= kMaxQuotaSharesPerQueue) {
    return Status::ResourceExhausted("job queue " + queue +
                                     " already has 20 quota shares (the AWS Batch limit)");
  }
  const std::string arn = MakeArn("job-queue/" + queue + kSharePart + name);
  Json doc = {{"quotaShareName", name},
              {"quotaShareArn", arn},
              {"jobQueueArn", qdoc.value("jobQueueArn", "")},
              {"capacityLimits", std::move(limits)},
              {"resourceSharingConfiguration", std::move(sharing)},
              {"preemptionConfiguration", std::move(preemption)},
              {"state", state.value_or("ENABLED")},
              {"status", "CREATING"}};
  WriteBatch batch;
  PutResource(&batch, ResourceKind::kQuotaShare, doc, arn, key, 0);
  for (const auto& [k, v] : tags) batch.PutTag(arn, k, v);
  quota_shares_[key] = doc;
  if (!tags.empty()) tags_[arn] = tags;
  RETURN_IF_ERROR(CommitLocked(lock, std::move(batch)));
  return Json{{"quotaShareName", name}, {"quotaShareArn", arn}};
}

Result<Json> ControlPlane::DescribeQuotaShare(const Json& request) {
  RETURN_IF_ERROR(ExpectObject(request, "request body"));
  ASSIGN_OR_RETURN(std::string arn, ReqString(request, "quotaShareArn", "quotaShareArn"));
  ASSIGN_OR_RETURN(std::string key, QuotaShareKeyOfArn(arn));
  std::lock_guard<std::mutex> lock(mu_);
  auto it = quota_shares_.find(key);
  if (it == quota_shares_.end()) {
    return Status::NotFound("quota share " + arn +
                            " does not exist; ListQuotaShares lists a queue's shares");
  }
  return WithTags(it->second, arn);
}

Result<Json> ControlPlane::ListQuotaShares(const Json& request) {
  RETURN_IF_ERROR(ExpectObject(request, "request body"));
  ASSIGN_OR_RETURN(std::string queue_ref, ReqString(request, "jobQueue", "jobQueue"));
  ASSIGN_OR_RETURN(std::string queue, NameFromReference(queue_ref, "job-queue", "jobQueue"));
  ASSIGN_OR_RETURN(std::optional<int64_t> max_results,
                   OptInt(request, "maxResults", "maxResults", 1, kMaxPageSize));
  ASSIGN_OR_RETURN(std::optional<std::string> token, OptString(request, "nextToken", "nextToken"));
  std::lock_guard<std::mutex> lock(mu_);
  if (!job_queues_.count(queue)) {
    return Status::NotFound("job queue " + queue_ref + " does not exist");
  }
  std::vector<std::string> keys;
  for (const auto& [k, doc] : quota_shares_)
    if (k.rfind(queue + "/", 0) == 0) keys.push_back(k);
  return Page(keys, token, max_results, "quotaShares",
              [&](size_t i) { return quota_shares_.at(keys[i]); });
}

Result<Json> ControlPlane::UpdateQuotaShare(const Json& request) {
  RETURN_IF_ERROR(ExpectObject(request, "request body"));
  ASSIGN_OR_RETURN(std::string arn, ReqString(request, "quotaShareArn", "quotaShareArn"));
  ASSIGN_OR_RETURN(std::string key, QuotaShareKeyOfArn(arn));
  std::optional<Json> limits, sharing, preemption;
  if (request.contains("capacityLimits") && !request["capacityLimits"].is_null()) {
    ASSIGN_OR_RETURN(limits, ValidateShareLimits(request["capacityLimits"]));
  }
  if (request.contains("resourceSharingConfiguration") &&
      !request["resourceSharingConfiguration"].is_null()) {
    ASSIGN_OR_RETURN(sharing, ValidateSharing(request["resourceSharingConfiguration"]));
  }
  if (request.contains("preemptionConfiguration") &&
      !request["preemptionConfiguration"].is_null()) {
    ASSIGN_OR_RETURN(preemption, ValidatePreemption(request["preemptionConfiguration"]));
  }
  ASSIGN_OR_RETURN(std::optional<std::string> state, OptString(request, "state", "state"));
  if (state) RETURN_IF_ERROR(ExpectEnum(*state, "state", {"ENABLED", "DISABLED"}));
  std::unique_lock<std::mutex> lock(mu_);
  auto it = quota_shares_.find(key);
  if (it == quota_shares_.end()) {
    return Status::NotFound("quota share " + arn + " does not exist");
  }
  Json doc = it->second;
  if (doc.value("status", "") == "DELETING") {
    return Status::FailedPrecondition("quota share " + arn + " is being deleted");
  }
  if (limits) {
    RETURN_IF_ERROR(CheckQuotaShareUnitsLocked(key.substr(0, key.find('/')), *limits));
    doc["capacityLimits"] = *limits;
  }
  if (sharing) doc["resourceSharingConfiguration"] = *sharing;
  if (preemption) doc["preemptionConfiguration"] = *preemption;
  if (state) doc["state"] = *state;
  doc["status"] = "UPDATING";
  WriteBatch batch;
  PutResource(&batch, ResourceKind::kQuotaShare, doc, arn, key, 0);
  it->second = doc;
  RETURN_IF_ERROR(CommitLocked(lock, std::move(batch)));
  return Json{{"quotaShareName", doc["quotaShareName"]}, {"quotaShareArn", arn}};
}

Result<Json> ControlPlane::DeleteQuotaShare(const Json& request) {
  RETURN_IF_ERROR(ExpectObject(request, "request body"));
  ASSIGN_OR_RETURN(std::string arn, ReqString(request, "quotaShareArn", "quotaShareArn"));
  ASSIGN_OR_RETURN(std::string key, QuotaShareKeyOfArn(arn));
  std::unique_lock<std::mutex> lock(mu_);
  auto it = quota_shares_.find(key);
  if (it == quota_shares_.end()) {
    return Status::NotFound("quota share " + arn + " does not exist");
  }
  Json doc = it->second;
  if (doc.value("status", "") == "DELETING") return Json::object();
  if (doc.value("state", "") != "DISABLED") {
    return Status::FailedPrecondition("quota share " + doc.value("quotaShareName", "") +
                                      " is ENABLED; disable it first (UpdateQuotaShare with "
                                      "state DISABLED)");
  }
  doc["status"] = "DELETING";
  WriteBatch batch;
  PutResource(&batch, ResourceKind::kQuotaShare, doc, arn, key, 0);
  it->second = std::move(doc);
  RETURN_IF_ERROR(CommitLocked(lock, std::move(batch)));
  return Json::object();
}

}  // namespace lote::control
