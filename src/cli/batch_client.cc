#include "cli/batch_client.h"

#include <algorithm>
#include <chrono>
#include <thread>

namespace lote::cli {
namespace {

constexpr size_t kDescribeJobsBatch = 100;  // DescribeJobs takes at most 100 ids
constexpr const char* kEc2Version = "2016-11-15";

bool Retryable(const Status& s, bool read_only) {
  if (s.code() == StatusCode::kResourceExhausted) return true;
  if (s.code() == StatusCode::kUnavailable) {
    // A 503 answer names its AWS code; a connection failure does not reach
    // the server's answer at all. Both are safe to repeat for reads; a 503
    // means "not done" for mutations too.
    const bool answered = s.message().find("cannot reach") == std::string::npos;
    return read_only || answered;
  }
  return false;
}

bool HasToken(const Json& page) {
  return page.contains("nextToken") && page["nextToken"].is_string() &&
         !page["nextToken"].get<std::string>().empty();
}

}  // namespace

Result<std::unique_ptr<BatchClient>> BatchClient::Connect(const ClientOptions& options,
                                                          RetryPolicy retry) {
  ASSIGN_OR_RETURN(std::unique_ptr<ApiClient> api, ApiClient::Create(options));
  return std::make_unique<BatchClient>(std::move(api), std::move(retry));
}

BatchClient::BatchClient(std::unique_ptr<ApiClient> api, RetryPolicy retry)
    : api_(std::move(api)), retry_(std::move(retry)) {
  if (!retry_.sleep) {
    retry_.sleep = [](int64_t ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); };
  }
  retry_.attempts = std::max(1, retry_.attempts);
}

BatchClient::~BatchClient() = default;

const std::string& BatchClient::endpoint() const { return api_->endpoint(); }

Result<Json> BatchClient::WithRetries(Kind kind, const std::function<Result<Json>()>& call) {
  int64_t delay = retry_.base_delay_ms;
  for (int attempt = 1;; ++attempt) {
    Result<Json> r = call();
    if (r.ok() || attempt >= retry_.attempts || !Retryable(r.status(), kind == Kind::kRead)) {
      return r;
    }
    retry_.sleep(delay);
    delay = std::min<int64_t>(delay * 2, 5000);
  }
}

Result<Json> BatchClient::Batch(Kind kind, const std::string& path, const Json& body) {
  return WithRetries(kind, [&] { return api_->Batch("POST", path, body); });
}

Result<Json> BatchClient::Logs(Kind kind, const std::string& operation, const Json& body) {
  return WithRetries(kind,
                     [&] { return api_->JsonTarget("logs", "Logs_20140328." + operation, body); });
}

Status BatchClient::Ec2(Kind kind, const std::string& action, const Json& request) {
  Result<Json> r = WithRetries(kind, [&]() -> Result<Json> {
    RETURN_IF_ERROR(api_->Query("ec2", action, kEc2Version, FlattenQuery(request)));
    return Json::object();
  });
  return r.status();
}

Result<bool> BatchClient::Ec2Exists(const std::string& action, const std::string& param,
                                    const std::string& name) {
  Status s = Ec2(Kind::kRead, action, {{param, Json::array({name})}});
  if (s.ok()) return true;
  if (s.IsNotFound()) return false;
  return s;
}

Status BatchClient::CreatePlacementGroup(const Json& request) {
  return Ec2(Kind::kMutation, "CreatePlacementGroup", request);
}

Result<bool> BatchClient::PlacementGroupExists(const std::string& name) {
  return Ec2Exists("DescribePlacementGroups", "GroupName", name);
}

Status BatchClient::DeletePlacementGroup(const std::string& name) {
  return Ec2(Kind::kMutation, "DeletePlacementGroup", {{"GroupName", name}});
}

Status BatchClient::CreateLaunchTemplate(const Json& request) {
  return Ec2(Kind::kMutation, "CreateLaunchTemplate", request);
}

Result<bool> BatchClient::LaunchTemplateExists(const std::string& name) {
  return Ec2Exists("DescribeLaunchTemplates", "LaunchTemplateName", name);
}

Status BatchClient::DeleteLaunchTemplate(const std::string& name) {
  return Ec2(Kind::kMutation, "DeleteLaunchTemplate", {{"LaunchTemplateName", name}});
}

Result<std::vector<Json>> BatchClient::AllPages(const std::string& path, Json request,
                                                const std::string& list_key) {
  std::vector<Json> out;
  for (;;) {
    ASSIGN_OR_RETURN(Json page, Batch(Kind::kRead, path, request));
    for (Json& item : page.value(list_key, Json::array())) out.push_back(std::move(item));
    if (!HasToken(page)) return out;
    if (request.contains("nextToken") && request["nextToken"] == page["nextToken"]) {
      return Status::Internal(path + " answered the same nextToken twice");
    }
    request["nextToken"] = page["nextToken"];
  }
}

// --- compute environments ----------------------------------------------------

Result<Json> BatchClient::CreateComputeEnvironment(const Json& request) {
  return Batch(Kind::kMutation, "/v1/createcomputeenvironment", request);
}

Result<std::vector<Json>> BatchClient::DescribeComputeEnvironments(
    const std::vector<std::string>& names) {
  Json request = Json::object();
  if (!names.empty()) request["computeEnvironments"] = names;
  return AllPages("/v1/describecomputeenvironments", request, "computeEnvironments");
}

Result<std::optional<Json>> BatchClient::DescribeComputeEnvironment(const std::string& name) {
  ASSIGN_OR_RETURN(std::vector<Json> all, DescribeComputeEnvironments({name}));
  if (all.empty()) return std::optional<Json>();
  return std::optional<Json>(std::move(all.front()));
}

Status BatchClient::UpdateComputeEnvironment(const Json& request) {
  return Batch(Kind::kMutation, "/v1/updatecomputeenvironment", request).status();
}

Status BatchClient::DeleteComputeEnvironment(const std::string& name) {
  return Batch(Kind::kMutation, "/v1/deletecomputeenvironment", {{"computeEnvironment", name}})
      .status();
}

// --- job queues ----------------------------------------------------------------

Result<Json> BatchClient::CreateJobQueue(const Json& request) {
  return Batch(Kind::kMutation, "/v1/createjobqueue", request);
}

Result<std::vector<Json>> BatchClient::DescribeJobQueues(const std::vector<std::string>& names) {
  Json request = Json::object();
  if (!names.empty()) request["jobQueues"] = names;
  return AllPages("/v1/describejobqueues", request, "jobQueues");
}

Result<std::optional<Json>> BatchClient::DescribeJobQueue(const std::string& name) {
  ASSIGN_OR_RETURN(std::vector<Json> all, DescribeJobQueues({name}));
  if (all.empty()) return std::optional<Json>();
  return std::optional<Json>(std::move(all.front()));
}

Status BatchClient::UpdateJobQueue(const Json& request) {
  return Batch(Kind::kMutation, "/v1/updatejobqueue", request).status();
}

Status BatchClient::DeleteJobQueue(const std::string& name) {
  return Batch(Kind::kMutation, "/v1/deletejobqueue", {{"jobQueue", name}}).status();
}

// --- job definitions -------------------------------------------------------------

Result<Json> BatchClient::RegisterJobDefinition(const Json& request) {
  return Batch(Kind::kMutation, "/v1/registerjobdefinition", request);
}

Result<std::vector<Json>> BatchClient::DescribeJobDefinitions(const Json& request) {
  return AllPages("/v1/describejobdefinitions", request.is_null() ? Json::object() : request,
                  "jobDefinitions");
}

Status BatchClient::DeregisterJobDefinition(const std::string& job_definition) {
  return Batch(Kind::kMutation, "/v1/deregisterjobdefinition", {{"jobDefinition", job_definition}})
      .status();
}

// --- jobs ----------------------------------------------------------------------------

Result<Json> BatchClient::SubmitJob(const Json& request) {
  return Batch(Kind::kMutation, "/v1/submitjob", request);
}

Result<Json> BatchClient::Accelerators(const std::string& operation, const Json& body) {
  if (operation == "describe") return Batch(Kind::kRead, "/v1/describeaccelerators", body);
  if (operation == "rescan") return Batch(Kind::kMutation, "/v1/rescanaccelerators", body);
  if (operation == "drain") return Batch(Kind::kMutation, "/v1/drainaccelerator", body);
  return Batch(Kind::kMutation, "/v1/releaseaccelerator", body);
}

Result<Json> BatchClient::ReleaseNode(const std::string& node) {
  return Batch(Kind::kMutation, "/v1/releasenode", Json{{"node", node}});
}

Result<std::vector<Json>> BatchClient::DescribeJobs(const std::vector<std::string>& ids) {
  std::vector<Json> out;
  for (size_t i = 0; i < ids.size(); i += kDescribeJobsBatch) {
    Json request = {{"jobs", Json::array()}};
    for (size_t k = i; k < std::min(ids.size(), i + kDescribeJobsBatch); ++k) {
      request["jobs"].push_back(ids[k]);
    }
    ASSIGN_OR_RETURN(Json page, Batch(Kind::kRead, "/v1/describejobs", request));
    for (Json& j : page.value("jobs", Json::array())) out.push_back(std::move(j));
  }
  return out;
}

Result<Json> BatchClient::DescribeJob(const std::string& job_id) {
  ASSIGN_OR_RETURN(std::vector<Json> jobs, DescribeJobs({job_id}));
  for (Json& j : jobs) {
    if (j.value("jobId", "") == job_id) return std::move(j);
  }
  return Status::NotFound("no job with id '" + job_id + "' on " + endpoint() +
                          ": check the id (`lote status` lists active jobs, `aws batch list-jobs "
                          "--job-queue Q --job-status S` all of them)");
}

Result<std::vector<Json>> BatchClient::ListJobs(const Json& request) {
  return AllPages("/v1/listjobs", request, "jobSummaryList");
}

Result<Json> BatchClient::InjectFault(const std::string& job_id, const Json& request) {
  Json body = request;
  body["jobId"] = job_id;
  return Batch(Kind::kMutation, "/v1/lote/injectfault", body);
}

Result<Json> BatchClient::DumpJob(const std::string& job_id) {
  return Batch(Kind::kMutation, "/v1/lote/dumpjob", {{"jobId", job_id}});
}

Status BatchClient::TerminateJob(const std::string& job_id, const std::string& reason) {
  return Batch(Kind::kMutation, "/v1/terminatejob", {{"jobId", job_id}, {"reason", reason}})
      .status();
}

Status BatchClient::CancelJob(const std::string& job_id, const std::string& reason) {
  return Batch(Kind::kMutation, "/v1/canceljob", {{"jobId", job_id}, {"reason", reason}}).status();
}

// --- logs ------------------------------------------------------------------------------

Result<LogEventsPage> BatchClient::GetLogEvents(const Json& request) {
  ASSIGN_OR_RETURN(Json page, Logs(Kind::kRead, "GetLogEvents", request));
  LogEventsPage out;
  for (Json& e : page.value("events", Json::array())) out.events.push_back(std::move(e));
  out.next_forward_token = page.value("nextForwardToken", "");
  return out;
}

Result<std::vector<Json>> BatchClient::DescribeLogStreams(const Json& request) {
  std::vector<Json> out;
  Json req = request;
  for (;;) {
    ASSIGN_OR_RETURN(Json page, Logs(Kind::kRead, "DescribeLogStreams", req));
    for (Json& s : page.value("logStreams", Json::array())) out.push_back(std::move(s));
    if (!HasToken(page)) return out;
    req["nextToken"] = page["nextToken"];
  }
}

}  // namespace lote::cli
