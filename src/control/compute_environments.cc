// CreateComputeEnvironment, DescribeComputeEnvironments,
// UpdateComputeEnvironment, DeleteComputeEnvironment.
#include <limits>

#include "common/ids.h"
#include "control/control_plane.h"
#include "control/fault_plan.h"

namespace lote::control {

using store::ResourceKind;
using store::WriteBatch;

namespace {
constexpr int64_t kMaxVcpus = 1'000'000;
}

// Validates computeResources (a create, or an update merged over `existing`)
// and returns the normalized document (minvCpus and desiredvCpus filled in).
Result<Json> ControlPlane::ValidateComputeResources(const Json& cr, bool for_update,
                                                    const Json* existing) const {
  RETURN_IF_ERROR(ExpectObject(cr, "computeResources"));
  Json out = existing ? *existing : Json::object();
  for (auto it = cr.begin(); it != cr.end(); ++it) {
    if (!it.value().is_null()) out[it.key()] = it.value();
  }
  ASSIGN_OR_RETURN(std::string type, ReqString(out, "type", "computeResources.type"));
  RETURN_IF_ERROR(
      ExpectEnum(type, "computeResources.type", {"EC2", "SPOT", "FARGATE", "FARGATE_SPOT"}));
  ASSIGN_OR_RETURN(int64_t max_vcpus,
                   ReqInt(out, "maxvCpus", "computeResources.maxvCpus", 0, kMaxVcpus));
  if (type == "FARGATE" || type == "FARGATE_SPOT") {
    // Fargate (AWS): no instance types, no minimum; each job gets its own
    // task. lote runs its jobs locally on virtual instances of the largest
    // Fargate task (16 vCPU, 120 GiB), up to maxvCpus (docs/jobs.md).
    for (const char* key :
         {"instanceTypes", "minvCpus", "desiredvCpus", "allocationStrategy", "instanceRole",
          "imageId", "ec2KeyPair", "placementGroup", "launchTemplate", "bidPercentage",
          "spotIamFleetRole", "ec2Configuration"}) {
      if (out.contains(key) && !out[key].is_null() &&
          !(for_update && existing && existing->contains(key))) {
        return Status::InvalidArgument(std::string("computeResources.") + key +
                                       " does not apply to " + type +
                                       " compute environments; remove it");
      }
    }
    ASSIGN_OR_RETURN(std::optional<std::vector<std::string>> subnets,
                     OptStringList(out, "subnets", "computeResources.subnets", 16));
    if (!subnets) {
      return Status::InvalidArgument(
          "computeResources.subnets is required by the AWS Batch API; lote ignores its values, "
          "so pass any list, e.g. [\"subnet-local\"]");
    }
    ASSIGN_OR_RETURN(
        std::optional<std::vector<std::string>> sgs,
        OptStringList(out, "securityGroupIds", "computeResources.securityGroupIds", 5));
    (void)sgs;
    out.erase("updateToLatestImageVersion");
    return out;
  }
  ASSIGN_OR_RETURN(std::optional<int64_t> min_vcpus,
                   OptInt(out, "minvCpus", "computeResources.minvCpus", 0, kMaxVcpus));
  int64_t min = min_vcpus.value_or(0);
  if (min > max_vcpus) {
    return Status::InvalidArgument("computeResources.minvCpus (" + std::to_string(min) +
                                   ") is greater than maxvCpus (" + std::to_string(max_vcpus) +
                                   "); make minvCpus <= maxvCpus");
  }
  ASSIGN_OR_RETURN(std::optional<int64_t> desired,
                   OptInt(out, "desiredvCpus", "computeResources.desiredvCpus", 0, kMaxVcpus));
  int64_t want = desired.value_or(min);
  if (for_update && !cr.contains("desiredvCpus")) want = std::clamp(want, min, max_vcpus);
  if (want < min || want > max_vcpus) {
    return Status::InvalidArgument("computeResources.desiredvCpus (" + std::to_string(want) +
                                   ") must be between minvCpus (" + std::to_string(min) +
                                   ") and maxvCpus (" + std::to_string(max_vcpus) + ")");
  }
  out["minvCpus"] = min;
  out["desiredvCpus"] = want;
  ASSIGN_OR_RETURN(std::optional<std::vector<std::string>> types,
                   OptStringList(out, "instanceTypes", "computeResources.instanceTypes", 100));
  if (!types || types->empty()) {
    return Status::InvalidArgument(
        "computeResources.instanceTypes is required for EC2 compute environments; list one or "
        "more types such as [\"local\"] (this host) or [\"trn1.32xlarge\"]");
  }
  for (const std::string& t : *types) {
    Result<InstanceType> found = catalog_.Lookup(t);
    if (!found.ok()) {
      return Status::InvalidArgument("computeResources.instanceTypes: " + found.status().message());
    }
  }
  ASSIGN_OR_RETURN(std::optional<std::vector<std::string>> subnets,
                   OptStringList(out, "subnets", "computeResources.subnets", 16));
  if (!subnets) {
    return Status::InvalidArgument(
        "computeResources.subnets is required by the AWS Batch API; lote ignores its values, so "
        "pass any list, e.g. [\"subnet-local\"]");
  }
  ASSIGN_OR_RETURN(std::optional<std::vector<std::string>> sgs,
                   OptStringList(out, "securityGroupIds", "computeResources.securityGroupIds", 5));
  ASSIGN_OR_RETURN(std::optional<std::string> strategy,
                   OptString(out, "allocationStrategy", "computeResources.allocationStrategy"));
  if (strategy) {
    RETURN_IF_ERROR(ExpectEnum(*strategy, "computeResources.allocationStrategy",
                               {"BEST_FIT", "BEST_FIT_PROGRESSIVE", "SPOT_CAPACITY_OPTIMIZED",
                                "SPOT_PRICE_CAPACITY_OPTIMIZED"}));
  }
  // A Spot bid: AWS applies (and range-checks) it for SPOT only; for EC2
  // (On-Demand) it is stored as given and has no effect.
  ASSIGN_OR_RETURN(std::optional<int64_t> bid,
                   OptInt(out, "bidPercentage", "computeResources.bidPercentage",
                          type == "SPOT" ? 0 : std::numeric_limits<int32_t>::min(),
                          type == "SPOT" ? 100 : std::numeric_limits<int32_t>::max()));
  for (const char* key :
       {"imageId", "ec2KeyPair", "instanceRole", "placementGroup", "spotIamFleetRole"}) {
    ASSIGN_OR_RETURN(std::optional<std::string> v,
                     OptString(out, key, std::string("computeResources.") + key));
    (void)v;
  }
  ASSIGN_OR_RETURN(TagMap cr_tags, ReadTags(out, "tags", "computeResources.tags"));
  (void)cr_tags;
  (void)bid;
  (void)sgs;
  for (const char* key : {"launchTemplate", "scalingPolicy"}) {
    if (out.contains(key))
      RETURN_IF_ERROR(ExpectObject(out[key], std::string("computeResources.") + key));
  }
  // AWS takes an empty launch template version as its default, $Default (what
  // a template's "$Latest" becomes after envsubst, as in the recipe's setup).
  if (Json* lt = out.contains("launchTemplate") ? &out["launchTemplate"] : nullptr;
      lt != nullptr && lt->contains("version") && (*lt)["version"] == "") {
    (*lt)["version"] = "$Default";
  }
  if (out.contains("ec2Configuration") && !out["ec2Configuration"].is_array()) {
    return Status::InvalidArgument("computeResources.ec2Configuration must be a list");
  }
  out.erase("updateToLatestImageVersion");
  return out;
}

Result<Json> ControlPlane::CreateComputeEnvironment(const Json& request) {
  RETURN_IF_ERROR(ExpectObject(request, "request body"));
  ASSIGN_OR_RETURN(std::string name,
                   ReqString(request, "computeEnvironmentName", "computeEnvironmentName"));
  RETURN_IF_ERROR(ValidateName("computeEnvironmentName", name));
  ASSIGN_OR_RETURN(std::string type, ReqString(request, "type", "type"));
  RETURN_IF_ERROR(ExpectEnum(type, "type", {"MANAGED", "UNMANAGED"}));
  ASSIGN_OR_RETURN(std::optional<std::string> state, OptString(request, "state", "state"));
  if (state) RETURN_IF_ERROR(ExpectEnum(*state, "state", {"ENABLED", "DISABLED"}));
  ASSIGN_OR_RETURN(std::optional<int64_t> unmanaged,
                   OptInt(request, "unmanagedvCpus", "unmanagedvCpus", 0, kMaxVcpus));
  ASSIGN_OR_RETURN(std::optional<std::string> service_role,
                   OptString(request, "serviceRole", "serviceRole"));
  ASSIGN_OR_RETURN(std::optional<std::string> context, OptString(request, "context", "context"));
  ASSIGN_OR_RETURN(TagMap tags, ReadTags(request, "tags", "tags"));
  RETURN_IF_ERROR(ValidateEnvironmentFaultTags(name, tags));  // lote:inject... (fault_plan.h)
  if (request.contains("eksConfiguration") && !request["eksConfiguration"].is_null()) {
    return Status::InvalidArgument(
        "eksConfiguration is not supported by lote (it runs no Kubernetes); remove it");
  }

  Json doc = {
      {"computeEnvironmentName", name},
      {"computeEnvironmentArn", MakeArn("compute-environment/" + name)},
      {"type", type},
      {"state", state.value_or("ENABLED")},
      {"status", "CREATING"},
      {"statusReason", "Creating compute environment"},
      {"containerOrchestrationType", "ECS"},
      {"uuid", NewUuid()},
      {"updatePolicy", {{"terminateJobsOnUpdate", false}, {"jobExecutionTimeoutMinutes", 30}}}};
  doc["ecsClusterArn"] = "arn:aws:ecs:" + config_.region + ":" + config_.account_id + ":cluster/" +
                         name + "_Batch_" + doc["uuid"].get<std::string>();
  if (service_role) doc["serviceRole"] = *service_role;
  if (context) doc["context"] = *context;
  const bool has_cr =
      request.contains("computeResources") && !request["computeResources"].is_null();
  if (type == "MANAGED") {
    if (!has_cr) {
      return Status::InvalidArgument(
          "computeResources is required for a MANAGED compute environment; give at least type "
          "EC2, maxvCpus, instanceTypes and subnets");
    }
    if (unmanaged) {
      return Status::InvalidArgument(
          "unmanagedvCpus applies only to UNMANAGED compute environments; remove it");
    }
    ASSIGN_OR_RETURN(Json cr,
                     ValidateComputeResources(request["computeResources"], false, nullptr));
    doc["computeResources"] = std::move(cr);
  } else {
    if (has_cr) {
      return Status::InvalidArgument(
          "computeResources is only for MANAGED compute environments; remove it or use type "
          "MANAGED");
    }
    doc["unmanagedvCpus"] = unmanaged.value_or(0);
  }

  const std::string arn = doc["computeEnvironmentArn"];
  std::unique_lock<std::mutex> lock(mu_);
  if (compute_environments_.count(name)) {
    return Status::AlreadyExists("compute environment " + name +
                                 " already exists; choose another computeEnvironmentName or "
                                 "delete the existing one first");
  }
  if (compute_environments_.size() >= kMaxComputeEnvironments) {
    return Status::ResourceExhausted(
        "this account already has 50 compute environments (the AWS Batch limit); delete one "
        "before creating another");
  }
  if (doc.contains("computeResources"))
    RETURN_IF_ERROR(CheckEc2ReferencesLocked(doc["computeResources"]));
  WriteBatch batch;
  PutResource(&batch, ResourceKind::kComputeEnvironment, doc, arn, name, 0);
  for (const auto& [k, v] : tags) batch.PutTag(arn, k, v);
  compute_environments_[name] = doc;
  if (!tags.empty()) tags_[arn] = tags;
  RETURN_IF_ERROR(CommitLocked(lock, std::move(batch)));
  return Json{{"computeEnvironmentName", name}, {"computeEnvironmentArn", arn}};
}

Result<Json> ControlPlane::DescribeComputeEnvironments(const Json& request) {
  ASSIGN_OR_RETURN(Json out, DescribeByName(request, "computeEnvironments", "compute-environment",
                                            compute_environments_, "computeEnvironmentArn"));
  // Extra key: what the backend of an UNMANAGED environment reports it holds.
  std::lock_guard<std::mutex> lock(mu_);
  if (out.contains("computeEnvironments") && out["computeEnvironments"].is_array()) {
    for (Json& ce : out["computeEnvironments"]) {
      auto it = backend_capacity_.find(ce.value("computeEnvironmentName", ""));
      if (it != backend_capacity_.end()) ce["loteCapacity"] = it->second;
      auto q = quarantined_nodes_.find(ce.value("computeEnvironmentName", ""));
      if (q != quarantined_nodes_.end()) ce["loteQuarantinedNodes"] = q->second;
      auto a = accelerators_.find(ce.value("computeEnvironmentName", ""));
      if (a != accelerators_.end()) ce["loteAccelerators"] = a->second;
    }
  }
  return out;
}

void ControlPlane::SetBackendCapacity(const std::string& name, const Json& capacity) {
  std::lock_guard<std::mutex> lock(mu_);
  if (capacity.is_null()) {
    backend_capacity_.erase(name);
  } else {
    backend_capacity_[name] = capacity;
  }
}

void ControlPlane::SetQuarantinedNodes(const std::string& name, const Json& nodes) {
  std::lock_guard<std::mutex> lock(mu_);
  if (nodes.is_null()) {
    quarantined_nodes_.erase(name);
  } else {
    quarantined_nodes_[name] = nodes;
  }
}

void ControlPlane::SetAccelerators(const std::string& name, const Json& accelerators) {
  std::lock_guard<std::mutex> lock(mu_);
  if (accelerators.is_null()) {
    accelerators_.erase(name);
  } else {
    accelerators_[name] = accelerators;
  }
}

Result<Json> ControlPlane::UpdateComputeEnvironment(const Json& request) {
  RETURN_IF_ERROR(ExpectObject(request, "request body"));
  ASSIGN_OR_RETURN(std::string ref, ReqString(request, "computeEnvironment", "computeEnvironment"));
  ASSIGN_OR_RETURN(std::string name,
                   NameFromReference(ref, "compute-environment", "computeEnvironment"));
  ASSIGN_OR_RETURN(std::optional<std::string> state, OptString(request, "state", "state"));
  if (state) RETURN_IF_ERROR(ExpectEnum(*state, "state", {"ENABLED", "DISABLED"}));
  ASSIGN_OR_RETURN(std::optional<int64_t> unmanaged,
                   OptInt(request, "unmanagedvCpus", "unmanagedvCpus", 0, kMaxVcpus));
  ASSIGN_OR_RETURN(std::optional<std::string> service_role,
                   OptString(request, "serviceRole", "serviceRole"));
  ASSIGN_OR_RETURN(std::optional<std::string> context, OptString(request, "context", "context"));
  std::unique_lock<std::mutex> lock(mu_);
  auto it = compute_environments_.find(name);
  if (it == compute_environments_.end()) {
    return Status::NotFound("compute environment " + ref +
                            " does not exist; check the name with DescribeComputeEnvironments");
  }
  Json doc = it->second;
  const std::string status = doc.value("status", "");
  if (status == "DELETING" || status == "DELETED") {
    return Status::FailedPrecondition("compute environment " + name +
                                      " is being deleted and cannot be updated");
  }
  if (state) doc["state"] = *state;
  if (service_role) doc["serviceRole"] = *service_role;
  if (context) doc["context"] = *context;
  if (request.contains("updatePolicy") && request["updatePolicy"].is_object()) {
    for (auto u = request["updatePolicy"].begin(); u != request["updatePolicy"].end(); ++u) {
      doc["updatePolicy"][u.key()] = u.value();
    }
  }
  if (unmanaged) {
    if (doc.value("type", "") != "UNMANAGED") {
      return Status::InvalidArgument(
          "unmanagedvCpus applies only to UNMANAGED compute environments; " + name +
          " is MANAGED, update computeResources instead");
    }
    doc["unmanagedvCpus"] = *unmanaged;
  }
  if (request.contains("computeResources") && !request["computeResources"].is_null()) {
    if (doc.value("type", "") != "MANAGED") {
      return Status::InvalidArgument(
          "computeResources can only be updated on MANAGED compute "
          "environments; " +
          name + " is UNMANAGED");
    }
    ASSIGN_OR_RETURN(Json cr, ValidateComputeResources(request["computeResources"], true,
                                                       &doc["computeResources"]));
    // Only the references this update changes must exist now.
    Json changed = Json::object();
    for (const char* key : {"placementGroup", "launchTemplate"}) {
      if (cr.contains(key) && cr[key] != doc["computeResources"].value(key, Json()))
        changed[key] = cr[key];
    }
    RETURN_IF_ERROR(CheckEc2ReferencesLocked(changed));
    doc["computeResources"] = std::move(cr);
  }
  doc["status"] = "UPDATING";
  doc["statusReason"] = "Updating compute environment";
  const std::string arn = doc["computeEnvironmentArn"];
  WriteBatch batch;
  PutResource(&batch, ResourceKind::kComputeEnvironment, doc, arn, name, 0);
  it->second = std::move(doc);
  RETURN_IF_ERROR(CommitLocked(lock, std::move(batch)));
  return Json{{"computeEnvironmentName", name}, {"computeEnvironmentArn", arn}};
}

Result<Json> ControlPlane::DeleteComputeEnvironment(const Json& request) {
  RETURN_IF_ERROR(ExpectObject(request, "request body"));
  ASSIGN_OR_RETURN(std::string ref, ReqString(request, "computeEnvironment", "computeEnvironment"));
  ASSIGN_OR_RETURN(std::string name,
                   NameFromReference(ref, "compute-environment", "computeEnvironment"));
  std::unique_lock<std::mutex> lock(mu_);
  auto it = compute_environments_.find(name);
  if (it == compute_environments_.end()) {
    return Status::NotFound("compute environment " + ref +
                            " does not exist; check the name with DescribeComputeEnvironments");
  }
  Json doc = it->second;
  const std::string arn = doc["computeEnvironmentArn"];
  if (doc.value("status", "") == "DELETING") return Json::object();
  if (doc.value("state", "") != "DISABLED") {
    return Status::FailedPrecondition(
        "compute environment " + name +
        " is ENABLED; disable it first (UpdateComputeEnvironment with state DISABLED), then "
        "delete it");
  }
  for (const auto& [qname, q] : job_queues_) {
    for (const Json& o : q.value("computeEnvironmentOrder", Json::array())) {
      if (o.value("computeEnvironment", "") == arn) {
        return Status::FailedPrecondition(
            "compute environment " + name + " is used by job queue " + qname +
            "; remove it from the queue's computeEnvironmentOrder (UpdateJobQueue) or delete the "
            "queue first");
      }
    }
  }
  doc["status"] = "DELETING";
  doc["statusReason"] = "Deleting compute environment";
  WriteBatch batch;
  PutResource(&batch, ResourceKind::kComputeEnvironment, doc, arn, name, 0);
  it->second = std::move(doc);
  RETURN_IF_ERROR(CommitLocked(lock, std::move(batch)));
  return Json::object();
}

}  // namespace lote::control
