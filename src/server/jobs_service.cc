#include "server/jobs_service.h"

#include <dirent.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <utility>

#include "common/ids.h"
#include "control/job_controller.h"
#include "control/job_env.h"
#include "control/job_render.h"
#include "control/job_sched.h"
#include "control/job_submit.h"
#include "control/validation.h"
#include "exec/batch_env.h"
#include "exec/node_files.h"
#include "logs/stream_names.h"

namespace lote::server {
namespace {

using control::Job;
using control::JobEvent;
using control::JobStatus;

// Container fields the local backend honours (everything else set on a job is
// passed as unsupported: the launch fails naming it, or it is skipped and
// reported in emulation mode).
const std::set<std::string>& SupportedFields() {
  static const std::set<std::string> fields = {
      "image", "command", "environment", "resourceRequirements", "vcpus", "memory", "user",
      "ulimits", "instanceType", "jobRoleArn", "executionRoleArn",
      // Fargate settings: recorded and returned, nothing to do on this host.
      "networkConfiguration", "fargatePlatformConfiguration", "runtimePlatform"};
  return fields;
}

std::string RequiredString(const Json& request, const char* field) {
  if (!request.is_object() || !request.contains(field) || !request[field].is_string()) return "";
  return request[field].get<std::string>();
}

}  // namespace

JobsService::JobsService(ServerContext& context, JobsServiceOptions options)
    : home_(context.home),
      clock_(context.clock),
      store_(context.store),
      control_(context.control),
      options_(options) {}

Result<std::unique_ptr<JobsService>> JobsService::Start(ServerContext& context,
                                                        JobsServiceOptions options) {
  std::unique_ptr<JobsService> service(new JobsService(context, options));
  exec::LocalBackendOptions backend_options;
  backend_options.home = context.home;
  backend_options.shim_command = options.shim_command;
  ASSIGN_OR_RETURN(service->backend_, exec::LocalBackend::Create(backend_options));
  if (context.log_store != nullptr) {
    service->job_logs_ = std::make_unique<JobLogs>(context.log_store);
    service->job_logs_->OnStored([svc = service.get()] { svc->Wake(); });
  }
  // Jobs may run as other users, who can pass through the home (the backend
  // makes it 0711 then): everything in it but jobs/ is the server's alone.
  RETURN_IF_ERROR(MakeHomePrivate(context.home));
  RETURN_IF_ERROR(service->Load());
  RETURN_IF_ERROR(service->RecoverNodes());
  service->ResumeLogs();
  service->RegisterOperations(context.router);
  service->loop_ = std::thread([s = service.get()] { s->Loop(); });
  return service;
}

JobsService::~JobsService() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  pass_done_.notify_all();
  if (backend_) backend_->Wake();
  if (loop_.joinable()) loop_.join();
  job_logs_.reset();  // its pump calls Wake(): stop it while mu_ and backend_ exist
}

Status JobsService::Load() {
  ASSIGN_OR_RETURN(store::Snapshot snapshot, store_->Load());
  std::vector<const Job*> order;
  for (const store::JobRow& row : snapshot.jobs) {
    ASSIGN_OR_RETURN(Json doc, ParseJson(row.doc));
    ASSIGN_OR_RETURN(Job job, control::JobFromJson(doc));
    ASSIGN_OR_RETURN(std::vector<store::JobEvent> events, store_->JobEvents(row.job_id));
    last_seq_[row.job_id] = events.empty() ? 0 : events.back().seq;
    jobs_[row.job_id] = std::move(job);
  }
  for (const auto& [id, job] : jobs_) order.push_back(&job);
  std::sort(order.begin(), order.end(), [](const Job* a, const Job* b) {
    return a->created_at != b->created_at ? a->created_at < b->created_at : a->id < b->id;
  });
  for (const Job* job : order) submit_order_[job->id] = next_submit_order_++;

  // Virtual instances that hold running nodes.
  for (const auto& [id, job] : jobs_) {
    const control::Attempt* attempt = job.CurrentAttempt();
    if (attempt == nullptr) continue;
    Result<control::ComputeEnvironmentSpec> ce =
        control_->FindComputeEnvironment(attempt->compute_environment);
    sched::Resources shape;
    if (ce.ok() && !ce->instance_types.empty())
      shape = control::ShapeOf(ce->instance_types.front());
    for (const control::NodeAttempt& node : attempt->nodes) {
      if (instances_.count(node.instance_id)) continue;
      control::VirtualInstance inst{node.instance_id, attempt->compute_environment, shape,
                                    node.private_ipv4, sched::Instance::kBusy};
      instances_[node.instance_id] = inst;
      next_instance_index_ =
          std::max(next_instance_index_, exec::InstanceIndexOfPrivateIp(node.private_ipv4) + 1);
    }
  }
  return Status();
}

Status JobsService::RecoverNodes() {
  std::vector<exec::NodeKey> expected;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [id, job] : jobs_) {
      const control::Attempt* attempt = job.CurrentAttempt();
      if (attempt == nullptr) continue;
      const int32_t number = static_cast<int32_t>(job.attempts.size());
      for (const control::NodeAttempt& node : attempt->nodes) {
        if (control::IsFinal(node.status)) continue;
        expected.push_back(exec::NodeKey{exec::AttemptKey{id, number}, node.node_index});
      }
    }
  }
  ASSIGN_OR_RETURN(exec::RecoverReport report, backend_->Recover(expected));
  // An attempt none of whose nodes ever ran its command (the server stopped
  // while it was STARTING) fails as NOT_STARTED, which does not count against
  // retryStrategy.attempts: the job runs again as if it had not been tried.
  {
    std::map<exec::AttemptKey, size_t> never;
    for (const exec::NodeKey& key : report.never_started) ++never[key.attempt];
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [attempt, count] : never) {
      auto it = jobs_.find(attempt.job_id);
      if (it == jobs_.end() || it->second.CurrentAttempt() == nullptr) continue;
      const control::Attempt& open = *it->second.CurrentAttempt();
      bool untouched = count == open.nodes.size();
      for (const control::NodeAttempt& node : open.nodes)
        untouched = untouched && node.status == control::JobStatus::kStarting;
      if (untouched) unstarted_attempts_.insert(attempt);
    }
  }
  if (!expected.empty()) {
    spdlog::info("jobs: recovered {} running node(s): {} adopted, {} finished, {} lost",
                 expected.size(), report.adopted.size(), report.finished.size(),
                 report.lost.size());
  }
  return Status();
}

void JobsService::ResumeLogs() {
  if (!job_logs_) return;
  size_t followed = 0, caught_up = 0;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [id, job] : jobs_) {
    for (size_t a = 0; a < job.attempts.size(); ++a) {
      const control::Attempt& attempt = job.attempts[a];
      const int32_t number = static_cast<int32_t>(a + 1);
      const bool open = &attempt == job.CurrentAttempt();
      for (const control::NodeAttempt& node : attempt.nodes) {
        if (node.log_stream_name.empty()) continue;
        const NodeLogKey key{id, number, node.node_index};
        Result<exec::NodePaths> paths =
            exec::NodePathsFor(home_, exec::NodeKey{exec::AttemptKey{id, number}, node.node_index});
        if (!paths.ok()) continue;
        const std::string output = paths->default_output();
        if (open && !control::IsFinal(node.status)) {
          // Running (adopted) or about to be reported ended by the executor.
          job_logs_->Follow(key, output, node.log_stream_name, node.started_at);
          ++followed;
          continue;
        }
        struct stat st;
        if (::stat(output.c_str(), &st) != 0 || st.st_size == 0) continue;
        Result<int64_t> stored = job_logs_->StoredOffset(node.log_stream_name);
        if (stored.ok() && *stored >= st.st_size) continue;
        job_logs_->Follow(key, output, node.log_stream_name, node.started_at);
        job_logs_->Complete(key);
        ++caught_up;
        // Its final progress may be in the part not stored yet.
        const exec::AttemptKey closed{id, number};
        if (!open && std::find(closed_attempts_.begin(), closed_attempts_.end(), closed) ==
                         closed_attempts_.end())
          closed_attempts_.push_back(closed);
      }
    }
  }
  if (followed + caught_up > 0)
    spdlog::info("logs: following {} running node(s); storing the rest of {} ended node(s)",
                 followed, caught_up);
}

void JobsService::RegisterOperations(api::ApiRouter* router) {
  router->RegisterRestOperation(
      {"SubmitJob", "POST", "/v1/submitjob", {}, [this](const Json& r) { return SubmitJob(r); }});
  router->RegisterRestOperation(
      {"DescribeJobs", "POST", "/v1/describejobs", {}, [this](const Json& r) {
         return DescribeJobs(r);
       }});
  router->RegisterRestOperation(
      {"ListJobs", "POST", "/v1/listjobs", {}, [this](const Json& r) { return ListJobs(r); }});
  router->RegisterRestOperation(
      {"CancelJob", "POST", "/v1/canceljob", {}, [this](const Json& r) { return CancelJob(r); }});
  router->RegisterRestOperation(
      {"TerminateJob", "POST", "/v1/terminatejob", {}, [this](const Json& r) {
         return TerminateJob(r);
       }});
  router->RegisterRestOperation(
      {"GetJobQueueSnapshot", "POST", "/v1/getjobqueuesnapshot", {}, [this](const Json& r) {
         return GetJobQueueSnapshot(r);
       }});
  // Tags of jobs live with the jobs; every other ARN goes to the control plane.
  control::ControlPlane* cp = control_;
  router->RegisterRestOperation(
      {"TagResource", "POST", "/v1/tags/{resourceArn}", {}, [this, cp](const Json& r) {
         return IsJobArn(r) ? ChangeJobTags(r, /*untag=*/false) : cp->TagResource(r);
       }});
  router->RegisterRestOperation(
      {"ListTagsForResource", "GET", "/v1/tags/{resourceArn}", {}, [this, cp](const Json& r) {
         return IsJobArn(r) ? ListJobTags(r) : cp->ListTagsForResource(r);
       }});
  router->RegisterRestOperation(
      {"UntagResource", "DELETE", "/v1/tags/{resourceArn}", {"tagKeys"}, [this, cp](const Json& r) {
         return IsJobArn(r) ? ChangeJobTags(r, /*untag=*/true) : cp->UntagResource(r);
       }});
}

void JobsService::Wake() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    dirty_ = true;
  }
  backend_->Wake();
}

// --- Events and persistence -------------------------------------------------

Result<Job> JobsService::ApplyLocked(const std::string& id, const JobEvent& event) {
  auto it = jobs_.find(id);
  static const Job kNone;
  const Job& before = it == jobs_.end() ? kNone : it->second;
  ASSIGN_OR_RETURN(Job after, control::Apply(before, event));
  if (it != jobs_.end() && after == before) return after;  // no-op or stale: nothing stored
  const int64_t seq = ++last_seq_[after.id];
  batch_.AppendJobEvent(store::JobEvent{after.id, seq, event.at_ms,
                                        std::string(control::JobEventTypeName(event.type)),
                                        control::EventToJson(event).dump()});
  batch_.PutJob(store::JobRow{after.id, after.name, after.queue_arn,
                              std::string(control::JobStatusName(after.status)), after.created_at,
                              event.at_ms, control::JobToJson(after).dump()});
  if (it == jobs_.end()) {
    submit_order_[after.id] = next_submit_order_++;
    jobs_[after.id] = after;
  } else {
    const Job previous = std::move(it->second);
    it->second = after;
    AfterChangeLocked(previous, after);
  }
  dirty_ = true;
  return after;
}

void JobsService::AfterChangeLocked(const Job& before, const Job& after) {
  // An attempt that closed: tear down whatever still runs of it (gang rule).
  if (before.CurrentAttempt() != nullptr &&
      (after.CurrentAttempt() == nullptr || after.attempts.size() != before.attempts.size())) {
    to_terminate_.push_back(
        exec::AttemptKey{before.id, static_cast<int32_t>(before.attempts.size())});
    if (job_logs_)
      closed_attempts_.push_back(
          exec::AttemptKey{before.id, static_cast<int32_t>(before.attempts.size())});
  }
}

Result<uint64_t> JobsService::FlushLocked() {
  if (batch_.empty()) return uint64_t{0};
  store::WriteBatch batch = std::move(batch_);
  batch_ = store::WriteBatch();
  return store_->Enqueue(std::move(batch));
}

Status JobsService::WaitTicket(Result<uint64_t> ticket) {
  if (!ticket.ok()) return ticket.status();
  if (*ticket == 0) return Status();
  return store_->Wait(*ticket);
}

// --- API ----------------------------------------------------------------------

Result<Json> JobsService::SubmitJob(const Json& request) {
  if (!request.is_object())
    return Status::InvalidArgument("the request body must be a JSON object");
  const std::string queue_ref = RequiredString(request, "jobQueue");
  const std::string definition_ref = RequiredString(request, "jobDefinition");
  if (queue_ref.empty())
    return Status::InvalidArgument("jobQueue is required: give a job queue name or ARN");
  if (definition_ref.empty())
    return Status::InvalidArgument(
        "jobDefinition is required: give a job definition name, name:revision or ARN");
  ASSIGN_OR_RETURN(control::JobQueueSpec queue, control_->FindJobQueue(queue_ref));
  ASSIGN_OR_RETURN(Json definition, control_->FindJobDefinition(definition_ref));

  Result<uint64_t> ticket = uint64_t{0};
  Json response;
  {
    std::lock_guard<std::mutex> lock(mu_);
    control::SubmitContext ctx;
    ctx.job_id = NewUuid();
    ctx.queue_arn = queue.arn;
    ctx.queue_has_fair_share = !queue.scheduling_policy_arn.empty();
    ctx.job_definition = definition;
    ctx.now_ms = clock_->NowMillis();
    ctx.find_job = [this](const std::string& id) -> std::optional<Job> {
      std::string key = id;
      if (auto node = control::ParseNodeJobId(id)) key = node->first;
      auto it = jobs_.find(key);
      if (it == jobs_.end()) return std::nullopt;
      return it->second;
    };
    ASSIGN_OR_RETURN(control::SubmittedJobs submitted, control::PrepareSubmit(request, ctx));
    RETURN_IF_ERROR(control::ValidateProgressTimeout(submitted.job));
    RETURN_IF_ERROR(control::ValidateTerminationGrace(submitted.job));
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

Result<Json> JobsService::DescribeJobs(const Json& request) {
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
    if (auto node = control::ParseNodeJobId(id)) {
      auto it = jobs_.find(node->first);
      if (it == jobs_.end()) continue;
      Result<Job> view = control::NodeJob(it->second, node->second);
      if (view.ok()) out.push_back(control::DescribeJobJson(*view));
      continue;
    }
    auto it = jobs_.find(id);
    if (it == jobs_.end()) continue;
    Json described = control::DescribeJobJson(it->second);
    if (job_logs_ && !it->second.attempts.empty()) {
      // Live values of the latest attempt (persisted when the attempt ends).
      std::optional<Json> live = job_logs_->Progress(
          id, static_cast<int32_t>(it->second.attempts.size()), clock_->NowMillis());
      if (live) described["progress"] = std::move(*live);
      // Extra key: the output of every node of the ended job is stored (the
      // streams lag the job's end by the time the last bytes take to store).
      if (control::IsFinal(it->second.status)) described["logsComplete"] = !job_logs_->Pending(id);
    }
    out.push_back(std::move(described));
  }
  return Json{{"jobs", out}};
}

Result<Json> JobsService::ListJobs(const Json& request) {
  ASSIGN_OR_RETURN(control::ListJobsQuery query, control::ParseListJobsRequest(request));
  if (!query.job_queue.empty()) {
    // An unknown queue is an error (AWS: ClientException).
    RETURN_IF_ERROR(control_->FindJobQueue(query.job_queue).status());
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
  std::vector<Job> matched;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!query.multi_node_job_id.empty()) {
      auto it = jobs_.find(query.multi_node_job_id);
      if (it != jobs_.end()) {
        for (Job& node : control::NodeJobs(it->second))
          if (control::MatchesListJobs(query, node)) matched.push_back(std::move(node));
      }
    } else if (!query.array_job_id.empty()) {
      auto it = jobs_.find(query.array_job_id);
      if (it != jobs_.end() && it->second.IsArrayParent()) {
        for (int32_t i = 0; i < it->second.array->size; ++i) {
          auto child = jobs_.find(control::ArrayChildId(it->first, i));
          if (child != jobs_.end() && control::MatchesListJobs(query, child->second))
            matched.push_back(child->second);
        }
      }
    } else {
      for (const auto& [id, job] : jobs_)
        if (control::MatchesListJobs(query, job)) matched.push_back(job);
    }
  }
  control::SortForListJobs(query, matched);
  Json list = Json::array();
  const size_t end = std::min(matched.size(), offset + static_cast<size_t>(query.max_results));
  for (size_t i = offset; i < end; ++i) list.push_back(control::JobSummaryJson(matched[i]));
  Json out{{"jobSummaryList", list}};
  if (end < matched.size()) out["nextToken"] = std::to_string(end);
  return out;
}

Result<Job> JobsService::RequestStopLocked(const std::string& job_id, bool terminate,
                                           const std::string& reason, int64_t now) {
  const JobEvent event = terminate ? JobEvent::TerminateRequested(reason, now)
                                   : JobEvent::CancelRequested(reason, now);
  ASSIGN_OR_RETURN(Job job, ApplyLocked(job_id, event));
  if (job.IsArrayParent()) {
    for (int32_t i = 0; i < job.array->size; ++i) {
      const std::string child = control::ArrayChildId(job_id, i);
      if (jobs_.count(child)) RETURN_IF_ERROR(ApplyLocked(child, event).status());
    }
  }
  return job;
}

bool JobsService::IsJobArn(const Json& request) const {
  Result<Arn> arn = Arn::Parse(RequiredString(request, "resourceArn"));
  return arn.ok() && arn->service == "batch" && arn->ResourceType() == "job";
}

// The job of a job ARN of this server (region, account), or NotFound.
Result<std::string> JobsService::JobIdOfArnLocked(const std::string& text) const {
  Result<Arn> arn = Arn::Parse(text);
  if (arn.ok() && arn->region == control_->config().region &&
      arn->account == control_->config().account_id && jobs_.count(arn->ResourceName()))
    return arn->ResourceName();
  return Status::NotFound("resource " + text + " does not exist; check the job ARN");
}

Result<Json> JobsService::ChangeJobTags(const Json& request, bool untag) {
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
      RETURN_IF_ERROR(control::ValidateTagKey(k.get<std::string>()));
      removed.push_back(k.get<std::string>());
    }
  } else {
    ASSIGN_OR_RETURN(set, control::ReadTags(request, "tags", "tags"));
    if (set.empty())
      return Status::InvalidArgument(
          "tags is empty; give at least one tag as {\"key\": \"value\"}");
  }
  Result<uint64_t> ticket = uint64_t{0};
  {
    std::lock_guard<std::mutex> lock(mu_);
    ASSIGN_OR_RETURN(std::string id, JobIdOfArnLocked(RequiredString(request, "resourceArn")));
    RETURN_IF_ERROR(
        ApplyLocked(id, JobEvent::TagsChanged(set, removed, clock_->NowMillis())).status());
    ticket = FlushLocked();
  }
  RETURN_IF_ERROR(WaitTicket(std::move(ticket)));
  return Json::object();
}

Result<Json> JobsService::ListJobTags(const Json& request) {
  std::lock_guard<std::mutex> lock(mu_);
  ASSIGN_OR_RETURN(std::string id, JobIdOfArnLocked(RequiredString(request, "resourceArn")));
  Json tags = Json::object();
  for (const auto& [k, v] : jobs_.at(id).tags) tags[k] = v;
  return Json{{"tags", tags}};
}

Result<Json> JobsService::GetJobQueueSnapshot(const Json& request) {
  const std::string queue_ref = RequiredString(request, "jobQueue");
  if (queue_ref.empty())
    return Status::InvalidArgument("jobQueue is required: give a job queue name or ARN");
  ASSIGN_OR_RETURN(control::JobQueueSpec queue, control_->FindJobQueue(queue_ref));
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t now = clock_->NowMillis();
  // The RUNNABLE jobs in the order the scheduler considers them: scheduling
  // priority (fair-share queues), then submission order.
  std::vector<const Job*> runnable;
  for (const auto& [id, job] : jobs_)
    if (job.status == JobStatus::kRunnable && job.queue_arn == queue.arn && !job.IsArrayParent())
      runnable.push_back(&job);
  std::sort(runnable.begin(), runnable.end(), [this](const Job* a, const Job* b) {
    const int32_t pa = a->scheduling_priority.value_or(0), pb = b->scheduling_priority.value_or(0);
    if (pa != pb) return pa > pb;
    return submit_order_.at(a->id) < submit_order_.at(b->id);
  });
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

Result<Json> JobsService::CancelJob(const Json& request) {
  return TerminateOrCancel(request, /*terminate=*/false);
}

Result<Json> JobsService::TerminateJob(const Json& request) {
  return TerminateOrCancel(request, /*terminate=*/true);
}

Result<Json> JobsService::TerminateOrCancel(const Json& request, bool terminate) {
  const char* op = terminate ? "TerminateJob" : "CancelJob";
  std::string id = RequiredString(request, "jobId");
  const std::string reason = RequiredString(request, "reason");
  if (id.empty()) return Status::InvalidArgument(std::string(op) + ": jobId is required");
  if (reason.empty())
    return Status::InvalidArgument(std::string(op) +
                                   ": reason is required: say why the job is stopped");
  if (auto node = control::ParseNodeJobId(id)) id = node->first;
  Result<uint64_t> ticket = uint64_t{0};
  {
    std::lock_guard<std::mutex> lock(mu_);
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

// --- The loop -----------------------------------------------------------------

void JobsService::Loop() {
  while (true) {
    int64_t sleep_ms = options_.max_sleep_ms;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
      if (dirty_) sleep_ms = 0;
      dirty_ = false;
    }
    Result<std::vector<exec::NodeEvent>> events = backend_->Wait(sleep_ms);
    if (!events.ok()) {
      spdlog::error("jobs: executor wait failed: {}", events.status().ToString());
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      continue;
    }
    // Node events in hand are always recorded, also when stopping.
    Pass(std::move(events).value());
    {
      std::lock_guard<std::mutex> lock(mu_);
      passes_done_ = std::max(passes_done_, passes_begun_);
    }
    pass_done_.notify_all();
  }
}

bool JobsService::WaitForPass(int64_t timeout_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  const uint64_t target = passes_begun_ + 1;
  dirty_ = true;
  lock.unlock();
  backend_->Wake();
  lock.lock();
  return pass_done_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] {
    return passes_done_ >= target || stopping_;
  }) && passes_done_ >= target;
}

std::string JobsService::NewInstanceIdLocked() {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "i-%017x", static_cast<unsigned>(next_instance_index_));
  return buf;
}

void JobsService::UpdateArrayParentLocked(const std::string& parent_id, int64_t now) {
  std::optional<JobEvent> e = control::ArrayParentEvent(jobs_, parent_id, now);
  if (!e) return;
  Result<Job> r = ApplyLocked(parent_id, *e);
  if (!r.ok()) spdlog::warn("jobs: array parent {}: {}", parent_id, r.status().ToString());
}

void JobsService::PersistClosedAttemptsLocked(int64_t now) {
  std::vector<exec::AttemptKey> closed;
  closed.swap(closed_attempts_);
  for (const exec::AttemptKey& key : closed) {
    // The final progress is the one of the attempt's last line: wait until
    // every line is stored (JobLogs::OnStored wakes the loop).
    if (job_logs_->AttemptPending(key.job_id, key.attempt)) {
      closed_attempts_.push_back(key);
      continue;
    }
    std::optional<Json> progress = job_logs_->Progress(key.job_id, key.attempt, now);
    if (progress && jobs_.count(key.job_id)) {
      Result<Job> r = ApplyLocked(key.job_id, JobEvent::Progress(std::move(*progress), now));
      if (!r.ok()) spdlog::warn("jobs: progress of {}: {}", key.job_id, r.status().ToString());
    }
    job_logs_->ReleaseAttempt(key.job_id, key.attempt);
  }
}

std::vector<std::pair<std::string, JobEvent>> JobsService::HangEventsLocked(int64_t now) {
  std::vector<std::pair<std::string, JobEvent>> hangs;
  if (!job_logs_) return hangs;
  for (const auto& [id, job] : jobs_) {
    if (job.status != JobStatus::kRunning) continue;
    const std::optional<int64_t> timeout_s = control::ProgressTimeoutSeconds(job);
    const control::Attempt* attempt = job.CurrentAttempt();
    if (!timeout_s || attempt == nullptr) continue;
    const int32_t number = static_cast<int32_t>(job.attempts.size());
    const std::vector<int32_t> stalled =
        job_logs_->StalledNodes(id, number, now, *timeout_s * 1000);
    if (stalled.empty()) continue;
    const std::string reason = control::HangReason(
        job, *attempt, stalled, *timeout_s,
        [this](const std::string& stream) { return job_logs_->LastLines(stream, 3); });
    hangs.emplace_back(id, JobEvent::AttemptFailed(number, control::FailureCategory::kHang, reason,
                                                   stalled.front(), now));
  }
  return hangs;
}

void JobsService::Pass(std::vector<exec::NodeEvent> node_events) {
  std::vector<std::string> launches;
  std::vector<exec::AttemptKey> terminate;
  Result<uint64_t> ticket = uint64_t{0};
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++passes_begun_;
    const int64_t now = clock_->NowMillis();
    auto apply = [&](const std::string& id, const JobEvent& e) {
      Result<Job> r = ApplyLocked(id, e);
      if (!r.ok())
        spdlog::warn("jobs: event {} on {} not applied: {}", control::JobEventTypeName(e.type), id,
                     r.status().ToString());
    };
    // 1. What the executor saw.
    for (const exec::NodeEvent& ev : node_events) {
      const std::string& id = ev.node.attempt.job_id;
      if (!jobs_.count(id)) continue;
      const int32_t attempt = ev.node.attempt.attempt;
      // Times come from the service's clock (the backend's may differ in tests);
      // the event arrives as soon as the node ends (pidfd).
      const int64_t at = now;
      if (job_logs_) job_logs_->Complete(NodeLogKey{id, attempt, ev.node.node_index});
      switch (ev.outcome) {
        case exec::NodeOutcome::kExited:
        case exec::NodeOutcome::kSignaled:
          apply(id, JobEvent::NodeExited(attempt, ev.node.node_index, exec::ContainerExitCode(ev),
                                         ev.signal, at));
          break;
        case exec::NodeOutcome::kLost:
        case exec::NodeOutcome::kStartFailed: {
          const control::FailureCategory category =
              FailureCategoryOf(ev, unstarted_attempts_.count(ev.node.attempt) > 0);
          if (category == control::FailureCategory::kNotStarted)
            spdlog::info("jobs: attempt {} of {} never started; running it again", attempt, id);
          apply(id, JobEvent::AttemptFailed(attempt, category, ev.reason, ev.node.node_index, at));
          break;
        }
      }
    }
    // 2. Timeouts.
    std::vector<std::pair<std::string, int32_t>> timed_out;
    for (const auto& [id, job] : jobs_) {
      std::optional<int64_t> deadline = control::AttemptDeadlineMs(job);
      if (deadline && *deadline <= now)
        timed_out.emplace_back(id, static_cast<int32_t>(job.attempts.size()));
    }
    for (const auto& [id, attempt] : timed_out) apply(id, JobEvent::TimedOut(attempt, now));
    // 2b. Hangs (no LOTE_PROGRESS for too long).
    for (const auto& [id, e] : HangEventsLocked(now)) apply(id, e);
    // 3. Dependencies, until nothing changes (a failure cascades down chains).
    auto status_of = [this](const std::string& dep) -> std::optional<JobStatus> {
      std::string key = dep;
      if (auto node = control::ParseNodeJobId(dep)) key = node->first;
      auto it = jobs_.find(key);
      if (it == jobs_.end()) return std::nullopt;
      return it->second.status;
    };
    for (int round = 0; round < 1000; ++round) {
      std::vector<std::pair<std::string, JobEvent>> deps;
      for (const auto& [id, job] : jobs_) {
        if (job.status != JobStatus::kSubmitted && job.status != JobStatus::kPending) continue;
        std::optional<JobEvent> e = control::DependencyEvent(job, status_of, now);
        if (e) deps.emplace_back(id, *e);
      }
      if (deps.empty()) break;
      for (const auto& [id, e] : deps) apply(id, e);
      // Array parents follow their children (a parent's own dependencies are its children's).
      std::set<std::string> parents;
      for (const auto& [id, e] : deps)
        if (auto child = control::ParseArrayChildId(id)) parents.insert(child->first);
      for (const std::string& p : parents) UpdateArrayParentLocked(p, now);
    }
    // 4. Array parents.
    std::vector<std::string> parents;
    for (const auto& [id, job] : jobs_)
      if (job.IsArrayParent() && !control::IsFinal(job.status)) parents.push_back(id);
    for (const std::string& p : parents) UpdateArrayParentLocked(p, now);
    // Progress of the attempts that ended is kept with the job.
    PersistClosedAttemptsLocked(now);
    // 5. Scheduling.
    // (Nothing new starts once the server is stopping.)
    Result<sched::Snapshot> snap =
        stopping_ ? Result<sched::Snapshot>(sched::Snapshot{})
                  : control::BuildSchedulerSnapshot(jobs_, submit_order_, &instances_, control_,
                                                    share_history_, now);
    if (snap.ok() && !snap->jobs.empty()) {
      Result<sched::Decisions> decisions = sched::Decide(*snap, now);
      if (!decisions.ok()) {
        spdlog::error("jobs: scheduling pass failed: {}", decisions.status().ToString());
      } else {
        std::vector<std::string> launched_ids;
        for (const sched::Launch& l : decisions->launches) {
          const std::string iid = NewInstanceIdLocked();
          Result<std::string> ip = exec::InstancePrivateIp(next_instance_index_);
          ++next_instance_index_;
          instances_[iid] = control::VirtualInstance{iid, l.compute_environment, l.shape,
                                                     ip.ok() ? *ip : std::string("127.0.0.1"), now};
          launched_ids.push_back(iid);
        }
        for (const sched::Removal& r : decisions->removals) instances_.erase(r.instance_id);
        for (const sched::CeTarget& t : decisions->targets) {
          Status st = control_->SetDesiredVcpus(t.compute_environment,
                                                static_cast<int32_t>(t.desired_vcpus));
          if (!st.ok())
            spdlog::warn("jobs: desiredvCpus of {}: {}", t.compute_environment, st.ToString());
        }
        for (const sched::ShareUsageUpdate& u : decisions->share_usage)
          share_history_[u.queue + "/" + u.share_identifier] = u;
        for (const sched::NeverFits& nf : decisions->never_fits)
          apply(nf.job_id, JobEvent::AttemptFailed(0, control::FailureCategory::kCapacity,
                                                   nf.message, -1, now));
        // A malformed request fails its own job, never the pass.
        for (const sched::Rejected& r : decisions->rejected) {
          spdlog::warn("jobs: {} cannot be scheduled: {}", r.job_id, r.message);
          apply(r.job_id,
                JobEvent::AttemptFailed(0, control::FailureCategory::kCapacity,
                                        "the job cannot be scheduled: " + r.message, -1, now));
        }
        for (const sched::Wait& w : decisions->waiting) {
          auto it = jobs_.find(w.job_id);
          if (it != jobs_.end() && it->second.status_reason != w.message)
            apply(w.job_id, JobEvent::StatusReason(w.message, now));
        }
        auto ip_of = [this](const std::string& iid) {
          auto it = instances_.find(iid);
          return it == instances_.end() ? std::string() : it->second.private_ip;
        };
        // A placement that cannot be recorded fails its own job (with the
        // reason), never the pass, and never leaves the job silently RUNNABLE.
        auto placement_failed = [&](const std::string& id, const Status& why) {
          spdlog::error("jobs: placement of {}: {}", id, why.ToString());
          apply(id,
                JobEvent::AttemptFailed(0, control::FailureCategory::kInfrastructure,
                                        "lote could not place the job: " + why.message(), -1, now));
        };
        for (const sched::Placement& p : decisions->placements) {
          Result<JobEvent> e = control::ScheduledEvent(p, launched_ids, ip_of, now);
          if (!e.ok()) {
            placement_failed(p.job_id, e.status());
            continue;
          }
          Result<Job> r = ApplyLocked(p.job_id, *e);
          if (r.ok()) {
            launches.push_back(p.job_id);
          } else {
            placement_failed(p.job_id, r.status());
          }
        }
      }
    } else if (!snap.ok()) {
      spdlog::error("jobs: snapshot: {}", snap.status().ToString());
    }
    terminate.swap(to_terminate_);
    ticket = FlushLocked();
  }
  // Placements are durable before anything runs.
  Status committed = WaitTicket(std::move(ticket));
  if (!committed.ok()) {
    spdlog::error("jobs: store commit failed: {}", committed.ToString());
    return;
  }
  for (const exec::AttemptKey& key : terminate) {
    Status s = backend_->Terminate(key, GraceMs(key));
    if (!s.ok() && s.code() != StatusCode::kNotFound)
      spdlog::warn("jobs: terminate {}/{}: {}", key.job_id, key.attempt, s.ToString());
  }
  LaunchPlaced(launches);
}

void JobsService::LaunchPlaced(const std::vector<std::string>& job_ids) {
  std::vector<std::pair<std::string, JobEvent>> all_events;
  for (const std::string& id : job_ids) {
    Job job;
    bool emulation = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = jobs_.find(id);
      if (it == jobs_.end() || it->second.CurrentAttempt() == nullptr) continue;
      job = it->second;
    }
    const control::Attempt* attempt = job.CurrentAttempt();
    const int32_t number = static_cast<int32_t>(job.attempts.size());
    if (Result<control::ComputeEnvironmentSpec> ce =
            control_->FindComputeEnvironment(attempt->compute_environment);
        ce.ok()) {
      emulation = ce->emulation;
    }
    std::vector<JobEvent> events;
    for (const control::NodeAttempt& node : attempt->nodes) {
      const int64_t now = clock_->NowMillis();
      Status failed;
      std::string output_path;
      std::vector<std::string> notices;
      Result<control::NodeLaunch> launch = control::NodeLaunchSpec(job, node.node_index);
      if (!launch.ok()) {
        failed = launch.status();
      } else {
        exec::NodeLaunchSpec spec;
        spec.node = exec::NodeKey{exec::AttemptKey{job.id, number}, node.node_index};
        spec.command = launch->command;
        for (const control::EnvVar& v : launch->environment) spec.environment[v.name] = v.value;
        spec.user = launch->user;
        if (launch->ulimits.is_array()) {
          for (const Json& u : launch->ulimits) {
            spec.ulimits.push_back(exec::Ulimit{u.value("name", ""),
                                                u.value("softLimit", int64_t{0}),
                                                u.value("hardLimit", int64_t{0})});
          }
        }
        spec.vcpu_milli = launch->milli_vcpu;
        spec.memory_mib = launch->memory_mib;
        spec.private_ip = launch->private_ipv4;
        for (const std::string& f : launch->fields_set)
          if (!SupportedFields().count(f)) spec.unsupported_fields.push_back(f);
        // Accelerators: virtual instances carry device indices, but the local
        // backend cannot hand real devices to a process; only an emulated
        // compute environment may run such nodes (without the devices).
        if (launch->gpus > 0) spec.unsupported_fields.push_back("resourceRequirements.GPU");
        spec.emulation = emulation;
        if (spec.command.empty()) {
          failed = Status::InvalidArgument(
              "the container has no command: set command in the job definition or in "
              "containerOverrides");
        } else {
          Result<exec::LaunchResult> r = backend_->Launch(spec);
          if (!r.ok()) {
            failed = r.status();
          } else {
            output_path = r->output_path;
            // lote's notices go to the server log and DescribeJobs, never into
            // the job's stream (which holds only the command's output, as AWS).
            for (const std::string& w : r->warnings)
              spdlog::info("jobs: {} attempt {} node {}: {}", job.id, number, node.node_index, w);
            notices = std::move(r->warnings);
          }
        }
      }
      if (!failed.ok()) {
        events.push_back(JobEvent::AttemptFailed(
            number, LaunchFailureCategory(failed),
            "could not start node " + std::to_string(node.node_index) + ": " + failed.message(),
            node.node_index, now));
        break;
      }
      const std::string task_id = logs::NewTaskId();  // 32 hex digits, as ECS
      const std::string stream = control::DefaultLogStreamName(job.definition_name, task_id);
      events.push_back(JobEvent::NodeStarted(number, node.node_index,
                                             control_->MakeArn("task/" + task_id), stream, now,
                                             std::move(notices)));
      if (job_logs_)
        job_logs_->Follow(NodeLogKey{job.id, number, node.node_index}, output_path, stream, now);
    }
    for (JobEvent& e : events) all_events.emplace_back(id, std::move(e));
  }
  // One commit for every node started in this pass.
  Result<uint64_t> ticket = uint64_t{0};
  std::vector<exec::AttemptKey> terminate;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [id, e] : all_events) {
      Result<Job> r = ApplyLocked(id, e);
      if (!r.ok())
        spdlog::warn("jobs: {} on {}: {}", control::JobEventTypeName(e.type), id,
                     r.status().ToString());
    }
    terminate.swap(to_terminate_);
    ticket = FlushLocked();
  }
  // Not waited for: the nodes already run and are recovered from their
  // placement after a crash; the next pass's commit comes after this one.
  if (!ticket.ok()) spdlog::error("jobs: store commit failed: {}", ticket.status().ToString());
  for (const exec::AttemptKey& key : terminate)
    (void)backend_->Terminate(key, GraceMs(key));  // NotFound: already gone
}

int64_t JobsService::GraceMs(const exec::AttemptKey& key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(key.job_id);
  if (it != jobs_.end()) {
    if (std::optional<int64_t> s = control::TerminationGraceSeconds(it->second)) return *s * 1000;
  }
  return options_.terminate_grace_ms;
}

control::FailureCategory FailureCategoryOf(const exec::NodeEvent& event, bool unstarted) {
  using control::FailureCategory;
  switch (event.outcome) {
    case exec::NodeOutcome::kExited:
      return event.exit_code == 0 ? FailureCategory::kNone
                                  : control::CategoryOfExit(event.exit_code, false);
    case exec::NodeOutcome::kSignaled:
      return FailureCategory::kUserError;
    case exec::NodeOutcome::kLost:
      return event.never_started && unstarted ? FailureCategory::kNotStarted
                                              : FailureCategory::kNodeLost;
    case exec::NodeOutcome::kStartFailed:
      return event.bad_command ? FailureCategory::kUserError : FailureCategory::kInfrastructure;
  }
  return FailureCategory::kInfrastructure;
}

control::FailureCategory LaunchFailureCategory(const Status& status) {
  return status.IsInvalidArgument() ? control::FailureCategory::kUserError
                                    : control::FailureCategory::kInfrastructure;
}

Status MakeHomePrivate(const std::string& home) {
  DIR* dir = ::opendir(home.c_str());
  if (dir == nullptr) return Status::Internal("cannot list " + home + ": " + std::strerror(errno));
  Status result;
  // Only the server's own entries: a home may be shared with other files.
  static const std::set<std::string> kOwn = {"lote.db",         "lote.db-wal", "lote.db-shm",
                                             "lote.db-journal", "logs",        "credentials",
                                             "server.json"};
  while (struct dirent* e = ::readdir(dir)) {
    const std::string name = e->d_name;
    if (!kOwn.count(name)) continue;
    const std::string path = home + "/" + name;
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0 || S_ISLNK(st.st_mode)) continue;
    const mode_t want = S_ISDIR(st.st_mode) ? 0700 : 0600;
    if ((st.st_mode & 07777) != want && ::chmod(path.c_str(), want) != 0 && result.ok()) {
      result = Status::Internal("cannot make " + path + " private: " + std::strerror(errno));
    }
  }
  ::closedir(dir);
  return result;
}

ServerExtension JobsExtension(JobsServiceOptions options) {
  return [options](ServerContext& context) mutable -> Result<std::shared_ptr<void>> {
    // $LOTE_EXEC_SHIM: a standalone supervisor binary (build/src/exec/lote-exec-shim)
    // starts faster than `lote exec-shim`, whose start loads every library of lote.
    if (const char* shim = std::getenv("LOTE_EXEC_SHIM");
        options.shim_command.empty() && shim != nullptr && *shim != '\0') {
      options.shim_command = {shim};
    }
    ASSIGN_OR_RETURN(std::unique_ptr<JobsService> service, JobsService::Start(context, options));
    return std::shared_ptr<void>(std::move(service));
  };
}

}  // namespace lote::server
