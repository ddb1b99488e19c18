// The EC2 resources Batch users' scripts create before their compute
// environment: placement groups and launch templates (with versions), and
// DescribeInstanceTypes from the instance catalog. Requests are the Query
// protocol's parameters as a JSON tree (api/query_protocol.h); answers use
// the EC2 model's XML locationNames. lote places no instances with them: a
// placement group and a launch template are records a compute environment
// names (docs/api.md, "EC2").
#include <algorithm>
#include <cctype>
#include <set>

#include "common/clock.h"
#include "common/crypto.h"
#include "control/control_plane.h"

namespace lote::control {

using store::ResourceKind;
using store::WriteBatch;

namespace {

constexpr size_t kMaxEc2Resources = 1000;

std::string NewEc2Id(const char* prefix) {
  return prefix + HexEncode(RandomBytes(9)).substr(0, 17);
}

// A Query parameter that is a string (absent: empty).
std::string Param(const Json& request, const char* name) {
  auto it = request.find(name);
  return it != request.end() && it->is_string() ? it->get<std::string>() : "";
}

// A Query list parameter ("GroupName.1", "GroupName.2" → its values).
std::vector<std::string> ParamList(const Json& request, const char* name) {
  std::vector<std::string> out;
  auto it = request.find(name);
  if (it == request.end()) return out;
  if (it->is_string()) out.push_back(it->get<std::string>());
  if (it->is_array())
    for (const Json& v : *it)
      if (v.is_string()) out.push_back(v.get<std::string>());
  return out;
}

// TagSpecification.N.{ResourceType, Tag.M.{Key, Value}} for `resource_type`
// → a tagSet ([{key, value}]).
Result<Json> TagSetFor(const Json& request, const std::string& resource_type) {
  Json tags = Json::array();
  auto specs = request.find("TagSpecification");
  if (specs == request.end()) return tags;
  if (!specs->is_array()) return Status::InvalidArgument("TagSpecification must be a list");
  for (const Json& spec : *specs) {
    if (!spec.is_object()) return Status::InvalidArgument("TagSpecification.N must have members");
    const std::string type = Param(spec, "ResourceType");
    if (type != resource_type) {
      return Status::InvalidArgument("TagSpecification ResourceType '" + type +
                                     "' does not fit this call; use '" + resource_type + "'");
    }
    for (const Json& tag : spec.value("Tag", Json::array())) {
      if (!tag.is_object() || Param(tag, "Key").empty())
        return Status::InvalidArgument("every TagSpecification.N.Tag.M needs a Key");
      tags.push_back(Json{{"key", Param(tag, "Key")}, {"value", Param(tag, "Value")}});
    }
  }
  return tags;
}

// Filter.N.{Name, Value.M}: true when `doc` passes every filter on the
// members named in `fields` (filter name → doc member); other filter names
// are an error.
Result<bool> PassesFilters(const Json& request, const Json& doc,
                           const std::map<std::string, std::string>& fields) {
  for (const Json& f : request.value("Filter", Json::array())) {
    const std::string name = Param(f, "Name");
    auto field = fields.find(name);
    if (field == fields.end()) {
      std::string known;
      for (const auto& [k, _] : fields) known += (known.empty() ? "" : ", ") + k;
      return Status::InvalidArgument("the filter '" + name +
                                     "' is not supported; lote filters on " + known);
    }
    const std::vector<std::string> values = ParamList(f, "Value");
    std::string have;
    if (doc.contains(field->second)) {
      const Json& v = doc[field->second];
      have = v.is_string() ? v.get<std::string>() : v.dump();
    }
    if (std::find(values.begin(), values.end(), have) == values.end()) return false;
  }
  return true;
}

Status ValidateLaunchTemplateName(const std::string& name) {
  if (name.size() < 3 || name.size() > 128)
    return Status::InvalidArgument("LaunchTemplateName must be 3 to 128 characters");
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) &&
        std::string("().-/_").find(c) == std::string::npos)
      return Status::InvalidArgument("LaunchTemplateName '" + name +
                                     "' may hold only letters, digits and ( ) . - / _");
  }
  return Status::Ok();
}

// A stored request form tree (LaunchTemplateData) as the answer's
// ResponseLaunchTemplateData: member names start lower case, a list "X"
// (sent as X.N) is answered as "xSet".
Json ResponseShape(const Json& form) {
  if (form.is_array()) {
    Json out = Json::array();
    for (const Json& item : form) out.push_back(ResponseShape(item));
    return out;
  }
  if (!form.is_object()) return form;
  Json out = Json::object();
  for (const auto& [name, value] : form.items()) {
    std::string lower = name;
    lower[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(lower[0])));
    if (value.is_array()) lower += "Set";
    out[lower] = ResponseShape(value);
  }
  return out;
}

}  // namespace

std::string ControlPlane::Ec2Arn(const std::string& resource) const {
  return "arn:aws:ec2:" + config_.region + ":" + config_.account_id + ":" + resource;
}

Result<Json> ControlPlane::CreatePlacementGroup(const Json& request) {
  const std::string name = Param(request, "GroupName");
  if (name.empty()) return Status::InvalidArgument("GroupName is required");
  if (name.size() > 255) return Status::InvalidArgument("GroupName is longer than 255 characters");
  const std::string strategy = Param(request, "Strategy");
  if (!strategy.empty())
    RETURN_IF_ERROR(ExpectEnum(strategy, "Strategy", {"cluster", "spread", "partition"}));
  ASSIGN_OR_RETURN(Json tags, TagSetFor(request, "placement-group"));
  Json doc = {{"groupName", name}, {"state", "available"}, {"tagSet", tags}};
  if (!strategy.empty()) doc["strategy"] = strategy;
  if (const std::string count = Param(request, "PartitionCount"); !count.empty()) {
    if (strategy != "partition")
      return Status::InvalidArgument("PartitionCount applies only to Strategy partition");
    doc["partitionCount"] = std::atoi(count.c_str());
  }
  std::unique_lock<std::mutex> lock(mu_);
  if (placement_groups_.count(name))
    return Status::AlreadyExists("the placement group '" + name + "' already exists");
  if (placement_groups_.size() >= kMaxEc2Resources)
    return Status::ResourceExhausted("this server holds at most 1000 placement groups");
  const std::string id = NewEc2Id("pg-");
  doc["groupId"] = id;
  doc["groupArn"] = Ec2Arn("placement-group/" + name);
  WriteBatch batch;
  PutResource(&batch, ResourceKind::kPlacementGroup, doc, doc["groupArn"], name, 0);
  placement_groups_[name] = doc;
  RETURN_IF_ERROR(CommitLocked(lock, std::move(batch)));
  return Json{{"placementGroup", doc}};
}

Result<Json> ControlPlane::DescribePlacementGroups(const Json& request) const {
  const std::vector<std::string> names = ParamList(request, "GroupName");
  const std::vector<std::string> ids = ParamList(request, "GroupId");
  std::lock_guard<std::mutex> lock(mu_);
  Json out = Json::array();
  for (const std::string& name : names) {
    if (!placement_groups_.count(name))
      return Status::NotFound("The specified placement group " + name + " does not exist.");
  }
  std::set<std::string> ids_seen;
  for (const auto& [name, doc] : placement_groups_) {
    if (!names.empty() && std::find(names.begin(), names.end(), name) == names.end()) continue;
    if (!ids.empty() && std::find(ids.begin(), ids.end(), doc.value("groupId", "")) == ids.end())
      continue;
    ASSIGN_OR_RETURN(bool pass, PassesFilters(request, doc,
                                              {{"group-name", "groupName"},
                                               {"group-id", "groupId"},
                                               {"strategy", "strategy"},
                                               {"state", "state"}}));
    if (!pass) continue;
    ids_seen.insert(doc.value("groupId", ""));
    out.push_back(doc);
  }
  for (const std::string& id : ids) {
    if (!ids_seen.count(id))
      return Status::NotFound("The specified placement group " + id + " does not exist.");
  }
  return Json{{"placementGroupSet", out}};
}

Result<Json> ControlPlane::DeletePlacementGroup(const Json& request) {
  const std::string name = Param(request, "GroupName");
  if (name.empty()) return Status::InvalidArgument("GroupName is required");
  std::unique_lock<std::mutex> lock(mu_);
  auto it = placement_groups_.find(name);
  if (it == placement_groups_.end())
    return Status::NotFound("The specified placement group " + name + " does not exist.");
  for (const auto& [ce, doc] : compute_environments_) {
    if (doc.value("computeResources", Json::object()).value("placementGroup", "") == name)
      return Status::FailedPrecondition("the placement group " + name +
                                        " is in use by compute environment " + ce +
                                        "; delete the compute environment first");
  }
  WriteBatch batch;
  batch.DeleteResource(ResourceKind::kPlacementGroup, it->second["groupArn"]);
  placement_groups_.erase(it);
  RETURN_IF_ERROR(CommitLocked(lock, std::move(batch)));
  return Json{{"return", true}};
}

Result<Json*> ControlPlane::FindLaunchTemplateLocked(const Json& request) {
  const std::string id = Param(request, "LaunchTemplateId");
  const std::string name = Param(request, "LaunchTemplateName");
  if (id.empty() == name.empty())
    return Status::InvalidArgument("give one of LaunchTemplateId and LaunchTemplateName");
  for (auto& [n, doc] : launch_templates_) {
    if ((!name.empty() && n == name) || (!id.empty() && doc.value("launchTemplateId", "") == id))
      return &doc;
  }
  return Status::NotFound(name.empty() ? "The launch template ID '" + id + "' does not exist"
                                       : "The specified launch template, with template name " +
                                             name + ", does not exist.");
}

Json ControlPlane::LaunchTemplateSummary(const Json& doc) {
  Json out = doc;
  out.erase("versions");
  return out;
}

Json ControlPlane::LaunchTemplateVersionJson(const Json& doc, const Json& version) {
  return Json{{"launchTemplateId", doc["launchTemplateId"]},
              {"launchTemplateName", doc["launchTemplateName"]},
              {"versionNumber", version["versionNumber"]},
              {"versionDescription", version.value("versionDescription", "")},
              {"createTime", version["createTime"]},
              {"createdBy", doc["createdBy"]},
              {"defaultVersion", version["versionNumber"] == doc["defaultVersionNumber"]},
              {"launchTemplateData", ResponseShape(version["data"])}};
}

Result<Json> ControlPlane::CreateLaunchTemplate(const Json& request) {
  const std::string name = Param(request, "LaunchTemplateName");
  RETURN_IF_ERROR(ValidateLaunchTemplateName(name));
  auto data = request.find("LaunchTemplateData");
  if (data == request.end() || !data->is_object())
    return Status::InvalidArgument(
        "LaunchTemplateData is required (LaunchTemplateData.ImageId, ...)");
  ASSIGN_OR_RETURN(Json tags, TagSetFor(request, "launch-template"));
  const int64_t now = clock_->NowMillis();
  std::unique_lock<std::mutex> lock(mu_);
  if (launch_templates_.count(name))
    return Status::AlreadyExists("Launch template name already in use.");
  if (launch_templates_.size() >= kMaxEc2Resources)
    return Status::ResourceExhausted("this server holds at most 1000 launch templates");
  const std::string id = NewEc2Id("lt-");
  Json version = {{"versionNumber", 1},
                  {"versionDescription", Param(request, "VersionDescription")},
                  {"createTime", Iso8601Utc(now)},
                  {"data", *data}};
  Json doc = {{"launchTemplateId", id},
              {"launchTemplateName", name},
              {"createTime", Iso8601Utc(now)},
              {"createdBy", "arn:aws:iam::" + config_.account_id + ":root"},
              {"defaultVersionNumber", 1},
              {"latestVersionNumber", 1},
              {"tagSet", tags},
              {"versions", Json::array({version})}};
  WriteBatch batch;
  PutResource(&batch, ResourceKind::kLaunchTemplate, doc, Ec2Arn("launch-template/" + id), name, 0);
  launch_templates_[name] = doc;
  RETURN_IF_ERROR(CommitLocked(lock, std::move(batch)));
  return Json{{"launchTemplate", LaunchTemplateSummary(doc)}};
}

Result<Json> ControlPlane::CreateLaunchTemplateVersion(const Json& request) {
  auto data = request.find("LaunchTemplateData");
  if (data == request.end() || !data->is_object())
    return Status::InvalidArgument("LaunchTemplateData is required");
  const int64_t now = clock_->NowMillis();
  std::unique_lock<std::mutex> lock(mu_);
  ASSIGN_OR_RETURN(Json * found, FindLaunchTemplateLocked(request));
  Json doc = *found;
  Json merged = *data;
  if (const std::string source = Param(request, "SourceVersion"); !source.empty()) {
    // The new version is the source's data with the given members replaced.
    ASSIGN_OR_RETURN(std::vector<int64_t> numbers, ResolveVersionsLocked(doc, {source}));
    for (const Json& v : doc["versions"]) {
      if (v["versionNumber"].get<int64_t>() != numbers.front()) continue;
      merged = v["data"];
      for (const auto& [k, value] : data->items()) merged[k] = value;
    }
  }
  const int64_t number = doc["latestVersionNumber"].get<int64_t>() + 1;
  Json version = {{"versionNumber", number},
                  {"versionDescription", Param(request, "VersionDescription")},
                  {"createTime", Iso8601Utc(now)},
                  {"data", merged}};
  doc["versions"].push_back(version);
  doc["latestVersionNumber"] = number;
  WriteBatch batch;
  PutResource(&batch, ResourceKind::kLaunchTemplate, doc,
              Ec2Arn("launch-template/" + doc["launchTemplateId"].get<std::string>()),
              doc["launchTemplateName"], 0);
  *found = doc;
  RETURN_IF_ERROR(CommitLocked(lock, std::move(batch)));
  return Json{{"launchTemplateVersion", LaunchTemplateVersionJson(doc, version)}};
}

Result<std::vector<int64_t>> ControlPlane::ResolveVersionsLocked(
    const Json& doc, const std::vector<std::string>& wanted) const {
  std::vector<int64_t> out;
  for (const std::string& w : wanted) {
    int64_t number = 0;
    if (w == "$Latest") {
      number = doc["latestVersionNumber"];
    } else if (w == "$Default") {
      number = doc["defaultVersionNumber"];
    } else {
      char* end = nullptr;
      number = std::strtoll(w.c_str(), &end, 10);
      if (w.empty() || *end != '\0' || number < 1)
        return Status::InvalidArgument("the version '" + w +
                                       "' is not a number, $Latest or $Default");
    }
    bool exists = false;
    for (const Json& v : doc["versions"]) exists |= v["versionNumber"].get<int64_t>() == number;
    if (!exists)
      return Status::NotFound("Could not find launch template version " + w + " of " +
                              doc["launchTemplateName"].get<std::string>());
    out.push_back(number);
  }
  return out;
}

Result<Json> ControlPlane::DescribeLaunchTemplates(const Json& request) const {
  const std::vector<std::string> ids = ParamList(request, "LaunchTemplateId");
  const std::vector<std::string> names = ParamList(request, "LaunchTemplateName");
  std::lock_guard<std::mutex> lock(mu_);
  for (const std::string& name : names) {
    if (!launch_templates_.count(name))
      return Status::NotFound(
          "At least one of the launch templates specified in the request does "
          "not exist: " +
          name);
  }
  Json out = Json::array();
  size_t ids_found = 0;
  for (const auto& [name, doc] : launch_templates_) {
    const bool by_id =
        std::find(ids.begin(), ids.end(), doc.value("launchTemplateId", "")) != ids.end();
    const bool by_name = std::find(names.begin(), names.end(), name) != names.end();
    if ((!ids.empty() || !names.empty()) && !by_id && !by_name) continue;
    ids_found += by_id ? 1 : 0;
    ASSIGN_OR_RETURN(bool pass,
                     PassesFilters(request, doc, {{"launch-template-name", "launchTemplateName"}}));
    if (pass) out.push_back(LaunchTemplateSummary(doc));
  }
  if (ids_found < ids.size())
    return Status::NotFound(
        "At least one of the launch template IDs in the request does not exist");
  return Json{{"launchTemplates", out}};
}

Result<Json> ControlPlane::DescribeLaunchTemplateVersions(const Json& request) {
  std::vector<std::string> wanted = ParamList(request, "LaunchTemplateVersion");
  std::lock_guard<std::mutex> lock(mu_);
  ASSIGN_OR_RETURN(Json * found, FindLaunchTemplateLocked(request));
  const Json& doc = *found;
  std::vector<int64_t> numbers;
  if (wanted.empty()) {
    for (const Json& v : doc["versions"]) numbers.push_back(v["versionNumber"]);
  } else {
    ASSIGN_OR_RETURN(numbers, ResolveVersionsLocked(doc, wanted));
  }
  const std::string min = Param(request, "MinVersion"), max = Param(request, "MaxVersion");
  Json out = Json::array();
  for (const Json& v : doc["versions"]) {
    const int64_t n = v["versionNumber"];
    if (std::find(numbers.begin(), numbers.end(), n) == numbers.end()) continue;
    if (!min.empty() && n < std::atoll(min.c_str())) continue;
    if (!max.empty() && n > std::atoll(max.c_str())) continue;
    out.push_back(LaunchTemplateVersionJson(doc, v));
  }
  return Json{{"launchTemplateVersionSet", out}};
}

Result<Json> ControlPlane::DeleteLaunchTemplate(const Json& request) {
  std::unique_lock<std::mutex> lock(mu_);
  ASSIGN_OR_RETURN(Json * found, FindLaunchTemplateLocked(request));
  const Json summary = LaunchTemplateSummary(*found);
  const std::string name = summary["launchTemplateName"];
  WriteBatch batch;
  batch.DeleteResource(ResourceKind::kLaunchTemplate,
                       Ec2Arn("launch-template/" + summary["launchTemplateId"].get<std::string>()));
  launch_templates_.erase(name);
  RETURN_IF_ERROR(CommitLocked(lock, std::move(batch)));
  return Json{{"launchTemplate", summary}};
}

Status ControlPlane::CheckEc2ReferencesLocked(const Json& compute_resources) {
  if (const std::string group = Param(compute_resources, "placementGroup");
      !group.empty() && !placement_groups_.count(group)) {
    return Status::InvalidArgument("computeResources.placementGroup '" + group +
                                   "' does not exist; create it with CreatePlacementGroup first");
  }
  auto lt = compute_resources.find("launchTemplate");
  if (lt == compute_resources.end() || !lt->is_object()) return Status::Ok();
  const std::string id = Param(*lt, "launchTemplateId");
  const std::string name = Param(*lt, "launchTemplateName");
  if (id.empty() == name.empty()) {
    return Status::InvalidArgument(
        "computeResources.launchTemplate needs exactly one of launchTemplateName and "
        "launchTemplateId");
  }
  Json lookup = id.empty() ? Json{{"LaunchTemplateName", name}} : Json{{"LaunchTemplateId", id}};
  Result<Json*> found = FindLaunchTemplateLocked(lookup);
  if (!found.ok()) {
    return Status::InvalidArgument(
        "computeResources.launchTemplate " +
        (id.empty() ? "launchTemplateName '" + name : "launchTemplateId '" + id) +
        "' does not exist; create it with CreateLaunchTemplate first");
  }
  if (lt->contains("version") && !(*lt)["version"].is_string())
    return Status::InvalidArgument("computeResources.launchTemplate.version must be a string");
  const std::string version = lt->value("version", "$Default");
  Result<std::vector<int64_t>> numbers = ResolveVersionsLocked(**found, {version});
  if (!numbers.ok()) {
    return Status::InvalidArgument("computeResources.launchTemplate.version: " +
                                   numbers.status().message());
  }
  return Status::Ok();
}

Result<Json> ControlPlane::DescribeInstanceTypes(const Json& request) const {
  std::vector<std::string> names = ParamList(request, "InstanceType");
  if (names.empty()) names = catalog_.Names();
  Json out = Json::array();
  for (const std::string& name : names) {
    ASSIGN_OR_RETURN(InstanceType t, catalog_.Lookup(name));
    Json info = {{"instanceType", t.name},
                 {"currentGeneration", true},
                 {"vCpuInfo", {{"defaultVCpus", t.vcpus}}},
                 {"memoryInfo", {{"sizeInMiB", t.memory_mib}}},
                 {"supportedUsageClasses", Json::array({"on-demand", "spot"})},
                 {"placementGroupInfo",
                  {{"supportedStrategies", Json::array({"cluster", "partition", "spread"})}}}};
    const Json devices = Json::array({{{"name", t.accelerator_kind}, {"count", t.accelerators}}});
    const bool neuron = t.accelerator_kind.find("Trainium") != std::string::npos ||
                        t.accelerator_kind.find("Inferentia") != std::string::npos;
    if (t.accelerators > 0 && neuron) info["neuronInfo"] = {{"neuronDevices", devices}};
    if (t.accelerators > 0 && !neuron) info["gpuInfo"] = {{"gpus", devices}};
    out.push_back(std::move(info));
  }
  return Json{{"instanceTypeSet", out}};
}

}  // namespace lote::control
