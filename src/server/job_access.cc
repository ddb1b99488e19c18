#include "server/job_access.h"

#include "control/job_submit.h"

namespace lote::server {

namespace {

std::string StringOf(const Json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// The queue whose jobs a ListJobs request lists: its jobQueue, else the queue
// of the array or multi-node parent it names; empty when there is none.
std::string ListedQueue(const Json& request, const control::ControlPlane* control,
                        const api::JobOwnerLookup& owners) {
  if (const std::string queue = StringOf(request, "jobQueue"); !queue.empty()) {
    Result<control::JobQueueSpec> spec = control->FindJobQueue(queue);
    return spec.ok() ? spec->arn : std::string();
  }
  for (const char* parent : {"arrayJobId", "multiNodeJobId"}) {
    const std::string id = StringOf(request, parent);
    if (id.empty()) continue;
    std::optional<iam::JobOwner> owner = owners(id);
    return owner ? owner->queue_arn : std::string();
  }
  return std::string();
}

}  // namespace

api::JsonHandler SubmitAsCaller(control::JobLoop* loop) {
  return [loop](const Json& request) -> Result<Json> {
    Json with_owner = request;
    if (with_owner.is_object()) {
      // Whatever a client sent under this key is replaced by its signer.
      with_owner.erase(control::kSubmitOwnerKey);
      if (const iam::User* caller = api::CurrentCaller())
        with_owner[control::kSubmitOwnerKey] = caller->name;
    }
    return loop->SubmitJob(with_owner);
  };
}

api::JsonHandler DescribeReadableJobs(control::JobLoop* loop, const api::IamAccessControl* access) {
  return [loop, access](const Json& request) -> Result<Json> {
    ASSIGN_OR_RETURN(Json answer, loop->DescribeJobs(request));
    if (api::CurrentCaller() == nullptr) return answer;
    Json shown = Json::array();
    for (Json& job : answer["jobs"]) {
      if (access->MayReadJob("batch:DescribeJobs", StringOf(job, "jobArn"),
                             StringOf(job, "jobQueue")))
        shown.push_back(std::move(job));
    }
    answer["jobs"] = std::move(shown);
    return answer;
  };
}

api::JsonHandler ListReadableJobs(control::JobLoop* loop, const control::ControlPlane* control,
                                  const api::IamAccessControl* access) {
  api::JobOwnerLookup owners = JobOwnersOf(loop);
  return [loop, control, access, owners](const Json& request) -> Result<Json> {
    ASSIGN_OR_RETURN(Json answer, loop->ListJobs(request));
    if (api::CurrentCaller() == nullptr || !answer.contains("jobSummaryList")) return answer;
    const std::string queue = ListedQueue(request, control, owners);
    Json shown = Json::array();
    for (Json& summary : answer["jobSummaryList"]) {
      if (access->MayReadJob("batch:ListJobs", StringOf(summary, "jobArn"), queue))
        shown.push_back(std::move(summary));
    }
    answer["jobSummaryList"] = std::move(shown);
    return answer;
  };
}

api::JobOwnerLookup JobOwnersOf(control::JobLoop* loop) {
  return [loop](const std::string& job_id) -> std::optional<iam::JobOwner> {
    Result<Json> described = loop->DescribeJobs(Json{{"jobs", Json::array({job_id})}});
    if (!described.ok() || (*described)["jobs"].empty()) return std::nullopt;
    const Json& job = (*described)["jobs"][0];
    return iam::JobOwner{StringOf(job, "loteOwner"), StringOf(job, "jobQueue")};
  };
}

}  // namespace lote::server
