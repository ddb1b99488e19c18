// The job loop's consumable resources (consumables.h): the AWS operations,
// what is in use (the jobs with an open attempt), and their documents stored
// with the jobs' batches.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>

#include "control/job_loop.h"
#include "control/validation.h"

namespace lote::control {

namespace {

bool NameMatches(const std::string& name, const std::string& pattern) {
  auto lower = [](std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
  };
  const std::string n = lower(name);
  std::string p = lower(pattern);
  if (!p.empty() && p.back() == '*') {
    p.pop_back();
    return n.compare(0, p.size(), p) == 0;
  }
  return n == p;
}

std::string ResourceArnOf(const Json& request) {
  auto it = request.find("resourceArn");
  return it != request.end() && it->is_string() ? it->get<std::string>() : "";
}

}  // namespace

UnitsInUse JobLoop::UnitsInUseLocked() const {
  UnitsInUse in_use;
  for (const std::string& id : index_.Holding()) {
    auto it = jobs_.find(id);
    if (it == jobs_.end()) continue;
    const Job& job = it->second;
    if (job.consumables.empty() && !job.node_properties) continue;
    for (const auto& [name, units] : ConsumableUnits(job)) in_use[name] += units;
  }
  return in_use;
}

Status JobLoop::LoadConsumablesLocked() {
  ASSIGN_OR_RETURN(store::Snapshot snap, store_->Load(/*with_jobs=*/false));
  std::vector<std::pair<std::string, std::string>> rows;
  for (const store::ResourceRow& r : snap.resources)
    if (r.kind == store::ResourceKind::kConsumableResource) rows.emplace_back(r.name, r.doc);
  return consumables_.Load(rows);
}

void JobLoop::StoreConsumableLocked(const ConsumableResources::Change& change) {
  if (change.doc.is_null()) {
    batch_.DeleteResource(store::ResourceKind::kConsumableResource, change.arn);
  } else {
    batch_.PutResource(store::ResourceRow{store::ResourceKind::kConsumableResource, change.arn,
                                          change.name, 0, change.doc.dump(), clock_->NowMillis()});
  }
  dirty_ = true;  // the scheduler's view of the resources changed
}

Result<Json> JobLoop::ChangeConsumables(
    const std::function<Result<Json>(ConsumableResources::Change*)>& change) {
  Result<uint64_t> ticket = uint64_t{0};
  Json answer;
  {
    std::lock_guard<std::mutex> lock(mu_);
    SyncWithStoreLocked();
    ConsumableResources::Change c;
    ASSIGN_OR_RETURN(answer, change(&c));
    if (!c.name.empty()) StoreConsumableLocked(c);
    ticket = FlushLocked();
  }
  RETURN_IF_ERROR(WaitTicket(std::move(ticket)));
  Wake();
  return answer;
}

Result<Json> JobLoop::CreateConsumableResource(const Json& request) {
  return ChangeConsumables([&](ConsumableResources::Change* c) {
    return consumables_.Create(request, clock_->NowMillis(), c);
  });
}

Result<Json> JobLoop::UpdateConsumableResource(const Json& request) {
  return ChangeConsumables([&](ConsumableResources::Change* c) {
    return consumables_.Update(request, clock_->NowMillis(), UnitsInUseLocked(), c);
  });
}

Result<Json> JobLoop::DeleteConsumableResource(const Json& request) {
  return ChangeConsumables(
      [&](ConsumableResources::Change* c) { return consumables_.Delete(request, c); });
}

Result<Json> JobLoop::DescribeConsumableResource(const Json& request) {
  std::lock_guard<std::mutex> lock(mu_);
  return consumables_.Describe(request, UnitsInUseLocked());
}

Result<Json> JobLoop::ListConsumableResources(const Json& request) {
  std::lock_guard<std::mutex> lock(mu_);
  return consumables_.List(request, UnitsInUseLocked());
}

bool JobLoop::IsConsumableResourceArn(const Json& request) {
  return ResourceArnOf(request).find(":consumable-resource/") != std::string::npos;
}

Result<Json> JobLoop::ChangeConsumableResourceTags(const Json& request, bool untag) {
  return ChangeConsumables([&](ConsumableResources::Change* c) {
    return consumables_.ChangeTags(ResourceArnOf(request), request, untag, c);
  });
}

Result<Json> JobLoop::ListConsumableResourceTags(const Json& request) {
  std::lock_guard<std::mutex> lock(mu_);
  return consumables_.Tags(ResourceArnOf(request));
}

Result<Json> JobLoop::ListJobsByConsumableResource(const Json& request) {
  ASSIGN_OR_RETURN(std::optional<int64_t> max_results,
                   OptInt(request, "maxResults", "maxResults", 1, kMaxPageSize));
  ASSIGN_OR_RETURN(std::optional<std::string> token, OptString(request, "nextToken", "nextToken"));
  std::vector<std::string> statuses;
  std::vector<std::string> names;
  if (auto f = request.find("filters"); f != request.end() && !f->is_null()) {
    if (!f->is_array())
      return Status::InvalidArgument("filters must be a list of {\"name\", \"values\"}");
    for (const Json& filter : *f) {
      RETURN_IF_ERROR(ExpectObject(filter, "filters[]"));
      ASSIGN_OR_RETURN(std::string fname, ReqString(filter, "name", "filters[].name"));
      ASSIGN_OR_RETURN(std::optional<std::vector<std::string>> values,
                       OptStringList(filter, "values", "filters[].values", 100));
      if (fname == "JOB_STATUS") {
        for (const std::string& v : values.value_or(std::vector<std::string>{})) {
          RETURN_IF_ERROR(ParseJobStatus(v).status());
          statuses.push_back(v);
        }
      } else if (fname == "JOB_NAME") {
        for (const std::string& v : values.value_or(std::vector<std::string>{})) names.push_back(v);
      } else {
        return Status::InvalidArgument("filter '" + fname +
                                       "' is not valid: ListJobsByConsumableResource filters by "
                                       "JOB_STATUS or JOB_NAME");
      }
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  ASSIGN_OR_RETURN(std::string resource, consumables_.Resolve(request));
  // The jobs lote holds in memory (every job not finished, and those that
  // ended lately), in creation order.
  std::vector<std::pair<std::pair<int64_t, std::string>, const Job*>> found;
  for (const auto& [id, job] : jobs_) {
    if (job.IsArrayParent()) continue;
    const std::map<std::string, int64_t> units = ConsumableUnits(job);
    if (!units.count(resource)) continue;
    const std::string status(JobStatusName(job.status));
    if (!statuses.empty() && std::find(statuses.begin(), statuses.end(), status) == statuses.end())
      continue;
    bool name_ok = names.empty();
    for (const std::string& p : names) name_ok = name_ok || NameMatches(job.name, p);
    if (!name_ok) continue;
    found.push_back({{job.created_at, id}, &job});
  }
  std::sort(found.begin(), found.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::string> keys;
  keys.reserve(found.size());
  for (const auto& f : found) {
    char created[24];
    std::snprintf(created, sizeof(created), "%020lld", static_cast<long long>(f.first.first));
    keys.push_back(std::string(created) + "/" + f.first.second);
  }
  ASSIGN_OR_RETURN(size_t start, PageStart(keys, token));
  const size_t limit = static_cast<size_t>(max_results.value_or(kMaxPageSize));
  Json list = Json::array();
  size_t i = start;
  for (; i < found.size() && list.size() < limit; ++i) {
    const Job& job = *found[i].second;
    const std::map<std::string, int64_t> units = ConsumableUnits(job);
    std::vector<ConsumableNeed> needs;
    for (const auto& [name, q] : units) needs.push_back(ConsumableNeed{name, name, q});
    Json item = {{"jobArn", job.arn},
                 {"jobQueueArn", job.queue_arn},
                 {"jobName", job.name},
                 {"jobDefinitionArn", job.definition_arn},
                 {"jobStatus", JobStatusName(job.status)},
                 {"quantity", units.at(resource)},
                 {"createdAt", job.created_at},
                 {"consumableResourceProperties", ConsumablePropertiesJson(needs)}};
    if (!job.share_identifier.empty()) item["shareIdentifier"] = job.share_identifier;
    if (!job.status_reason.empty()) item["statusReason"] = job.status_reason;
    if (job.started_at > 0) item["startedAt"] = job.started_at;
    list.push_back(std::move(item));
  }
  Json out = {{"jobs", std::move(list)}};
  if (i < found.size() && i > start) out["nextToken"] = MakeNextToken(keys[i - 1]);
  return out;
}

}  // namespace lote::control
