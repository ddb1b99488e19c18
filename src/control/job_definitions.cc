// RegisterJobDefinition, DescribeJobDefinitions, DeregisterJobDefinition.
#include <cstdio>
#include <set>

#include "common/ids.h"
#include "control/consumables.h"
#include "control/control_plane.h"
#include "control/job_model.h"
#include "control/job_submit.h"
#include "control/node_ranges.h"

namespace lote::control {

using store::ResourceKind;
using store::WriteBatch;

namespace {

// "name\x01<revision, zero padded>": sorts like (name, revision).
std::string JobDefinitionKey(const std::string& name, int64_t revision) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "%010lld", static_cast<long long>(revision));
  return name + '\x01' + buf;
}

Status ValidateStringPairs(const Json& list, const std::string& path) {
  if (!list.is_array()) return Status::InvalidArgument(path + " must be a list");
  for (const Json& e : list) {
    RETURN_IF_ERROR(ExpectObject(e, path + "[]"));
    ASSIGN_OR_RETURN(std::string n, ReqString(e, "name", path + "[].name"));
    ASSIGN_OR_RETURN(std::optional<std::string> v, OptString(e, "value", path + "[].value"));
    (void)v;
    if (path.ends_with("environment") && n.rfind("AWS_BATCH", 0) == 0) {
      return Status::InvalidArgument(path + " sets " + n +
                                     "; variables starting with AWS_BATCH are reserved for the "
                                     "service, rename it");
    }
  }
  return Status::Ok();
}

}  // namespace

Result<Json> ControlPlane::ValidateContainerProperties(const Json& props,
                                                       const std::string& path) const {
  RETURN_IF_ERROR(ExpectObject(props, path));
  ASSIGN_OR_RETURN(std::string image, ReqString(props, "image", path + ".image"));
  if (image.empty()) {
    return Status::InvalidArgument(path +
                                   ".image is empty; name the container image (lote's "
                                   "local backend runs the command on the host, any "
                                   "name works)");
  }
  ASSIGN_OR_RETURN(std::optional<int64_t> vcpus,
                   OptInt(props, "vcpus", path + ".vcpus", 1, 1 << 20));
  ASSIGN_OR_RETURN(std::optional<int64_t> memory,
                   OptInt(props, "memory", path + ".memory", 4, kMaxResourceValue));
  (void)vcpus;
  (void)memory;
  ASSIGN_OR_RETURN(std::optional<std::vector<std::string>> command,
                   OptStringList(props, "command", path + ".command", 4096));
  (void)command;
  ASSIGN_OR_RETURN(std::optional<std::string> user, OptString(props, "user", path + ".user"));
  (void)user;
  ASSIGN_OR_RETURN(std::optional<bool> privileged,
                   OptBool(props, "privileged", path + ".privileged"));
  (void)privileged;
  ASSIGN_OR_RETURN(std::optional<std::string> itype,
                   OptString(props, "instanceType", path + ".instanceType"));
  if (itype) {
    Result<InstanceType> t = catalog_.Lookup(*itype);
    if (!t.ok()) return Status::InvalidArgument(path + ".instanceType: " + t.status().message());
  }
  if (props.contains("environment")) {
    RETURN_IF_ERROR(ValidateStringPairs(props["environment"], path + ".environment"));
  }
  if (props.contains("resourceRequirements")) {
    const Json& rr = props["resourceRequirements"];
    if (!rr.is_array())
      return Status::InvalidArgument(path + ".resourceRequirements must be a list");
    for (const Json& r : rr) {
      RETURN_IF_ERROR(ExpectObject(r, path + ".resourceRequirements[]"));
      ASSIGN_OR_RETURN(std::string type,
                       ReqString(r, "type", path + ".resourceRequirements[].type"));
      RETURN_IF_ERROR(
          ExpectEnum(type, path + ".resourceRequirements[].type", {"GPU", "VCPU", "MEMORY"}));
      ASSIGN_OR_RETURN(std::string value,
                       ReqString(r, "value", path + ".resourceRequirements[].value"));
      RETURN_IF_ERROR(ValidateResourceValue(type, value, path + ".resourceRequirements"));
    }
  }
  if (props.contains("ulimits")) {
    const Json& ul = props["ulimits"];
    if (!ul.is_array()) return Status::InvalidArgument(path + ".ulimits must be a list");
    for (const Json& u : ul) {
      RETURN_IF_ERROR(ExpectObject(u, path + ".ulimits[]"));
      ASSIGN_OR_RETURN(std::string n, ReqString(u, "name", path + ".ulimits[].name"));
      ASSIGN_OR_RETURN(int64_t soft, ReqInt(u, "softLimit", path + ".ulimits[].softLimit", -1,
                                            std::numeric_limits<int64_t>::max()));
      ASSIGN_OR_RETURN(int64_t hard, ReqInt(u, "hardLimit", path + ".ulimits[].hardLimit", -1,
                                            std::numeric_limits<int64_t>::max()));
      (void)n;
      (void)soft;
      (void)hard;
    }
  }
  if (props.contains("linuxParameters")) {
    const Json& lp = props["linuxParameters"];
    RETURN_IF_ERROR(ExpectObject(lp, path + ".linuxParameters"));
    if (lp.contains("devices")) {
      if (!lp["devices"].is_array()) {
        return Status::InvalidArgument(path + ".linuxParameters.devices must be a list");
      }
      for (const Json& d : lp["devices"]) {
        RETURN_IF_ERROR(ExpectObject(d, path + ".linuxParameters.devices[]"));
        ASSIGN_OR_RETURN(std::string host_path,
                         ReqString(d, "hostPath", path + ".linuxParameters.devices[].hostPath"));
        (void)host_path;
        ASSIGN_OR_RETURN(
            std::optional<std::vector<std::string>> perms,
            OptStringList(d, "permissions", path + ".linuxParameters.devices[].permissions", 3));
        for (const std::string& p : perms.value_or(std::vector<std::string>{})) {
          RETURN_IF_ERROR(ExpectEnum(p, path + ".linuxParameters.devices[].permissions",
                                     {"READ", "WRITE", "MKNOD"}));
        }
      }
    }
  }
  for (const char* list_field : {"volumes", "mountPoints", "secrets"}) {
    if (props.contains(list_field) && !props[list_field].is_array()) {
      return Status::InvalidArgument(path + "." + list_field + " must be a list");
    }
  }
  for (const Json& s : props.value("secrets", Json::array())) {
    if (!s.is_object() || !s.value("name", Json()).is_string() ||
        !s.value("valueFrom", Json()).is_string())
      return Status::InvalidArgument(path + ".secrets[] needs name and valueFrom (strings)");
    if (s["valueFrom"].get<std::string>().rfind("arn:aws:secretsmanager:", 0) == 0)
      return Status::InvalidArgument(
          path + ".secrets[" + s["name"].get<std::string>() +
          "].valueFrom is a Secrets Manager ARN; lote serves no Secrets Manager: store the value "
          "as an SSM SecureString parameter and name it (or its ARN) in valueFrom");
  }
  return props;
}

Result<Json> ControlPlane::ValidateNodeProperties(const Json& props) const {
  RETURN_IF_ERROR(ExpectObject(props, "nodeProperties"));
  ASSIGN_OR_RETURN(int64_t num_nodes,
                   ReqInt(props, "numNodes", "nodeProperties.numNodes", 1, 1000));
  ASSIGN_OR_RETURN(int64_t main_node, ReqInt(props, "mainNode", "nodeProperties.mainNode", 0, 999));
  if (main_node >= num_nodes) {
    return Status::InvalidArgument("nodeProperties.mainNode (" + std::to_string(main_node) +
                                   ") must be less than numNodes (" + std::to_string(num_nodes) +
                                   "); node indexes start at 0");
  }
  if (!props.contains("nodeRangeProperties") || !props["nodeRangeProperties"].is_array() ||
      props["nodeRangeProperties"].empty()) {
    return Status::InvalidArgument(
        "nodeProperties.nodeRangeProperties is required: a list of {\"targetNodes\": \"0:\", "
        "\"container\": {...}}");
  }
  const Json& ranges = props["nodeRangeProperties"];
  if (ranges.size() > 5) {
    return Status::InvalidArgument("nodeProperties.nodeRangeProperties has " +
                                   std::to_string(ranges.size()) + " entries; at most 5");
  }
  std::vector<NodeIndexRange> parsed;
  for (size_t i = 0; i < ranges.size(); ++i) {
    const Json& r = ranges[i];
    const std::string path = "nodeProperties.nodeRangeProperties[" + std::to_string(i) + "]";
    RETURN_IF_ERROR(ExpectObject(r, path));
    ASSIGN_OR_RETURN(std::string target, ReqString(r, "targetNodes", path + ".targetNodes"));
    ASSIGN_OR_RETURN(NodeIndexRange range, ParseNodeRange(target, static_cast<int32_t>(num_nodes),
                                                          path + ".targetNodes"));
    parsed.push_back(range);
    if (!r.contains("container") || r["container"].is_null()) {
      return Status::InvalidArgument(path +
                                     ".container is required; give the container "
                                     "(image, command, vcpus, memory) for these nodes");
    }
    ASSIGN_OR_RETURN(Json c, ValidateContainerProperties(r["container"], path + ".container"));
    (void)c;
    ASSIGN_OR_RETURN(std::vector<ConsumableNeed> needs,
                     ParseConsumableProperties(r.value("consumableResourceProperties", Json()),
                                               path + ".consumableResourceProperties"));
    (void)needs;
    if (r.contains("eksProperties") || r.contains("ecsProperties")) {
      return Status::InvalidArgument(path +
                                     ": eksProperties/ecsProperties are not supported by "
                                     "lote; use container");
    }
  }
  RETURN_IF_ERROR(CheckNodeRangesCover(parsed, static_cast<int32_t>(num_nodes)));
  return props;
}

Result<Json> ControlPlane::RegisterJobDefinition(const Json& request) {
  RETURN_IF_ERROR(ExpectObject(request, "request body"));
  ASSIGN_OR_RETURN(std::string name, ReqString(request, "jobDefinitionName", "jobDefinitionName"));
  RETURN_IF_ERROR(ValidateName("jobDefinitionName", name));
  ASSIGN_OR_RETURN(std::string type, ReqString(request, "type", "type"));
  RETURN_IF_ERROR(ExpectEnum(type, "type", {"container", "multinode"}));
  if (request.contains("ecsProperties") && !request["ecsProperties"].is_null()) {
    return Status::InvalidArgument(
        "ecsProperties is not supported by lote; describe the job with "
        "containerProperties or nodeProperties");
  }
  const std::string dumped = request.dump();
  if (dumped.size() > kMaxJobDefinitionBytes) {
    return Status::InvalidArgument("the job definition is " + std::to_string(dumped.size()) +
                                   " bytes; AWS Batch limits it to 24 KiB (24576 bytes), move "
                                   "large values into files or parameters");
  }
  Json doc = {{"jobDefinitionName", name},
              {"type", type},
              {"status", "ACTIVE"},
              {"containerOrchestrationType", "ECS"}};
  const bool has_container =
      request.contains("containerProperties") && !request["containerProperties"].is_null();
  const bool has_nodes = request.contains("nodeProperties") && !request["nodeProperties"].is_null();
  const bool has_eks = request.contains("eksProperties") && !request["eksProperties"].is_null();
  if (has_eks) {
    // A single-container pod, run as that container's process (docs/jobs.md).
    if (type != "container" || has_container || has_nodes) {
      return Status::InvalidArgument(
          "eksProperties describes the whole job: use it with type container and without "
          "containerProperties or nodeProperties");
    }
    RETURN_IF_ERROR(ExpectObject(request["eksProperties"], "eksProperties"));
    Result<Json> container =
        EksPodContainer(request["eksProperties"].value("podProperties", Json()), Json(),
                        "eksProperties.podProperties");
    if (!container.ok()) return container.status();
    doc["eksProperties"] = request["eksProperties"];
    doc["containerOrchestrationType"] = "EKS";
  } else if (type == "container") {
    if (has_nodes) {
      return Status::InvalidArgument(
          "nodeProperties is only for type multinode; use containerProperties for type "
          "container, or set type to multinode");
    }
    if (!has_container) {
      return Status::InvalidArgument(
          "containerProperties is required for type container; give at least image, and usually "
          "command, vcpus and memory");
    }
    ASSIGN_OR_RETURN(
        Json c, ValidateContainerProperties(request["containerProperties"], "containerProperties"));
    doc["containerProperties"] = std::move(c);
  } else {
    if (has_container) {
      return Status::InvalidArgument(
          "containerProperties is not allowed for type multinode; put the container in "
          "nodeProperties.nodeRangeProperties[].container");
    }
    if (!has_nodes) {
      return Status::InvalidArgument(
          "nodeProperties is required for type multinode; give numNodes, mainNode and "
          "nodeRangeProperties");
    }
    ASSIGN_OR_RETURN(Json n, ValidateNodeProperties(request["nodeProperties"]));
    doc["nodeProperties"] = std::move(n);
  }
  Json params = Json::object();
  if (request.contains("parameters") && !request["parameters"].is_null()) {
    RETURN_IF_ERROR(ExpectObject(request["parameters"], "parameters"));
    for (auto it = request["parameters"].begin(); it != request["parameters"].end(); ++it) {
      if (!it.value().is_string()) {
        return Status::InvalidArgument("parameters." + it.key() + " must be a string");
      }
    }
    params = request["parameters"];
  }
  doc["parameters"] = params;
  ASSIGN_OR_RETURN(std::vector<ConsumableNeed> consumables,
                   ParseConsumableProperties(request.value("consumableResourceProperties", Json()),
                                             "consumableResourceProperties"));
  if (!consumables.empty())
    doc["consumableResourceProperties"] = ConsumablePropertiesJson(consumables);
  ASSIGN_OR_RETURN(std::optional<int64_t> sched_priority,
                   OptInt(request, "schedulingPriority", "schedulingPriority", 0, 9999));
  if (sched_priority) doc["schedulingPriority"] = *sched_priority;
  if (request.contains("retryStrategy") && !request["retryStrategy"].is_null()) {
    const Json& rs = request["retryStrategy"];
    RETURN_IF_ERROR(ExpectObject(rs, "retryStrategy"));
    ASSIGN_OR_RETURN(std::optional<int64_t> attempts,
                     OptInt(rs, "attempts", "retryStrategy.attempts", 1, 10));
    (void)attempts;
    if (rs.contains("evaluateOnExit")) {
      if (!rs["evaluateOnExit"].is_array() || rs["evaluateOnExit"].size() > 5) {
        return Status::InvalidArgument("retryStrategy.evaluateOnExit must be a list of at most 5");
      }
      for (const Json& e : rs["evaluateOnExit"]) {
        RETURN_IF_ERROR(ExpectObject(e, "retryStrategy.evaluateOnExit[]"));
        ASSIGN_OR_RETURN(std::string action,
                         ReqString(e, "action", "retryStrategy.evaluateOnExit[].action"));
        std::string upper;
        for (char ch : action)
          upper += static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
        RETURN_IF_ERROR(
            ExpectEnum(upper, "retryStrategy.evaluateOnExit[].action", {"RETRY", "EXIT"}));
        for (const char* f : {"onStatusReason", "onReason", "onExitCode"}) {
          ASSIGN_OR_RETURN(std::optional<std::string> pattern,
                           OptString(e, f, std::string("retryStrategy.evaluateOnExit[].") + f));
          if (pattern && pattern->size() > 512) {
            return Status::InvalidArgument(std::string("retryStrategy.evaluateOnExit[].") + f +
                                           " is longer than 512 characters");
          }
        }
      }
    }
    doc["retryStrategy"] = rs;
  }
  if (request.contains("timeout") && !request["timeout"].is_null()) {
    RETURN_IF_ERROR(ExpectObject(request["timeout"], "timeout"));
    ASSIGN_OR_RETURN(
        std::optional<int64_t> secs,
        OptInt(request["timeout"], "attemptDurationSeconds", "timeout.attemptDurationSeconds", 60,
               std::numeric_limits<int32_t>::max()));
    (void)secs;
    doc["timeout"] = request["timeout"];
  }
  ASSIGN_OR_RETURN(std::optional<bool> propagate,
                   OptBool(request, "propagateTags", "propagateTags"));
  if (propagate) doc["propagateTags"] = *propagate;
  ASSIGN_OR_RETURN(std::optional<std::vector<std::string>> caps,
                   OptStringList(request, "platformCapabilities", "platformCapabilities", 2));
  if (caps) {
    for (const std::string& c : *caps) {
      RETURN_IF_ERROR(ExpectEnum(c, "platformCapabilities", {"EC2", "FARGATE"}));
      if (c == "FARGATE") {
        // Fargate (AWS): single-node container jobs with Fargate's resource
        // pairs; lote runs them locally (networkConfiguration and
        // fargatePlatformConfiguration are recorded and returned as given).
        if (type != "container" || !doc.contains("containerProperties")) {
          return Status::InvalidArgument(
              "platformCapabilities FARGATE applies only to type container with "
              "containerProperties (multi-node parallel and EKS jobs are not Fargate jobs); "
              "remove it or describe the job with containerProperties");
        }
        Result<ContainerSpec> spec = ContainerFromJson(doc["containerProperties"]);
        if (!spec.ok()) {
          return Status::InvalidArgument("containerProperties: " + spec.status().message());
        }
        RETURN_IF_ERROR(ValidateFargateResources(*spec, "containerProperties"));
        const Json& cp = doc["containerProperties"];
        if (cp.contains("networkConfiguration")) {
          RETURN_IF_ERROR(
              ExpectObject(cp["networkConfiguration"], "containerProperties.networkConfiguration"));
          ASSIGN_OR_RETURN(std::optional<std::string> ip,
                           OptString(cp["networkConfiguration"], "assignPublicIp",
                                     "containerProperties.networkConfiguration.assignPublicIp"));
          if (ip) {
            RETURN_IF_ERROR(ExpectEnum(*ip,
                                       "containerProperties.networkConfiguration.assignPublicIp",
                                       {"ENABLED", "DISABLED"}));
          }
        }
        if (cp.contains("fargatePlatformConfiguration")) {
          RETURN_IF_ERROR(ExpectObject(cp["fargatePlatformConfiguration"],
                                       "containerProperties.fargatePlatformConfiguration"));
          ASSIGN_OR_RETURN(
              std::optional<std::string> version,
              OptString(cp["fargatePlatformConfiguration"], "platformVersion",
                        "containerProperties.fargatePlatformConfiguration.platformVersion"));
          (void)version;
        }
      }
    }
    doc["platformCapabilities"] = *caps;
  }
  ASSIGN_OR_RETURN(TagMap tags, ReadTags(request, "tags", "tags"));

  std::unique_lock<std::mutex> lock(mu_);
  int64_t revision = ++last_revision_[name];
  const std::string arn = MakeArn("job-definition/" + name + ":" + std::to_string(revision));
  doc["jobDefinitionArn"] = arn;
  doc["revision"] = revision;
  WriteBatch batch;
  PutResource(&batch, ResourceKind::kJobDefinition, doc, arn, name, revision);
  for (const auto& [k, v] : tags) batch.PutTag(arn, k, v);
  job_definitions_[name][revision] = std::move(doc);
  if (!tags.empty()) tags_[arn] = tags;
  RETURN_IF_ERROR(CommitLocked(lock, std::move(batch)));
  return Json{{"jobDefinitionName", name}, {"jobDefinitionArn", arn}, {"revision", revision}};
}

Result<const Json*> ControlPlane::FindJobDefinitionLocked(const std::string& reference) const {
  std::string name_rev = reference;
  if (reference.rfind("arn:", 0) == 0) {
    Result<Arn> arn = Arn::Parse(reference);
    if (!arn.ok() || arn->service != "batch" || arn->ResourceType() != "job-definition") {
      return Status::InvalidArgument(
          "'" + reference +
          "' is not a job definition ARN; expected arn:aws:batch:" + config_.region + ":" +
          config_.account_id + ":job-definition/<name>:<revision>, or name:revision");
    }
    if (arn->region != config_.region || arn->account != config_.account_id) {
      return Status::NotFound("job definition " + reference + " is in region " + arn->region +
                              ", account " + arn->account + "; this server is " + config_.region +
                              ", " + config_.account_id);
    }
    name_rev = arn->ResourceName();
  }
  std::string name = name_rev;
  std::optional<int64_t> revision;
  size_t colon = name_rev.find(':');
  if (colon != std::string::npos) {
    name = name_rev.substr(0, colon);
    std::string rev = name_rev.substr(colon + 1);
    char* end = nullptr;
    long long r = std::strtoll(rev.c_str(), &end, 10);
    if (rev.empty() || *end != '\0' || r < 1) {
      return Status::InvalidArgument("job definition reference '" + reference + "' has revision '" +
                                     rev + "'; use name:revision with a revision number >= 1");
    }
    revision = r;
  }
  RETURN_IF_ERROR(ValidateName("jobDefinition name", name));
  auto it = job_definitions_.find(name);
  if (it == job_definitions_.end()) {
    return Status::NotFound("job definition " + reference +
                            " does not exist; register it with RegisterJobDefinition");
  }
  if (revision) {
    auto r = it->second.find(*revision);
    if (r == it->second.end()) {
      return Status::NotFound("job definition " + name + " has no revision " +
                              std::to_string(*revision) + "; the latest is " +
                              std::to_string(it->second.rbegin()->first));
    }
    return &r->second;
  }
  for (auto r = it->second.rbegin(); r != it->second.rend(); ++r) {
    if (r->second.value("status", "") == "ACTIVE") return &r->second;
  }
  return Status::NotFound("job definition " + name +
                          " has no ACTIVE revision; register a new revision");
}

Result<Json> ControlPlane::DescribeJobDefinitions(const Json& request) {
  RETURN_IF_ERROR(ExpectObject(request, "request body"));
  ASSIGN_OR_RETURN(std::optional<std::vector<std::string>> wanted,
                   OptStringList(request, "jobDefinitions", "jobDefinitions", 100));
  if (wanted && wanted->empty()) wanted.reset();  // as DescribeByName: every definition
  ASSIGN_OR_RETURN(std::optional<std::string> by_name,
                   OptString(request, "jobDefinitionName", "jobDefinitionName"));
  ASSIGN_OR_RETURN(std::optional<std::string> status, OptString(request, "status", "status"));
  if (status) RETURN_IF_ERROR(ExpectEnum(*status, "status", {"ACTIVE", "INACTIVE"}));
  ASSIGN_OR_RETURN(std::optional<int64_t> max_results,
                   OptInt(request, "maxResults", "maxResults", 1, kMaxPageSize));
  ASSIGN_OR_RETURN(std::optional<std::string> token, OptString(request, "nextToken", "nextToken"));
  if (by_name) RETURN_IF_ERROR(ValidateName("jobDefinitionName", *by_name));

  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::pair<std::string, const Json*>> items;  // key → doc
  auto consider = [&](const Json& doc) {
    if (status && doc.value("status", "") != *status) return;
    items.emplace_back(JobDefinitionKey(doc["jobDefinitionName"], doc["revision"].get<int64_t>()),
                       &doc);
  };
  if (wanted) {
    for (const std::string& ref : *wanted) {
      bool plain_name = ref.rfind("arn:", 0) != 0 && ref.find(':') == std::string::npos;
      if (plain_name) {
        RETURN_IF_ERROR(ValidateName("jobDefinitions", ref));
        auto it = job_definitions_.find(ref);
        if (it != job_definitions_.end()) {
          for (const auto& [_, doc] : it->second) consider(doc);
        }
        continue;
      }
      Result<const Json*> doc = FindJobDefinitionLocked(ref);
      if (doc.ok()) {
        consider(**doc);
      } else if (doc.status().IsInvalidArgument()) {
        return doc.status();
      }
    }
    std::sort(items.begin(), items.end());
    items.erase(std::unique(items.begin(), items.end()), items.end());
  } else if (by_name) {
    auto it = job_definitions_.find(*by_name);
    if (it != job_definitions_.end()) {
      for (const auto& [_, doc] : it->second) consider(doc);
    }
  } else {
    for (const auto& [_, revisions] : job_definitions_) {
      for (const auto& [__, doc] : revisions) consider(doc);
    }
  }
  std::vector<std::string> keys;
  keys.reserve(items.size());
  for (const auto& [k, _] : items) keys.push_back(k);
  return Page(keys, token, max_results, "jobDefinitions", [&](size_t i) {
    return WithTags(*items[i].second, (*items[i].second)["jobDefinitionArn"]);
  });
}

Result<Json> ControlPlane::DeregisterJobDefinition(const Json& request) {
  RETURN_IF_ERROR(ExpectObject(request, "request body"));
  ASSIGN_OR_RETURN(std::string ref, ReqString(request, "jobDefinition", "jobDefinition"));
  // A bare name is resolved as SubmitJob resolves it: its latest ACTIVE
  // revision (the CLI's and boto3's own examples deregister by name alone).
  std::unique_lock<std::mutex> lock(mu_);
  ASSIGN_OR_RETURN(const Json* found, FindJobDefinitionLocked(ref));
  if (found->value("status", "") == "INACTIVE") return Json::object();
  Json doc = *found;
  doc["status"] = "INACTIVE";
  const std::string name = doc["jobDefinitionName"];
  const int64_t revision = doc["revision"];
  WriteBatch batch;
  PutResource(&batch, ResourceKind::kJobDefinition, doc, doc["jobDefinitionArn"], name, revision);
  job_definitions_[name][revision] = std::move(doc);
  RETURN_IF_ERROR(CommitLocked(lock, std::move(batch)));
  return Json::object();
}

}  // namespace lote::control
