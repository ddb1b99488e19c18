#include "control/job_render.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <string>

#include "common/ids.h"

namespace lote::control {
namespace {

// The node whose outcome an attempt reports: the one that failed it, else the
// main node, else the first (node views hold only their own node).
const NodeAttempt* ReportedNode(const Attempt& a, int32_t main_node) {
  if (a.failed_node >= 0) {
    if (const NodeAttempt* n = a.Node(a.failed_node)) return n;
  }
  if (const NodeAttempt* n = a.Node(main_node)) return n;
  return a.nodes.empty() ? nullptr : &a.nodes.front();
}

Json AttemptContainerJson(const Attempt& a, int32_t main_node) {
  Json c = Json::object();
  const NodeAttempt* n = ReportedNode(a, main_node);
  if (n == nullptr) return c;
  if (!n->task_arn.empty()) c["taskArn"] = n->task_arn;
  if (n->exit_code) c["exitCode"] = *n->exit_code;
  std::string reason = n->reason.empty() ? a.reason : n->reason;
  // Notices that change what runs (a device skipped, a limit not enforced)
  // also go into reason: stock clients (the aws CLI) drop loteNotices.
  if (!n->notices.empty()) {
    std::string joined;
    for (const std::string& notice : n->notices) joined += (joined.empty() ? "" : "; ") + notice;
    reason = reason.empty() ? "lote: " + joined : reason + " (lote: " + joined + ")";
  }
  if (!reason.empty()) c["reason"] = reason;
  if (!n->log_stream_name.empty()) c["logStreamName"] = n->log_stream_name;
  if (!n->private_ipv4.empty())
    c["networkInterfaces"] = Json::array({{{"privateIpv4Address", n->private_ipv4}}});
  if (!n->notices.empty()) c["loteNotices"] = n->notices;  // lote extra
  // lote extra: the accelerator devices the node holds (positions in its
  // host's inventory; docs/jobs.md, "Accelerators").
  if (!n->devices.empty())
    c["loteAccelerators"] = Json{{"instance", n->instance_id}, {"devices", n->devices}};
  return c;
}

// A container as DescribeJobs shows it: AWS returns these lists empty when
// they are unset (never absent), and clients index them without a check.
Json RenderedContainer(const ContainerSpec& spec) {
  Json c = ContainerToJson(spec);
  for (const char* key : {"command", "environment", "volumes", "mountPoints", "ulimits", "secrets",
                          "resourceRequirements"}) {
    if (!c.contains(key) || c[key].is_null()) c[key] = Json::array();
  }
  return c;
}

Json RetryStrategyJson(const RetryStrategy& r) {
  Json j = {{"attempts", r.attempts}};
  if (!r.evaluate_on_exit.empty()) {
    Json rules = Json::array();
    for (const EvaluateOnExit& e : r.evaluate_on_exit) {
      Json rule = {{"action", e.ActionText()}};
      if (!e.on_status_reason.empty()) rule["onStatusReason"] = e.on_status_reason;
      if (!e.on_reason.empty()) rule["onReason"] = e.on_reason;
      if (!e.on_exit_code.empty()) rule["onExitCode"] = e.on_exit_code;
      rules.push_back(rule);
    }
    j["evaluateOnExit"] = rules;
  }
  return j;
}

bool PrefixOrExact(const std::string& pattern, const std::string& text) {
  if (!pattern.empty() && pattern.back() == '*') {
    return text.compare(0, pattern.size() - 1, pattern, 0, pattern.size() - 1) == 0;
  }
  return pattern == text;
}

std::string QueueName(const std::string& queue) {
  Result<Arn> arn = Arn::Parse(queue);
  return arn.ok() ? arn->ResourceName() : queue;
}

std::string NodeParentId(const Job& job) {
  auto parsed = ParseNodeJobId(job.id);
  return parsed ? parsed->first : std::string();
}

// arrayProperties of a parent (size, statusSummary) or a child (index).
Json ArrayPropertiesJson(const ArrayInfo& array) {
  Json ap = Json::object();
  if (array.index < 0) {
    ap["size"] = array.size;
    ap["statusSummary"] = Json::object();
    for (const auto& [k, v] : array.status_summary) ap["statusSummary"][k] = v;
    if (array.status_summary_updated_at > 0)
      ap["statusSummaryLastUpdatedAt"] = array.status_summary_updated_at;
  } else {
    ap["index"] = array.index;
  }
  return ap;
}

// An EKS job as AWS shows it: eksProperties (the pod, with its pod and node
// names once placed) and eksAttempts (each ended attempt's pod). The pod runs
// as the process of its single container, which `container` still shows (its
// log stream, for lote's own tools).
void RenderAsEksJob(const Job& job, Json* j) {
  Json pod = job.eks_properties.value("podProperties", Json::object());
  Json containers = Json::array();
  for (const Json& c : pod.value("containers", Json::array())) {
    Json shown = c;
    if (!job.attempts.empty()) {
      Json outcome = AttemptContainerJson(job.attempts.back(), job.MainNode());
      if (outcome.contains("exitCode")) shown["exitCode"] = outcome["exitCode"];
      if (outcome.contains("reason")) shown["reason"] = outcome["reason"];
    }
    containers.push_back(shown);
  }
  pod["containers"] = containers;
  auto names = [&](const Attempt& a, Json* into) {
    if (a.nodes.empty()) return;
    (*into)["podName"] =
        "lote-" + job.id.substr(0, 8) + "-" + std::to_string(&a - &job.attempts[0] + 1);
    if (!a.nodes[0].instance_id.empty()) (*into)["nodeName"] = a.nodes[0].instance_id;
  };
  if (!job.attempts.empty()) names(job.attempts.back(), &pod);
  (*j)["eksProperties"] = {{"podProperties", pod}};
  Json attempts = Json::array();
  for (const Attempt& a : job.attempts) {
    if (a.stopped_at == 0) continue;
    Json c = AttemptContainerJson(a, job.MainNode());
    Json container = Json::object();
    if (c.contains("exitCode")) container["exitCode"] = c["exitCode"];
    if (c.contains("reason")) container["reason"] = c["reason"];
    Json attempt = {{"containers", Json::array({container})}, {"stoppedAt", a.stopped_at}};
    if (a.started_at > 0) attempt["startedAt"] = a.started_at;
    if (!a.status_reason.empty()) attempt["statusReason"] = a.status_reason;
    names(a, &attempt);
    attempts.push_back(attempt);
  }
  (*j)["eksAttempts"] = attempts;
}

}  // namespace

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

Json DescribeJobJson(const Job& job) {
  Json j = {{"jobArn", job.arn},
            {"jobName", job.name},
            {"jobId", job.id},
            {"jobQueue", job.queue_arn},
            {"status", JobStatusName(ShownStatus(job))},
            {"createdAt", job.created_at},
            {"jobDefinition", job.definition_arn},
            {"parameters", Json::object()},
            {"dependsOn", Json::array()},
            {"propagateTags", job.propagate_tags},
            {"platformCapabilities",
             Json::array({job.platform_capability.empty() ? "EC2" : job.platform_capability})},
            {"isCancelled", job.is_cancelled},
            {"isTerminated", job.is_terminated}};
  if (!job.owner.empty()) j["loteOwner"] = job.owner;  // lote extra: who submitted it
  for (const auto& [k, v] : job.parameters) j["parameters"][k] = v;
  for (const JobDependency& d : job.depends_on) {
    Json dep = Json::object();
    if (!d.job_id.empty()) dep["jobId"] = d.job_id;
    if (d.type != DependencyType::kNone) dep["type"] = DependencyTypeName(d.type);
    j["dependsOn"].push_back(dep);
  }
  if (!ShownStatusReason(job).empty()) j["statusReason"] = ShownStatusReason(job);
  if (job.started_at > 0) j["startedAt"] = job.started_at;
  if (job.stopped_at > 0) j["stoppedAt"] = job.stopped_at;
  if (!job.share_identifier.empty()) j["shareIdentifier"] = job.share_identifier;
  if (job.scheduling_priority) j["schedulingPriority"] = *job.scheduling_priority;
  if (!job.consumables.empty())
    j["consumableResourceProperties"] = ConsumablePropertiesJson(job.consumables);
  if (job.retry_strategy.specified) j["retryStrategy"] = RetryStrategyJson(job.retry_strategy);
  if (job.timeout_seconds) j["timeout"] = {{"attemptDurationSeconds", *job.timeout_seconds}};
  j["tags"] = Json::object();  // AWS: {} when the job has none
  for (const auto& [k, v] : job.tags) j["tags"][k] = v;

  Json attempts = Json::array();
  for (const Attempt& a : job.attempts) {
    if (a.stopped_at == 0) continue;  // AWS lists an attempt once it has ended
    Json attempt = {{"container", AttemptContainerJson(a, job.MainNode())}};
    if (a.started_at > 0) attempt["startedAt"] = a.started_at;
    attempt["stoppedAt"] = a.stopped_at;
    if (!a.status_reason.empty()) attempt["statusReason"] = a.status_reason;
    if (a.failure_category != FailureCategory::kNone) {
      attempt["failureCategory"] = FailureCategoryName(a.failure_category);
    }
    // lote extra: when the attempt was placed (STARTING) and each node's own
    // times, for timelines (`lote report`, the console).
    Json timeline = {{"scheduledAt", a.scheduled_at}, {"nodes", Json::array()}};
    for (const NodeAttempt& n : a.nodes) {
      Json node = {{"nodeIndex", n.node_index}};
      if (n.started_at > 0) node["startedAt"] = n.started_at;
      if (n.stopped_at > 0) node["stoppedAt"] = n.stopped_at;
      if (n.pull_started_at > 0) {  // container mode: the image was pulled
        node["pullStartedAt"] = n.pull_started_at;
        node["pullStoppedAt"] = n.pull_stopped_at;
      }
      if (n.exit_code) node["exitCode"] = *n.exit_code;
      timeline["nodes"].push_back(node);
    }
    attempt["loteTimeline"] = timeline;
    attempts.push_back(attempt);
  }
  j["attempts"] = attempts;

  // The container: a single-node job's, an array child's, or a node view's.
  const bool node_view = job.node_index >= 0;
  if (job.container && (!job.IsMultiNode() || node_view)) {
    Json c = RenderedContainer(*job.container);
    if (!job.attempts.empty()) {
      Json outcome = AttemptContainerJson(job.attempts.back(), job.MainNode());
      // An open attempt's node has no exit code yet; only report what is known.
      for (auto it = outcome.begin(); it != outcome.end(); ++it) c[it.key()] = it.value();
    }
    j["container"] = c;
  }
  if (job.node_properties) {
    Json ranges = Json::array();
    for (const NodeRange& r : job.node_properties->ranges) {
      Json range = {{"targetNodes", r.TargetNodes()},
                    {"container", RenderedContainer(r.container)}};
      if (!r.instance_types.empty()) range["instanceTypes"] = r.instance_types;
      if (!r.consumables.empty())
        range["consumableResourceProperties"] = ConsumablePropertiesJson(r.consumables);
      ranges.push_back(range);
    }
    j["nodeProperties"] = {{"numNodes", job.node_properties->num_nodes},
                           {"mainNode", job.node_properties->main_node},
                           {"nodeRangeProperties", ranges}};
    if (node_view) {
      j["nodeDetails"] = {{"nodeIndex", job.node_index},
                          {"isMainNode", job.node_index == job.node_properties->main_node}};
    }
  }
  if (job.array) j["arrayProperties"] = ArrayPropertiesJson(*job.array);
  if (job.eks_properties.is_object()) RenderAsEksJob(job, &j);
  if (!job.progress.is_null()) j["progress"] = job.progress;
  // The last failure's category (a lote extra): not of a job that then succeeded.
  if (job.failure_category != FailureCategory::kNone && job.status != JobStatus::kSucceeded)
    j["failureCategory"] = FailureCategoryName(job.failure_category);
  return j;
}

Json JobSummaryJson(const Job& job) {
  Json j = {{"jobArn", job.arn},
            {"jobId", job.id},
            {"jobName", job.name},
            {"createdAt", job.created_at},
            {"status", JobStatusName(ShownStatus(job))},
            {"jobDefinition", job.definition_arn}};
  if (!ShownStatusReason(job).empty()) j["statusReason"] = ShownStatusReason(job);
  if (job.started_at > 0) j["startedAt"] = job.started_at;
  if (job.stopped_at > 0) j["stoppedAt"] = job.stopped_at;
  if (!job.share_identifier.empty()) j["shareIdentifier"] = job.share_identifier;
  if (!job.attempts.empty() && job.attempts.back().stopped_at > 0) {
    Json outcome = AttemptContainerJson(job.attempts.back(), job.MainNode());
    Json c = Json::object();
    if (outcome.contains("exitCode")) c["exitCode"] = outcome["exitCode"];
    if (outcome.contains("reason")) c["reason"] = outcome["reason"];
    j["container"] = c;
  }
  if (job.array) j["arrayProperties"] = ArrayPropertiesJson(*job.array);
  if (job.node_properties) {
    Json np = {{"numNodes", job.node_properties->num_nodes}};
    if (job.node_index >= 0) {
      np["nodeIndex"] = job.node_index;
      np["isMainNode"] = job.node_index == job.node_properties->main_node;
    }
    j["nodeProperties"] = np;
  }
  // The last failure's category (a lote extra): not of a job that then succeeded.
  if (job.failure_category != FailureCategory::kNone && job.status != JobStatus::kSucceeded)
    j["failureCategory"] = FailureCategoryName(job.failure_category);
  return j;
}

Result<ListJobsQuery> ParseListJobsRequest(const Json& request) {
  if (!request.is_object())
    return Status::InvalidArgument("the ListJobs request body must be a Json object");
  ListJobsQuery q;
  auto str = [&](const char* key, std::string& out) -> Status {
    auto it = request.find(key);
    if (it == request.end() || it->is_null()) return Status::Ok();
    if (!it->is_string()) return Status::InvalidArgument(std::string(key) + " must be a string");
    out = it->get<std::string>();
    return Status::Ok();
  };
  RETURN_IF_ERROR(str("jobQueue", q.job_queue));
  RETURN_IF_ERROR(str("arrayJobId", q.array_job_id));
  RETURN_IF_ERROR(str("multiNodeJobId", q.multi_node_job_id));
  RETURN_IF_ERROR(str("nextToken", q.next_token));
  std::string status;
  RETURN_IF_ERROR(str("jobStatus", status));
  const int given = !q.job_queue.empty() + !q.array_job_id.empty() + !q.multi_node_job_id.empty();
  if (given != 1) {
    return Status::InvalidArgument(
        "ListJobs needs exactly one of jobQueue, arrayJobId or multiNodeJobId (got " +
        std::to_string(given) + ")");
  }
  if (request.contains("maxResults") && !request["maxResults"].is_null()) {
    if (!request["maxResults"].is_number_integer() || request["maxResults"].get<int64_t>() < 1 ||
        request["maxResults"].get<int64_t>() > 1000) {
      return Status::InvalidArgument("maxResults must be an integer from 1 to 1000");
    }
    q.max_results = request["maxResults"].get<int32_t>();
  }
  if (request.contains("filters") && !request["filters"].is_null()) {
    const Json& filters = request["filters"];
    if (!filters.is_array())
      return Status::InvalidArgument("filters must be a list of {name, values}");
    if (filters.size() > 1)
      return Status::InvalidArgument("filters: only one filter can be used at a time");
    if (filters.size() == 1) {
      const Json& f = filters[0];
      if (!f.is_object() || !f.value("name", Json()).is_string()) {
        return Status::InvalidArgument("filters[0].name is required");
      }
      q.filter_name = f["name"].get<std::string>();
      static const char* kNames[] = {"JOB_NAME", "JOB_DEFINITION", "BEFORE_CREATED_AT",
                                     "AFTER_CREATED_AT", "SHARE_IDENTIFIER"};
      if (std::none_of(std::begin(kNames), std::end(kNames),
                       [&](const char* n) { return q.filter_name == n; })) {
        return Status::InvalidArgument(
            "filters[0].name '" + q.filter_name +
            "' is not valid: use JOB_NAME, JOB_DEFINITION, BEFORE_CREATED_AT, "
            "AFTER_CREATED_AT or SHARE_IDENTIFIER");
      }
      const Json values = f.value("values", Json());
      if (!values.is_array() || values.size() != 1 || !values[0].is_string()) {
        return Status::InvalidArgument("filters[0].values must hold exactly one string");
      }
      q.filter_value = values[0].get<std::string>();
      if (q.filter_name == "BEFORE_CREATED_AT" || q.filter_name == "AFTER_CREATED_AT") {
        int64_t ms = 0;
        const std::string& v = q.filter_value;
        auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), ms);
        if (ec != std::errc() || p != v.data() + v.size()) {
          return Status::InvalidArgument("filters[0].values: " + q.filter_name +
                                         " takes milliseconds since the epoch, not '" + v + "'");
        }
      }
    }
  }
  if (!status.empty()) {
    ASSIGN_OR_RETURN(JobStatus s, ParseJobStatus(status));
    q.job_status = s;
  }
  const bool filter_overrides_status =
      !q.filter_name.empty() && q.filter_name != "SHARE_IDENTIFIER";
  if (filter_overrides_status) {
    q.job_status.reset();
  } else if (!q.job_status) {
    q.job_status = JobStatus::kRunning;
  }
  return q;
}

bool MatchesListJobs(const ListJobsQuery& q, const Job& job) {
  if (q.job_status && ShownStatus(job) != *q.job_status) return false;
  if (!q.array_job_id.empty()) return job.IsArrayChild() && job.array_parent_id == q.array_job_id;
  if (!q.multi_node_job_id.empty())
    return job.node_index >= 0 && NodeParentId(job) == q.multi_node_job_id;
  if (job.IsArrayChild() || job.node_index >= 0) return false;
  if (q.job_queue.rfind("arn:", 0) == 0) {
    if (job.queue_arn != q.job_queue) return false;
  } else if (QueueName(job.queue_arn) != q.job_queue) {
    return false;
  }
  if (q.filter_name.empty()) return true;
  const std::string& v = q.filter_value;
  if (q.filter_name == "JOB_NAME") return PrefixOrExact(Lower(v), Lower(job.name));
  if (q.filter_name == "JOB_DEFINITION") {
    if (v.rfind("arn:", 0) == 0) return job.definition_arn == v;
    return PrefixOrExact(v, job.definition_name);
  }
  if (q.filter_name == "BEFORE_CREATED_AT") return job.created_at < std::stoll(v);
  if (q.filter_name == "AFTER_CREATED_AT") return job.created_at > std::stoll(v);
  if (q.filter_name == "SHARE_IDENTIFIER") return job.share_identifier == v;
  return false;
}

void SortForListJobs(const ListJobsQuery& q, std::vector<Job>& jobs) {
  if (!q.array_job_id.empty()) {
    std::sort(jobs.begin(), jobs.end(),
              [](const Job& a, const Job& b) { return a.array->index < b.array->index; });
    return;
  }
  if (!q.multi_node_job_id.empty()) {
    std::sort(jobs.begin(), jobs.end(),
              [](const Job& a, const Job& b) { return a.node_index < b.node_index; });
    return;
  }
  const bool newest_first = !q.filter_name.empty();
  std::sort(jobs.begin(), jobs.end(), [&](const Job& a, const Job& b) {
    if (a.created_at != b.created_at)
      return newest_first ? a.created_at > b.created_at : a.created_at < b.created_at;
    return a.id < b.id;
  });
}

ListPosition ListPositionOf(const ListJobsQuery& q, const Job& job) {
  if (!q.array_job_id.empty()) return ListPosition{job.array ? job.array->index : -1, ""};
  if (!q.multi_node_job_id.empty()) return ListPosition{job.node_index, ""};
  return ListPosition{job.created_at, job.id};
}

bool ListedAfter(const ListJobsQuery& q, const ListPosition& position, const Job& job) {
  const ListPosition p = ListPositionOf(q, job);
  if (!q.array_job_id.empty() || !q.multi_node_job_id.empty()) return p.at > position.at;
  if (p.at != position.at) return q.filter_name.empty() ? p.at > position.at : p.at < position.at;
  return p.id > position.id;
}

// "p<at>.<id>" in hex digits of its bytes: opaque, and free of characters a
// query string would need to escape.
std::string ListJobsToken(const ListPosition& position) {
  static const char kHex[] = "0123456789abcdef";
  std::string text = std::to_string(position.at) + "." + position.id;
  std::string token = "p";
  for (unsigned char c : text) {
    token += kHex[c >> 4];
    token += kHex[c & 15];
  }
  return token;
}

Result<ListPosition> ParseListJobsToken(const std::string& token) {
  const Status bad = Status::InvalidArgument(
      "nextToken '" + token +
      "' is not one this server issued; pass the nextToken of the previous ListJobs answer "
      "unchanged");
  if (token.size() < 3 || token[0] != 'p' || token.size() % 2 != 1) return bad;
  auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  std::string text;
  for (size_t i = 1; i + 1 < token.size(); i += 2) {
    const int hi = digit(token[i]), lo = digit(token[i + 1]);
    if (hi < 0 || lo < 0) return bad;
    text += static_cast<char>(hi * 16 + lo);
  }
  const size_t dot = text.find('.');
  if (dot == std::string::npos || dot == 0 || dot > 20) return bad;
  ListPosition position;
  size_t used = 0;
  try {
    position.at = std::stoll(text.substr(0, dot), &used);
  } catch (const std::exception&) {
    return bad;
  }
  if (used != dot) return bad;
  position.id = text.substr(dot + 1);
  return position;
}

std::vector<Job> NodeJobs(const Job& parent) {
  std::vector<Job> out;
  if (!parent.node_properties) return out;
  for (int32_t i = 0; i < parent.node_properties->num_nodes; ++i) {
    Result<Job> node = NodeJob(parent, i);
    if (node.ok()) out.push_back(std::move(node).value());
  }
  return out;
}

}  // namespace lote::control
