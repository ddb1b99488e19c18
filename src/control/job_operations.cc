// The AWS Batch job operations of the job loop: SubmitJob, DescribeJobs,
// ListJobs, CancelJob, TerminateJob, DeleteJobQueue's terminations,
// GetJobQueueSnapshot and job tags. Each answers after its events are
// committed (job_journal.cc); the loop itself is job_loop.cc.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <utility>

#include "common/ids.h"
#include "control/capacity_hold.h"
#include "control/fault_plan.h"
#include "control/job_controller.h"
#include "control/job_loop.h"
#include "control/job_render.h"
#include "control/job_submit.h"
#include "control/validation.h"

namespace lote::control {
namespace {

std::string RequiredString(const Json& request, const char* field) {
  if (!request.is_object() || !request.contains(field) || !request[field].is_string()) return "";
  return request[field].get<std::string>();
}

}  // namespace

Result<Json> JobLoop::SubmitJob(const Json& request) {
  const auto began = std::chrono::steady_clock::now();
  Result<Json> answer = SubmitJobTimed(request);
  metrics_.submit_seconds()->Observe(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count());
  return answer;
}

Result<Json> JobLoop::SubmitJobTimed(const Json& request) {
  if (!request.is_object())
    return Status::InvalidArgument("the request body must be a JSON object");
  const std::string queue_ref = RequiredString(request, "jobQueue");
  const std::string definition_ref = RequiredString(request, "jobDefinition");
  if (queue_ref.empty())
    return Status::InvalidArgument("jobQueue is required: give a job queue name or ARN");
  if (definition_ref.empty())
    return Status::InvalidArgument(
        "jobDefinition is required: give a job definition name, name:revision or ARN");
  ASSIGN_OR_RETURN(JobQueueSpec queue, control_->FindJobQueue(queue_ref));
  ASSIGN_OR_RETURN(Json definition, control_->FindJobDefinition(definition_ref));

  Result<uint64_t> ticket = uint64_t{0};
  Json response;
  {
    std::lock_guard<std::mutex> lock(mu_);
    SyncWithStoreLocked();
    SubmitContext ctx;
    ctx.job_id = NewUuid();
    ctx.queue_arn = queue.arn;
    ctx.queue_has_fair_share = !queue.scheduling_policy_arn.empty();
    ctx.job_definition = definition;
    ctx.now_ms = clock_->NowMillis();
    ctx.find_job = [this](const std::string& id) -> std::optional<Job> {
      std::string key = id;
      if (auto node = ParseNodeJobId(id)) key = node->first;
      auto it = jobs_.find(key);
      if (it == jobs_.end()) return std::nullopt;
      return it->second;
    };
    ASSIGN_OR_RETURN(SubmittedJobs submitted, PrepareSubmit(request, ctx));
    RETURN_IF_ERROR(ValidateProgressTimeout(submitted.job));
    RETURN_IF_ERROR(ValidateTerminationGrace(submitted.job));
    RETURN_IF_ERROR(ValidateInjectedShortage(submitted.job));
    RETURN_IF_ERROR(ParseFaultPlan(submitted.job).status());
    ASSIGN_OR_RETURN(Job job,
                     ApplyLocked(submitted.job.id, JobEvent::Submitted(submitted.job, ctx.now_ms)));
    for (const Job& child : submitted.array_children)
      RETURN_IF_ERROR(ApplyLocked(child.id, JobEvent::Submitted(child, ctx.now_ms)).status());
    response = Json{{"jobArn", job.arn}, {"jobName", job.name}, {"jobId", job.id}};
    ticket = FlushLocked();
  }
  RETURN_IF_ERROR(WaitTicket(std::move(ticket)));
  Wake();
  return response;
}

Result<Json> JobLoop::DescribeJobs(const Json& request) {
  if (!request.is_object() || !request.contains("jobs") || !request["jobs"].is_array())
    return Status::InvalidArgument("jobs is required: a list of 1 to 100 job ids");
  const Json& ids = request["jobs"];
  if (ids.size() > 100)
    return Status::InvalidArgument("jobs lists " + std::to_string(ids.size()) +
                                   " ids; DescribeJobs takes at most 100: split the request");
  Json out = Json::array();
  std::lock_guard<std::mutex> lock(mu_);
  for (const Json& id_json : ids) {
    if (!id_json.is_string()) return Status::InvalidArgument("jobs must hold job id strings");
    const std::string id = id_json.get<std::string>();
    if (auto node = ParseNodeJobId(id)) {
      auto it = jobs_.find(node->first);
      if (it == jobs_.end()) continue;
      Result<Job> view = NodeJob(it->second, node->second);
      if (view.ok()) out.push_back(DescribeJobJson(*view));
      continue;
    }
    auto it = jobs_.find(id);
    if (it == jobs_.end()) continue;
    Json described = DescribeJobJson(it->second);
    if (output_ != nullptr && !it->second.attempts.empty()) {
      // Live values of the latest attempt (persisted when the attempt ends).
      std::optional<Json> live = output_->Progress(
          id, static_cast<int32_t>(it->second.attempts.size()), clock_->NowMillis());
      if (live) described["progress"] = std::move(*live);
      // Extra key: the output of every node of the ended job is stored (the
      // streams lag the job's end by the time the last bytes take to store).
      if (IsFinal(it->second.status)) described["logsComplete"] = !output_->Pending(id);
    }
    out.push_back(std::move(described));
  }
  return Json{{"jobs", out}};
}

Result<Json> JobLoop::ListJobs(const Json& request) {
  ASSIGN_OR_RETURN(ListJobsQuery query, ParseListJobsRequest(request));
  std::string queue_arn;
  if (!query.job_queue.empty()) {
    // An unknown queue is an error (AWS: ClientException).
    ASSIGN_OR_RETURN(JobQueueSpec queue, control_->FindJobQueue(query.job_queue));
    queue_arn = queue.arn;
  }
  size_t offset = 0;
  if (!query.next_token.empty()) {
    try {
      offset = std::stoul(query.next_token);
    } catch (const std::exception&) {
      return Status::InvalidArgument("nextToken '" + query.next_token +
                                     "' is not one this server issued; pass the nextToken of the "
                                     "previous ListJobs answer unchanged");
    }
  }
  if (!queue_arn.empty() && query.job_status && query.filter_name.empty())
    return ListQueuePage(queue_arn, *query.job_status, offset, query.max_results);
  std::vector<Job> matched;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!query.multi_node_job_id.empty()) {
      auto it = jobs_.find(query.multi_node_job_id);
      if (it != jobs_.end()) {
        for (Job& node : NodeJobs(it->second))
          if (MatchesListJobs(query, node)) matched.push_back(std::move(node));
      }
    } else if (!query.array_job_id.empty()) {
      auto it = jobs_.find(query.array_job_id);
      if (it != jobs_.end() && it->second.IsArrayParent()) {
        for (int32_t i = 0; i < it->second.array->size; ++i) {
          auto child = jobs_.find(ArrayChildId(it->first, i));
          if (child != jobs_.end() && MatchesListJobs(query, child->second))
            matched.push_back(child->second);
        }
      }
    } else {
      for (const auto& [id, job] : jobs_)
        if (MatchesListJobs(query, job)) matched.push_back(job);
    }
  }
  SortForListJobs(query, matched);
  Json list = Json::array();
  const size_t end = std::min(matched.size(), offset + static_cast<size_t>(query.max_results));
  for (size_t i = offset; i < end; ++i) list.push_back(JobSummaryJson(matched[i]));
  Json out{{"jobSummaryList", list}};
  if (end < matched.size()) out["nextToken"] = std::to_string(end);
  return out;
}

// One page of a queue's jobs in a status, no filter: read from the index in
// ListJobs' order (createdAt, then id), only the page's jobs rendered.
Json JobLoop::ListQueuePage(const std::string& queue_arn, JobStatus status, size_t offset,
                            int32_t max_results) {
  Json list = Json::array();
  Json out = Json::object();
  std::lock_guard<std::mutex> lock(mu_);
  const JobIndex::Listed* listed = index_.ListedJobs(queue_arn, status);
  if (listed != nullptr && offset < listed->size()) {
    auto it = std::next(listed->begin(), static_cast<std::ptrdiff_t>(offset));
    for (int32_t n = 0; it != listed->end() && n < max_results; ++it, ++n)
      list.push_back(JobSummaryJson(jobs_.at(it->second)));
    if (it != listed->end()) out["nextToken"] = std::to_string(offset + list.size());
  }
  out["jobSummaryList"] = std::move(list);
  return out;
}

Result<Job> JobLoop::RequestStopLocked(const std::string& job_id, bool terminate,
                                       const std::string& reason, int64_t now) {
  const JobEvent event = terminate ? JobEvent::TerminateRequested(reason, now)
                                   : JobEvent::CancelRequested(reason, now);
  ASSIGN_OR_RETURN(Job job, ApplyLocked(job_id, event));
  if (job.IsArrayParent()) {
    for (int32_t i = 0; i < job.array->size; ++i) {
      const std::string child = ArrayChildId(job_id, i);
      if (jobs_.count(child)) RETURN_IF_ERROR(ApplyLocked(child, event).status());
    }
  }
  return job;
}

bool JobLoop::IsJobArn(const Json& request) const {
  Result<Arn> arn = Arn::Parse(RequiredString(request, "resourceArn"));
  return arn.ok() && arn->service == "batch" && arn->ResourceType() == "job";
}

// The job of a job ARN of this server (region, account), or NotFound.
Result<std::string> JobLoop::JobIdOfArnLocked(const std::string& text) const {
  Result<Arn> arn = Arn::Parse(text);
  if (arn.ok() && arn->region == control_->config().region &&
      arn->account == control_->config().account_id && jobs_.count(arn->ResourceName()))
    return arn->ResourceName();
  return Status::NotFound("resource " + text + " does not exist; check the job ARN");
}

Result<Json> JobLoop::ChangeJobTags(const Json& request, bool untag) {
  std::map<std::string, std::string> set;
  std::vector<std::string> removed;
  if (untag) {
    const Json keys = request.value("tagKeys", Json());
    if (!keys.is_array() || keys.empty())
      return Status::InvalidArgument(
          "tagKeys is required; name at least one tag key to remove (query parameter "
          "tagKeys=<key>)");
    for (const Json& k : keys) {
      if (!k.is_string()) return Status::InvalidArgument("tagKeys must hold strings");
      RETURN_IF_ERROR(ValidateTagKey(k.get<std::string>()));
      removed.push_back(k.get<std::string>());
    }
  } else {
    ASSIGN_OR_RETURN(set, ReadTags(request, "tags", "tags"));
    if (set.empty())
      return Status::InvalidArgument(
          "tags is empty; give at least one tag as {\"key\": \"value\"}");
  }
  Result<uint64_t> ticket = uint64_t{0};
  {
    std::lock_guard<std::mutex> lock(mu_);
    SyncWithStoreLocked();
    ASSIGN_OR_RETURN(std::string id, JobIdOfArnLocked(RequiredString(request, "resourceArn")));
    RETURN_IF_ERROR(
        ApplyLocked(id, JobEvent::TagsChanged(set, removed, clock_->NowMillis())).status());
    ticket = FlushLocked();
  }
  RETURN_IF_ERROR(WaitTicket(std::move(ticket)));
  return Json::object();
}

Result<Json> JobLoop::ListJobTags(const Json& request) {
  std::lock_guard<std::mutex> lock(mu_);
  ASSIGN_OR_RETURN(std::string id, JobIdOfArnLocked(RequiredString(request, "resourceArn")));
  Json tags = Json::object();
  for (const auto& [k, v] : jobs_.at(id).tags) tags[k] = v;
  return Json{{"tags", tags}};
}

Result<Json> JobLoop::GetJobQueueSnapshot(const Json& request) {
  const std::string queue_ref = RequiredString(request, "jobQueue");
  if (queue_ref.empty())
    return Status::InvalidArgument("jobQueue is required: give a job queue name or ARN");
  ASSIGN_OR_RETURN(JobQueueSpec queue, control_->FindJobQueue(queue_ref));
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t now = clock_->NowMillis();
  // The RUNNABLE jobs in the order the last scheduling pass considered them
  // (one order for the scheduler and the snapshot, fair share included).
  std::vector<const Job*> runnable;
  auto order = queue_order_.find(queue.name);
  if (order != queue_order_.end()) {
    for (const std::string& id : order->second) {
      auto it = jobs_.find(id);
      if (it != jobs_.end() && it->second.status == JobStatus::kRunnable &&
          it->second.CurrentAttempt() == nullptr)
        runnable.push_back(&it->second);
    }
  }
  Json jobs = Json::array();
  std::map<std::string, std::pair<size_t, int64_t>> positions;
  for (size_t i = 0; i < runnable.size() && i < 100; ++i) {
    const Job* job = runnable[i];
    // Time at this position: kept while the job holds it, reset when it moves.
    auto old = queue_positions_.find(job->id);
    const int64_t since =
        old != queue_positions_.end() && old->second.first == i ? old->second.second : now;
    positions[job->id] = {i, since};
    jobs.push_back(Json{{"jobArn", job->arn}, {"earliestTimeAtPosition", since}});
  }
  for (auto it = queue_positions_.begin(); it != queue_positions_.end();) {
    const auto job = jobs_.find(it->first);
    if (job == jobs_.end() || job->second.queue_arn == queue.arn) {
      it = queue_positions_.erase(it);
    } else {
      ++it;
    }
  }
  queue_positions_.merge(positions);
  return Json{{"frontOfQueue", Json{{"jobs", jobs}, {"lastUpdatedAt", now}}}};
}

Result<Json> JobLoop::CancelJob(const Json& request) {
  return TerminateOrCancel(request, /*terminate=*/false);
}

Result<Json> JobLoop::TerminateJob(const Json& request) {
  return TerminateOrCancel(request, /*terminate=*/true);
}

Result<Json> JobLoop::TerminateOrCancel(const Json& request, bool terminate) {
  const char* op = terminate ? "TerminateJob" : "CancelJob";
  std::string id = RequiredString(request, "jobId");
  const std::string reason = RequiredString(request, "reason");
  if (id.empty()) return Status::InvalidArgument(std::string(op) + ": jobId is required");
  if (reason.empty())
    return Status::InvalidArgument(std::string(op) +
                                   ": reason is required: say why the job is stopped");
  if (auto node = ParseNodeJobId(id)) id = node->first;
  Result<uint64_t> ticket = uint64_t{0};
  {
    std::lock_guard<std::mutex> lock(mu_);
    SyncWithStoreLocked();
    // AWS answers 200 {} for an id it does not know (nothing to stop).
    if (!jobs_.count(id)) return Json::object();
    ASSIGN_OR_RETURN(Job job, RequestStopLocked(id, terminate, reason, clock_->NowMillis()));
    (void)job;
    ticket = FlushLocked();
  }
  RETURN_IF_ERROR(WaitTicket(std::move(ticket)));
  Wake();
  return Json::object();
}

Result<Json> JobLoop::DeleteJobQueue(const Json& request) {
  const std::string ref = RequiredString(request, "jobQueue");
  Result<JobQueueSpec> queue = control_->FindJobQueue(ref);
  ASSIGN_OR_RETURN(Json answer, control_->DeleteJobQueue(request));
  if (!queue.ok()) return answer;
  // AWS: "all jobs in the queue are eventually terminated when you delete a
  // job queue". Here at once, each as TerminateJob would.
  Result<uint64_t> ticket = uint64_t{0};
  size_t stopped = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    SyncWithStoreLocked();
    const int64_t now = clock_->NowMillis();
    std::vector<std::string> ids;
    for (const auto& [id, job] : jobs_)
      if (job.queue_arn == queue->arn && !IsFinal(job.status)) ids.push_back(id);
    for (const std::string& id : ids) {
      if (IsFinal(jobs_.at(id).status)) continue;  // ended with its array parent
      Result<Job> r = RequestStopLocked(id, /*terminate=*/true,
                                        "Job queue " + queue->name + " was deleted", now);
      if (r.ok()) {
        ++stopped;
      } else {
        spdlog::warn("jobs: deleting queue {}: {}: {}", queue->name, id, r.status().ToString());
      }
    }
    ticket = FlushLocked();
  }
  RETURN_IF_ERROR(WaitTicket(std::move(ticket)));
  if (stopped > 0)
    spdlog::info("jobs: queue {} deleted: {} job(s) terminated", queue->name, stopped);
  Wake();
  return answer;
}
}  // namespace lote::control
