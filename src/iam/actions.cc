#include "iam/actions.h"

#include <set>

namespace lote::iam {

namespace {

std::string Str(const Json& request, const char* key) {
  auto it = request.find(key);
  return it != request.end() && it->is_string() ? it->get<std::string>() : "";
}

std::vector<std::string> Strings(const Json& request, const char* key) {
  std::vector<std::string> out;
  auto it = request.find(key);
  if (it == request.end() || !it->is_array()) return out;
  for (const Json& v : *it)
    if (v.is_string()) out.push_back(v.get<std::string>());
  return out;
}

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

std::string Arn(const ArnScope& scope, std::string_view service, const std::string& rest) {
  return "arn:aws:" + std::string(service) + ":" + scope.region + ":" + scope.account_id + ":" +
         rest;
}

// A name-or-ARN member: the ARN as given, else one built from the name
// (empty name: "*", the request names nothing).
std::string NameOrArn(const ArnScope& scope, const std::string& value, const char* type) {
  if (value.empty()) return "*";
  if (StartsWith(value, "arn:")) return value;
  return Arn(scope, "batch", std::string(type) + "/" + value);
}

// Batch: the members that name each operation's resources.
std::vector<std::string> BatchResources(const std::string& op, const Json& r,
                                        const ArnScope& scope) {
  static const std::map<std::string, std::pair<const char*, const char*>> kNamed = {
      {"CreateComputeEnvironment", {"computeEnvironmentName", "compute-environment"}},
      {"UpdateComputeEnvironment", {"computeEnvironment", "compute-environment"}},
      {"DeleteComputeEnvironment", {"computeEnvironment", "compute-environment"}},
      {"CreateJobQueue", {"jobQueueName", "job-queue"}},
      {"UpdateJobQueue", {"jobQueue", "job-queue"}},
      {"DeleteJobQueue", {"jobQueue", "job-queue"}},
      {"GetJobQueueSnapshot", {"jobQueue", "job-queue"}},
      {"RegisterJobDefinition", {"jobDefinitionName", "job-definition"}},
      {"DeregisterJobDefinition", {"jobDefinition", "job-definition"}},
      {"CreateSchedulingPolicy", {"name", "scheduling-policy"}},
      {"UpdateSchedulingPolicy", {"arn", "scheduling-policy"}},
      {"DeleteSchedulingPolicy", {"arn", "scheduling-policy"}},
      {"CreateConsumableResource", {"consumableResourceName", "consumable-resource"}},
      {"DescribeConsumableResource", {"consumableResource", "consumable-resource"}},
      {"UpdateConsumableResource", {"consumableResource", "consumable-resource"}},
      {"DeleteConsumableResource", {"consumableResource", "consumable-resource"}},
      {"ListJobsByConsumableResource", {"consumableResource", "consumable-resource"}},
      {"CreateServiceEnvironment", {"serviceEnvironmentName", "service-environment"}},
      {"UpdateServiceEnvironment", {"serviceEnvironment", "service-environment"}},
      {"DeleteServiceEnvironment", {"serviceEnvironment", "service-environment"}},
  };
  if (auto it = kNamed.find(op); it != kNamed.end()) {
    return {NameOrArn(scope, Str(r, it->second.first), it->second.second)};
  }
  if (op == "CreateQuotaShare") {
    const std::string queue = NameOrArn(scope, Str(r, "jobQueue"), "job-queue");
    const std::string name = Str(r, "quotaShareName");
    return {queue == "*" || name.empty() ? "*" : queue + "/quota-share/" + name};
  }
  if (op == "DescribeQuotaShare" || op == "UpdateQuotaShare" || op == "DeleteQuotaShare") {
    const std::string arn = Str(r, "quotaShareArn");
    return {arn.empty() ? "*" : arn};
  }
  if (op == "ListQuotaShares") return {NameOrArn(scope, Str(r, "jobQueue"), "job-queue")};
  if (op == "SubmitJob") {
    return {NameOrArn(scope, Str(r, "jobQueue"), "job-queue"),
            NameOrArn(scope, Str(r, "jobDefinition"), "job-definition")};
  }
  if (IsJobControlOperation(op)) {
    const std::string id = Str(r, "jobId");
    return {id.empty() ? "*" : JobArn(scope, id)};
  }
  if (op == "TagResource" || op == "UntagResource" || op == "ListTagsForResource") {
    const std::string arn = Str(r, "resourceArn");
    return {arn.empty() ? "*" : arn};
  }
  return {"*"};
}

std::vector<std::string> LogsResources(const std::string& op, const Json& r,
                                       const ArnScope& scope) {
  std::string group = Str(r, "logGroupName");
  if (group.empty()) group = Str(r, "logGroupIdentifier");
  if (StartsWith(group, "arn:")) {
    // "arn:aws:logs:R:A:log-group:NAME[:*]" → NAME
    const size_t at = group.find(":log-group:");
    group = at == std::string::npos ? "" : group.substr(at + 11);
    if (group.size() >= 2 && group.compare(group.size() - 2, 2, ":*") == 0)
      group.resize(group.size() - 2);
  }
  if (group.empty()) return {"*"};
  const std::string group_arn = Arn(scope, "logs", "log-group:" + group);
  auto stream_arn = [&](const std::string& stream) { return group_arn + ":log-stream:" + stream; };
  static const std::set<std::string> kStreamOps = {"CreateLogStream", "DeleteLogStream",
                                                   "PutLogEvents", "GetLogEvents"};
  if (kStreamOps.count(op)) return {stream_arn(Str(r, "logStreamName"))};
  if (op == "FilterLogEvents") {
    std::vector<std::string> streams = Strings(r, "logStreamNames");
    if (streams.empty()) return {group_arn};
    std::vector<std::string> out;
    for (const std::string& s : streams) out.push_back(stream_arn(s));
    return out;
  }
  if (op == "DescribeLogGroups") return {"*"};
  return {group_arn};
}

std::vector<std::string> EcrResources(const Json& r, const ArnScope& scope) {
  auto repo = [&](const std::string& name) { return Arn(scope, "ecr", "repository/" + name); };
  if (const std::string name = Str(r, "repositoryName"); !name.empty()) return {repo(name)};
  std::vector<std::string> out;
  for (const std::string& name : Strings(r, "repositoryNames")) out.push_back(repo(name));
  if (out.empty()) out.push_back("*");
  return out;
}

std::vector<std::string> SsmResources(const Json& r, const ArnScope& scope) {
  auto param = [&](std::string name) {
    if (StartsWith(name, "arn:")) return name;
    if (StartsWith(name, "/")) name = name.substr(1);
    return Arn(scope, "ssm", "parameter/" + name);
  };
  std::vector<std::string> out;
  if (std::string name = Str(r, "Name"); !name.empty()) out.push_back(param(name));
  if (std::string path = Str(r, "Path"); !path.empty()) out.push_back(param(path));
  for (const std::string& name : Strings(r, "Names")) out.push_back(param(name));
  if (out.empty()) out.push_back("*");
  return out;
}

// "tags"/"Tags" as a map {k: v} (Batch, Logs) or a list [{Key, Value}] (ECR, SSM).
std::map<std::string, std::string> RequestTags(const Json& r) {
  std::map<std::string, std::string> tags;
  for (const char* member : {"tags", "Tags"}) {
    auto it = r.find(member);
    if (it == r.end()) continue;
    if (it->is_object()) {
      for (const auto& [k, v] : it->items())
        if (v.is_string()) tags[k] = v.get<std::string>();
    } else if (it->is_array()) {
      for (const Json& t : *it) {
        if (!t.is_object()) continue;
        const std::string k = t.contains("Key") ? Str(t, "Key") : Str(t, "key");
        if (!k.empty()) tags[k] = t.contains("Value") ? Str(t, "Value") : Str(t, "value");
      }
    }
  }
  return tags;
}

// S3: the IAM action of each operation and its bucket or object ARN
// (arn:aws:s3:::BUCKET[/KEY]); a copy reads its source and writes its
// destination. Only bucket creation and deletion count as changes for the
// audit (objects are data, as CloudTrail's management events see it).
// UploadPartCopy reads its source and writes its destination as CopyObject does.
RequiredAccess S3Access(const std::string& operation, const Json& r) {
  static const std::map<std::string, std::string, std::less<>> kActions = {
      {"ListBuckets", "ListAllMyBuckets"},
      {"CreateBucket", "CreateBucket"},
      {"DeleteBucket", "DeleteBucket"},
      {"HeadBucket", "ListBucket"},
      {"ListObjects", "ListBucket"},
      {"ListObjectsV2", "ListBucket"},
      {"GetBucketLocation", "GetBucketLocation"},
      {"GetBucketVersioning", "GetBucketVersioning"},
      {"ListMultipartUploads", "ListBucketMultipartUploads"},
      {"PutObject", "PutObject"},
      {"CreateMultipartUpload", "PutObject"},
      {"UploadPart", "PutObject"},
      {"CompleteMultipartUpload", "PutObject"},
      {"GetObject", "GetObject"},
      {"HeadObject", "GetObject"},
      {"DeleteObject", "DeleteObject"},
      {"AbortMultipartUpload", "AbortMultipartUpload"},
      {"ListParts", "ListMultipartUploadParts"},
  };
  RequiredAccess access;
  access.mutation = operation == "CreateBucket" || operation == "DeleteBucket";
  auto arn = [](const std::string& bucket, const std::string& key, bool object) {
    if (bucket.empty()) return std::string("*");
    return "arn:aws:s3:::" + bucket + (object ? "/" + key : "");
  };
  const std::string bucket = Str(r, "Bucket");
  const std::string key = Str(r, "Key");
  if (operation == "CopyObject" || operation == "UploadPartCopy") {
    access.permissions.push_back(
        {"s3:GetObject", arn(Str(r, "CopySourceBucket"), Str(r, "CopySourceKey"), true)});
    access.permissions.push_back({"s3:PutObject", arn(bucket, key, true)});
    return access;
  }
  auto it = kActions.find(operation);
  const std::string action = "s3:" + (it == kActions.end() ? operation : it->second);
  const bool object = r.contains("Key");
  access.permissions.push_back(
      {action, operation == "ListBuckets" ? std::string("*") : arn(bucket, key, object)});
  return access;
}

}  // namespace

std::string JobArn(const ArnScope& scope, const std::string& job_id) {
  return Arn(scope, "batch", "job/" + job_id);
}

bool IsJobControlOperation(std::string_view op) {
  return op == "CancelJob" || op == "TerminateJob" || op == "InjectFault" || op == "DumpJob";
}

bool IsReadOperation(std::string_view op) {
  for (std::string_view prefix :
       {"Describe", "List", "Get", "BatchGet", "BatchCheck", "Filter", "Lookup"}) {
    if (StartsWith(op, prefix)) return true;
  }
  return false;
}

RequiredAccess Access(std::string_view service, const std::string& operation, const Json& request,
                      const ArnScope& scope) {
  RequiredAccess access;
  access.mutation = !IsReadOperation(operation);
  if (service == "sts") {
    access.always_allowed = operation == "GetCallerIdentity";
    access.mutation = false;
    if (access.always_allowed) return access;
  }
  if (service == "s3") return S3Access(operation, request);
  if (service == "batch" && (operation == "DescribeJobs" || operation == "ListJobs")) {
    // Not refused as a whole: each job of the answer is shown only if the
    // principal may read it (MayReadJob, applied by the server).
    access.always_allowed = true;
    return access;
  }
  std::vector<std::string> resources;
  std::string action = std::string(service) + ":" + operation;
  if (service == "batch") {
    resources = BatchResources(operation, request, scope);
  } else if (service == "logs") {
    resources = LogsResources(operation, request, scope);
  } else if (service == "ecr") {
    resources = EcrResources(request, scope);
  } else if (service == "ssm") {
    resources = SsmResources(request, scope);
  } else if (service == "iam" && operation == "LookupEvents") {
    action = "cloudtrail:LookupEvents";
    resources = {"*"};
  } else if (service == "iam") {
    const std::string user = Str(request, "UserName");
    resources = {user.empty() ? "*" : "arn:aws:iam::" + scope.account_id + ":user/" + user};
  } else {
    resources = {"*"};  // EC2 and anything else: the action alone
  }
  for (std::string& resource : resources)
    access.permissions.push_back({action, std::move(resource)});
  access.request_tags = RequestTags(request);
  for (const auto& [k, _] : access.request_tags) access.tag_keys.push_back(k);
  for (const std::string& k : Strings(request, "tagKeys")) access.tag_keys.push_back(k);
  for (const std::string& k : Strings(request, "TagKeys")) access.tag_keys.push_back(k);
  return access;
}

}  // namespace lote::iam
