#include "control/job_loop.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <thread>
#include <utility>

#include "common/ids.h"
#include "control/job_controller.h"
#include "control/job_env.h"
#include "control/job_render.h"
#include "control/job_sched.h"
#include "control/job_submit.h"
#include "control/validation.h"
#include "exec/batch_env.h"
#include "exec/container.h"
#include "logs/stream_names.h"

namespace lote::control {
namespace {

// Gangs handed to their backends at once by one pass.
constexpr size_t kParallelLaunches = 8;

// Attempt::backend: what picks the backend of a compute environment.
Json BackendRecord(const ComputeEnvironmentSpec& ce) {
  Json tags = Json::object();
  for (const auto& [k, v] : ce.lote_tags) tags[k] = v;
  return Json{{"managed", ce.managed}, {"tags", tags}};
}

std::string RequiredString(const Json& request, const char* field) {
  if (!request.is_object() || !request.contains(field) || !request[field].is_string()) return "";
  return request[field].get<std::string>();
}

// Whether the environment's nodes run in their images: its tag lote:runtime,
// else the server's default. InvalidArgument for another value.
Result<bool> InContainerMode(const ComputeEnvironmentSpec& ce, const std::string& fallback) {
  auto tag = ce.lote_tags.find("lote:runtime");
  const std::string runtime = tag == ce.lote_tags.end() ? fallback : tag->second;
  if (runtime == "container") return true;
  if (runtime == "process" || runtime.empty()) return false;
  return Status::InvalidArgument("compute environment " + ce.name + ": lote:runtime is '" +
                                 runtime + "'; use container or process");
}

}  // namespace

JobLoop::JobLoop(JobLoopOptions options)
    : options_(std::move(options)),
      clock_(options_.clock),
      store_(options_.store),
      control_(options_.control),
      output_(options_.output) {}

Result<std::unique_ptr<JobLoop>> JobLoop::Create(JobLoopOptions options) {
  if (options.clock == nullptr || options.store == nullptr || options.control == nullptr ||
      options.backends == nullptr)
    return Status::InvalidArgument("JobLoop needs a clock, a store, a control plane and backends");
  std::unique_ptr<JobLoop> loop(new JobLoop(std::move(options)));
  RETURN_IF_ERROR(loop->Load());
  RETURN_IF_ERROR(loop->RecoverNodes());
  loop->ResumeLogs();
  return loop;
}

Status JobLoop::Load() {
  ASSIGN_OR_RETURN(store::Snapshot snapshot, store_->Load());
  std::vector<const Job*> order;
  for (const store::JobRow& row : snapshot.jobs) {
    ASSIGN_OR_RETURN(Json doc, ParseJson(row.doc));
    ASSIGN_OR_RETURN(Job job, JobFromJson(doc));
    ASSIGN_OR_RETURN(std::vector<store::JobEvent> events, store_->JobEvents(row.job_id));
    last_seq_[row.job_id] = events.empty() ? 0 : events.back().seq;
    jobs_[row.job_id] = std::move(job);
  }
  for (const auto& [id, job] : jobs_) order.push_back(&job);
  std::sort(order.begin(), order.end(), [](const Job* a, const Job* b) {
    return a->created_at != b->created_at ? a->created_at < b->created_at : a->id < b->id;
  });
  for (const Job* job : order) submit_order_[job->id] = next_submit_order_++;
  index_.Rebuild(jobs_);

  // Virtual instances that hold running nodes.
  for (const auto& [id, job] : jobs_) {
    const Attempt* attempt = job.CurrentAttempt();
    if (attempt == nullptr) continue;
    Result<ComputeEnvironmentSpec> ce =
        control_->FindComputeEnvironment(attempt->compute_environment);
    sched::Resources shape;
    if (ce.ok() && !ce->instance_types.empty()) shape = ShapeOf(ce->instance_types.front());
    for (const NodeAttempt& node : attempt->nodes) {
      if (instances_.count(node.instance_id)) continue;
      VirtualInstance inst{node.instance_id, attempt->compute_environment, shape, node.private_ipv4,
                           sched::Instance::kBusy};
      instances_[node.instance_id] = inst;
      next_instance_index_ =
          std::max(next_instance_index_, exec::InstanceIndexOfPrivateIp(node.private_ipv4) + 1);
    }
  }
  return Status();
}

exec::Backend* JobLoop::BackendOf(const Attempt& attempt) {
  // The backend recorded at launch first: the environment may be gone.
  Result<ComputeEnvironmentSpec> ce = Status::NotFound("no backend recorded");
  if (attempt.backend.is_object()) {
    ComputeEnvironmentSpec recorded;
    recorded.name = attempt.compute_environment;
    recorded.managed = attempt.backend.value("managed", true);
    const Json tags = attempt.backend.value("tags", Json::object());
    for (const auto& [k, v] : tags.items())
      if (v.is_string()) recorded.lote_tags[k] = v.get<std::string>();
    ce = std::move(recorded);
  } else {
    ce = control_->FindComputeEnvironment(attempt.compute_environment);
  }
  if (!ce.ok()) return nullptr;
  Result<exec::Backend*> backend = options_.backends->ForEnvironment(*ce);
  if (!backend.ok()) {
    spdlog::warn("jobs: compute environment {}: {}", attempt.compute_environment,
                 backend.status().ToString());
    return nullptr;
  }
  return *backend;
}

Status JobLoop::RecoverNodes() {
  std::map<exec::Backend*, std::vector<exec::RecoverItem>> expected;
  size_t total = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [id, job] : jobs_) {
      const Attempt* attempt = job.CurrentAttempt();
      if (attempt == nullptr) continue;
      exec::Backend* backend = BackendOf(*attempt);
      if (backend == nullptr) {
        // Its environment is gone (or its backend cannot be set up): nothing
        // can report on its nodes.
        spdlog::warn("jobs: {} runs on {}, which has no backend now; it is lost", id,
                     attempt->compute_environment);
        continue;
      }
      const int32_t number = static_cast<int32_t>(job.attempts.size());
      for (const NodeAttempt& node : attempt->nodes) {
        if (IsFinal(node.status)) continue;
        expected[backend].push_back(exec::RecoverItem{
            exec::NodeKey{exec::AttemptKey{id, number}, node.node_index}, attempt->backend_ref});
        ++total;
      }
    }
  }
  // Every backend recovers, also with nothing expected (it ends orphans).
  for (exec::Backend* backend : options_.backends->All()) expected.try_emplace(backend);
  exec::RecoverReport report;
  for (auto& [backend, items] : expected) {
    ASSIGN_OR_RETURN(exec::RecoverReport r, backend->Recover(items));
    auto append = [](std::vector<exec::NodeKey>& to, const std::vector<exec::NodeKey>& from) {
      to.insert(to.end(), from.begin(), from.end());
    };
    append(report.adopted, r.adopted);
    append(report.finished, r.finished);
    append(report.lost, r.lost);
    append(report.never_started, r.never_started);
    append(report.orphans_terminated, r.orphans_terminated);
  }
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
      const Attempt& open = *it->second.CurrentAttempt();
      bool untouched = count == open.nodes.size();
      for (const NodeAttempt& node : open.nodes)
        untouched = untouched && node.status == JobStatus::kStarting;
      if (untouched) unstarted_attempts_.insert(attempt);
    }
  }
  if (total > 0) {
    spdlog::info("jobs: recovered {} running node(s): {} adopted, {} finished, {} lost", total,
                 report.adopted.size(), report.finished.size(), report.lost.size());
  }
  return Status();
}

void JobLoop::ResumeLogs() {
  if (output_ == nullptr) return;
  size_t followed = 0, caught_up = 0;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [id, job] : jobs_) {
    for (size_t a = 0; a < job.attempts.size(); ++a) {
      const Attempt& attempt = job.attempts[a];
      const int32_t number = static_cast<int32_t>(a + 1);
      const bool open = &attempt == job.CurrentAttempt();
      exec::Backend* backend = nullptr;
      for (const NodeAttempt& node : attempt.nodes) {
        if (node.log_stream_name.empty()) continue;
        if (backend == nullptr) backend = BackendOf(attempt);
        if (backend == nullptr) break;
        const NodeOutputKey key{id, number, node.node_index};
        Result<std::string> output =
            backend->OutputPath(exec::NodeKey{exec::AttemptKey{id, number}, node.node_index});
        if (!output.ok()) continue;
        if (open && !IsFinal(node.status)) {
          // Running (adopted) or about to be reported ended by the backend.
          output_->Follow(key, *output, node.log_stream_name, node.started_at);
          ++followed;
          continue;
        }
        struct stat st;
        if (::stat(output->c_str(), &st) != 0 || st.st_size == 0) continue;
        Result<int64_t> stored = output_->StoredOffset(node.log_stream_name);
        if (stored.ok() && *stored >= st.st_size) continue;
        output_->Follow(key, *output, node.log_stream_name, node.started_at);
        output_->Complete(key);
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

void JobLoop::Wake() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    dirty_ = true;
  }
  if (options_.wake) options_.wake();
}

bool JobLoop::TakeDirty() {
  std::lock_guard<std::mutex> lock(mu_);
  const bool was = dirty_;
  dirty_ = false;
  return was;
}

void JobLoop::Stop() {
  std::lock_guard<std::mutex> lock(mu_);
  stopping_ = true;
}

// --- Events and persistence -------------------------------------------------

Result<Job> JobLoop::ApplyLocked(const std::string& id, const JobEvent& event) {
  auto it = jobs_.find(id);
  static const Job kNone;
  const Job& before = it == jobs_.end() ? kNone : it->second;
  ASSIGN_OR_RETURN(Job after, Apply(before, event));
  if (it != jobs_.end() && after == before) return after;  // no-op or stale: nothing stored
  const int64_t seq = ++last_seq_[after.id];
  batch_.AppendJobEvent(store::JobEvent{after.id, seq, event.at_ms,
                                        std::string(JobEventTypeName(event.type)),
                                        EventToJson(event).dump()});
  batch_.PutJob(store::JobRow{after.id, after.name, after.queue_arn,
                              std::string(JobStatusName(after.status)), after.created_at,
                              event.at_ms, JobToJson(after).dump()});
  if (it == jobs_.end()) {
    submit_order_[after.id] = next_submit_order_++;
    index_.Update(nullptr, jobs_[after.id] = after);
  } else {
    const Job previous = std::move(it->second);
    it->second = after;
    AfterChangeLocked(previous, after);
  }
  dirty_ = true;
  return after;
}

void JobLoop::AfterChangeLocked(const Job& before, const Job& after) {
  index_.Update(&before, after);
  // An attempt that closed: tear down whatever still runs of it (gang rule).
  if (before.CurrentAttempt() != nullptr &&
      (after.CurrentAttempt() == nullptr || after.attempts.size() != before.attempts.size())) {
    to_terminate_.push_back(
        exec::AttemptKey{before.id, static_cast<int32_t>(before.attempts.size())});
    launch_warnings_.erase(
        exec::AttemptKey{before.id, static_cast<int32_t>(before.attempts.size())});
    if (output_ != nullptr)
      closed_attempts_.push_back(
          exec::AttemptKey{before.id, static_cast<int32_t>(before.attempts.size())});
  }
}

Result<uint64_t> JobLoop::FlushLocked() {
  if (batch_.empty()) return uint64_t{0};
  store::WriteBatch batch = std::move(batch_);
  batch_ = store::WriteBatch();
  return store_->Enqueue(std::move(batch));
}

Status JobLoop::WaitTicket(Result<uint64_t> ticket) {
  if (!ticket.ok()) return ticket.status();
  if (*ticket == 0) return Status();
  return store_->Wait(*ticket);
}

// --- API ----------------------------------------------------------------------

Result<Json> JobLoop::SubmitJob(const Json& request) {
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

// --- The loop -----------------------------------------------------------------

std::string JobLoop::NewInstanceIdLocked() {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "i-%017x", static_cast<unsigned>(next_instance_index_));
  return buf;
}

void JobLoop::UpdateArrayParentLocked(const std::string& parent_id, int64_t now) {
  auto parent = jobs_.find(parent_id);
  if (parent == jobs_.end()) return;
  std::optional<JobEvent> e =
      ArrayParentEvent(parent->second, index_.ArrayChildCounts(parent_id), now);
  if (!e) return;
  Result<Job> r = ApplyLocked(parent_id, *e);
  if (!r.ok()) spdlog::warn("jobs: array parent {}: {}", parent_id, r.status().ToString());
}

void JobLoop::PersistClosedAttemptsLocked(int64_t now) {
  std::vector<exec::AttemptKey> closed;
  closed.swap(closed_attempts_);
  for (const exec::AttemptKey& key : closed) {
    // The final progress is the one of the attempt's last line: wait until
    // every line is stored (JobLogs::OnStored wakes the loop).
    if (output_->AttemptPending(key.job_id, key.attempt)) {
      closed_attempts_.push_back(key);
      continue;
    }
    std::optional<Json> progress = output_->Progress(key.job_id, key.attempt, now);
    if (progress && jobs_.count(key.job_id)) {
      Result<Job> r = ApplyLocked(key.job_id, JobEvent::Progress(std::move(*progress), now));
      if (!r.ok()) spdlog::warn("jobs: progress of {}: {}", key.job_id, r.status().ToString());
    }
    output_->ReleaseAttempt(key.job_id, key.attempt);
  }
}

std::vector<std::pair<std::string, JobEvent>> JobLoop::HangEventsLocked(int64_t now) {
  std::vector<std::pair<std::string, JobEvent>> hangs;
  if (output_ == nullptr) return hangs;
  for (const std::string& id : index_.HangWatched()) {
    const Job& job = jobs_.at(id);
    const std::optional<int64_t> timeout_s = ProgressTimeoutSeconds(job);
    const Attempt* attempt = job.CurrentAttempt();
    if (!timeout_s || attempt == nullptr) continue;
    const int32_t number = static_cast<int32_t>(job.attempts.size());
    const std::vector<int32_t> stalled = output_->StalledNodes(id, number, now, *timeout_s * 1000);
    if (stalled.empty()) continue;
    const std::string reason =
        HangReason(job, *attempt, stalled, *timeout_s,
                   [this](const std::string& stream) { return output_->LastLines(stream, 3); });
    hangs.emplace_back(
        id, JobEvent::AttemptFailed(number, FailureCategory::kHang, reason, stalled.front(), now));
  }
  return hangs;
}

void JobLoop::ApplyNodeEventsLocked(const std::vector<exec::NodeEvent>& events, int64_t now) {
  auto apply = [&](const std::string& id, const JobEvent& e) {
    Result<Job> r = ApplyLocked(id, e);
    if (!r.ok())
      spdlog::warn("jobs: event {} on {} not applied: {}", JobEventTypeName(e.type), id,
                   r.status().ToString());
  };
  for (const exec::NodeEvent& ev : events) {
    const std::string& id = ev.node.attempt.job_id;
    auto it = jobs_.find(id);
    if (it == jobs_.end()) continue;
    const int32_t attempt = ev.node.attempt.attempt;
    // The backend's own time of what happened (never in the future of ours).
    const int64_t at = ev.at_ms > 0 ? std::min(ev.at_ms, now) : now;
    switch (ev.kind) {
      case exec::NodeEventKind::kPending:
        apply(id, JobEvent::BackendPending(attempt, ev.reason, at));
        continue;
      case exec::NodeEventKind::kRunning: {
        std::vector<std::string> notices;
        auto w = launch_warnings_.find(ev.node.attempt);
        if (w != launch_warnings_.end()) {
          auto n = w->second.find(ev.node.node_index);
          if (n != w->second.end()) notices = std::move(n->second);
        }
        apply(id, NodeStartedLocked(it->second, ev, std::move(notices)));
        continue;
      }
      case exec::NodeEventKind::kEnded:
        break;
    }
    if (output_ != nullptr) output_->Complete(NodeOutputKey{id, attempt, ev.node.node_index});
    switch (ev.outcome) {
      case exec::NodeOutcome::kExited:
      case exec::NodeOutcome::kSignaled:
        apply(id,
              JobEvent::NodeExited(attempt, ev.node.node_index,
                                   ev.outcome == exec::NodeOutcome::kExited ? ev.exit_code : 0,
                                   ev.outcome == exec::NodeOutcome::kSignaled ? ev.signal : 0, at));
        break;
      case exec::NodeOutcome::kLost:
      case exec::NodeOutcome::kStartFailed: {
        const FailureCategory category =
            FailureCategoryOf(ev, unstarted_attempts_.count(ev.node.attempt) > 0);
        if (category == FailureCategory::kNotStarted)
          spdlog::info("jobs: attempt {} of {} never started; running it again", attempt, id);
        apply(id, JobEvent::AttemptFailed(attempt, category, ev.reason, ev.node.node_index, at));
        break;
      }
    }
  }
}

JobEvent JobLoop::NodeStartedLocked(const Job& job, const exec::NodeEvent& ev,
                                    std::vector<std::string> notices) {
  const int64_t at = ev.at_ms > 0 ? std::min(ev.at_ms, clock_->NowMillis()) : clock_->NowMillis();
  const std::string task_id = logs::NewTaskId();  // 32 hex digits, as ECS
  const std::string stream = DefaultLogStreamName(job.definition_name, task_id);
  const int32_t number = ev.node.attempt.attempt;
  const bool current =
      number == static_cast<int32_t>(job.attempts.size()) && job.CurrentAttempt() != nullptr;
  if (output_ != nullptr && current) {
    exec::Backend* backend = BackendOf(*job.CurrentAttempt());
    Result<std::string> path = backend == nullptr
                                   ? Result<std::string>(Status::NotFound("no backend"))
                                   : backend->OutputPath(ev.node);
    if (path.ok()) {
      output_->Follow(NodeOutputKey{job.id, number, ev.node.node_index}, *path, stream, at);
    } else {
      spdlog::warn("jobs: output of {}: {}", ev.node.ToString(), path.status().ToString());
    }
  }
  for (const std::string& w : notices)
    spdlog::info("jobs: {} attempt {} node {}: {}", job.id, number, ev.node.node_index, w);
  return JobEvent::NodeStarted(number, ev.node.node_index, control_->MakeArn("task/" + task_id),
                               stream, at, std::move(notices));
}

void JobLoop::Schedule(int64_t now, std::vector<std::string>* launches) {
  auto apply = [&](const std::string& id, const JobEvent& e) {
    Result<Job> r = ApplyLocked(id, e);
    if (!r.ok())
      spdlog::warn("jobs: event {} on {} not applied: {}", JobEventTypeName(e.type), id,
                   r.status().ToString());
  };
  // Capacity of the environments whose backend owns its machines (Slurm).
  std::map<std::string, exec::Capacity> capacity;
  for (const ComputeEnvironmentSpec& ce : control_->ComputeEnvironments()) {
    if (!ce.instance_types.empty()) continue;  // lote launches its instances
    Result<exec::Backend*> backend = options_.backends->ForEnvironment(ce);
    if (!backend.ok()) continue;
    std::optional<exec::Capacity> c = (*backend)->GetCapacity();
    if (c) {
      capacity[ce.name] = *c;
      control_->SetBackendCapacity(ce.name, Json{{"nodes", c->nodes},
                                                 {"vcpusPerNode", c->milli_vcpu_per_node / 1000},
                                                 {"memoryMiBPerNode", c->memory_mib_per_node},
                                                 {"description", c->description},
                                                 {"backend", (*backend)->Name()}});
    }
  }
  SchedulerJobs candidates;
  for (const std::string& id : index_.Holding()) candidates.holding.push_back(&jobs_.at(id));
  for (const auto& [queue, ids] : index_.RunnableByQueue())
    for (const std::string& id : ids) candidates.runnable.push_back(&jobs_.at(id));
  Result<sched::Snapshot> snap = BuildSchedulerSnapshot(candidates, submit_order_, &instances_,
                                                        control_, share_history_, now, capacity);
  if (!snap.ok()) {
    spdlog::error("jobs: snapshot: {}", snap.status().ToString());
    return;
  }
  if (snap->jobs.empty()) {
    queue_order_.clear();
    return;
  }
  Result<sched::Decisions> decisions = sched::Decide(*snap, now);
  if (!decisions.ok()) {
    spdlog::error("jobs: scheduling pass failed: {}", decisions.status().ToString());
    return;
  }
  queue_order_ = decisions->order;
  std::vector<std::string> launched_ids;
  for (const sched::Launch& l : decisions->launches) {
    const std::string iid = NewInstanceIdLocked();
    Result<std::string> ip = exec::InstancePrivateIp(next_instance_index_);
    ++next_instance_index_;
    instances_[iid] = VirtualInstance{iid, l.compute_environment, l.shape,
                                      ip.ok() ? *ip : std::string("127.0.0.1"), now};
    launched_ids.push_back(iid);
  }
  for (const sched::Removal& r : decisions->removals) instances_.erase(r.instance_id);
  for (const sched::CeTarget& t : decisions->targets) {
    if (capacity.count(t.compute_environment)) continue;  // nothing to scale
    Status st =
        control_->SetDesiredVcpus(t.compute_environment, static_cast<int32_t>(t.desired_vcpus));
    if (!st.ok())
      spdlog::warn("jobs: desiredvCpus of {}: {}", t.compute_environment, st.ToString());
  }
  for (const sched::ShareUsageUpdate& u : decisions->share_usage)
    share_history_[u.queue + "/" + u.share_identifier] = u;
  for (const sched::NeverFits& nf : decisions->never_fits)
    apply(nf.job_id, JobEvent::AttemptFailed(0, FailureCategory::kCapacity, nf.message, -1, now));
  // A malformed request fails its own job, never the pass.
  for (const sched::Rejected& r : decisions->rejected) {
    spdlog::warn("jobs: {} cannot be scheduled: {}", r.job_id, r.message);
    apply(r.job_id, JobEvent::AttemptFailed(0, FailureCategory::kCapacity,
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
  // A placement that cannot be recorded fails its own job (with the reason),
  // never the pass, and never leaves the job silently RUNNABLE.
  auto placement_failed = [&](const std::string& id, const Status& why) {
    spdlog::error("jobs: placement of {}: {}", id, why.ToString());
    apply(id, JobEvent::AttemptFailed(0, FailureCategory::kInfrastructure,
                                      "lote could not place the job: " + why.message(), -1, now));
  };
  for (const sched::Placement& p : decisions->placements) {
    Result<JobEvent> e = ScheduledEvent(p, launched_ids, ip_of, now);
    if (!e.ok()) {
      placement_failed(p.job_id, e.status());
      continue;
    }
    Result<Job> r = ApplyLocked(p.job_id, *e);
    if (r.ok()) {
      launches->push_back(p.job_id);
    } else {
      placement_failed(p.job_id, r.status());
    }
  }
}

void JobLoop::Pass(std::vector<exec::NodeEvent> node_events) {
  std::vector<std::string> launches;
  std::vector<exec::AttemptKey> terminate;
  Result<uint64_t> ticket = uint64_t{0};
  {
    std::lock_guard<std::mutex> lock(mu_);
    const int64_t now = clock_->NowMillis();
    auto apply = [&](const std::string& id, const JobEvent& e) {
      Result<Job> r = ApplyLocked(id, e);
      if (!r.ok())
        spdlog::warn("jobs: event {} on {} not applied: {}", JobEventTypeName(e.type), id,
                     r.status().ToString());
    };
    // 1. What the backends saw.
    ApplyNodeEventsLocked(node_events, now);
    // 2. Timeouts.
    for (const std::string& id : index_.DueTimeouts(now))
      apply(id, JobEvent::TimedOut(static_cast<int32_t>(jobs_.at(id).attempts.size()), now));
    // 2b. Hangs (no LOTE_PROGRESS for too long).
    for (const auto& [id, e] : HangEventsLocked(now)) apply(id, e);
    // 3. Dependencies, until nothing changes (a failure cascades down chains).
    auto status_of = [this](const std::string& dep) -> std::optional<JobStatus> {
      std::string key = dep;
      if (auto node = ParseNodeJobId(dep)) key = node->first;
      auto it = jobs_.find(key);
      if (it == jobs_.end()) return std::nullopt;
      return it->second.status;
    };
    // Array parents follow their children (a parent's own dependencies are
    // its children's); both only for what changed.
    for (int round = 0; round < 1000; ++round) {
      const std::vector<std::string> candidates = index_.TakeDependencyCandidates();
      const std::vector<std::string> parents = index_.TakeChangedArrayParents();
      if (candidates.empty() && parents.empty()) break;
      for (const std::string& id : candidates) {
        auto it = jobs_.find(id);
        if (it == jobs_.end()) continue;
        if (std::optional<JobEvent> e = DependencyEvent(it->second, status_of, now)) apply(id, *e);
      }
      for (const std::string& p : parents) UpdateArrayParentLocked(p, now);
    }
    // Progress of the attempts that ended is kept with the job.
    PersistClosedAttemptsLocked(now);
    // 5. Scheduling (nothing new starts once the server is stopping).
    if (!stopping_) Schedule(now, &launches);
    terminate.swap(to_terminate_);
    ticket = FlushLocked();
  }
  // Placements are durable before anything runs.
  Status committed = WaitTicket(std::move(ticket));
  if (!committed.ok()) {
    spdlog::error("jobs: store commit failed: {}", committed.ToString());
    return;
  }
  TerminateAttempts(terminate);
  LaunchPlaced(launches);
}

void JobLoop::TerminateAttempts(const std::vector<exec::AttemptKey>& keys) {
  for (const exec::AttemptKey& key : keys) {
    Attempt attempt;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = jobs_.find(key.job_id);
      if (it == jobs_.end() || key.attempt < 1 ||
          key.attempt > static_cast<int32_t>(it->second.attempts.size()))
        continue;
      attempt = it->second.attempts[static_cast<size_t>(key.attempt - 1)];
    }
    exec::Backend* backend = BackendOf(attempt);
    if (backend == nullptr) {
      // Never silent: its nodes may still run.
      spdlog::error("jobs: cannot terminate {}/{}: no backend for compute environment {}",
                    key.job_id, key.attempt, attempt.compute_environment);
      continue;
    }
    Status s = backend->Terminate(key, GraceMs(key));
    if (!s.ok() && s.code() != StatusCode::kNotFound)
      spdlog::warn("jobs: terminate {}/{}: {}", key.job_id, key.attempt, s.ToString());
  }
}

void JobLoop::LaunchPlaced(const std::vector<std::string>& job_ids) {
  std::vector<std::pair<std::string, JobEvent>> all_events;
  std::vector<std::pair<std::string, exec::NodeEvent>> known;  // what LaunchGang reported
  // 1. Each attempt's gang, built here; 2. handed to the backends, several at
  // once (a remote backend's submission is a round trip); 3. the outcomes.
  struct Handover {
    std::string id;
    int32_t number = 0;
    int64_t now = 0;
    exec::Backend* backend = nullptr;  // null: `launched` holds why not
    Json backend_record;               // Attempt::backend
    exec::GangSpec gang;
    Result<exec::GangLaunch> launched = exec::GangLaunch{};
  };
  std::vector<Handover> handovers;
  for (const std::string& id : job_ids) {
    Job job;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = jobs_.find(id);
      if (it == jobs_.end() || it->second.CurrentAttempt() == nullptr) continue;
      job = it->second;
    }
    const Attempt* attempt = job.CurrentAttempt();
    const int32_t number = static_cast<int32_t>(job.attempts.size());
    const int64_t now = clock_->NowMillis();
    Result<ComputeEnvironmentSpec> ce =
        control_->FindComputeEnvironment(attempt->compute_environment);
    Result<exec::Backend*> backend =
        ce.ok() ? options_.backends->ForEnvironment(*ce) : Result<exec::Backend*>(ce.status());
    Result<exec::GangLaunch> launched = backend.ok() ? Result<exec::GangLaunch>(exec::GangLaunch{})
                                                     : Result<exec::GangLaunch>(backend.status());
    if (backend.ok()) {
      exec::GangSpec gang;
      gang.attempt = exec::AttemptKey{job.id, number};
      gang.multi_node = job.IsMultiNode();
      gang.main_node_index = job.MainNode();
      if (job.timeout_seconds) gang.timeout_seconds = *job.timeout_seconds;
      const exec::Capabilities& caps = (*backend)->capabilities();
      Status failed;
      Result<bool> container_mode = InContainerMode(*ce, options_.default_runtime);
      if (!container_mode.ok()) failed = container_mode.status();
      const bool in_container = container_mode.ok() && *container_mode;
      for (const NodeAttempt& node : attempt->nodes) {
        if (!failed.ok()) break;
        Result<NodeLaunch> launch = MakeNodeLaunch(job, node.node_index);
        if (launch.ok()) {
          Status secrets = AddSecrets(*job.ContainerFor(node.node_index), &*launch);
          if (!secrets.ok()) launch = secrets;
        }
        if (!launch.ok()) {
          failed = launch.status();
          break;
        }
        exec::NodeSpec spec;
        spec.node = exec::NodeKey{gang.attempt, node.node_index};
        spec.command = launch->command;
        for (const EnvVar& v : launch->environment) spec.environment[v.name] = v.value;
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
        if (in_container) {
          Result<exec::ContainerRun> run =
              exec::ContainerRunFromAws(launch->image, launch->linux_parameters, launch->other);
          if (!run.ok()) {
            failed = run.status();
            break;
          }
          spec.container = std::move(*run);
        }
        for (const std::string& f : launch->fields_set)
          if (!caps.container_fields.count(f) &&
              !(in_container && exec::ContainerModeFields().count(f)))
            spec.unsupported_fields.push_back(f);
        // Accelerators: only a backend that hands devices to a node runs such
        // nodes; elsewhere only an emulated environment (without the devices).
        if (launch->gpus > 0 && !caps.accelerators)
          spec.unsupported_fields.push_back("resourceRequirements.GPU");
        spec.emulation = ce->emulation;
        if (spec.command.empty() && !spec.container) {
          failed = Status::InvalidArgument(
              launch->image.empty()
                  ? "the container has no command: set command in the job definition or in "
                    "containerOverrides"
                  : "the job definition names the image " + launch->image +
                        " but no command, and its compute environment runs jobs as host "
                        "processes (lote:runtime=process), which cannot run an image's "
                        "ENTRYPOINT/CMD: tag the compute environment lote:runtime=container (or "
                        "start lote server --runtime container) to run the image, or set "
                        "command in the job definition or in containerOverrides");
          break;
        }
        gang.nodes.push_back(std::move(spec));
      }
      if (failed.ok()) {
        handovers.push_back(Handover{id, number, now, *backend, BackendRecord(*ce), std::move(gang),
                                     exec::GangLaunch{}});
        continue;
      }
      launched = failed;
    }
    handovers.push_back(
        Handover{id, number, now, nullptr, Json(), exec::GangSpec{}, std::move(launched)});
  }
  {
    std::atomic<size_t> next{0};
    auto work = [&] {
      for (size_t i = next++; i < handovers.size(); i = next++)
        if (handovers[i].backend != nullptr)
          handovers[i].launched = handovers[i].backend->LaunchGang(handovers[i].gang);
    };
    std::vector<std::thread> helpers;
    const size_t extra = std::min<size_t>(kParallelLaunches - 1, handovers.size() / 2);
    for (size_t i = 0; i < extra; ++i) helpers.emplace_back(work);
    work();
    for (std::thread& t : helpers) t.join();
  }
  for (Handover& h : handovers) {
    const std::string& id = h.id;
    const int32_t number = h.number;
    const int64_t now = h.now;
    Result<exec::GangLaunch>& launched = h.launched;
    if (!launched.ok()) {
      all_events.emplace_back(
          id, JobEvent::AttemptFailed(number, LaunchFailureCategory(launched.status()),
                                      "could not start the job: " + launched.status().message(), -1,
                                      now));
      continue;
    }
    all_events.emplace_back(
        id, JobEvent::Launched(number, launched->backend_ref, now, std::move(h.backend_record)));
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!launched->warnings.empty())
        launch_warnings_[exec::AttemptKey{id, number}] = std::move(launched->warnings);
    }
    for (exec::NodeEvent& e : launched->events) known.emplace_back(id, std::move(e));
  }
  // One commit for every gang handed over in this pass.
  Result<uint64_t> ticket = uint64_t{0};
  std::vector<exec::AttemptKey> terminate;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [id, e] : all_events) {
      Result<Job> r = ApplyLocked(id, e);
      if (!r.ok())
        spdlog::warn("jobs: {} on {}: {}", JobEventTypeName(e.type), id, r.status().ToString());
    }
    std::vector<exec::NodeEvent> events;
    for (auto& [id, e] : known) events.push_back(std::move(e));
    ApplyNodeEventsLocked(events, clock_->NowMillis());
    terminate.swap(to_terminate_);
    ticket = FlushLocked();
  }
  // Not waited for: the nodes already run and are recovered from their
  // placement after a crash; the next pass's commit comes after this one.
  if (!ticket.ok()) spdlog::error("jobs: store commit failed: {}", ticket.status().ToString());
  TerminateAttempts(terminate);
}

Status JobLoop::AddSecrets(const ContainerSpec& container, NodeLaunch* launch) const {
  const Json secrets = container.other.value("secrets", Json::array());
  if (!secrets.is_array() || secrets.empty()) return Status::Ok();
  for (const Json& s : secrets) {
    const std::string name = s.value("name", "");
    // The value goes only into the node's environment: never logged, never
    // in an answer (DescribeJobs shows name and valueFrom, as AWS does).
    Result<std::string> value = control_->SecretValue(s.value("valueFrom", ""));
    if (!value.ok())
      return Status::InvalidArgument("secret " + name + ": " + value.status().message());
    launch->environment.push_back({name, *value});
  }
  // Resolved here, for every backend alike.
  auto& fields = launch->fields_set;
  fields.erase(std::remove(fields.begin(), fields.end(), "secrets"), fields.end());
  return Status::Ok();
}

int64_t JobLoop::GraceMs(const exec::AttemptKey& key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(key.job_id);
  if (it != jobs_.end()) {
    if (std::optional<int64_t> s = TerminationGraceSeconds(it->second)) return *s * 1000;
  }
  return options_.terminate_grace_ms;
}

FailureCategory FailureCategoryOf(const exec::NodeEvent& event, bool unstarted) {
  switch (event.outcome) {
    case exec::NodeOutcome::kExited:
      return event.exit_code == 0 ? FailureCategory::kNone : CategoryOfExit(event.exit_code, false);
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

FailureCategory LaunchFailureCategory(const Status& status) {
  return status.IsInvalidArgument() ? FailureCategory::kUserError
                                    : FailureCategory::kInfrastructure;
}

}  // namespace lote::control
