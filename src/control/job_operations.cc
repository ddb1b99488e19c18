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
  if (queue.type != "ECS") {
    return Status::InvalidArgument("job queue " + queue.name + " is a " + queue.type +
                                   " queue for service jobs: submit them with SubmitServiceJob, "
                                   "or submit this job to a container job queue");
  }
  ASSIGN_OR_RETURN(Json definition, control_->FindJobDefinition(definition_ref));

  Result<uint64_t> ticket = uint64_t{0};
  Json response;
  {
    std::lock_guard<std::mutex> lock(mu_);
    SyncWithStoreLocked();
    SubmitContext ctx;
    ctx.now_ms = clock_->NowMillis();
    ctx.job_id = NewTimeOrderedUuid(ctx.now_ms);
    ctx.queue_arn = queue.arn;
    ctx.queue_has_fair_share = !queue.scheduling_policy_arn.empty();
    ctx.job_definition = definition;
    ctx.find_job = [this](const std::string& id) -> std::optional<Job> {
      std::string key = id;
      if (auto node = ParseNodeJobId(id)) key = node->first;
      Result<std::optional<Job>> job = FindJobLocked(key);  // the store's once it finished
      if (!job.ok()) {
        spdlog::warn("jobs: dependency {}: {}", key, job.status().ToString());
        return std::nullopt;
      }
      return *job;
    };
    ctx.consumable_exists = [this](const std::string& reference) {
      return consumables_.Resolve(Json{{"consumableResource", reference}}).ok();
    };
    ASSIGN_OR_RETURN(SubmittedJobs submitted, PrepareSubmit(request, ctx));
    RETURN_IF_ERROR(ValidateProgressTimeout(submitted.job));
    RETURN_IF_ERROR(ValidateTerminationGrace(submitted.job));
    RETURN_IF_ERROR(ValidateInjectedShortage(submitted.job));
    RETURN_IF_ERROR(ParseFaultPlan(submitted.job).status());
    RETURN_IF_ERROR(ApplyLocked(submitted.job.id, JobEvent::Submitted(submitted.job, ctx.now_ms)));
    const Job& job = submitted.job;
    for (const Job& child : submitted.array_children)
      RETURN_IF_ERROR(ApplyLocked(child.id, JobEvent::Submitted(child, ctx.now_ms)));
    response = Json{{"jobArn", job.arn}, {"jobName", job.name}, {"jobId", job.id}};
    ticket = FlushLocked();
  }
  RETURN_IF_ERROR(WaitTicket(std::move(ticket)));
  Wake();
  return response;
}

Result<Json> JobLoop::DescribeJobs(const Json& request) {
  return ReadCommitted([&](uint64_t* shown) { return DescribeJobsOnce(request, shown); });
}

Result<Json> JobLoop::ReadCommitted(const std::function<Result<Json>(uint64_t*)>& read) {
  // When the commit waited for failed, memory is what the store holds again
  // (WaitTicket) and the read runs again, waiting for what it shows then (a
  // batch queued since). Only a disk that keeps refusing writers in between
  // three times gets the third read unconfirmed: reads go on answering.
  constexpr int kReads = 3;
  for (int i = 1;; ++i) {
    uint64_t shown = 0;
    ASSIGN_OR_RETURN(Json out, read(&shown));
    if (WaitTicket(shown).ok() || i == kReads) return out;
  }
}

uint64_t JobLoop::LastHandedTicketLocked() const {
  return unstored_.empty() ? 0 : unstored_.back().first;
}

Result<Json> JobLoop::DescribeJobsOnce(const Json& request, uint64_t* shown) {
  if (!request.is_object() || !request.contains("jobs") || !request["jobs"].is_array())
    return Status::InvalidArgument("jobs is required: a list of 1 to 100 job ids");
  const Json& ids = request["jobs"];
  if (ids.size() > 100)
    return Status::InvalidArgument("jobs lists " + std::to_string(ids.size()) +
                                   " ids; DescribeJobs takes at most 100: split the request");
  std::vector<std::string> wanted;
  for (const Json& id_json : ids) {
    if (!id_json.is_string()) return Status::InvalidArgument("jobs must hold job id strings");
    wanted.push_back(id_json.get<std::string>());
  }
  // `<id>#<n>`: node n of the multi-node job <id>.
  auto key_of = [](const std::string& id) {
    auto node = ParseNodeJobId(id);
    return node ? node->first : id;
  };
  auto render = [this](const std::string& id, const Job& job) -> std::optional<Json> {
    if (auto node = ParseNodeJobId(id)) {
      Result<Job> view = NodeJob(job, node->second);
      if (!view.ok()) return std::nullopt;
      return DescribeJobJson(*view);
    }
    return DescribedLocked(job);
  };
  std::vector<std::optional<Json>> described(wanted.size());
  std::vector<std::string> missing;  // not in memory: finished, in the store (or unknown)
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < wanted.size(); ++i) {
      auto it = jobs_.find(key_of(wanted[i]));
      if (it == jobs_.end()) {
        missing.push_back(key_of(wanted[i]));
        continue;
      }
      described[i] = render(wanted[i], it->second);
    }
    *shown = LastHandedTicketLocked();
  }
  if (!missing.empty()) {
    // Committed before they left memory: the store has what memory had.
    std::sort(missing.begin(), missing.end());
    missing.erase(std::unique(missing.begin(), missing.end()), missing.end());
    ASSIGN_OR_RETURN(std::vector<store::JobRow> rows, store_->FindJobs(missing));
    std::map<std::string, Job> stored;
    for (const store::JobRow& row : rows) {
      Result<Json> doc = ParseJson(row.doc);
      Result<Job> job = doc.ok() ? JobFromJson(*doc) : Result<Job>(doc.status());
      if (!job.ok()) {
        spdlog::error("jobs: the stored row of {} cannot be read: {}", row.job_id,
                      job.status().ToString());
        continue;
      }
      stored.emplace(row.job_id, std::move(job).value());
    }
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < wanted.size(); ++i) {
      if (described[i]) continue;
      auto it = stored.find(key_of(wanted[i]));
      if (it != stored.end() && !retiring_.count(it->first))
        described[i] = render(wanted[i], it->second);
    }
  }
  Json out = Json::array();
  for (std::optional<Json>& d : described)
    if (d) out.push_back(std::move(*d));
  return Json{{"jobs", out}};
}

Json JobLoop::DescribedLocked(const Job& job) {
  Json described = DescribeJobJson(job);
  if (output_ != nullptr && !job.attempts.empty()) {
    // Live values of the latest attempt (persisted when the attempt ends).
    std::optional<Json> live =
        output_->Progress(job.id, static_cast<int32_t>(job.attempts.size()), clock_->NowMillis());
    if (live) described["progress"] = std::move(*live);
    // Extra key: the output of every node of the ended job is stored (the
    // streams lag the job's end by the time the last bytes take to store).
    if (IsFinal(job.status)) described["logsComplete"] = !output_->Pending(job.id);
  }
  return described;
}

Result<Json> JobLoop::ListJobs(const Json& request) {
  return ReadCommitted([&](uint64_t* shown) { return ListJobsOnce(request, shown); });
}

Result<Json> JobLoop::ListJobsOnce(const Json& request, uint64_t* shown) {
  ASSIGN_OR_RETURN(ListJobsQuery query, ParseListJobsRequest(request));
  std::string queue_arn;
  if (!query.job_queue.empty()) {
    // An unknown queue is an error (AWS: ClientException).
    ASSIGN_OR_RETURN(JobQueueSpec queue, control_->FindJobQueue(query.job_queue));
    queue_arn = queue.arn;
  }
  std::optional<ListPosition> after;
  if (!query.next_token.empty()) {
    ASSIGN_OR_RETURN(ListPosition position, ParseListJobsToken(query.next_token));
    after = std::move(position);
  }
  const size_t page = static_cast<size_t>(query.max_results);
  // Memory first (every unfinished job, and finished ones not yet gone),
  // then the store's finished jobs that memory did not hold then: each part
  // has its first page + 1 after the token, so their merge has the page and
  // says whether more follow.
  std::vector<Job> matched;
  {
    std::lock_guard<std::mutex> lock(mu_);
    matched = ListedInMemoryLocked(query, queue_arn, after, page + 1);
    *shown = LastHandedTicketLocked();
  }
  const bool finished_listed = !query.job_status || IsFinal(*query.job_status);
  if (finished_listed && query.multi_node_job_id.empty()) {
    std::set<std::string> in_memory;
    for (const Job& job : matched) in_memory.insert(job.id);
    ASSIGN_OR_RETURN(std::vector<Job> stored,
                     ListedInStore(query, queue_arn, after, page + 1, in_memory));
    for (Job& job : stored) matched.push_back(std::move(job));
  }
  SortForListJobs(query, matched);
  Json list = Json::array();
  for (size_t i = 0; i < matched.size() && i < page; ++i)
    list.push_back(JobSummaryJson(matched[i]));
  Json out{{"jobSummaryList", list}};
  if (matched.size() > page)
    out["nextToken"] = ListJobsToken(ListPositionOf(query, matched[page - 1]));
  return out;
}

std::vector<Job> JobLoop::ListedInMemoryLocked(const ListJobsQuery& query,
                                               const std::string& queue_arn,
                                               const std::optional<ListPosition>& after,
                                               size_t limit) {
  std::vector<Job> matched;
  auto consider = [&](const Job& job) {
    if (MatchesListJobs(query, job) && (!after || ListedAfter(query, *after, job)))
      matched.push_back(job);
  };
  if (!query.multi_node_job_id.empty()) {
    Result<std::optional<Job>> parent = FindJobLocked(query.multi_node_job_id);
    if (parent.ok() && *parent)
      for (const Job& node : NodeJobs(**parent)) consider(node);
  } else if (!query.array_job_id.empty()) {
    Result<std::optional<Job>> parent = FindJobLocked(query.array_job_id);
    if (parent.ok() && *parent && (*parent)->IsArrayParent()) {
      for (int32_t i = 0; i < (*parent)->array->size; ++i) {
        auto child = jobs_.find(ArrayChildId(query.array_job_id, i));
        if (child != jobs_.end()) consider(child->second);
      }
    }
  } else if (query.job_status && query.filter_name.empty()) {
    // A queue's jobs in one status, no filter: that page of the index.
    const JobIndex::Listed* listed = index_.ListedJobs(queue_arn, *query.job_status);
    if (listed != nullptr) {
      auto it = after ? listed->upper_bound({after->at, after->id}) : listed->begin();
      for (; it != listed->end() && matched.size() < limit; ++it)
        matched.push_back(jobs_.at(it->second));
    }
    return matched;
  } else {
    for (const auto& [id, job] : jobs_) consider(job);
  }
  SortForListJobs(query, matched);
  if (matched.size() > limit) matched.resize(limit);
  return matched;
}

Result<std::vector<Job>> JobLoop::ListedInStore(const ListJobsQuery& query,
                                                const std::string& queue_arn,
                                                const std::optional<ListPosition>& after,
                                                size_t limit,
                                                const std::set<std::string>& in_memory) {
  store::FinishedJobsQuery q;
  if (!query.array_job_id.empty()) {
    q.parent_id = query.array_job_id;
    q.after_index = after ? static_cast<int32_t>(after->at) : -1;
  } else {
    q.queue_arn = queue_arn;
    q.newest_first = !query.filter_name.empty();
    if (after) q.after = std::make_pair(after->at, after->id);
    if (query.filter_name == "AFTER_CREATED_AT") q.created_after = std::stoll(query.filter_value);
    if (query.filter_name == "BEFORE_CREATED_AT") q.created_before = std::stoll(query.filter_value);
    if (query.filter_name == "JOB_NAME") q.name_lower = Lower(query.filter_value);
    if (query.filter_name == "JOB_DEFINITION") {
      if (query.filter_value.rfind("arn:", 0) == 0) {
        // The name part of ".../job-definition/NAME:REVISION" narrows the
        // index; the ARN itself is the match.
        Result<Arn> arn = Arn::Parse(query.filter_value);
        const std::string resource = arn.ok() ? arn->ResourceName() : "";
        q.definition_name = resource.substr(0, resource.rfind(':'));
        q.definition_arn = query.filter_value;
      } else {
        q.definition_name = query.filter_value;
      }
    }
    if (query.filter_name == "SHARE_IDENTIFIER") q.share_identifier = query.filter_value;
  }
  if (query.job_status) q.status = std::string(JobStatusName(*query.job_status));
  // Every filter is a term of the store's query; rows still in memory (listed
  // above) are read past, a chunk at a time.
  q.limit = static_cast<int64_t>(limit + in_memory.size());
  std::vector<Job> matched;
  for (;;) {
    ASSIGN_OR_RETURN(std::vector<store::JobRow> rows, store_->ListFinishedJobs(q));
    for (const store::JobRow& row : rows) {
      if (in_memory.count(row.job_id)) continue;
      Result<Json> doc = ParseJson(row.doc);
      Result<Job> job = doc.ok() ? JobFromJson(*doc) : Result<Job>(doc.status());
      if (!job.ok()) {
        spdlog::error("jobs: the stored row of {} cannot be read: {}", row.job_id,
                      job.status().ToString());
        continue;
      }
      if (MatchesListJobs(query, *job)) matched.push_back(std::move(job).value());
    }
    if (matched.size() >= limit || rows.size() < static_cast<size_t>(q.limit)) break;
    const store::JobRow& last = rows.back();
    if (q.parent_id.empty()) {
      q.after = std::make_pair(last.created_ms, last.job_id);
    } else {
      q.after_index = last.array_index;
    }
    q.limit = std::min<int64_t>(q.limit * 2, 10'000);
  }
  if (matched.size() > limit) matched.resize(limit);
  return matched;
}

Result<Job> JobLoop::RequestStopLocked(const std::string& job_id, bool terminate,
                                       const std::string& reason, int64_t now) {
  const JobEvent event = terminate ? JobEvent::TerminateRequested(reason, now)
                                   : JobEvent::CancelRequested(reason, now);
  RETURN_IF_ERROR(ApplyLocked(job_id, event));
  Job job = jobs_.at(job_id);
  if (job.IsArrayParent()) {
    for (int32_t i = 0; i < job.array->size; ++i) {
      const std::string child = ArrayChildId(job_id, i);
      if (jobs_.count(child)) RETURN_IF_ERROR(ApplyLocked(child, event));
    }
  }
  return job;
}

bool JobLoop::IsJobArn(const Json& request) const {
  Result<Arn> arn = Arn::Parse(RequiredString(request, "resourceArn"));
  return arn.ok() && arn->service == "batch" && arn->ResourceType() == "job";
}

// The job of a job ARN of this server (region, account), in memory or in the
// store, or NotFound.
Result<std::string> JobLoop::JobIdOfArnLocked(const std::string& text) {
  Result<Arn> arn = Arn::Parse(text);
  if (arn.ok() && arn->region == control_->config().region &&
      arn->account == control_->config().account_id) {
    ASSIGN_OR_RETURN(std::optional<Job> job, FindJobLocked(arn->ResourceName()));
    if (job) return arn->ResourceName();
  }
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
    RETURN_IF_ERROR(ApplyLocked(id, JobEvent::TagsChanged(set, removed, clock_->NowMillis())));
    ticket = FlushLocked();
  }
  RETURN_IF_ERROR(WaitTicket(std::move(ticket)));
  return Json::object();
}

Result<Json> JobLoop::ListJobTags(const Json& request) {
  std::lock_guard<std::mutex> lock(mu_);
  ASSIGN_OR_RETURN(std::string id, JobIdOfArnLocked(RequiredString(request, "resourceArn")));
  ASSIGN_OR_RETURN(std::optional<Job> job, FindJobLocked(id));
  Json tags = Json::object();
  if (job)
    for (const auto& [k, v] : job->tags) tags[k] = v;
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
