// CreateJobQueue, DescribeJobQueues, UpdateJobQueue, DeleteJobQueue.
#include <set>

#include "control/control_plane.h"

namespace lote::control {

using store::ResourceKind;
using store::WriteBatch;

namespace {

constexpr int64_t kMaxPriority = 1000;

constexpr const char* kSageMakerTraining = "SAGEMAKER_TRAINING";

// `service`: a SAGEMAKER_TRAINING queue, whose only action is TERMINATE.
Result<Json> ValidateTimeLimitActions(const Json& actions, bool service) {
  if (!actions.is_array()) {
    return Status::InvalidArgument("jobStateTimeLimitActions must be a list");
  }
  if (actions.size() > 5) {
    return Status::InvalidArgument("jobStateTimeLimitActions has " +
                                   std::to_string(actions.size()) + " entries; at most 5");
  }
  for (const Json& a : actions) {
    RETURN_IF_ERROR(ExpectObject(a, "jobStateTimeLimitActions[]"));
    ASSIGN_OR_RETURN(std::string reason,
                     ReqString(a, "reason", "jobStateTimeLimitActions[].reason"));
    ASSIGN_OR_RETURN(std::string state, ReqString(a, "state", "jobStateTimeLimitActions[].state"));
    RETURN_IF_ERROR(ExpectEnum(state, "jobStateTimeLimitActions[].state", {"RUNNABLE"}));
    ASSIGN_OR_RETURN(int64_t secs, ReqInt(a, "maxTimeSeconds",
                                          "jobStateTimeLimitActions[].maxTimeSeconds", 600, 86400));
    ASSIGN_OR_RETURN(std::string action,
                     ReqString(a, "action", "jobStateTimeLimitActions[].action"));
    RETURN_IF_ERROR(ExpectEnum(action, "jobStateTimeLimitActions[].action",
                               service ? std::vector<std::string_view>{"TERMINATE"}
                                       : std::vector<std::string_view>{"CANCEL", "TERMINATE"}));
    (void)reason;
    (void)secs;
  }
  return actions;
}

}  // namespace

// Checks computeEnvironmentOrder (1 to 3 entries, distinct orders, existing
// compute environments) and returns it with every reference turned into an
// ARN. Requires mu_.
Result<Json> ControlPlane::ValidateComputeEnvironmentOrder(const Json& orders) const {
  if (!orders.is_array()) {
    return Status::InvalidArgument(
        "computeEnvironmentOrder must be a list of {\"order\": N, \"computeEnvironment\": name}");
  }
  if (orders.empty()) {
    return Status::InvalidArgument(
        "computeEnvironmentOrder is empty; a job queue needs 1 to 3 compute environments");
  }
  if (orders.size() > kMaxComputeEnvironmentsPerQueue) {
    return Status::InvalidArgument("computeEnvironmentOrder lists " +
                                   std::to_string(orders.size()) +
                                   " compute environments; a job queue can have at most 3");
  }
  Json out = Json::array();
  std::set<int64_t> seen_orders;
  std::set<std::string> seen_ces;
  for (const Json& o : orders) {
    RETURN_IF_ERROR(ExpectObject(o, "computeEnvironmentOrder[]"));
    ASSIGN_OR_RETURN(int64_t order, ReqInt(o, "order", "computeEnvironmentOrder[].order", 0,
                                           std::numeric_limits<int32_t>::max()));
    ASSIGN_OR_RETURN(std::string ref, ReqString(o, "computeEnvironment",
                                                "computeEnvironmentOrder[].computeEnvironment"));
    ASSIGN_OR_RETURN(std::string name,
                     NameFromReference(ref, "compute-environment",
                                       "computeEnvironmentOrder[].computeEnvironment"));
    if (!seen_orders.insert(order).second) {
      return Status::InvalidArgument("computeEnvironmentOrder uses order " + std::to_string(order) +
                                     " twice; give each compute environment a distinct order");
    }
    auto it = compute_environments_.find(name);
    if (it == compute_environments_.end()) {
      return Status::NotFound("compute environment " + ref +
                              " in computeEnvironmentOrder does not exist; create it first");
    }
    if (it->second.value("status", "") == "DELETING") {
      return Status::FailedPrecondition("compute environment " + name +
                                        " is being deleted; it cannot be added to a job queue");
    }
    if (!seen_ces.insert(name).second) {
      return Status::InvalidArgument("computeEnvironmentOrder lists compute environment " + name +
                                     " twice; list each one once");
    }
    out.push_back({{"order", order}, {"computeEnvironment", it->second["computeEnvironmentArn"]}});
  }
  return out;
}

Result<std::string> ControlPlane::SchedulingPolicyArnLocked(const std::string& ref) const {
  ASSIGN_OR_RETURN(std::string name,
                   NameFromReference(ref, "scheduling-policy", "schedulingPolicyArn"));
  auto it = scheduling_policies_.find(name);
  if (it == scheduling_policies_.end()) {
    return Status::NotFound("scheduling policy " + ref +
                            " does not exist; create it with CreateSchedulingPolicy first");
  }
  return it->second["arn"].get<std::string>();
}

// A queue with a quota-share policy: exactly one service environment, limited
// in instance types (not NUM_INSTANCES), used by no other queue (AWS's rule).
Status ControlPlane::CheckQuotaManagedEnvironmentsLocked(const std::string& queue,
                                                         const Json& order) const {
  if (!order.is_array() || order.size() != 1) {
    return Status::InvalidArgument(
        "a job queue with a quota-share scheduling policy takes exactly one service environment "
        "in serviceEnvironmentOrder");
  }
  const std::string arn = order[0].value("serviceEnvironment", "");
  for (const auto& [name, se] : service_environments_) {
    if (se.value("serviceEnvironmentArn", "") != arn) continue;
    for (const Json& l : se.value("capacityLimits", Json::array())) {
      if (l.value("capacityUnit", "") == "NUM_INSTANCES") {
        return Status::InvalidArgument(
            "service environment " + name +
            " counts NUM_INSTANCES; quota management needs its capacityLimits in SageMaker "
            "instance types (ml.m5.large, ...)");
      }
    }
  }
  for (const auto& [qname, q] : job_queues_) {
    if (qname == queue) continue;
    for (const Json& o : q.value("serviceEnvironmentOrder", Json::array())) {
      if (o.value("serviceEnvironment", "") == arn) {
        return Status::InvalidArgument("service environment " + arn + " is used by job queue " +
                                       qname +
                                       "; a quota-managed queue needs one no other queue uses");
      }
    }
  }
  return Status::Ok();
}

Result<Json> ControlPlane::CreateJobQueue(const Json& request) {
  RETURN_IF_ERROR(ExpectObject(request, "request body"));
  ASSIGN_OR_RETURN(std::string name, ReqString(request, "jobQueueName", "jobQueueName"));
  RETURN_IF_ERROR(ValidateName("jobQueueName", name));
  ASSIGN_OR_RETURN(int64_t priority, ReqInt(request, "priority", "priority", 0, kMaxPriority));
  ASSIGN_OR_RETURN(std::optional<std::string> state, OptString(request, "state", "state"));
  if (state) RETURN_IF_ERROR(ExpectEnum(*state, "state", {"ENABLED", "DISABLED"}));
  ASSIGN_OR_RETURN(std::optional<std::string> policy_ref,
                   OptString(request, "schedulingPolicyArn", "schedulingPolicyArn"));
  ASSIGN_OR_RETURN(std::optional<std::string> queue_type,
                   OptString(request, "jobQueueType", "jobQueueType"));
  if (queue_type && *queue_type != "ECS" && *queue_type != kSageMakerTraining) {
    return Status::InvalidArgument("jobQueueType " + *queue_type +
                                   " is not supported by lote; use ECS (container jobs, the "
                                   "default) or SAGEMAKER_TRAINING (service jobs)");
  }
  const bool service = queue_type == kSageMakerTraining;
  const bool has_service_order =
      request.contains("serviceEnvironmentOrder") && !request["serviceEnvironmentOrder"].is_null();
  const bool has_ce_order = request.contains("computeEnvironmentOrder") &&
                            !request["computeEnvironmentOrder"].is_null() &&
                            !(request["computeEnvironmentOrder"].is_array() &&
                              request["computeEnvironmentOrder"].empty() && service);
  if (service && has_ce_order) {
    return Status::InvalidArgument(
        "a SAGEMAKER_TRAINING job queue runs service jobs on service environments: give "
        "serviceEnvironmentOrder, not computeEnvironmentOrder");
  }
  if (service && !has_service_order) {
    return Status::InvalidArgument(
        "serviceEnvironmentOrder is required for jobQueueType SAGEMAKER_TRAINING; list 1 to 3 "
        "service environments as [{\"order\": 1, \"serviceEnvironment\": \"my-se\"}]");
  }
  if (!service && has_service_order) {
    return Status::InvalidArgument(
        "serviceEnvironmentOrder needs jobQueueType SAGEMAKER_TRAINING; a container job queue "
        "takes computeEnvironmentOrder");
  }
  ASSIGN_OR_RETURN(TagMap tags, ReadTags(request, "tags", "tags"));
  Json limit_actions = Json::array();
  if (request.contains("jobStateTimeLimitActions") &&
      !request["jobStateTimeLimitActions"].is_null()) {
    ASSIGN_OR_RETURN(limit_actions,
                     ValidateTimeLimitActions(request["jobStateTimeLimitActions"], service));
  }
  if (!service && !has_ce_order) {
    return Status::InvalidArgument(
        "computeEnvironmentOrder is required; list 1 to 3 compute environments as "
        "[{\"order\": 1, \"computeEnvironment\": \"my-ce\"}]");
  }

  std::unique_lock<std::mutex> lock(mu_);
  if (job_queues_.count(name)) {
    return Status::AlreadyExists("job queue " + name +
                                 " already exists; choose another jobQueueName or delete the "
                                 "existing queue first");
  }
  if (job_queues_.size() >= kMaxJobQueues) {
    return Status::ResourceExhausted(
        "this account already has 50 job queues (the AWS Batch limit); delete one before "
        "creating another");
  }
  Json order = Json::array();
  Json service_order;
  if (service) {
    ASSIGN_OR_RETURN(service_order,
                     ValidateServiceEnvironmentOrder(request["serviceEnvironmentOrder"]));
  } else {
    ASSIGN_OR_RETURN(order, ValidateComputeEnvironmentOrder(request["computeEnvironmentOrder"]));
  }
  const std::string arn = MakeArn("job-queue/" + name);
  Json doc = {{"jobQueueName", name},
              {"jobQueueArn", arn},
              {"state", state.value_or("ENABLED")},
              {"status", "CREATING"},
              {"statusReason", "Creating job queue"},
              {"priority", priority},
              {"computeEnvironmentOrder", std::move(order)},
              {"jobStateTimeLimitActions", std::move(limit_actions)}};
  if (service) {
    doc["jobQueueType"] = kSageMakerTraining;
    doc["serviceEnvironmentOrder"] = std::move(service_order);
  }
  if (policy_ref) {
    ASSIGN_OR_RETURN(doc["schedulingPolicyArn"], SchedulingPolicyArnLocked(*policy_ref));
    if (IsQuotaSharePolicyLocked(doc["schedulingPolicyArn"])) {
      if (!service) {
        return Status::InvalidArgument(
            "scheduling policy " + *policy_ref +
            " is a quota-share policy, for SAGEMAKER_TRAINING queues; give a container job queue "
            "a fair-share policy (lote does not schedule container jobs by quota shares yet)");
      }
      RETURN_IF_ERROR(CheckQuotaManagedEnvironmentsLocked(name, doc["serviceEnvironmentOrder"]));
    }
  }
  WriteBatch batch;
  PutResource(&batch, ResourceKind::kJobQueue, doc, arn, name, 0);
  for (const auto& [k, v] : tags) batch.PutTag(arn, k, v);
  job_queues_[name] = doc;
  if (!tags.empty()) tags_[arn] = tags;
  RETURN_IF_ERROR(CommitLocked(lock, std::move(batch)));
  return Json{{"jobQueueName", name}, {"jobQueueArn", arn}};
}

Result<Json> ControlPlane::DescribeJobQueues(const Json& request) {
  return DescribeByName(request, "jobQueues", "job-queue", job_queues_, "jobQueueArn");
}

Result<Json> ControlPlane::UpdateJobQueue(const Json& request) {
  RETURN_IF_ERROR(ExpectObject(request, "request body"));
  ASSIGN_OR_RETURN(std::string ref, ReqString(request, "jobQueue", "jobQueue"));
  ASSIGN_OR_RETURN(std::string name, NameFromReference(ref, "job-queue", "jobQueue"));
  ASSIGN_OR_RETURN(std::optional<std::string> state, OptString(request, "state", "state"));
  if (state) RETURN_IF_ERROR(ExpectEnum(*state, "state", {"ENABLED", "DISABLED"}));
  ASSIGN_OR_RETURN(std::optional<int64_t> priority,
                   OptInt(request, "priority", "priority", 0, kMaxPriority));
  ASSIGN_OR_RETURN(std::optional<std::string> policy_ref,
                   OptString(request, "schedulingPolicyArn", "schedulingPolicyArn"));
  std::unique_lock<std::mutex> lock(mu_);
  auto it = job_queues_.find(name);
  if (it == job_queues_.end()) {
    return Status::NotFound("job queue " + ref +
                            " does not exist; check the name with DescribeJobQueues");
  }
  Json doc = it->second;
  const bool service = doc.value("jobQueueType", "") == kSageMakerTraining;
  std::optional<Json> limit_actions;
  if (request.contains("jobStateTimeLimitActions") &&
      !request["jobStateTimeLimitActions"].is_null()) {
    ASSIGN_OR_RETURN(limit_actions,
                     ValidateTimeLimitActions(request["jobStateTimeLimitActions"], service));
  }
  if (request.contains("serviceEnvironmentOrder") &&
      !request["serviceEnvironmentOrder"].is_null()) {
    if (!service) {
      return Status::InvalidArgument("job queue " + name +
                                     " runs container jobs; serviceEnvironmentOrder is for "
                                     "SAGEMAKER_TRAINING queues");
    }
    ASSIGN_OR_RETURN(doc["serviceEnvironmentOrder"],
                     ValidateServiceEnvironmentOrder(request["serviceEnvironmentOrder"]));
    if (IsQuotaSharePolicyLocked(doc.value("schedulingPolicyArn", "")))
      RETURN_IF_ERROR(CheckQuotaManagedEnvironmentsLocked(name, doc["serviceEnvironmentOrder"]));
  }
  if (doc.value("status", "") == "DELETING") {
    return Status::FailedPrecondition("job queue " + name +
                                      " is being deleted and cannot be updated");
  }
  if (state) doc["state"] = *state;
  if (priority) doc["priority"] = *priority;
  if (limit_actions) doc["jobStateTimeLimitActions"] = *limit_actions;
  if (request.contains("computeEnvironmentOrder") &&
      !request["computeEnvironmentOrder"].is_null()) {
    if (service) {
      return Status::InvalidArgument("job queue " + name +
                                     " is a SAGEMAKER_TRAINING queue; change its "
                                     "serviceEnvironmentOrder, not computeEnvironmentOrder");
    }
    ASSIGN_OR_RETURN(Json order,
                     ValidateComputeEnvironmentOrder(request["computeEnvironmentOrder"]));
    doc["computeEnvironmentOrder"] = std::move(order);
  }
  if (policy_ref) {
    if (!doc.contains("schedulingPolicyArn")) {
      return Status::InvalidArgument(
          "job queue " + name +
          " was created without a scheduling policy (FIFO); AWS Batch cannot add one later, "
          "create a new queue with schedulingPolicyArn instead");
    }
    ASSIGN_OR_RETURN(std::string policy_arn, SchedulingPolicyArnLocked(*policy_ref));
    if (IsQuotaSharePolicyLocked(policy_arn) !=
        IsQuotaSharePolicyLocked(doc["schedulingPolicyArn"])) {
      return Status::InvalidArgument("job queue " + name +
                                     " cannot change between a fair-share and a quota-share "
                                     "scheduling policy; create a new queue instead");
    }
    doc["schedulingPolicyArn"] = policy_arn;
  }
  doc["status"] = "UPDATING";
  doc["statusReason"] = "Updating job queue";
  const std::string arn = doc["jobQueueArn"];
  WriteBatch batch;
  PutResource(&batch, ResourceKind::kJobQueue, doc, arn, name, 0);
  it->second = std::move(doc);
  RETURN_IF_ERROR(CommitLocked(lock, std::move(batch)));
  return Json{{"jobQueueName", name}, {"jobQueueArn", arn}};
}

Result<Json> ControlPlane::DeleteJobQueue(const Json& request) {
  RETURN_IF_ERROR(ExpectObject(request, "request body"));
  ASSIGN_OR_RETURN(std::string ref, ReqString(request, "jobQueue", "jobQueue"));
  ASSIGN_OR_RETURN(std::string name, NameFromReference(ref, "job-queue", "jobQueue"));
  std::unique_lock<std::mutex> lock(mu_);
  auto it = job_queues_.find(name);
  if (it == job_queues_.end()) {
    return Status::NotFound("job queue " + ref +
                            " does not exist; check the name with DescribeJobQueues");
  }
  Json doc = it->second;
  if (doc.value("status", "") == "DELETING") return Json::object();
  if (doc.value("state", "") != "DISABLED") {
    return Status::FailedPrecondition(
        "job queue " + name +
        " is ENABLED; disable it first (UpdateJobQueue with state DISABLED), then delete it");
  }
  for (const auto& [key, share] : quota_shares_) {
    if (key.rfind(name + "/", 0) == 0) {
      return Status::FailedPrecondition("job queue " + name + " has quota share " +
                                        share.value("quotaShareName", "") +
                                        "; disable and delete its quota shares first");
    }
  }
  doc["status"] = "DELETING";
  doc["statusReason"] = "Deleting job queue";
  const std::string arn = doc["jobQueueArn"];
  WriteBatch batch;
  PutResource(&batch, ResourceKind::kJobQueue, doc, arn, name, 0);
  it->second = std::move(doc);
  RETURN_IF_ERROR(CommitLocked(lock, std::move(batch)));
  return Json::object();
}

}  // namespace lote::control
