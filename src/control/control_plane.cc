#include "control/control_plane.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

#include "common/ids.h"
#include "control/fault_plan.h"

namespace lote::control {

using store::ResourceKind;
using store::WriteBatch;

ControlPlane::ControlPlane(store::Store* store, const Clock* clock, ControlConfig config)
    : store_(store), clock_(clock), config_(std::move(config)), catalog_(config_.host) {}

Result<std::unique_ptr<ControlPlane>> ControlPlane::Open(store::Store* store, const Clock* clock,
                                                         ControlConfig config) {
  std::unique_ptr<ControlPlane> cp(new ControlPlane(store, clock, std::move(config)));
  // Resources only: the job loop reads the jobs it keeps (JobLoop::Load).
  ASSIGN_OR_RETURN(store::Snapshot snapshot, store->Load(/*with_jobs=*/false));
  RETURN_IF_ERROR(cp->LoadFrom(snapshot));
  return cp;
}

Status ControlPlane::LoadFrom(const store::Snapshot& snapshot) {
  std::lock_guard<std::mutex> lock(mu_);
  return LoadLocked(snapshot);
}

Status ControlPlane::LoadLocked(const store::Snapshot& snapshot) {
  compute_environments_.clear();
  job_queues_.clear();
  job_definitions_.clear();
  last_revision_.clear();
  scheduling_policies_.clear();
  placement_groups_.clear();
  launch_templates_.clear();
  ssm_parameters_.clear();
  service_environments_.clear();
  quota_shares_.clear();
  tags_.clear();
  for (const store::ResourceRow& row : snapshot.resources) {
    Result<Json> doc = ParseJson(row.doc);
    if (!doc.ok()) {
      return Status::DataLoss("stored document of " + row.arn +
                              " is not valid JSON: " + doc.status().message());
    }
    switch (row.kind) {
      case ResourceKind::kComputeEnvironment:
        compute_environments_[row.name] = std::move(*doc);
        break;
      case ResourceKind::kJobQueue:
        job_queues_[row.name] = std::move(*doc);
        break;
      case ResourceKind::kJobDefinition:
        job_definitions_[row.name][row.revision] = std::move(*doc);
        last_revision_[row.name] = std::max(last_revision_[row.name], row.revision);
        break;
      case ResourceKind::kSchedulingPolicy:
        scheduling_policies_[row.name] = std::move(*doc);
        break;
      case ResourceKind::kPlacementGroup:
        placement_groups_[row.name] = std::move(*doc);
        break;
      case ResourceKind::kLaunchTemplate:
        launch_templates_[row.name] = std::move(*doc);
        break;
      case ResourceKind::kSsmParameter:
        ssm_parameters_[row.name] = std::move(*doc);
        break;
      case ResourceKind::kConsumableResource:
        break;  // the job loop's (control/consumables.h)
      case ResourceKind::kServiceEnvironment:
        service_environments_[row.name] = std::move(*doc);
        break;
      case ResourceKind::kQuotaShare:
        quota_shares_[row.name] = std::move(*doc);
        break;
    }
  }
  for (const store::TagRow& tag : snapshot.tags) tags_[tag.resource_arn][tag.key] = tag.value;
  return Status::Ok();
}

std::string ControlPlane::MakeArn(const std::string& resource) const {
  return "arn:aws:batch:" + config_.region + ":" + config_.account_id + ":" + resource;
}

Result<std::string> ControlPlane::NameFromReference(const std::string& ref, const std::string& type,
                                                    const std::string& field) const {
  if (ref.rfind("arn:", 0) == 0) {
    Result<Arn> arn = Arn::Parse(ref);
    if (!arn.ok() || arn->service != "batch" || arn->ResourceType() != type) {
      return Status::InvalidArgument(field + " '" + ref + "' is not a " + type +
                                     " ARN; expected arn:aws:batch:" + config_.region + ":" +
                                     config_.account_id + ":" + type + "/<name>, or just the name");
    }
    if (arn->region != config_.region || arn->account != config_.account_id) {
      return Status::NotFound(field + " '" + ref + "' names region " + arn->region +
                              " and account " + arn->account + ", but this server is region " +
                              config_.region + ", account " + config_.account_id);
    }
    return arn->ResourceName();
  }
  RETURN_IF_ERROR(ValidateName(field, ref));
  return ref;
}

Status ControlPlane::CommitLocked(std::unique_lock<std::mutex>& lock, WriteBatch batch) {
  // Waited for under the lock: nobody sees a change before it is stored.
  Status st = store_->Write(std::move(batch));
  if (st.ok()) return st;
  // What is in memory is ahead of the store: back to what is committed.
  Result<store::Snapshot> committed = store_->Load(/*with_jobs=*/false);
  Status reloaded = committed.ok() ? LoadLocked(*committed) : committed.status();
  if (!reloaded.ok())
    spdlog::error("control plane: could not reload the committed state: {}", reloaded.ToString());
  return Status::Unavailable("could not store the change: " + st.message());
}

void ControlPlane::PutResource(WriteBatch* batch, ResourceKind kind, const Json& doc,
                               const std::string& arn, const std::string& name,
                               int64_t revision) const {
  batch->PutResource(
      store::ResourceRow{kind, arn, name, revision, doc.dump(), clock_->NowMillis()});
}

Json ControlPlane::WithTags(const Json& doc, const std::string& arn) const {
  Json out = doc;
  auto it = tags_.find(arn);
  Json tags = Json::object();
  if (it != tags_.end()) {
    for (const auto& [k, v] : it->second) tags[k] = v;
  }
  if (!tags.empty()) out["tags"] = std::move(tags);
  return out;
}

Result<Json> ControlPlane::DescribeByName(const Json& request, const char* list_field,
                                          const char* type, const std::map<std::string, Json>& docs,
                                          const char* arn_field) const {
  RETURN_IF_ERROR(ExpectObject(request, "request body"));
  ASSIGN_OR_RETURN(std::optional<std::vector<std::string>> wanted,
                   OptStringList(request, list_field, list_field, 100));
  // An empty list names no resource in particular: every one is described,
  // as AWS (and every SDK that sends the list it was given) expects.
  if (wanted && wanted->empty()) wanted.reset();
  ASSIGN_OR_RETURN(std::optional<int64_t> max_results,
                   OptInt(request, "maxResults", "maxResults", 1, kMaxPageSize));
  ASSIGN_OR_RETURN(std::optional<std::string> token, OptString(request, "nextToken", "nextToken"));
  std::vector<std::string> names;
  if (wanted) {
    for (const std::string& ref : *wanted) {
      ASSIGN_OR_RETURN(std::string n, NameFromReference(ref, type, list_field));
      names.push_back(n);
    }
    std::sort(names.begin(), names.end());
    names.erase(std::unique(names.begin(), names.end()), names.end());
  }
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> keys;
  if (wanted) {
    for (const std::string& n : names) {
      if (docs.count(n)) keys.push_back(n);
    }
  } else {
    for (const auto& [n, _] : docs) keys.push_back(n);
  }
  return Page(keys, token, max_results, list_field, [&](size_t i) {
    const Json& doc = docs.at(keys[i]);
    return WithTags(doc, doc[arn_field]);
  });
}

Result<Json> ControlPlane::Page(const std::vector<std::string>& sorted_keys,
                                const std::optional<std::string>& next_token,
                                std::optional<int64_t> max_results, const char* list_field,
                                const std::function<Json(size_t)>& item) {
  ASSIGN_OR_RETURN(size_t start, PageStart(sorted_keys, next_token));
  const size_t limit = static_cast<size_t>(max_results.value_or(kMaxPageSize));
  Json list = Json::array();
  size_t i = start;
  for (; i < sorted_keys.size() && list.size() < limit; ++i) list.push_back(item(i));
  Json out = {{list_field, std::move(list)}};
  if (i < sorted_keys.size()) out["nextToken"] = MakeNextToken(sorted_keys[i - 1]);
  return out;
}

bool ControlPlane::ResourceExistsLocked(const std::string& arn) const {
  Result<Arn> parsed = Arn::Parse(arn);
  if (!parsed.ok() || parsed->service != "batch" || parsed->region != config_.region ||
      parsed->account != config_.account_id) {
    return false;
  }
  std::string type = parsed->ResourceType();
  std::string name = parsed->ResourceName();
  if (type == "job-queue" && name.find("/quota-share/") != std::string::npos) {
    Result<std::string> key = QuotaShareKeyOfArn(arn);
    return key.ok() && quota_shares_.count(*key) > 0;
  }
  if (type == "compute-environment") return compute_environments_.count(name) > 0;
  if (type == "job-queue") return job_queues_.count(name) > 0;
  if (type == "scheduling-policy") return scheduling_policies_.count(name) > 0;
  if (type == "service-environment") return service_environments_.count(name) > 0;
  if (type == "job-definition") {
    Result<const Json*> jd = FindJobDefinitionLocked(arn);
    return jd.ok() && name.find(':') != std::string::npos;
  }
  return false;
}

// ---------------------------------------------------------------- tags

Result<Json> ControlPlane::TagResource(const Json& request) {
  ASSIGN_OR_RETURN(std::string arn, ReqString(request, "resourceArn", "resourceArn"));
  ASSIGN_OR_RETURN(TagMap tags, ReadTags(request, "tags", "tags"));
  if (tags.empty()) {
    return Status::InvalidArgument("tags is empty; give at least one tag as {\"key\": \"value\"}");
  }
  std::unique_lock<std::mutex> lock(mu_);
  if (!ResourceExistsLocked(arn)) {
    return Status::NotFound("resource " + arn +
                            " does not exist; tag a compute environment, job queue, job "
                            "definition (name:revision ARN) or scheduling policy by its ARN");
  }
  TagMap merged = tags_[arn];
  for (const auto& [k, v] : tags) merged[k] = v;
  RETURN_IF_ERROR(ValidateResourceFaultTags(arn, merged));  // lote:inject... (fault_plan.h)
  if (merged.size() > kMaxTagsPerResource) {
    return Status::ResourceExhausted(
        "resource " + arn + " would have " + std::to_string(merged.size()) +
        " tags; the limit is 50, remove some with UntagResource first");
  }
  WriteBatch batch;
  for (const auto& [k, v] : tags) batch.PutTag(arn, k, v);
  tags_[arn] = std::move(merged);
  RETURN_IF_ERROR(CommitLocked(lock, std::move(batch)));
  return Json::object();
}

Result<Json> ControlPlane::UntagResource(const Json& request) {
  ASSIGN_OR_RETURN(std::string arn, ReqString(request, "resourceArn", "resourceArn"));
  ASSIGN_OR_RETURN(std::optional<std::vector<std::string>> keys,
                   OptStringList(request, "tagKeys", "tagKeys", 50));
  if (!keys || keys->empty()) {
    return Status::InvalidArgument(
        "tagKeys is required; name at least one tag key to remove "
        "(query parameter tagKeys=<key>)");
  }
  std::unique_lock<std::mutex> lock(mu_);
  if (!ResourceExistsLocked(arn)) {
    return Status::NotFound("resource " + arn + " does not exist; check the ARN");
  }
  WriteBatch batch;
  TagMap& current = tags_[arn];
  for (const std::string& k : *keys) {
    RETURN_IF_ERROR(ValidateTagKey(k));
    batch.DeleteTag(arn, k);
  }
  for (const std::string& k : *keys) current.erase(k);
  if (current.empty()) tags_.erase(arn);
  RETURN_IF_ERROR(CommitLocked(lock, std::move(batch)));
  return Json::object();
}

Result<Json> ControlPlane::ListTagsForResource(const Json& request) {
  ASSIGN_OR_RETURN(std::string arn, ReqString(request, "resourceArn", "resourceArn"));
  std::lock_guard<std::mutex> lock(mu_);
  if (!ResourceExistsLocked(arn)) {
    return Status::NotFound("resource " + arn + " does not exist; check the ARN");
  }
  Json tags = Json::object();
  auto it = tags_.find(arn);
  if (it != tags_.end()) {
    for (const auto& [k, v] : it->second) tags[k] = v;
  }
  return Json{{"tags", tags}};
}

Status ControlPlane::SetDesiredVcpus(const std::string& compute_environment, int32_t vcpus) {
  std::unique_lock<std::mutex> lock(mu_);
  auto it = compute_environments_.find(compute_environment);
  if (it == compute_environments_.end())
    return Status::NotFound("compute environment " + compute_environment + " does not exist");
  Json& doc = it->second;
  if (!doc.contains("computeResources") || !doc["computeResources"].is_object())
    return Status::FailedPrecondition("compute environment " + compute_environment +
                                      " is unmanaged: it has no desiredvCpus");
  if (doc["computeResources"].value("desiredvCpus", -1) == vcpus) return Status::Ok();
  doc["computeResources"]["desiredvCpus"] = vcpus;
  WriteBatch batch;
  PutResource(&batch, ResourceKind::kComputeEnvironment, doc,
              doc.value("computeEnvironmentArn", ""), compute_environment, 0);
  // Not waited for (the next pass writes it again if it is lost: it is
  // informational).
  Result<store::Store::Ticket> ticket = store_->Enqueue(std::move(batch));
  if (!ticket.ok())
    return Status::Unavailable("could not store the change: " + ticket.status().message());
  return Status::Ok();
}

// ---------------------------------------------------------------- reconcile

Result<int32_t> ControlPlane::Reconcile() {
  std::unique_lock<std::mutex> lock(mu_);
  WriteBatch batch;
  int32_t changed = 0;
  auto settle = [&](std::map<std::string, Json>& docs, ResourceKind kind, const char* arn_field) {
    for (auto it = docs.begin(); it != docs.end();) {
      Json& doc = it->second;
      std::string status = doc.value("status", "");
      std::string arn = doc.value(arn_field, "");
      if (status == "DELETING") {
        batch.DeleteResource(kind, arn);
        batch.DeleteAllTags(arn);
        tags_.erase(arn);
        it = docs.erase(it);
        ++changed;
        continue;
      }
      if (status == "CREATING" || status == "UPDATING") {
        doc["status"] = "VALID";
        if (kind != ResourceKind::kServiceEnvironment &&
            kind != ResourceKind::kQuotaShare) {  // their details have no statusReason
          doc["statusReason"] = kind == ResourceKind::kComputeEnvironment
                                    ? "ComputeEnvironment Healthy"
                                    : "JobQueue Healthy";
        }
        PutResource(&batch, kind, doc, arn, it->first, 0);
        ++changed;
      }
      ++it;
    }
  };
  settle(compute_environments_, ResourceKind::kComputeEnvironment, "computeEnvironmentArn");
  settle(job_queues_, ResourceKind::kJobQueue, "jobQueueArn");
  settle(service_environments_, ResourceKind::kServiceEnvironment, "serviceEnvironmentArn");
  settle(quota_shares_, ResourceKind::kQuotaShare, "quotaShareArn");
  if (changed == 0) return 0;
  RETURN_IF_ERROR(CommitLocked(lock, std::move(batch)));
  return changed;
}

// ---------------------------------------------------------------- lookups

ComputeEnvironmentSpec ControlPlane::CeSpecLocked(const Json& doc) const {
  ComputeEnvironmentSpec spec;
  spec.name = doc.value("computeEnvironmentName", "");
  spec.arn = doc.value("computeEnvironmentArn", "");
  spec.managed = doc.value("type", "MANAGED") == "MANAGED";
  spec.enabled = doc.value("state", "ENABLED") == "ENABLED";
  spec.status = doc.value("status", "");
  spec.unmanaged_vcpus = doc.value("unmanagedvCpus", 0);
  if (doc.contains("computeResources")) {
    const Json& cr = doc["computeResources"];
    spec.min_vcpus = cr.value("minvCpus", 0);
    spec.max_vcpus = cr.value("maxvCpus", 0);
    spec.desired_vcpus = cr.value("desiredvCpus", spec.min_vcpus);
    spec.placement_group = cr.value("placementGroup", "");
    const std::string cr_type = cr.value("type", "EC2");
    spec.fargate = cr_type == "FARGATE" || cr_type == "FARGATE_SPOT";
    if (spec.fargate) spec.instance_types.push_back(kFargateInstance);
    if (cr.contains("instanceTypes") && cr["instanceTypes"].is_array()) {
      for (const Json& t : cr["instanceTypes"]) {
        Result<InstanceType> it = catalog_.Lookup(t.get<std::string>());
        if (it.ok()) spec.instance_types.push_back(*it);
      }
    }
  }
  auto tags = tags_.find(spec.arn);
  if (tags != tags_.end()) {
    auto e = tags->second.find(kEmulationTag);
    spec.emulation = e != tags->second.end() && e->second == "true";
    for (const auto& [k, v] : tags->second)
      if (k.rfind("lote:", 0) == 0) spec.lote_tags[k] = v;
  }
  return spec;
}

JobQueueSpec ControlPlane::QueueSpecLocked(const Json& doc) const {
  JobQueueSpec spec;
  spec.name = doc.value("jobQueueName", "");
  spec.arn = doc.value("jobQueueArn", "");
  spec.enabled = doc.value("state", "ENABLED") == "ENABLED";
  spec.status = doc.value("status", "");
  spec.priority = doc.value("priority", 0);
  spec.scheduling_policy_arn = doc.value("schedulingPolicyArn", "");
  std::vector<std::pair<int64_t, std::string>> order;
  for (const Json& o : doc.value("computeEnvironmentOrder", Json::array())) {
    order.emplace_back(o.value("order", 0), o.value("computeEnvironment", ""));
  }
  std::sort(order.begin(), order.end());
  for (auto& [_, arn] : order) spec.compute_environment_arns.push_back(arn);
  spec.type = doc.value("jobQueueType", "ECS");
  order.clear();
  for (const Json& o : doc.value("serviceEnvironmentOrder", Json::array()))
    order.emplace_back(o.value("order", 0), o.value("serviceEnvironment", ""));
  std::sort(order.begin(), order.end());
  for (auto& [_, arn] : order) spec.service_environment_arns.push_back(arn);
  return spec;
}

Result<JobQueueSpec> ControlPlane::FindJobQueue(const std::string& name_or_arn) const {
  ASSIGN_OR_RETURN(std::string name, NameFromReference(name_or_arn, "job-queue", "jobQueue"));
  std::lock_guard<std::mutex> lock(mu_);
  auto it = job_queues_.find(name);
  if (it == job_queues_.end()) {
    return Status::NotFound("job queue " + name_or_arn +
                            " does not exist; create it with CreateJobQueue");
  }
  return QueueSpecLocked(it->second);
}

Result<ComputeEnvironmentSpec> ControlPlane::FindComputeEnvironment(
    const std::string& name_or_arn) const {
  ASSIGN_OR_RETURN(std::string name,
                   NameFromReference(name_or_arn, "compute-environment", "computeEnvironment"));
  std::lock_guard<std::mutex> lock(mu_);
  auto it = compute_environments_.find(name);
  if (it == compute_environments_.end()) {
    return Status::NotFound("compute environment " + name_or_arn +
                            " does not exist; create it with CreateComputeEnvironment");
  }
  return CeSpecLocked(it->second);
}

std::vector<ComputeEnvironmentSpec> ControlPlane::ComputeEnvironments() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<ComputeEnvironmentSpec> out;
  for (const auto& [_, doc] : compute_environments_) out.push_back(CeSpecLocked(doc));
  return out;
}

std::vector<JobQueueSpec> ControlPlane::JobQueues() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<JobQueueSpec> out;
  for (const auto& [_, doc] : job_queues_) out.push_back(QueueSpecLocked(doc));
  return out;
}

Result<Json> ControlPlane::FindJobDefinition(const std::string& reference) const {
  std::lock_guard<std::mutex> lock(mu_);
  ASSIGN_OR_RETURN(const Json* doc, FindJobDefinitionLocked(reference));
  return WithTags(*doc, doc->value("jobDefinitionArn", ""));
}

}  // namespace lote::control
