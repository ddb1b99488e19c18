// Create/Describe/Update/DeleteServiceEnvironment: AWS Batch's service
// environments (SageMaker training capacity, counted in instances), the
// capacity of job queues of type SAGEMAKER_TRAINING (serviceEnvironmentOrder).
#include <set>

#include "control/control_plane.h"

namespace lote::control {

using store::ResourceKind;
using store::WriteBatch;

namespace {

constexpr const char* kNumInstances = "NUM_INSTANCES";

// capacityLimits: 1 to 5 entries of {maxCapacity >= 1, capacityUnit}, each unit
// once; NUM_INSTANCES (FIFO and fair-share queues) or SageMaker instance types
// ("ml.m5.large": quota management), never both.
Result<Json> ValidateCapacityLimits(const Json& limits) {
  if (!limits.is_array() || limits.empty()) {
    return Status::InvalidArgument(
        "capacityLimits is required: a list of {\"maxCapacity\": N, \"capacityUnit\": "
        "\"NUM_INSTANCES\"}");
  }
  if (limits.size() > 5) {
    return Status::InvalidArgument("capacityLimits has " + std::to_string(limits.size()) +
                                   " entries; at most 5");
  }
  Json out = Json::array();
  std::set<std::string> units;
  for (size_t i = 0; i < limits.size(); ++i) {
    const std::string at = "capacityLimits[" + std::to_string(i) + "]";
    RETURN_IF_ERROR(ExpectObject(limits[i], at));
    ASSIGN_OR_RETURN(int64_t max, ReqInt(limits[i], "maxCapacity", at + ".maxCapacity", 1,
                                         std::numeric_limits<int32_t>::max()));
    ASSIGN_OR_RETURN(std::optional<std::string> unit,
                     OptString(limits[i], "capacityUnit", at + ".capacityUnit"));
    const std::string u = unit.value_or(kNumInstances);
    if (u != kNumInstances && u.rfind("ml.", 0) != 0) {
      return Status::InvalidArgument(at + ".capacityUnit '" + u +
                                     "' is neither NUM_INSTANCES nor a SageMaker instance type "
                                     "(ml.m5.large, ml.p4d.24xlarge, ...)");
    }
    if (!units.insert(u).second) {
      return Status::InvalidArgument("capacityLimits names " + u + " twice; list each unit once");
    }
    out.push_back({{"maxCapacity", max}, {"capacityUnit", u}});
  }
  if (units.count(kNumInstances) && units.size() > 1) {
    return Status::InvalidArgument(
        "capacityLimits mixes NUM_INSTANCES with instance types; use NUM_INSTANCES alone, or "
        "instance types alone (quota management)");
  }
  return out;
}

}  // namespace

Result<Json> ControlPlane::CreateServiceEnvironment(const Json& request) {
  RETURN_IF_ERROR(ExpectObject(request, "request body"));
  ASSIGN_OR_RETURN(std::string name,
                   ReqString(request, "serviceEnvironmentName", "serviceEnvironmentName"));
  RETURN_IF_ERROR(ValidateName("serviceEnvironmentName", name));
  ASSIGN_OR_RETURN(std::string type,
                   ReqString(request, "serviceEnvironmentType", "serviceEnvironmentType"));
  RETURN_IF_ERROR(ExpectEnum(type, "serviceEnvironmentType", {"SAGEMAKER_TRAINING"}));
  ASSIGN_OR_RETURN(std::optional<std::string> state, OptString(request, "state", "state"));
  if (state) RETURN_IF_ERROR(ExpectEnum(*state, "state", {"ENABLED", "DISABLED"}));
  ASSIGN_OR_RETURN(Json limits, ValidateCapacityLimits(request.value("capacityLimits", Json())));
  ASSIGN_OR_RETURN(TagMap tags, ReadTags(request, "tags", "tags"));
  const std::string arn = MakeArn("service-environment/" + name);
  Json doc = {{"serviceEnvironmentName", name}, {"serviceEnvironmentArn", arn},
              {"serviceEnvironmentType", type}, {"state", state.value_or("ENABLED")},
              {"status", "CREATING"},           {"capacityLimits", std::move(limits)}};
  std::unique_lock<std::mutex> lock(mu_);
  if (service_environments_.count(name)) {
    return Status::AlreadyExists("service environment " + name +
                                 " already exists; choose another name or update it with "
                                 "UpdateServiceEnvironment");
  }
  if (service_environments_.size() >= kMaxComputeEnvironments) {
    return Status::ResourceExhausted(
        "this account already has 50 service environments; delete one before creating another");
  }
  WriteBatch batch;
  PutResource(&batch, ResourceKind::kServiceEnvironment, doc, arn, name, 0);
  for (const auto& [k, v] : tags) batch.PutTag(arn, k, v);
  service_environments_[name] = doc;
  if (!tags.empty()) tags_[arn] = tags;
  RETURN_IF_ERROR(CommitLocked(lock, std::move(batch)));
  return Json{{"serviceEnvironmentName", name}, {"serviceEnvironmentArn", arn}};
}

Result<Json> ControlPlane::DescribeServiceEnvironments(const Json& request) {
  return DescribeByName(request, "serviceEnvironments", "service-environment",
                        service_environments_, "serviceEnvironmentArn");
}

Result<Json> ControlPlane::UpdateServiceEnvironment(const Json& request) {
  RETURN_IF_ERROR(ExpectObject(request, "request body"));
  ASSIGN_OR_RETURN(std::string ref, ReqString(request, "serviceEnvironment", "serviceEnvironment"));
  ASSIGN_OR_RETURN(std::string name,
                   NameFromReference(ref, "service-environment", "serviceEnvironment"));
  ASSIGN_OR_RETURN(std::optional<std::string> state, OptString(request, "state", "state"));
  if (state) RETURN_IF_ERROR(ExpectEnum(*state, "state", {"ENABLED", "DISABLED"}));
  std::optional<Json> limits;
  if (request.contains("capacityLimits") && !request["capacityLimits"].is_null()) {
    ASSIGN_OR_RETURN(limits, ValidateCapacityLimits(request["capacityLimits"]));
  }
  std::unique_lock<std::mutex> lock(mu_);
  auto it = service_environments_.find(name);
  if (it == service_environments_.end()) {
    return Status::NotFound("service environment " + ref +
                            " does not exist; check the name with DescribeServiceEnvironments");
  }
  Json doc = it->second;
  if (doc.value("status", "") == "DELETING") {
    return Status::FailedPrecondition("service environment " + name +
                                      " is being deleted and cannot be updated");
  }
  if (state) doc["state"] = *state;
  if (limits) doc["capacityLimits"] = *limits;
  doc["status"] = "UPDATING";
  const std::string arn = doc["serviceEnvironmentArn"];
  WriteBatch batch;
  PutResource(&batch, ResourceKind::kServiceEnvironment, doc, arn, name, 0);
  it->second = std::move(doc);
  RETURN_IF_ERROR(CommitLocked(lock, std::move(batch)));
  return Json{{"serviceEnvironmentName", name}, {"serviceEnvironmentArn", arn}};
}

Result<Json> ControlPlane::DeleteServiceEnvironment(const Json& request) {
  RETURN_IF_ERROR(ExpectObject(request, "request body"));
  ASSIGN_OR_RETURN(std::string ref, ReqString(request, "serviceEnvironment", "serviceEnvironment"));
  ASSIGN_OR_RETURN(std::string name,
                   NameFromReference(ref, "service-environment", "serviceEnvironment"));
  std::unique_lock<std::mutex> lock(mu_);
  auto it = service_environments_.find(name);
  if (it == service_environments_.end()) {
    return Status::NotFound("service environment " + ref +
                            " does not exist; check the name with DescribeServiceEnvironments");
  }
  Json doc = it->second;
  if (doc.value("status", "") == "DELETING") return Json::object();
  if (doc.value("state", "") != "DISABLED") {
    return Status::FailedPrecondition(
        "service environment " + name +
        " is ENABLED; disable it first (UpdateServiceEnvironment with state DISABLED)");
  }
  const std::string arn = doc["serviceEnvironmentArn"];
  for (const auto& [qname, q] : job_queues_) {
    for (const Json& o : q.value("serviceEnvironmentOrder", Json::array())) {
      if (o.value("serviceEnvironment", "") == arn) {
        return Status::FailedPrecondition("service environment " + name + " is used by job queue " +
                                          qname +
                                          "; remove it from that queue (UpdateJobQueue) or "
                                          "delete the queue first");
      }
    }
  }
  doc["status"] = "DELETING";
  WriteBatch batch;
  PutResource(&batch, ResourceKind::kServiceEnvironment, doc, arn, name, 0);
  it->second = std::move(doc);
  RETURN_IF_ERROR(CommitLocked(lock, std::move(batch)));
  return Json::object();
}

// Checks serviceEnvironmentOrder (1 to 3 entries, distinct orders, existing
// service environments) and returns it with every reference an ARN. mu_ held.
Result<Json> ControlPlane::ValidateServiceEnvironmentOrder(const Json& orders) const {
  if (!orders.is_array() || orders.empty()) {
    return Status::InvalidArgument(
        "serviceEnvironmentOrder must list 1 to 3 service environments as "
        "[{\"order\": 1, \"serviceEnvironment\": name}]");
  }
  if (orders.size() > kMaxComputeEnvironmentsPerQueue) {
    return Status::InvalidArgument("serviceEnvironmentOrder lists " +
                                   std::to_string(orders.size()) +
                                   " service environments; a job queue can have at most 3");
  }
  Json out = Json::array();
  std::set<int64_t> seen_orders;
  std::set<std::string> seen;
  for (const Json& o : orders) {
    RETURN_IF_ERROR(ExpectObject(o, "serviceEnvironmentOrder[]"));
    ASSIGN_OR_RETURN(int64_t order, ReqInt(o, "order", "serviceEnvironmentOrder[].order", 0,
                                           std::numeric_limits<int32_t>::max()));
    ASSIGN_OR_RETURN(std::string ref, ReqString(o, "serviceEnvironment",
                                                "serviceEnvironmentOrder[].serviceEnvironment"));
    ASSIGN_OR_RETURN(std::string name,
                     NameFromReference(ref, "service-environment",
                                       "serviceEnvironmentOrder[].serviceEnvironment"));
    if (!seen_orders.insert(order).second) {
      return Status::InvalidArgument("serviceEnvironmentOrder uses order " + std::to_string(order) +
                                     " twice; give each service environment a distinct order");
    }
    auto it = service_environments_.find(name);
    if (it == service_environments_.end()) {
      return Status::NotFound("service environment " + ref +
                              " in serviceEnvironmentOrder does not exist; create it first");
    }
    if (it->second.value("status", "") == "DELETING") {
      return Status::FailedPrecondition("service environment " + name +
                                        " is being deleted; it cannot be added to a job queue");
    }
    if (!seen.insert(name).second) {
      return Status::InvalidArgument("serviceEnvironmentOrder lists service environment " + name +
                                     " twice; list each one once");
    }
    out.push_back({{"order", order}, {"serviceEnvironment", it->second["serviceEnvironmentArn"]}});
  }
  return out;
}

}  // namespace lote::control
