#include "control/job_submit.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <utility>

#include "common/ids.h"
#include "control/node_ranges.h"

namespace lote::control {
namespace {

constexpr int32_t kMinArraySize = 2;
constexpr int32_t kMaxArraySize = 10000;
constexpr size_t kMaxDependencies = 20;
constexpr size_t kMaxEvaluateOnExit = 5;
constexpr size_t kMaxPatternLength = 512;
constexpr int32_t kMinTimeoutSeconds = 60;
constexpr size_t kMaxTags = 50;

Status Invalid(const std::string& message) { return Status::InvalidArgument(message); }

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

std::string Upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// Optional integer field: nullopt when absent or null.
Result<std::optional<int64_t>> OptionalInt(const Json& obj, const char* key,
                                           const std::string& field) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::optional<int64_t>();
  if (!it->is_number_integer()) return Invalid(field + " must be an integer");
  return std::optional<int64_t>(it->get<int64_t>());
}

Result<std::string> OptionalString(const Json& obj, const char* key, const std::string& field) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::string();
  if (!it->is_string()) return Invalid(field + " must be a string");
  return it->get<std::string>();
}

Result<std::map<std::string, std::string>> StringMap(const Json& obj, const char* key,
                                                     const std::string& field) {
  std::map<std::string, std::string> out;
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return out;
  if (!it->is_object()) return Invalid(field + " must be a map of string to string");
  for (auto e = it->begin(); e != it->end(); ++e) {
    if (!e.value().is_string()) {
      return Invalid(field + "." + e.key() + " must be a string (quote numbers and booleans)");
    }
    out[e.key()] = e.value().get<std::string>();
  }
  return out;
}

Status ValidateJobName(const std::string& name) {
  if (name.empty() || name.size() > 128) {
    return Invalid("jobName must be 1 to 128 characters long (got " + std::to_string(name.size()) +
                   ")");
  }
  if (!std::isalnum(static_cast<unsigned char>(name[0]))) {
    return Invalid("jobName '" + name + "' must start with a letter or digit");
  }
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') {
      return Invalid("jobName '" + name +
                     "' may contain only letters, digits, hyphens and underscores");
    }
  }
  return Status::Ok();
}

Status ValidateEnvironmentNames(const std::vector<EnvVar>& env, const std::string& field) {
  for (const EnvVar& e : env) {
    if (e.name.empty())
      return Invalid(field + ": an environment variable has an empty name; give it a name");
    if (StartsWith(e.name, "AWS_BATCH")) {
      return Invalid(
          field + ": environment variable " + e.name +
          " is reserved (names starting with AWS_BATCH are set by the service); rename it");
    }
  }
  return Status::Ok();
}

// Checks a container after overrides: resources present and well formed.
Status ValidateContainer(const ContainerSpec& c, const std::string& field,
                         const std::string& definition) {
  for (const ResourceRequirement& r : c.resource_requirements) {
    RETURN_IF_ERROR(ValidateResourceValue(r.type, r.value, field + ".resourceRequirements"));
  }
  if (c.MilliVcpu() <= 0) {
    return Invalid(
        field + ": no vCPUs for the job (job definition " + definition +
        "): set resourceRequirements [{\"type\": \"VCPU\", \"value\": \"1\"}] in the definition or "
        "in the overrides");
  }
  if (c.MemoryMib() < 4) {
    return Invalid(field + ": memory is " + std::to_string(c.MemoryMib()) +
                   " MiB (job definition " + definition +
                   "): give at least 4 MiB with resourceRequirements [{\"type\": \"MEMORY\", "
                   "\"value\": \"2048\"}]");
  }
  return ValidateEnvironmentNames(c.environment, field + ".environment");
}

// Applies a ContainerOverrides object to `base`.
Result<ContainerSpec> ApplyContainerOverrides(ContainerSpec c, const Json& overrides,
                                              const std::string& field,
                                              const std::string& definition) {
  if (overrides.is_null()) return c;
  if (!overrides.is_object()) return Invalid(field + " must be an object");
  for (auto it = overrides.begin(); it != overrides.end(); ++it) {
    const std::string& key = it.key();
    const Json& v = it.value();
    if (v.is_null()) continue;
    const std::string f = field + "." + key;
    if (key == "command") {
      if (!v.is_array()) return Invalid(f + " must be a list of strings");
      c.command.clear();
      for (const Json& a : v) {
        if (!a.is_string()) return Invalid(f + " must be a list of strings");
        c.command.push_back(a.get<std::string>());
      }
    } else if (key == "environment") {
      if (!v.is_array()) return Invalid(f + " must be a list of {\"name\", \"value\"}");
      for (const Json& e : v) {
        if (!e.is_object() || !e.value("name", Json()).is_string()) {
          return Invalid(f + ": every entry needs a string \"name\"");
        }
        Json value = e.value("value", Json(""));
        if (!value.is_string())
          return Invalid(f + ": the value of " + e["name"].get<std::string>() +
                         " must be a string");
        EnvVar var{e["name"].get<std::string>(), value.get<std::string>()};
        auto same = std::find_if(c.environment.begin(), c.environment.end(),
                                 [&](const EnvVar& x) { return x.name == var.name; });
        if (same != c.environment.end()) {
          same->value = var.value;
        } else {
          c.environment.push_back(std::move(var));
        }
      }
    } else if (key == "resourceRequirements") {
      if (!v.is_array()) return Invalid(f + " must be a list of {\"type\", \"value\"}");
      for (const Json& r : v) {
        if (!r.is_object() || !r.value("type", Json()).is_string() ||
            !r.value("value", Json()).is_string()) {
          return Invalid(f +
                         ": every entry needs string \"type\" (VCPU, MEMORY, GPU) and \"value\"");
        }
        ResourceRequirement req{r["type"].get<std::string>(), r["value"].get<std::string>()};
        auto same = std::find_if(c.resource_requirements.begin(), c.resource_requirements.end(),
                                 [&](const ResourceRequirement& x) { return x.type == req.type; });
        if (same != c.resource_requirements.end()) {
          same->value = req.value;
        } else {
          c.resource_requirements.push_back(std::move(req));
        }
      }
    } else if (key == "vcpus" || key == "memory") {
      if (!v.is_number_integer() || v.get<int64_t>() <= 0 || v.get<int64_t>() > kMaxResourceValue)
        return Invalid(f + " must be a positive integer of at most " +
                       std::to_string(kMaxResourceValue));
      const char* type = key == "vcpus" ? "VCPU" : "MEMORY";
      bool in_requirements =
          std::any_of(c.resource_requirements.begin(), c.resource_requirements.end(),
                      [&](const ResourceRequirement& r) { return r.type == type; });
      if (in_requirements) {
        return Invalid(f + " cannot override the " + type +
                       " resourceRequirement of job definition " + definition + ": use " + field +
                       ".resourceRequirements [{\"type\": \"" + type + "\", \"value\": \"" +
                       std::to_string(v.get<int64_t>()) + "\"}] instead");
      }
      (key == "vcpus" ? c.vcpus : c.memory) = v.get<int64_t>();
    } else if (key == "instanceType") {
      if (!v.is_string()) return Invalid(f + " must be a string");
      c.instance_type = v.get<std::string>();
    } else {
      return Invalid(
          f +
          " is not a ContainerOverrides field: use command, environment, resourceRequirements, "
          "vcpus, memory or instanceType");
    }
  }
  return c;
}

Result<ContainerSpec> ParseDefinitionContainer(const Json& json, const std::string& field) {
  Result<ContainerSpec> c = ContainerFromJson(json);
  if (!c.ok()) return Invalid(field + ": " + c.status().message());
  RETURN_IF_ERROR(ValidateEnvironmentNames(c->environment, field + ".environment"));
  return c;
}

bool PatternCharOk(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == ':' || c == ' ' ||
         c == '\t' || c == '_' || c == '-';
}

Status ValidatePattern(const std::string& pattern, bool digits_only, const std::string& field) {
  if (pattern.size() > kMaxPatternLength) {
    return Invalid(field + " is " + std::to_string(pattern.size()) +
                   " characters long: at most 512 are allowed");
  }
  for (size_t i = 0; i < pattern.size(); ++i) {
    char c = pattern[i];
    if (c == '*') {
      if (i + 1 != pattern.size()) {
        return Invalid(field + " '" + pattern +
                       "': '*' may only appear as the last character (a prefix match)");
      }
      continue;
    }
    if (digits_only ? !std::isdigit(static_cast<unsigned char>(c)) : !PatternCharOk(c)) {
      return Invalid(field + " '" + pattern + "': character '" + std::string(1, c) +
                     "' is not allowed (use " +
                     (digits_only ? "digits" : "letters, digits, '.', ':', '_', '-' and spaces") +
                     ", optionally ending with '*')");
    }
  }
  return Status::Ok();
}

Result<std::optional<int32_t>> ParseTimeout(const Json& json, const std::string& field) {
  if (json.is_null()) return std::optional<int32_t>();
  if (!json.is_object())
    return Invalid(field + " must be an object {\"attemptDurationSeconds\": N}");
  ASSIGN_OR_RETURN(std::optional<int64_t> seconds,
                   OptionalInt(json, "attemptDurationSeconds", field + ".attemptDurationSeconds"));
  if (!seconds) return std::optional<int32_t>();
  if (*seconds < kMinTimeoutSeconds || *seconds > INT32_MAX) {
    return Invalid(field + ".attemptDurationSeconds is " + std::to_string(*seconds) +
                   ": the minimum is 60 seconds");
  }
  return std::optional<int32_t>(static_cast<int32_t>(*seconds));
}

// "job definition X nodeProperties.nodeRangeProperties[i]", for messages.
std::string DefinitionRangeField(const std::string& dfield, size_t i) {
  return dfield + ".nodeRangeProperties[" + std::to_string(i) + "]";
}

struct RawNodeOverride {
  NodeIndexRange range;
  Json container_overrides;
  std::vector<std::string> instance_types;
  std::string field;
  // consumableResourcePropertiesOverride: replaces the nodes' list when set.
  std::optional<std::vector<ConsumableNeed>> consumables;
};

// Resolves the multi-node properties of the definition with nodeOverrides.
Result<NodeProperties> ResolveNodeProperties(const Json& def_np, const Json& node_overrides,
                                             const std::map<std::string, std::string>& parameters,
                                             const std::string& definition) {
  const std::string dfield = "job definition " + definition + " nodeProperties";
  if (!def_np.is_object())
    return Invalid(dfield + " is missing: register the definition with nodeProperties");
  ASSIGN_OR_RETURN(std::optional<int64_t> def_num,
                   OptionalInt(def_np, "numNodes", dfield + ".numNodes"));
  ASSIGN_OR_RETURN(std::optional<int64_t> main,
                   OptionalInt(def_np, "mainNode", dfield + ".mainNode"));
  if (!def_num || *def_num < 1) return Invalid(dfield + ".numNodes must be at least 1");
  if (!main || *main < 0) return Invalid(dfield + ".mainNode must be a node index (0 or more)");
  int64_t num_nodes = *def_num;

  const std::string ofield = "nodeOverrides";
  if (!node_overrides.is_null() && !node_overrides.is_object())
    return Invalid(ofield + " must be an object");
  const Json no = node_overrides.is_object() ? node_overrides : Json::object();
  ASSIGN_OR_RETURN(std::optional<int64_t> override_num,
                   OptionalInt(no, "numNodes", ofield + ".numNodes"));
  const Json def_ranges = def_np.value("nodeRangeProperties", Json::array());
  if (!def_ranges.is_array() || def_ranges.empty()) {
    return Invalid(dfield + ".nodeRangeProperties must list at least one node range");
  }
  if (override_num) {
    if (*override_num < 1) return Invalid(ofield + ".numNodes must be at least 1");
    if (*main >= *override_num) {
      return Invalid(ofield + ".numNodes is " + std::to_string(*override_num) +
                     " but the main node of job definition " + definition + " is node " +
                     std::to_string(*main) + ": numNodes must be greater than mainNode");
    }
    bool has_open = false;
    for (size_t i = 0; i < def_ranges.size(); ++i) {
      const Json& r = def_ranges[i];
      // A missing targetNodes is reported with the definition's ranges below.
      if (!r.is_object() || !r.value("targetNodes", Json()).is_string()) continue;
      ASSIGN_OR_RETURN(NodeRangeBounds bounds,
                       ParseNodeRangeBounds(r["targetNodes"].get<std::string>(),
                                            DefinitionRangeField(dfield, i) + ".targetNodes"));
      if (!bounds.last && bounds.first.value_or(0) < *override_num) has_open = true;
    }
    if (!has_open) {
      return Invalid(
          ofield +
          ".numNodes needs a node range with an open upper bound (such as \"0:\" or \"1:\") "
          "starting below " +
          std::to_string(*override_num) + " in job definition " + definition +
          ": register such a range or drop the numNodes override");
    }
    num_nodes = *override_num;
  }
  if (*main >= num_nodes) {
    return Invalid(dfield + ".mainNode " + std::to_string(*main) + " must be less than numNodes " +
                   std::to_string(num_nodes));
  }
  const int32_t n = static_cast<int32_t>(num_nodes);

  struct DefRange {
    NodeIndexRange range;
    ContainerSpec container;
    std::vector<std::string> instance_types;
    std::vector<ConsumableNeed> consumables;
  };
  std::vector<DefRange> ranges;
  for (size_t i = 0; i < def_ranges.size(); ++i) {
    const Json& r = def_ranges[i];
    const std::string rf = DefinitionRangeField(dfield, i);
    if (!r.is_object() || !r.value("targetNodes", Json()).is_string()) {
      return Invalid(rf + ".targetNodes is required (a range such as \"0:\" or \"1:3\")");
    }
    ASSIGN_OR_RETURN(NodeIndexRange range,
                     ParseNodeRange(r["targetNodes"].get<std::string>(), n, rf + ".targetNodes"));
    ASSIGN_OR_RETURN(ContainerSpec c, ParseDefinitionContainer(r.value("container", Json::object()),
                                                               rf + ".container"));
    std::vector<std::string> types;
    for (const Json& t : r.value("instanceTypes", Json::array())) {
      if (t.is_string()) types.push_back(t.get<std::string>());
    }
    Result<std::vector<ConsumableNeed>> needs = ParseConsumableProperties(
        r.value("consumableResourceProperties", Json()), rf + ".consumableResourceProperties");
    if (!needs.ok()) return Invalid(needs.status().message());
    ranges.push_back({range, std::move(c), std::move(types), std::move(*needs)});
  }

  std::vector<RawNodeOverride> overrides;
  const Json npo = no.value("nodePropertyOverrides", Json::array());
  if (!npo.is_array()) return Invalid(ofield + ".nodePropertyOverrides must be a list");
  for (size_t i = 0; i < npo.size(); ++i) {
    const Json& o = npo[i];
    const std::string f = ofield + ".nodePropertyOverrides[" + std::to_string(i) + "]";
    if (!o.is_object() || !o.value("targetNodes", Json()).is_string()) {
      return Invalid(f + ".targetNodes is required (a range such as \"0:\" or \"1:3\")");
    }
    for (auto it = o.begin(); it != o.end(); ++it) {
      if (it.key() != "targetNodes" && it.key() != "containerOverrides" &&
          it.key() != "instanceTypes" && it.key() != "consumableResourcePropertiesOverride" &&
          !it.value().is_null()) {
        return Invalid(f + "." + it.key() +
                       " is not supported by lote: use containerOverrides, instanceTypes or "
                       "consumableResourcePropertiesOverride");
      }
    }
    std::optional<std::vector<ConsumableNeed>> consumables;
    if (o.contains("consumableResourcePropertiesOverride") &&
        !o["consumableResourcePropertiesOverride"].is_null()) {
      Result<std::vector<ConsumableNeed>> needs = ParseConsumableProperties(
          o["consumableResourcePropertiesOverride"], f + ".consumableResourcePropertiesOverride");
      if (!needs.ok()) return Invalid(needs.status().message());
      consumables = std::move(*needs);
    }
    ASSIGN_OR_RETURN(NodeIndexRange range,
                     ParseNodeRange(o["targetNodes"].get<std::string>(), n, f + ".targetNodes"));
    std::vector<std::string> types;
    for (const Json& t : o.value("instanceTypes", Json::array())) {
      if (t.is_string()) types.push_back(t.get<std::string>());
    }
    overrides.push_back({range, o.value("containerOverrides", Json()), std::move(types),
                         f + ".containerOverrides", std::move(consumables)});
  }

  // Per node: the most specific definition range (ties: the later one), then the overrides in
  // order.
  struct PerNode {
    ContainerSpec container;
    std::vector<std::string> instance_types;
    std::vector<ConsumableNeed> consumables;
  };
  std::vector<PerNode> per_node;
  per_node.reserve(static_cast<size_t>(n));
  for (int32_t node = 0; node < n; ++node) {
    const DefRange* best = nullptr;
    for (const DefRange& r : ranges) {
      if (node < r.range.first || node > r.range.last) continue;
      if (best == nullptr || r.range.last - r.range.first <= best->range.last - best->range.first)
        best = &r;
    }
    if (best == nullptr) {
      return Invalid(dfield + ".nodeRangeProperties do not cover node " + std::to_string(node) +
                     " of " + std::to_string(n) + ": add a range such as \"0:\" that includes it");
    }
    ContainerSpec c = best->container;
    std::vector<std::string> types = best->instance_types;
    std::vector<ConsumableNeed> consumables = best->consumables;
    for (const RawNodeOverride& o : overrides) {
      if (node < o.range.first || node > o.range.last) continue;
      ASSIGN_OR_RETURN(
          c, ApplyContainerOverrides(std::move(c), o.container_overrides, o.field, definition));
      if (!o.instance_types.empty()) types = o.instance_types;
      if (o.consumables) consumables = *o.consumables;
    }
    c.command = SubstituteParameters(c.command, parameters);
    RETURN_IF_ERROR(
        ValidateContainer(c, "node " + std::to_string(node) + " container", definition));
    per_node.push_back(PerNode{std::move(c), std::move(types), std::move(consumables)});
  }

  NodeProperties np;
  np.num_nodes = n;
  np.main_node = static_cast<int32_t>(*main);
  for (int32_t node = 0; node < n; ++node) {
    PerNode& p = per_node[static_cast<size_t>(node)];
    if (!np.ranges.empty() && np.ranges.back().container == p.container &&
        np.ranges.back().instance_types == p.instance_types &&
        np.ranges.back().consumables == p.consumables) {
      np.ranges.back().end = node;
    } else {
      np.ranges.push_back({node, node, std::move(p.container), std::move(p.instance_types),
                           std::move(p.consumables)});
    }
  }
  return np;
}

std::string JobArn(const std::string& queue_arn, const std::string& id) {
  Result<Arn> q = Arn::Parse(queue_arn);
  Arn arn;
  if (q.ok()) {
    arn = *q;
  } else {
    arn.service = "batch";
  }
  arn.resource = "job/" + id;
  return arn.ToString();
}

// A Kubernetes quantity of cpu ("2", "500m", "0.5") as a VCPU value string.
Result<std::string> CpuQuantity(const std::string& q, const std::string& field) {
  std::string text = q;
  double scale = 1.0;
  if (!text.empty() && text.back() == 'm') {
    text.pop_back();
    scale = 0.001;
  }
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(v) || v <= 0 ||
      v * scale > static_cast<double>(kMaxResourceValue)) {
    return Invalid(field + " cpu '" + q + "' is not a Kubernetes cpu quantity (e.g. 2, 0.5, 500m)");
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3f", v * scale);
  std::string out = buf;
  while (out.back() == '0') out.pop_back();
  if (out.back() == '.') out.pop_back();
  return out;
}

// A Kubernetes quantity of memory ("2048Mi", "2Gi", "2G", "1000000") in MiB, rounded up.
Result<std::string> MemoryQuantity(const std::string& q, const std::string& field) {
  static const std::pair<const char*, double> kUnits[] = {
      {"Ki", 1024.0}, {"Mi", 1048576.0}, {"Gi", 1073741824.0}, {"Ti", 1099511627776.0},
      {"k", 1e3},     {"M", 1e6},        {"G", 1e9},           {"T", 1e12}};
  std::string text = q;
  double bytes_per = 1.0;
  for (const auto& [suffix, factor] : kUnits) {
    const std::string s = suffix;
    if (text.size() > s.size() && text.compare(text.size() - s.size(), s.size(), s) == 0) {
      text.resize(text.size() - s.size());
      bytes_per = factor;
      break;
    }
  }
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  const double mib = std::ceil(v * bytes_per / 1048576.0);
  if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(v) || v <= 0 ||
      mib > static_cast<double>(kMaxResourceValue)) {
    return Invalid(field + " memory '" + q +
                   "' is not a Kubernetes memory quantity (e.g. 2048Mi, 2Gi, 2G)");
  }
  return std::to_string(static_cast<int64_t>(mib));
}

}  // namespace

// The memory (MiB) lote reserves for an EKS pod container that requests none.
constexpr int64_t kEksBestEffortMib = 1024;

Result<Json> EksPodContainer(const Json& pod_properties, const Json& override,
                             const std::string& field) {
  if (!pod_properties.is_object()) return Invalid(field + " must be an object");
  const Json containers = pod_properties.value("containers", Json::array());
  if (!containers.is_array() || containers.empty()) {
    return Invalid(field + ".containers must list the pod's container");
  }
  if (containers.size() > 1) {
    return Invalid(field + ".containers lists " + std::to_string(containers.size()) +
                   " containers: lote runs single-container pods only (one process per node); "
                   "put the work in one container");
  }
  const Json init = pod_properties.value("initContainers", Json::array());
  if (!init.is_array() || !init.empty()) {
    return Invalid(field +
                   ".initContainers: lote runs single-container pods only; run the init step at "
                   "the start of the container's command");
  }
  Json pod = containers[0];
  if (!pod.is_object()) return Invalid(field + ".containers[0] must be an object");
  if (!override.is_null()) {
    if (!override.is_object())
      return Invalid("eksPropertiesOverride.podProperties must be an object");
    const Json oc = override.value("containers", Json::array());
    if (!oc.is_array() || oc.size() > 1) {
      return Invalid(
          "eksPropertiesOverride.podProperties.containers overrides the pod's single container: "
          "give at most one");
    }
    if (!oc.empty()) {
      if (!oc[0].is_object()) {
        return Invalid("eksPropertiesOverride.podProperties.containers[0] must be an object");
      }
      for (auto it = oc[0].begin(); it != oc[0].end(); ++it) {
        if (it.key() == "name" || it.value().is_null()) continue;
        if (it.key() == "env" && it.value().is_array()) {  // merged by name
          Json env = pod.value("env", Json::array());
          for (const Json& e : it.value()) {
            bool replaced = false;
            for (Json& have : env) {
              if (have.is_object() && e.is_object() &&
                  have.value("name", "") == e.value("name", "")) {
                have = e;
                replaced = true;
              }
            }
            if (!replaced) env.push_back(e);
          }
          pod["env"] = env;
        } else {
          pod[it.key()] = it.value();
        }
      }
    }
  }
  const std::string f = field + ".containers[0]";
  Json c = Json::object();
  if (!pod.contains("image") || !pod["image"].is_string() ||
      pod["image"].get<std::string>().empty())
    return Invalid(f + ".image is required: name the container image");
  c["image"] = pod["image"];
  Json command = Json::array();
  for (const char* key : {"command", "args"}) {
    const Json list = pod.value(key, Json::array());
    if (!list.is_array()) return Invalid(f + "." + key + " must be a list of strings");
    for (const Json& a : list) {
      if (!a.is_string()) return Invalid(f + "." + key + " must be a list of strings");
      command.push_back(a);
    }
  }
  c["command"] = command;
  Json env = Json::array();
  const Json pod_env = pod.value("env", Json::array());
  if (!pod_env.is_array()) return Invalid(f + ".env must be a list of {name, value}");
  for (const Json& e : pod_env) {
    if (!e.is_object() || !e.value("name", Json()).is_string() ||
        !e.value("value", Json("")).is_string()) {
      return Invalid(f + ".env: every entry needs a string name and value");
    }
    env.push_back({{"name", e["name"]}, {"value", e.value("value", "")}});
  }
  c["environment"] = env;
  const Json resources = pod.value("resources", Json::object());
  if (!resources.is_object()) return Invalid(f + ".resources must be an object");
  Json requirements = Json::array();
  for (const auto& [key, type] : std::vector<std::pair<std::string, std::string>>{
           {"cpu", "VCPU"}, {"memory", "MEMORY"}, {"nvidia.com/gpu", "GPU"}}) {
    std::string quantity;
    for (const char* kind : {"limits", "requests"}) {
      const Json m = resources.value(kind, Json::object());
      if (!m.is_object()) return Invalid(f + ".resources." + kind + " must be a map");
      if (quantity.empty() && m.contains(key)) {
        if (!m[key].is_string())
          return Invalid(f + ".resources." + kind + "." + key + " must be a string");
        quantity = m[key].get<std::string>();
      }
    }
    if (quantity.empty()) continue;
    std::string value = quantity;
    if (type == "VCPU") {
      ASSIGN_OR_RETURN(value, CpuQuantity(quantity, f + ".resources"));
    } else if (type == "MEMORY") {
      ASSIGN_OR_RETURN(value, MemoryQuantity(quantity, f + ".resources"));
    }
    RETURN_IF_ERROR(ValidateResourceValue(type, value, f + ".resources"));
    requirements.push_back({{"type", type}, {"value", value}});
  }
  // A pod that requests nothing is Kubernetes' BestEffort class: it runs
  // wherever it fits, with no reservation. lote places it in the smallest
  // slot it reserves: 1 vCPU and kEksBestEffortMib.
  auto has = [&](const char* type) {
    for (const Json& r : requirements)
      if (r["type"] == type) return true;
    return false;
  };
  if (!has("VCPU")) requirements.push_back({{"type", "VCPU"}, {"value", "1"}});
  if (!has("MEMORY"))
    requirements.push_back({{"type", "MEMORY"}, {"value", std::to_string(kEksBestEffortMib)}});
  c["resourceRequirements"] = requirements;
  const Json security = pod.value("securityContext", Json::object());
  if (security.is_object() && security.contains("runAsUser")) {
    if (!security["runAsUser"].is_number_integer() || security["runAsUser"].get<int64_t>() < 0)
      return Invalid(f + ".securityContext.runAsUser must be a non-negative integer (a uid)");
    c["user"] = std::to_string(security["runAsUser"].get<int64_t>());
  }
  return c;
}

std::vector<std::string> SubstituteParameters(
    const std::vector<std::string>& command, const std::map<std::string, std::string>& parameters) {
  std::vector<std::string> out;
  out.reserve(command.size());
  for (const std::string& arg : command) {
    if (StartsWith(arg, "Ref::")) {
      auto it = parameters.find(arg.substr(5));
      if (it != parameters.end()) {
        out.push_back(it->second);
        continue;
      }
    }
    out.push_back(arg);
  }
  return out;
}

Result<RetryStrategy> ParseRetryStrategy(const Json& json, const std::string& field) {
  RetryStrategy r;
  if (json.is_null()) return r;
  if (!json.is_object())
    return Invalid(field + " must be an object {\"attempts\": N, \"evaluateOnExit\": [...]}");
  ASSIGN_OR_RETURN(std::optional<int64_t> attempts,
                   OptionalInt(json, "attempts", field + ".attempts"));
  const Json rules = json.value("evaluateOnExit", Json());
  if (!rules.is_null() && !rules.is_array())
    return Invalid(field + ".evaluateOnExit must be a list");
  if (!attempts) {
    if (!rules.is_null() && !rules.empty()) {
      return Invalid(field + ".evaluateOnExit needs " + field +
                     ".attempts too: set attempts (1 to 10)");
    }
    return r;
  }
  if (*attempts < 1 || *attempts > 10) {
    return Invalid(field + ".attempts is " + std::to_string(*attempts) + ": use 1 to 10");
  }
  r.attempts = static_cast<int32_t>(*attempts);
  r.specified = true;
  if (rules.is_null()) return r;
  if (rules.size() > kMaxEvaluateOnExit) {
    return Invalid(field + ".evaluateOnExit has " + std::to_string(rules.size()) +
                   " rules: at most 5 are allowed");
  }
  for (size_t i = 0; i < rules.size(); ++i) {
    const Json& rule = rules[i];
    const std::string f = field + ".evaluateOnExit[" + std::to_string(i) + "]";
    if (!rule.is_object()) return Invalid(f + " must be an object");
    EvaluateOnExit e;
    ASSIGN_OR_RETURN(std::string given, OptionalString(rule, "action", f + ".action"));
    const std::string action = Upper(given);
    if (given != action) e.action_text = given;  // AWS returns it as given
    if (action == "RETRY") {
      e.action = RetryAction::kRetry;
    } else if (action == "EXIT") {
      e.action = RetryAction::kExit;
    } else {
      return Invalid(f + ".action " +
                     (action.empty() ? "is missing" : "'" + action + "' is not valid") +
                     ": use RETRY or EXIT");
    }
    ASSIGN_OR_RETURN(e.on_status_reason,
                     OptionalString(rule, "onStatusReason", f + ".onStatusReason"));
    ASSIGN_OR_RETURN(e.on_reason, OptionalString(rule, "onReason", f + ".onReason"));
    ASSIGN_OR_RETURN(e.on_exit_code, OptionalString(rule, "onExitCode", f + ".onExitCode"));
    if (e.on_status_reason.empty() && e.on_reason.empty() && e.on_exit_code.empty()) {
      return Invalid(
          f +
          " has no condition: set onStatusReason, onReason or onExitCode (\"*\" matches anything)");
    }
    RETURN_IF_ERROR(ValidatePattern(e.on_status_reason, false, f + ".onStatusReason"));
    RETURN_IF_ERROR(ValidatePattern(e.on_reason, false, f + ".onReason"));
    RETURN_IF_ERROR(ValidatePattern(e.on_exit_code, true, f + ".onExitCode"));
    r.evaluate_on_exit.push_back(std::move(e));
  }
  return r;
}

Result<SubmittedJobs> PrepareSubmit(const Json& request, const SubmitContext& ctx) {
  if (!request.is_object()) return Invalid("the SubmitJob request body must be a Json object");
  const Json& def = ctx.job_definition;
  if (!def.is_object())
    return Status::Internal("PrepareSubmit: the resolved job definition is not an object");

  ASSIGN_OR_RETURN(std::string name, OptionalString(request, "jobName", "jobName"));
  if (name.empty()) return Invalid("jobName is required: give the job a name");
  RETURN_IF_ERROR(ValidateJobName(name));
  ASSIGN_OR_RETURN(std::string queue, OptionalString(request, "jobQueue", "jobQueue"));
  if (queue.empty()) return Invalid("jobQueue is required: name the job queue (name or ARN)");
  ASSIGN_OR_RETURN(std::string definition_ref,
                   OptionalString(request, "jobDefinition", "jobDefinition"));
  if (definition_ref.empty())
    return Invalid(
        "jobDefinition is required: name the job definition (name, name:revision or ARN)");
  if (request.contains("ecsPropertiesOverride") && !request["ecsPropertiesOverride"].is_null()) {
    return Invalid(
        "ecsPropertiesOverride is not supported by lote: use containerOverrides or nodeOverrides");
  }

  const std::string def_name = def.value("jobDefinitionName", "");
  const std::string def_status = def.value("status", "ACTIVE");
  const std::string def_label = def_name + ":" + std::to_string(def.value("revision", 0));
  if (def_status != "ACTIVE") {
    return Invalid("job definition " + def_label + " is " + def_status +
                   ": submit with an ACTIVE revision");
  }
  const std::string type = def.value("type", "container");

  Job job;
  job.id = ctx.job_id;
  job.arn = JobArn(ctx.queue_arn, ctx.job_id);
  job.name = name;
  job.queue_arn = ctx.queue_arn;
  job.definition_arn = def.value("jobDefinitionArn", "");
  job.definition_name = def_name;
  job.definition_revision = def.value("revision", 0);
  if (auto owner = request.find(kSubmitOwnerKey); owner != request.end() && owner->is_string())
    job.owner = owner->get<std::string>();
  job.status = JobStatus::kSubmitted;
  job.created_at = ctx.now_ms;
  job.platform_capability = "EC2";
  if (def.contains("platformCapabilities") && def["platformCapabilities"].is_array() &&
      !def["platformCapabilities"].empty() && def["platformCapabilities"][0].is_string()) {
    job.platform_capability = def["platformCapabilities"][0].get<std::string>();
  }

  // Parameters: definition defaults, then the request's.
  ASSIGN_OR_RETURN(job.parameters,
                   StringMap(def, "parameters", "job definition " + def_label + " parameters"));
  ASSIGN_OR_RETURN(auto submitted_parameters, StringMap(request, "parameters", "parameters"));
  for (auto& [k, v] : submitted_parameters) job.parameters[k] = v;

  // Array properties.
  int32_t array_size = 0;
  if (request.contains("arrayProperties") && !request["arrayProperties"].is_null()) {
    const Json& ap = request["arrayProperties"];
    if (!ap.is_object()) return Invalid("arrayProperties must be an object {\"size\": N}");
    ASSIGN_OR_RETURN(std::optional<int64_t> size, OptionalInt(ap, "size", "arrayProperties.size"));
    if (size) {
      if (*size < kMinArraySize || *size > kMaxArraySize) {
        return Invalid(
            "arrayProperties.size is " + std::to_string(*size) +
            ": an array job has 2 to 10,000 children (omit arrayProperties for a single job)");
      }
      array_size = static_cast<int32_t>(*size);
    }
  }

  // Container or nodes.
  const Json container_overrides = request.value("containerOverrides", Json());
  const Json node_overrides = request.value("nodeOverrides", Json());
  if (type == "container") {
    if (!node_overrides.is_null()) {
      return Invalid("nodeOverrides applies only to multi-node jobs, and job definition " +
                     def_label + " is of type container: use containerOverrides");
    }
    Json properties = def.value("containerProperties", Json::object());
    const Json eks_override = request.value("eksPropertiesOverride", Json());
    if (def.contains("eksProperties") && def["eksProperties"].is_object()) {
      // An EKS pod runs as the process of its single container.
      if (!eks_override.is_null() && !eks_override.is_object())
        return Invalid("eksPropertiesOverride must be an object");
      const Json pod_override =
          eks_override.is_object() ? eks_override.value("podProperties", Json()) : Json();
      ASSIGN_OR_RETURN(
          properties,
          EksPodContainer(def["eksProperties"].value("podProperties", Json()), pod_override,
                          "job definition " + def_label + " eksProperties.podProperties"));
      job.eks_properties = def["eksProperties"];
    } else if (!eks_override.is_null()) {
      return Invalid(
          "eksPropertiesOverride applies only to job definitions with eksProperties, "
          "and " +
          def_label + " has none: use containerOverrides");
    }
    ASSIGN_OR_RETURN(ContainerSpec c,
                     ParseDefinitionContainer(
                         properties, "job definition " + def_label + " containerProperties"));
    ASSIGN_OR_RETURN(c, ApplyContainerOverrides(std::move(c), container_overrides,
                                                "containerOverrides", def_label));
    c.command = SubstituteParameters(c.command, job.parameters);
    RETURN_IF_ERROR(ValidateContainer(c, "containerOverrides", def_label));
    if (job.platform_capability == "FARGATE")
      RETURN_IF_ERROR(ValidateFargateResources(c, "containerOverrides (a Fargate job)"));
    job.container = std::move(c);
  } else if (type == "multinode") {
    if (!container_overrides.is_null()) {
      return Invalid(
          "containerOverrides does not apply to multi-node job definition " + def_label +
          ": use nodeOverrides.nodePropertyOverrides with targetNodes (\"0:\" for every node)");
    }
    if (array_size > 0) {
      return Invalid("arrayProperties cannot be used with multi-node job definition " + def_label +
                     ": submit separate multi-node jobs instead");
    }
    ASSIGN_OR_RETURN(NodeProperties np,
                     ResolveNodeProperties(def.value("nodeProperties", Json()), node_overrides,
                                           job.parameters, def_label));
    job.node_properties = std::move(np);
  } else {
    return Invalid("job definition " + def_label + " has type '" + type +
                   "': lote runs container and multinode jobs");
  }

  // Retry strategy, timeout, tags: the request's replace the definition's.
  if (request.contains("retryStrategy") && !request["retryStrategy"].is_null()) {
    ASSIGN_OR_RETURN(job.retry_strategy,
                     ParseRetryStrategy(request["retryStrategy"], "retryStrategy"));
  } else {
    ASSIGN_OR_RETURN(job.retry_strategy,
                     ParseRetryStrategy(def.value("retryStrategy", Json()),
                                        "job definition " + def_label + " retryStrategy"));
  }
  if (request.contains("timeout") && !request["timeout"].is_null()) {
    ASSIGN_OR_RETURN(job.timeout_seconds, ParseTimeout(request["timeout"], "timeout"));
  } else {
    ASSIGN_OR_RETURN(job.timeout_seconds, ParseTimeout(def.value("timeout", Json()),
                                                       "job definition " + def_label + " timeout"));
  }
  ASSIGN_OR_RETURN(job.tags, StringMap(request, "tags", "tags"));
  if (job.tags.size() > kMaxTags) {
    return Invalid("tags has " + std::to_string(job.tags.size()) +
                   " entries: at most 50 are allowed");
  }
  for (const auto& [k, v] : job.tags) {
    if (k.empty() || k.size() > 128)
      return Invalid("tags: key '" + k + "' must be 1 to 128 characters");
    if (v.size() > 256)
      return Invalid("tags: the value of '" + k + "' is longer than 256 characters");
    if (StartsWith(k, "aws:"))
      return Invalid("tags: key '" + k + "' uses the reserved prefix aws:; rename it");
  }
  if (request.contains("propagateTags") && !request["propagateTags"].is_null()) {
    if (!request["propagateTags"].is_boolean())
      return Invalid("propagateTags must be true or false");
    job.propagate_tags = request["propagateTags"].get<bool>();
  } else {
    job.propagate_tags = def.value("propagateTags", false);
  }

  // Consumable resources: the request's list replaces the definition's.
  {
    const bool overridden = request.contains("consumableResourcePropertiesOverride") &&
                            !request["consumableResourcePropertiesOverride"].is_null();
    Result<std::vector<ConsumableNeed>> needs =
        overridden ? ParseConsumableProperties(request["consumableResourcePropertiesOverride"],
                                               "consumableResourcePropertiesOverride")
                   : ParseConsumableProperties(
                         def.value("consumableResourceProperties", Json()),
                         "job definition " + def_label + " consumableResourceProperties");
    if (!needs.ok()) return Invalid(needs.status().message());
    job.consumables = std::move(*needs);
    std::vector<const ConsumableNeed*> all;
    for (const ConsumableNeed& n : job.consumables) all.push_back(&n);
    if (job.node_properties)
      for (const NodeRange& r : job.node_properties->ranges)
        for (const ConsumableNeed& n : r.consumables) all.push_back(&n);
    for (const ConsumableNeed* n : all) {
      if (ctx.consumable_exists && !ctx.consumable_exists(n->resource)) {
        return Invalid("consumable resource " + n->resource +
                       " does not exist; create it with CreateConsumableResource or remove it "
                       "from the job's consumableResourceProperties");
      }
    }
    for (const auto& [name, units] : ConsumableUnits(job)) {
      if (units > sched::kMaxConsumableUnits) {
        return Invalid("the job needs " + std::to_string(units) + " units of consumable resource " +
                       name + " over its nodes; at most 2^50 can be scheduled");
      }
    }
  }

  // Fair share.
  ASSIGN_OR_RETURN(job.share_identifier,
                   OptionalString(request, "shareIdentifier", "shareIdentifier"));
  if (ctx.queue_has_fair_share && job.share_identifier.empty()) {
    return Invalid("shareIdentifier is required: job queue " + ctx.queue_arn +
                   " has a fair-share scheduling policy, so give the job a share identifier");
  }
  if (!ctx.queue_has_fair_share && !job.share_identifier.empty()) {
    return Invalid(
        "shareIdentifier '" + job.share_identifier + "' is not allowed: job queue " +
        ctx.queue_arn +
        " has no fair-share scheduling policy; remove shareIdentifier or use a fair-share queue");
  }
  if (!job.share_identifier.empty()) {
    const std::string& s = job.share_identifier;
    if (s.size() > 255) return Invalid("shareIdentifier is longer than 255 characters");
    for (size_t i = 0; i < s.size(); ++i) {
      char c = s[i];
      bool ok = std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' ||
                (c == '*' && i + 1 == s.size());
      if (!ok) {
        return Invalid("shareIdentifier '" + s +
                       "' may contain only letters, digits, '-', '_' and '.', "
                       "optionally ending with '*'");
      }
    }
  }
  ASSIGN_OR_RETURN(
      std::optional<int64_t> priority,
      OptionalInt(request, "schedulingPriorityOverride", "schedulingPriorityOverride"));
  if (priority) {
    if (*priority < 0 || *priority > 9999) {
      return Invalid("schedulingPriorityOverride is " + std::to_string(*priority) +
                     ": use 0 to 9999");
    }
    job.scheduling_priority = static_cast<int32_t>(*priority);
  } else if (def.contains("schedulingPriority") && def["schedulingPriority"].is_number_integer()) {
    job.scheduling_priority = def["schedulingPriority"].get<int32_t>();
  }

  // Dependencies.
  std::vector<std::string> plain;
  std::vector<std::string> n_to_n;
  bool sequential = false;
  if (request.contains("dependsOn") && !request["dependsOn"].is_null()) {
    const Json& deps = request["dependsOn"];
    if (!deps.is_array()) return Invalid("dependsOn must be a list of {\"jobId\", \"type\"}");
    if (deps.size() > kMaxDependencies) {
      return Invalid("dependsOn lists " + std::to_string(deps.size()) +
                     " jobs: a job can depend on at most 20");
    }
    for (size_t i = 0; i < deps.size(); ++i) {
      const std::string f = "dependsOn[" + std::to_string(i) + "]";
      const Json& d = deps[i];
      if (!d.is_object()) return Invalid(f + " must be an object {\"jobId\", \"type\"}");
      ASSIGN_OR_RETURN(std::string dep_id, OptionalString(d, "jobId", f + ".jobId"));
      ASSIGN_OR_RETURN(std::string dep_type, OptionalString(d, "type", f + ".type"));
      JobDependency dep{dep_id, DependencyType::kNone};
      if (dep_type == "N_TO_N") {
        dep.type = DependencyType::kNToN;
      } else if (dep_type == "SEQUENTIAL") {
        dep.type = DependencyType::kSequential;
      } else if (!dep_type.empty()) {
        return Invalid(f + ".type '" + dep_type +
                       "' is not valid: use N_TO_N or SEQUENTIAL (or omit it)");
      }
      if (dep.type != DependencyType::kNone && array_size == 0) {
        // AWS accepts a type on a plain job's dependency and ignores it: the
        // job waits for the whole job named by jobId (rendered as given).
        if (dep_id.empty()) {
          return Invalid(f + ".type " + dep_type +
                         " without a jobId applies only to array jobs: set arrayProperties.size, "
                         "or name the job to wait for in jobId");
        }
        std::optional<Job> found = ctx.find_job ? ctx.find_job(dep_id) : std::nullopt;
        if (!found) {
          return Invalid(f + ".jobId: job " + dep_id +
                         " does not exist; submit it first or remove the dependency");
        }
        plain.push_back(dep_id);
        job.depends_on.push_back(dep);
        continue;
      }
      if (dep.type == DependencyType::kSequential) {
        if (!dep_id.empty()) {
          return Invalid(
              f +
              ": a SEQUENTIAL dependency orders the children of this array job and takes no jobId; "
              "remove jobId (or list it as a separate dependency without type)");
        }
        sequential = true;
        job.depends_on.push_back(dep);
        continue;
      }
      if (dep_id.empty()) return Invalid(f + ".jobId is required: name the job to wait for");
      std::optional<Job> found = ctx.find_job ? ctx.find_job(dep_id) : std::nullopt;
      if (!found) {
        return Invalid(f + ".jobId: job " + dep_id +
                       " does not exist; submit it first or remove the dependency");
      }
      if (dep.type == DependencyType::kNToN) {
        if (!found->IsArrayParent()) {
          return Invalid(f + ": N_TO_N needs an array job, and job " + dep_id +
                         " is not one; drop the type to wait for the whole job");
        }
        if (found->array->size != array_size) {
          return Invalid(f + ": N_TO_N needs arrays of the same size, but job " + dep_id + " has " +
                         std::to_string(found->array->size) + " children and this job " +
                         std::to_string(array_size) + "; make the sizes equal or drop the type");
        }
        n_to_n.push_back(dep_id);
      } else {
        plain.push_back(dep_id);
      }
      job.depends_on.push_back(dep);
    }
  }
  job.wait_for = plain;

  SubmittedJobs out;
  if (array_size > 0) {
    job.array = ArrayInfo{array_size, -1, {}, ctx.now_ms};
    for (JobStatus s : kAllJobStatuses)
      job.array->status_summary[std::string(JobStatusName(s))] = 0;
    job.array->status_summary["SUBMITTED"] = array_size;
    out.array_children.reserve(static_cast<size_t>(array_size));
    for (int32_t i = 0; i < array_size; ++i) {
      Job child = job;
      child.id = ArrayChildId(job.id, i);
      child.arn = job.arn + ":" + std::to_string(i);
      child.array = ArrayInfo{array_size, i, {}, 0};
      child.array_parent_id = job.id;
      child.depends_on.clear();
      child.wait_for.clear();
      for (const std::string& p : plain) {
        child.depends_on.push_back({p, DependencyType::kNone});
        child.wait_for.push_back(p);
      }
      for (const std::string& a : n_to_n) {
        child.depends_on.push_back({ArrayChildId(a, i), DependencyType::kNToN});
        child.wait_for.push_back(ArrayChildId(a, i));
      }
      if (sequential && i > 0) {
        child.depends_on.push_back({ArrayChildId(job.id, i - 1), DependencyType::kSequential});
        child.wait_for.push_back(ArrayChildId(job.id, i - 1));
      }
      out.array_children.push_back(std::move(child));
    }
  }
  out.job = std::move(job);
  return out;
}

}  // namespace lote::control
