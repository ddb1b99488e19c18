#include "control/job_model.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <string>
#include <utility>

namespace lote::control {
namespace {

constexpr std::string_view kStatusNames[] = {"SUBMITTED", "PENDING",   "RUNNABLE", "STARTING",
                                             "RUNNING",   "SUCCEEDED", "FAILED"};

constexpr std::pair<FailureCategory, std::string_view> kCategoryNames[] = {
    {FailureCategory::kUserError, "USER_ERROR"},
    {FailureCategory::kTimeout, "TIMEOUT"},
    {FailureCategory::kNodeLost, "NODE_LOST"},
    {FailureCategory::kTerminated, "TERMINATED"},
    {FailureCategory::kInfrastructure, "INFRASTRUCTURE"},
    {FailureCategory::kCapacity, "CAPACITY"},
    {FailureCategory::kHang, "HANG"},
    {FailureCategory::kPreempted, "PREEMPTED"},
    {FailureCategory::kNotStarted, "NOT_STARTED"},
};

// The value of a resourceRequirement of `type`, or nullptr.
const std::string* Requirement(const ContainerSpec& c, std::string_view type) {
  for (const ResourceRequirement& r : c.resource_requirements) {
    if (r.type == type) return &r.value;
  }
  return nullptr;
}

double ParseNumber(const std::string& text) {
  try {
    size_t used = 0;
    double v = std::stod(text, &used);
    if (used != text.size() || !std::isfinite(v) || v < 0) return 0.0;
    return std::min(v, static_cast<double>(kMaxResourceValue));
  } catch (...) {
    return 0.0;
  }
}

// Typed getters that turn a wrong type into InvalidArgument instead of a throw.
Result<std::string> GetString(const Json& j, const char* key, bool required = false) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    if (required) return Status::InvalidArgument(std::string("stored job lacks ") + key);
    return std::string();
  }
  if (!it->is_string())
    return Status::InvalidArgument(std::string("stored job: ") + key + " is not a string");
  return it->get<std::string>();
}

Result<int64_t> GetInt(const Json& j, const char* key, int64_t fallback = 0) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_number_integer()) {
    return Status::InvalidArgument(std::string("stored job: ") + key + " is not an integer");
  }
  return it->get<int64_t>();
}

Json StringMapToJson(const std::map<std::string, std::string>& m) {
  Json j = Json::object();
  for (const auto& [k, v] : m) j[k] = v;
  return j;
}

Result<std::map<std::string, std::string>> StringMapFromJson(const Json& j, const char* key) {
  std::map<std::string, std::string> out;
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return out;
  if (!it->is_object())
    return Status::InvalidArgument(std::string("stored job: ") + key + " is not an object");
  for (auto e = it->begin(); e != it->end(); ++e) {
    if (!e.value().is_string()) {
      return Status::InvalidArgument(std::string("stored job: ") + key + "." + e.key() +
                                     " is not a string");
    }
    out[e.key()] = e.value().get<std::string>();
  }
  return out;
}

Json NodeAttemptToJson(const NodeAttempt& n) {
  Json j = {{"nodeIndex", n.node_index},
            {"status", JobStatusName(n.status)},
            {"instanceId", n.instance_id},
            {"privateIpv4Address", n.private_ipv4},
            {"devices", n.devices},
            {"taskArn", n.task_arn},
            {"logStreamName", n.log_stream_name},
            {"reason", n.reason},
            {"startedAt", n.started_at},
            {"stoppedAt", n.stopped_at}};
  if (n.exit_code) j["exitCode"] = *n.exit_code;
  if (!n.notices.empty()) j["notices"] = n.notices;
  if (n.pull_started_at > 0) {
    j["pullStartedAt"] = n.pull_started_at;
    j["pullStoppedAt"] = n.pull_stopped_at;
  }
  return j;
}

Result<NodeAttempt> NodeAttemptFromJson(const Json& j) {
  NodeAttempt n;
  ASSIGN_OR_RETURN(int64_t index, GetInt(j, "nodeIndex"));
  n.node_index = static_cast<int32_t>(index);
  ASSIGN_OR_RETURN(std::string status, GetString(j, "status", true));
  ASSIGN_OR_RETURN(n.status, ParseJobStatus(status));
  ASSIGN_OR_RETURN(n.instance_id, GetString(j, "instanceId"));
  ASSIGN_OR_RETURN(n.private_ipv4, GetString(j, "privateIpv4Address"));
  if (j.contains("devices") && j["devices"].is_array()) {
    for (const Json& d : j["devices"]) {
      if (!d.is_number_integer())
        return Status::InvalidArgument("stored job: devices must be integers");
      n.devices.push_back(d.get<int32_t>());
    }
  }
  ASSIGN_OR_RETURN(n.task_arn, GetString(j, "taskArn"));
  ASSIGN_OR_RETURN(n.log_stream_name, GetString(j, "logStreamName"));
  ASSIGN_OR_RETURN(n.reason, GetString(j, "reason"));
  ASSIGN_OR_RETURN(n.started_at, GetInt(j, "startedAt"));
  ASSIGN_OR_RETURN(n.stopped_at, GetInt(j, "stoppedAt"));
  if (j.contains("pullStartedAt")) {
    ASSIGN_OR_RETURN(n.pull_started_at, GetInt(j, "pullStartedAt"));
    ASSIGN_OR_RETURN(n.pull_stopped_at, GetInt(j, "pullStoppedAt"));
  }
  if (j.contains("notices")) {
    if (!j["notices"].is_array())
      return Status::InvalidArgument("stored job: notices is not a list");
    for (const Json& t : j["notices"]) {
      if (!t.is_string()) return Status::InvalidArgument("stored job: notices must be strings");
      n.notices.push_back(t.get<std::string>());
    }
  }
  if (j.contains("exitCode") && !j["exitCode"].is_null()) {
    ASSIGN_OR_RETURN(int64_t code, GetInt(j, "exitCode"));
    n.exit_code = static_cast<int32_t>(code);
  }
  return n;
}

Json AttemptToJson(const Attempt& a) {
  Json nodes = Json::array();
  for (const NodeAttempt& n : a.nodes) nodes.push_back(NodeAttemptToJson(n));
  return {{"computeEnvironment", a.compute_environment},
          {"scheduledAt", a.scheduled_at},
          {"startedAt", a.started_at},
          {"stoppedAt", a.stopped_at},
          {"statusReason", a.status_reason},
          {"reason", a.reason},
          {"failureCategory", FailureCategoryName(a.failure_category)},
          {"failedNode", a.failed_node},
          {"backendRef", a.backend_ref},
          {"backend", a.backend},
          {"pendingReason", a.pending_reason},
          {"nodes", nodes}};
}

Result<Attempt> AttemptFromJson(const Json& j) {
  Attempt a;
  ASSIGN_OR_RETURN(a.compute_environment, GetString(j, "computeEnvironment"));
  ASSIGN_OR_RETURN(a.scheduled_at, GetInt(j, "scheduledAt"));
  ASSIGN_OR_RETURN(a.started_at, GetInt(j, "startedAt"));
  ASSIGN_OR_RETURN(a.stopped_at, GetInt(j, "stoppedAt"));
  ASSIGN_OR_RETURN(a.status_reason, GetString(j, "statusReason"));
  ASSIGN_OR_RETURN(a.reason, GetString(j, "reason"));
  ASSIGN_OR_RETURN(int64_t failed_node, GetInt(j, "failedNode", -1));
  a.failed_node = static_cast<int32_t>(failed_node);
  a.backend_ref = j.value("backendRef", "");
  a.backend = j.value("backend", Json());
  a.pending_reason = j.value("pendingReason", "");
  ASSIGN_OR_RETURN(std::string category, GetString(j, "failureCategory"));
  ASSIGN_OR_RETURN(a.failure_category, ParseFailureCategory(category));
  if (j.contains("nodes")) {
    for (const Json& n : j["nodes"]) {
      ASSIGN_OR_RETURN(NodeAttempt node, NodeAttemptFromJson(n));
      a.nodes.push_back(std::move(node));
    }
  }
  return a;
}

Json RetryToJson(const RetryStrategy& r) {
  Json rules = Json::array();
  for (const EvaluateOnExit& e : r.evaluate_on_exit) {
    Json rule = {{"action", e.ActionText()}};
    if (!e.on_status_reason.empty()) rule["onStatusReason"] = e.on_status_reason;
    if (!e.on_reason.empty()) rule["onReason"] = e.on_reason;
    if (!e.on_exit_code.empty()) rule["onExitCode"] = e.on_exit_code;
    rules.push_back(rule);
  }
  return {{"attempts", r.attempts}, {"evaluateOnExit", rules}, {"specified", r.specified}};
}

Result<RetryStrategy> RetryFromJson(const Json& j) {
  RetryStrategy r;
  if (!j.is_object()) return r;
  ASSIGN_OR_RETURN(int64_t attempts, GetInt(j, "attempts", 1));
  r.attempts = static_cast<int32_t>(attempts);
  r.specified = j.value("specified", false);
  if (j.contains("evaluateOnExit")) {
    for (const Json& rule : j["evaluateOnExit"]) {
      EvaluateOnExit e;
      ASSIGN_OR_RETURN(e.on_status_reason, GetString(rule, "onStatusReason"));
      ASSIGN_OR_RETURN(e.on_reason, GetString(rule, "onReason"));
      ASSIGN_OR_RETURN(e.on_exit_code, GetString(rule, "onExitCode"));
      ASSIGN_OR_RETURN(std::string action, GetString(rule, "action"));
      std::string upper = action;
      for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      e.action = upper == "EXIT" ? RetryAction::kExit : RetryAction::kRetry;
      if (upper != action) e.action_text = action;
      r.evaluate_on_exit.push_back(std::move(e));
    }
  }
  return r;
}

Result<int32_t> ParseIndexSuffix(std::string_view text) {
  int32_t v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || p != text.data() + text.size() || text.empty() || v < 0) {
    return Status::InvalidArgument("not an index");
  }
  return v;
}

}  // namespace

std::string_view JobStatusName(JobStatus status) { return kStatusNames[static_cast<int>(status)]; }

Result<JobStatus> ParseJobStatus(std::string_view name) {
  for (JobStatus s : kAllJobStatuses) {
    if (JobStatusName(s) == name) return s;
  }
  return Status::InvalidArgument(
      "unknown job status '" + std::string(name) +
      "': use one of SUBMITTED, PENDING, RUNNABLE, STARTING, RUNNING, SUCCEEDED, FAILED");
}

bool IsFinal(JobStatus status) {
  return status == JobStatus::kSucceeded || status == JobStatus::kFailed;
}

std::string_view FailureCategoryName(FailureCategory category) {
  for (const auto& [c, name] : kCategoryNames) {
    if (c == category) return name;
  }
  return "";
}

Result<FailureCategory> ParseFailureCategory(std::string_view name) {
  if (name.empty()) return FailureCategory::kNone;
  for (const auto& [c, n] : kCategoryNames) {
    if (n == name) return c;
  }
  return Status::InvalidArgument("unknown failure category '" + std::string(name) +
                                 "': use one of USER_ERROR, TIMEOUT, NODE_LOST, TERMINATED, "
                                 "INFRASTRUCTURE, CAPACITY, HANG, PREEMPTED");
}

std::string_view DependencyTypeName(DependencyType type) {
  switch (type) {
    case DependencyType::kNToN:
      return "N_TO_N";
    case DependencyType::kSequential:
      return "SEQUENTIAL";
    case DependencyType::kNone:
      break;
  }
  return "";
}

int64_t ContainerSpec::MilliVcpu() const {
  if (const std::string* v = Requirement(*this, "VCPU")) {
    return static_cast<int64_t>(std::llround(ParseNumber(*v) * 1000.0));
  }
  return std::clamp<int64_t>(vcpus.value_or(0), 0, kMaxResourceValue) * 1000;
}

int64_t ContainerSpec::MemoryMib() const {
  if (const std::string* v = Requirement(*this, "MEMORY"))
    return static_cast<int64_t>(ParseNumber(*v));
  return std::clamp<int64_t>(memory.value_or(0), 0, kMaxResourceValue);
}

int32_t ContainerSpec::Gpus() const {
  if (const std::string* v = Requirement(*this, "GPU"))
    return static_cast<int32_t>(ParseNumber(*v));
  return 0;
}

int32_t NeuronDeviceIndex(const std::string& path) {
  const std::string prefix = "/dev/neuron";
  if (path.rfind(prefix, 0) != 0 || path.size() == prefix.size() || path.size() > prefix.size() + 6)
    return -1;
  int32_t n = 0;
  for (size_t i = prefix.size(); i < path.size(); ++i) {
    if (path[i] < '0' || path[i] > '9') return -1;
    n = n * 10 + (path[i] - '0');
  }
  return n;
}

AcceleratorRequest ContainerSpec::Accelerators() const {
  if (int32_t gpus = Gpus(); gpus > 0) return {gpus, "gpu"};
  int32_t neurons = 0;
  const Json& lp = linux_parameters;
  if (lp.is_object() && lp.contains("devices") && lp["devices"].is_array()) {
    for (const Json& d : lp["devices"])
      if (d.is_object() && d.contains("hostPath") && d["hostPath"].is_string() &&
          NeuronDeviceIndex(d["hostPath"].get<std::string>()) >= 0)
        ++neurons;
  }
  if (neurons > 0) return {neurons, "neuron"};
  return {};
}

Status ValidateResourceValue(const std::string& type, const std::string& value,
                             const std::string& field) {
  auto bad = [&](const std::string& rule) {
    return Status::InvalidArgument(field + ": " + type + " value '" + value + "' " + rule);
  };
  if (type != "VCPU" && type != "MEMORY" && type != "GPU") {
    return Status::InvalidArgument(field + ": unknown type '" + type +
                                   "': use VCPU, MEMORY or GPU");
  }
  const bool fractional = type == "VCPU";
  const std::string shape =
      fractional ? "is not a non-negative number (write digits, optionally with a decimal point, "
                   "e.g. \"2\" or \"0.25\")"
                 : "is not a non-negative number (write a whole number of " +
                       std::string(type == "MEMORY" ? "MiB" : "GPUs") + ", e.g. \"" +
                       (type == "MEMORY" ? "2048" : "1") + "\")";
  size_t digits = 0;
  size_t dots = 0;
  for (char c : value) {
    if (c >= '0' && c <= '9') {
      ++digits;
    } else if (c == '.' && fractional) {
      ++dots;
    } else if (c == '.') {
      return bad("must be a whole number");
    } else {
      return bad(shape);
    }
  }
  if (digits == 0 || dots > 1 || value.front() == '.' || value.back() == '.') return bad(shape);
  // At most 10 integer digits can be within range; leading zeros aside.
  const size_t dot = value.find('.');
  std::string whole = value.substr(0, dot);
  whole.erase(0, std::min(whole.find_first_not_of('0'), whole.size()));
  int64_t amount = 0;
  if (whole.size() > 10) {
    amount = kMaxResourceValue + 1;
  } else {
    for (char c : whole) amount = amount * 10 + (c - '0');
  }
  const bool fraction =
      dot != std::string::npos && value.find_first_not_of('0', dot + 1) != std::string::npos;
  if (amount > kMaxResourceValue || (amount == kMaxResourceValue && fraction)) {
    return bad("is above " + std::to_string(kMaxResourceValue) +
               ", the largest amount AWS accepts");
  }
  if (type == "GPU") return Status::Ok();
  if (amount == 0 && !fraction) return bad("must be greater than 0");
  return Status::Ok();
}

std::string EvaluateOnExit::ActionText() const {
  if (!action_text.empty()) return action_text;
  return action == RetryAction::kRetry ? "RETRY" : "EXIT";
}

Status ValidateFargateResources(const ContainerSpec& c, const std::string& field) {
  if (c.vcpus || c.memory) {
    return Status::InvalidArgument(
        field + ": Fargate jobs take their resources from resourceRequirements, not the legacy " +
        (c.vcpus ? "vcpus" : "memory") +
        " field; use [{\"type\": \"VCPU\", ...}, {\"type\": " + "\"MEMORY\", ...}]");
  }
  if (c.Gpus() > 0) {
    return Status::InvalidArgument(field +
                                   ": GPUs aren't available for jobs on Fargate resources; "
                                   "remove the GPU resourceRequirement or use EC2");
  }
  struct Rule {
    int64_t milli_vcpu, min_mib, max_mib, step_mib;
  };
  static constexpr Rule kRules[] = {{250, 512, 2048, 512},       {500, 1024, 4096, 1024},
                                    {1000, 2048, 8192, 1024},    {2000, 4096, 16384, 1024},
                                    {4000, 8192, 30720, 1024},   {8000, 16384, 61440, 4096},
                                    {16000, 32768, 122880, 8192}};
  const int64_t mv = c.MilliVcpu();
  const int64_t mib = c.MemoryMib();
  for (const Rule& r : kRules) {
    if (r.milli_vcpu != mv) continue;
    const bool ok = mib >= r.min_mib && mib <= r.max_mib &&
                    (r.milli_vcpu == 250 ? (mib == 512 || mib == 1024 || mib == 2048)
                                         : (mib - r.min_mib) % r.step_mib == 0);
    if (ok) return Status::Ok();
    return Status::InvalidArgument(
        field + ": Fargate does not offer " + std::to_string(mib) + " MiB with " +
        std::to_string(mv / 1000) + (mv % 1000 ? "." + std::to_string(mv % 1000 / 10) : "") +
        " vCPU; with it MEMORY is " + std::to_string(r.min_mib) + " to " +
        std::to_string(r.max_mib) + " MiB in steps of " + std::to_string(r.step_mib) +
        (r.milli_vcpu == 250 ? " (512, 1024 or 2048)" : ""));
  }
  return Status::InvalidArgument(field +
                                 ": Fargate VCPU must be one of 0.25, 0.5, 1, 2, 4, 8, 16 (got " +
                                 std::to_string(static_cast<double>(mv) / 1000.0) + ")");
}

FailureCategory CategoryOfExit(int32_t code, bool signaled) {
  return !signaled && code == kPreemptedExitCode ? FailureCategory::kPreempted
                                                 : FailureCategory::kUserError;
}

bool ConsumesAttempt(FailureCategory category) {
  return category != FailureCategory::kPreempted && category != FailureCategory::kNotStarted;
}

int32_t AttemptsConsumed(const Job& job) {
  int32_t n = 0;
  for (const Attempt& a : job.attempts) n += ConsumesAttempt(a.failure_category) ? 1 : 0;
  return n;
}

std::string NodeRange::TargetNodes() const {
  return std::to_string(start) + ":" + std::to_string(end);
}

const ContainerSpec* NodeProperties::ContainerFor(int32_t index) const {
  for (const NodeRange& r : ranges) {
    if (index >= r.start && index <= r.end) return &r.container;
  }
  return nullptr;
}

const NodeAttempt* Attempt::Node(int32_t index) const {
  for (const NodeAttempt& n : nodes) {
    if (n.node_index == index) return &n;
  }
  return nullptr;
}

NodeAttempt* Attempt::MutableNode(int32_t index) {
  for (NodeAttempt& n : nodes) {
    if (n.node_index == index) return &n;
  }
  return nullptr;
}

std::map<std::string, int64_t> ConsumableUnits(const Job& job) {
  std::map<std::string, int64_t> units;
  for (const ConsumableNeed& n : job.consumables) units[n.name] += n.quantity;
  if (job.node_properties) {
    for (const NodeRange& r : job.node_properties->ranges)
      for (const ConsumableNeed& n : r.consumables)
        units[n.name] += n.quantity * (r.end - r.start + 1);
  }
  return units;
}

const ContainerSpec* Job::ContainerFor(int32_t index) const {
  if (node_properties) return node_properties->ContainerFor(index);
  if (container && index == 0) return &*container;
  return nullptr;
}

const std::string* Job::LoteSetting(const std::string& key) const {
  if (auto it = parameters.find(key); it != parameters.end()) return &it->second;
  if (auto it = tags.find(key); it != tags.end()) return &it->second;
  return nullptr;
}

const Attempt* Job::CurrentAttempt() const {
  if ((status == JobStatus::kStarting || status == JobStatus::kRunning) && !attempts.empty()) {
    return &attempts.back();
  }
  return nullptr;
}

Json ContainerToJson(const ContainerSpec& c) {
  Json j = c.other.is_object() ? c.other : Json::object();
  if (!c.image.empty()) j["image"] = c.image;
  j["command"] = c.command;
  Json env = Json::array();
  for (const EnvVar& e : c.environment) env.push_back({{"name", e.name}, {"value", e.value}});
  j["environment"] = env;
  if (!c.resource_requirements.empty()) {
    Json rr = Json::array();
    for (const ResourceRequirement& r : c.resource_requirements) {
      rr.push_back({{"type", r.type}, {"value", r.value}});
    }
    j["resourceRequirements"] = rr;
  }
  if (c.vcpus) j["vcpus"] = *c.vcpus;
  if (c.memory) j["memory"] = *c.memory;
  if (!c.user.empty()) j["user"] = c.user;
  if (!c.instance_type.empty()) j["instanceType"] = c.instance_type;
  if (!c.ulimits.empty()) j["ulimits"] = c.ulimits;
  if (!c.linux_parameters.empty()) j["linuxParameters"] = c.linux_parameters;
  return j;
}

Result<ContainerSpec> ContainerFromJson(const Json& j) {
  if (!j.is_object()) return Status::InvalidArgument("container properties must be an object");
  ContainerSpec c;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& key = it.key();
    const Json& v = it.value();
    if (key == "image") {
      if (!v.is_string()) return Status::InvalidArgument("image must be a string");
      c.image = v.get<std::string>();
    } else if (key == "command") {
      if (!v.is_array()) return Status::InvalidArgument("command must be a list of strings");
      for (const Json& a : v) {
        if (!a.is_string()) return Status::InvalidArgument("command must be a list of strings");
        c.command.push_back(a.get<std::string>());
      }
    } else if (key == "environment") {
      if (!v.is_array())
        return Status::InvalidArgument("environment must be a list of {name, value}");
      for (const Json& e : v) {
        if (!e.is_object() || !e.value("name", Json()).is_string()) {
          return Status::InvalidArgument("environment entries need a string name");
        }
        Json value = e.value("value", Json(""));
        if (!value.is_string())
          return Status::InvalidArgument("environment value must be a string");
        c.environment.push_back({e["name"].get<std::string>(), value.get<std::string>()});
      }
    } else if (key == "resourceRequirements") {
      if (!v.is_array())
        return Status::InvalidArgument("resourceRequirements must be a list of {type, value}");
      for (const Json& r : v) {
        if (!r.is_object() || !r.value("type", Json()).is_string() ||
            !r.value("value", Json()).is_string()) {
          return Status::InvalidArgument("resourceRequirements entries need string type and value");
        }
        c.resource_requirements.push_back(
            {r["type"].get<std::string>(), r["value"].get<std::string>()});
      }
    } else if (key == "vcpus" || key == "memory") {
      if (v.is_null()) continue;
      if (!v.is_number_integer()) return Status::InvalidArgument(key + " must be an integer");
      (key == "vcpus" ? c.vcpus : c.memory) = v.get<int64_t>();
    } else if (key == "user") {
      if (!v.is_string()) return Status::InvalidArgument("user must be a string");
      c.user = v.get<std::string>();
    } else if (key == "instanceType") {
      if (!v.is_string()) return Status::InvalidArgument("instanceType must be a string");
      c.instance_type = v.get<std::string>();
    } else if (key == "ulimits") {
      if (!v.is_array())
        return Status::InvalidArgument("ulimits must be a list of {name, softLimit, hardLimit}");
      c.ulimits = v;
    } else if (key == "linuxParameters") {
      if (!v.is_object()) return Status::InvalidArgument("linuxParameters must be an object");
      c.linux_parameters = v;
    } else {
      c.other[key] = v;
    }
  }
  return c;
}

Json JobToJson(const Job& job) {
  Json j = {{"jobId", job.id},
            {"jobArn", job.arn},
            {"jobName", job.name},
            {"jobQueue", job.queue_arn},
            {"jobDefinition", job.definition_arn},
            {"jobDefinitionName", job.definition_name},
            {"jobDefinitionRevision", job.definition_revision},
            {"status", JobStatusName(job.status)},
            {"statusReason", job.status_reason},
            {"createdAt", job.created_at},
            {"startedAt", job.started_at},
            {"stoppedAt", job.stopped_at},
            {"parameters", StringMapToJson(job.parameters)},
            {"nodeIndex", job.node_index},
            {"arrayParentId", job.array_parent_id},
            {"waitFor", job.wait_for},
            {"retryStrategy", RetryToJson(job.retry_strategy)},
            {"tags", StringMapToJson(job.tags)},
            {"propagateTags", job.propagate_tags},
            {"shareIdentifier", job.share_identifier},
            {"owner", job.owner},
            {"platformCapability", job.platform_capability},
            {"eksProperties", job.eks_properties},
            {"failureCategory", FailureCategoryName(job.failure_category)},
            {"isCancelled", job.is_cancelled},
            {"isTerminated", job.is_terminated},
            {"progress", job.progress}};
  if (job.container) j["container"] = ContainerToJson(*job.container);
  if (job.node_properties) {
    Json ranges = Json::array();
    for (const NodeRange& r : job.node_properties->ranges) {
      ranges.push_back({{"start", r.start},
                        {"end", r.end},
                        {"container", ContainerToJson(r.container)},
                        {"instanceTypes", r.instance_types}});
      if (!r.consumables.empty())
        ranges.back()["consumableResourceProperties"] = ConsumablePropertiesJson(r.consumables);
    }
    j["nodeProperties"] = {{"numNodes", job.node_properties->num_nodes},
                           {"mainNode", job.node_properties->main_node},
                           {"ranges", ranges}};
  }
  if (job.array) {
    Json summary = Json::object();
    for (const auto& [k, v] : job.array->status_summary) summary[k] = v;
    j["arrayProperties"] = {{"size", job.array->size},
                            {"index", job.array->index},
                            {"statusSummary", summary},
                            {"statusSummaryLastUpdatedAt", job.array->status_summary_updated_at}};
  }
  Json deps = Json::array();
  for (const JobDependency& d : job.depends_on) {
    deps.push_back({{"jobId", d.job_id}, {"type", DependencyTypeName(d.type)}});
  }
  j["dependsOn"] = deps;
  if (job.timeout_seconds) j["timeoutSeconds"] = *job.timeout_seconds;
  if (job.scheduling_priority) j["schedulingPriority"] = *job.scheduling_priority;
  if (!job.consumables.empty())
    j["consumableResourceProperties"] = ConsumablePropertiesJson(job.consumables);
  Json attempts = Json::array();
  for (const Attempt& a : job.attempts) attempts.push_back(AttemptToJson(a));
  j["attempts"] = attempts;
  return j;
}

namespace {

Result<Job> JobFromJsonUnchecked(const Json& j) {
  Job job;
  ASSIGN_OR_RETURN(job.id, GetString(j, "jobId", true));
  ASSIGN_OR_RETURN(job.arn, GetString(j, "jobArn"));
  ASSIGN_OR_RETURN(job.name, GetString(j, "jobName"));
  ASSIGN_OR_RETURN(job.queue_arn, GetString(j, "jobQueue"));
  ASSIGN_OR_RETURN(job.definition_arn, GetString(j, "jobDefinition"));
  ASSIGN_OR_RETURN(job.definition_name, GetString(j, "jobDefinitionName"));
  ASSIGN_OR_RETURN(int64_t revision, GetInt(j, "jobDefinitionRevision"));
  job.definition_revision = static_cast<int32_t>(revision);
  ASSIGN_OR_RETURN(std::string status, GetString(j, "status", true));
  ASSIGN_OR_RETURN(job.status, ParseJobStatus(status));
  ASSIGN_OR_RETURN(job.status_reason, GetString(j, "statusReason"));
  ASSIGN_OR_RETURN(job.created_at, GetInt(j, "createdAt"));
  ASSIGN_OR_RETURN(job.started_at, GetInt(j, "startedAt"));
  ASSIGN_OR_RETURN(job.stopped_at, GetInt(j, "stoppedAt"));
  ASSIGN_OR_RETURN(job.parameters, StringMapFromJson(j, "parameters"));
  ASSIGN_OR_RETURN(int64_t node_index, GetInt(j, "nodeIndex", -1));
  job.node_index = static_cast<int32_t>(node_index);
  ASSIGN_OR_RETURN(job.array_parent_id, GetString(j, "arrayParentId"));
  if (j.contains("waitFor")) {
    for (const Json& w : j["waitFor"]) {
      if (!w.is_string()) return Status::InvalidArgument("stored job: waitFor must hold strings");
      job.wait_for.push_back(w.get<std::string>());
    }
  }
  ASSIGN_OR_RETURN(job.retry_strategy, RetryFromJson(j.value("retryStrategy", Json::object())));
  ASSIGN_OR_RETURN(job.tags, StringMapFromJson(j, "tags"));
  job.propagate_tags = j.value("propagateTags", false);
  ASSIGN_OR_RETURN(job.share_identifier, GetString(j, "shareIdentifier"));
  ASSIGN_OR_RETURN(job.owner, GetString(j, "owner"));
  ASSIGN_OR_RETURN(job.platform_capability, GetString(j, "platformCapability"));
  job.eks_properties = j.value("eksProperties", Json());
  ASSIGN_OR_RETURN(std::string category, GetString(j, "failureCategory"));
  ASSIGN_OR_RETURN(job.failure_category, ParseFailureCategory(category));
  job.is_cancelled = j.value("isCancelled", false);
  job.is_terminated = j.value("isTerminated", false);
  job.progress = j.value("progress", Json());
  ASSIGN_OR_RETURN(job.consumables,
                   ParseConsumableProperties(j.value("consumableResourceProperties", Json()),
                                             "stored job: consumableResourceProperties"));
  if (j.contains("container")) {
    ASSIGN_OR_RETURN(ContainerSpec c, ContainerFromJson(j["container"]));
    job.container = std::move(c);
  }
  if (j.contains("nodeProperties")) {
    const Json& np = j["nodeProperties"];
    NodeProperties p;
    ASSIGN_OR_RETURN(int64_t num, GetInt(np, "numNodes"));
    ASSIGN_OR_RETURN(int64_t main, GetInt(np, "mainNode"));
    p.num_nodes = static_cast<int32_t>(num);
    p.main_node = static_cast<int32_t>(main);
    for (const Json& r : np.value("ranges", Json::array())) {
      NodeRange range;
      ASSIGN_OR_RETURN(int64_t start, GetInt(r, "start"));
      ASSIGN_OR_RETURN(int64_t end, GetInt(r, "end"));
      range.start = static_cast<int32_t>(start);
      range.end = static_cast<int32_t>(end);
      ASSIGN_OR_RETURN(range.container, ContainerFromJson(r.value("container", Json::object())));
      for (const Json& t : r.value("instanceTypes", Json::array()))
        range.instance_types.push_back(t.get<std::string>());
      ASSIGN_OR_RETURN(range.consumables,
                       ParseConsumableProperties(r.value("consumableResourceProperties", Json()),
                                                 "stored job: consumableResourceProperties"));
      p.ranges.push_back(std::move(range));
    }
    job.node_properties = std::move(p);
  }
  if (j.contains("arrayProperties")) {
    const Json& ap = j["arrayProperties"];
    ArrayInfo a;
    ASSIGN_OR_RETURN(int64_t size, GetInt(ap, "size"));
    ASSIGN_OR_RETURN(int64_t index, GetInt(ap, "index", -1));
    a.size = static_cast<int32_t>(size);
    a.index = static_cast<int32_t>(index);
    Json summary = ap.value("statusSummary", Json::object());
    for (auto it = summary.begin(); it != summary.end(); ++it)
      a.status_summary[it.key()] = it.value().get<int32_t>();
    ASSIGN_OR_RETURN(a.status_summary_updated_at, GetInt(ap, "statusSummaryLastUpdatedAt"));
    job.array = std::move(a);
  }
  for (const Json& d : j.value("dependsOn", Json::array())) {
    JobDependency dep;
    ASSIGN_OR_RETURN(dep.job_id, GetString(d, "jobId"));
    ASSIGN_OR_RETURN(std::string type, GetString(d, "type"));
    dep.type = type == "N_TO_N"       ? DependencyType::kNToN
               : type == "SEQUENTIAL" ? DependencyType::kSequential
                                      : DependencyType::kNone;
    job.depends_on.push_back(std::move(dep));
  }
  if (j.contains("timeoutSeconds")) {
    ASSIGN_OR_RETURN(int64_t t, GetInt(j, "timeoutSeconds"));
    job.timeout_seconds = static_cast<int32_t>(t);
  }
  if (j.contains("schedulingPriority")) {
    ASSIGN_OR_RETURN(int64_t p, GetInt(j, "schedulingPriority"));
    job.scheduling_priority = static_cast<int32_t>(p);
  }
  for (const Json& a : j.value("attempts", Json::array())) {
    ASSIGN_OR_RETURN(Attempt attempt, AttemptFromJson(a));
    job.attempts.push_back(std::move(attempt));
  }
  return job;
}

}  // namespace

Result<Job> JobFromJson(const Json& j) {
  if (!j.is_object()) return Status::InvalidArgument("stored job must be a Json object");
  try {
    return JobFromJsonUnchecked(j);
  } catch (const Json::exception& e) {
    return Status::InvalidArgument(std::string("malformed stored job: ") + e.what());
  }
}

std::string ArrayChildId(std::string_view parent_id, int32_t index) {
  return std::string(parent_id) + ":" + std::to_string(index);
}

JobStatus ShownStatus(const Job& job) {
  const Attempt* a = job.CurrentAttempt();
  if (job.status == JobStatus::kStarting && a != nullptr && !a->pending_reason.empty())
    return JobStatus::kRunnable;
  return job.status;
}

const std::string& ShownStatusReason(const Job& job) {
  const Attempt* a = job.CurrentAttempt();
  if (job.status == JobStatus::kStarting && a != nullptr && !a->pending_reason.empty())
    return a->pending_reason;
  return job.status_reason;
}

std::string NodeJobId(std::string_view parent_id, int32_t node) {
  return std::string(parent_id) + "#" + std::to_string(node);
}

std::optional<std::pair<std::string, int32_t>> ParseNodeJobId(std::string_view id) {
  size_t hash = id.rfind('#');
  if (hash == std::string_view::npos || hash == 0) return std::nullopt;
  Result<int32_t> index = ParseIndexSuffix(id.substr(hash + 1));
  if (!index.ok()) return std::nullopt;
  return std::make_pair(std::string(id.substr(0, hash)), *index);
}

std::optional<std::pair<std::string, int32_t>> ParseArrayChildId(std::string_view id) {
  size_t colon = id.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return std::nullopt;
  Result<int32_t> index = ParseIndexSuffix(id.substr(colon + 1));
  if (!index.ok()) return std::nullopt;
  return std::make_pair(std::string(id.substr(0, colon)), *index);
}

Result<Job> NodeJob(const Job& parent, int32_t node_index) {
  if (!parent.node_properties) {
    return Status::NotFound("job " + parent.id +
                            " is not a multi-node parallel job, so it has no node #" +
                            std::to_string(node_index));
  }
  const ContainerSpec* container = parent.node_properties->ContainerFor(node_index);
  if (node_index < 0 || container == nullptr) {
    return Status::NotFound("job " + parent.id + " has " +
                            std::to_string(parent.node_properties->num_nodes) + " nodes: #" +
                            std::to_string(node_index) + " does not exist (use #0 to #" +
                            std::to_string(parent.node_properties->num_nodes - 1) + ")");
  }
  Job node = parent;
  node.id = NodeJobId(parent.id, node_index);
  if (!parent.arn.empty()) node.arn = parent.arn + "#" + std::to_string(node_index);
  node.node_index = node_index;
  node.container = *container;
  node.attempts.clear();
  for (const Attempt& a : parent.attempts) {
    Attempt mine = a;
    mine.nodes.clear();
    if (const NodeAttempt* n = a.Node(node_index)) mine.nodes.push_back(*n);
    node.attempts.push_back(std::move(mine));
  }
  // Status: the node's own while an attempt is open or after one ended the job.
  if (!parent.attempts.empty() &&
      (parent.status == JobStatus::kStarting || parent.status == JobStatus::kRunning ||
       IsFinal(parent.status))) {
    if (const NodeAttempt* n = parent.attempts.back().Node(node_index)) {
      if (!IsFinal(parent.status) || IsFinal(n->status)) node.status = n->status;
      node.started_at = n->started_at;
      if (IsFinal(n->status)) node.stopped_at = n->stopped_at;
      if (!n->reason.empty() && n->node_index != parent.node_properties->main_node) {
        node.status_reason = n->reason;
      }
    }
  }
  return node;
}

}  // namespace lote::control
