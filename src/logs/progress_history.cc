#include "logs/progress_history.h"

#include <algorithm>

namespace lote::logs {

ProgressHistory::ProgressHistory(LogStore* store, size_t max_points)
    : store_(store), max_points_(std::max<size_t>(2, max_points)) {}

std::string ProgressHistory::StreamName(std::string_view job_id, int32_t attempt) {
  std::string name(job_id);
  std::replace(name.begin(), name.end(), ':', '.');
  return name + "/" + std::to_string(attempt);
}

void ProgressHistory::Apply(Series& series, const Json& event) const {
  if (!event.is_object()) return;
  const int64_t n = event.value("n", int64_t{-1});
  const int64_t stride = event.value("s", int64_t{1});
  const int64_t step = event.value("step", int64_t{0});
  if (n < 0 || stride < 1) return;
  if (stride > series.stride) {
    series.stride = stride;
    std::erase_if(series.points, [stride](const ProgressPoint& p) { return p.n % stride != 0; });
  }
  series.next_n = std::max(series.next_n, n + 1);
  series.last_step = std::max(series.last_step, step);
  series.last_kept = true;
  if (n % series.stride != 0) return;
  const Json* values = event.contains("v") && event["v"].is_object() ? &event["v"] : nullptr;
  if (!series.points.empty() && series.points.back().n == n) {
    if (values)
      for (auto it = values->begin(); it != values->end(); ++it)
        series.points.back().values[it.key()] = it.value();
    return;
  }
  ProgressPoint p;
  p.n = n;
  p.step = step;
  p.time_ms = event.value("t", int64_t{0});
  p.node = event.value("node", int32_t{0});
  if (values) p.values = *values;
  series.points.push_back(std::move(p));
}

void ProgressHistory::EvictLocked() const {
  while (series_.size() > kCachedAttempts) {
    auto oldest = series_.begin();
    for (auto it = series_.begin(); it != series_.end(); ++it)
      if (it->second.last_used < oldest->second.last_used) oldest = it;
    series_.erase(oldest);
  }
}

Result<ProgressHistory::Series*> ProgressHistory::SyncLocked(const Key& key, bool create,
                                                             bool refresh) const {
  const std::string group(kProgressHistoryGroup);
  const std::string stream = StreamName(key.first, key.second);
  auto it = series_.find(key);
  if (it == series_.end()) {
    Result<StreamInfo> info = store_->GetStream(group, stream);
    if (!info.ok()) {
      if (!info.status().IsNotFound() || !create) return info.status();
      RETURN_IF_ERROR(store_->EnsureStream(group, stream));
    }
    it = series_.emplace(key, Series{}).first;
    it->second.last_used = ++uses_;
    EvictLocked();  // never the newest
    it = series_.find(key);
  } else if (!refresh) {
    it->second.last_used = ++uses_;
    return &it->second;
  }
  Series& series = it->second;
  series.last_used = ++uses_;
  while (true) {
    ReadRequest request;
    request.position = series.position;
    request.limit = 10000;
    Result<ReadResult> read = store_->Read(group, stream, request);
    if (!read.ok()) {
      series_.erase(it);
      return read.status();
    }
    for (const LogEvent& e : read->events) {
      Result<Json> parsed = ParseJson(e.message);
      if (parsed.ok()) Apply(series, *parsed);
    }
    series.position = std::max(series.position, read->next_position);
    if (read->exhausted || read->events.empty()) break;
  }
  return &series;
}

Status ProgressHistory::Record(const std::string& job_id, int32_t attempt, int32_t node,
                               const ProgressReport& report) {
  if (!report.values.is_object()) return Status::Ok();
  auto step_it = report.values.find("step");
  if (step_it == report.values.end() || !step_it->is_number_integer()) return Status::Ok();
  const int64_t step = step_it->get<int64_t>();
  std::lock_guard<std::mutex> lock(mu_);
  ASSIGN_OR_RETURN(Series * series,
                   SyncLocked({job_id, attempt}, /*create=*/true, /*refresh=*/false));
  Json values = report.values;
  values.erase("step");
  int64_t n = 0;
  if (step < series->last_step) return Status::Ok();  // replayed
  if (step == series->last_step && series->next_n > 0) {
    if (!series->last_kept) return Status::Ok();
    n = series->next_n - 1;  // merged into the kept point of this step
  } else {
    n = series->next_n++;
    series->last_step = step;
    series->last_kept = false;
    if (n % series->stride != 0) return Status::Ok();
    if (series->points.size() + 1 > max_points_) {
      const int64_t stride = series->stride * 2;
      series->stride = stride;
      std::erase_if(series->points, [stride](const ProgressPoint& p) { return p.n % stride != 0; });
      if (n % stride != 0) return Status::Ok();
    }
  }
  Json event = {{"n", n},       {"s", series->stride},   {"step", step}, {"t", report.timestamp_ms},
                {"node", node}, {"v", std::move(values)}};
  const std::string message = event.dump(-1, ' ', false, Json::error_handler_t::replace);
  const InputEvent input{report.timestamp_ms, message, -1};
  RETURN_IF_ERROR(store_
                      ->Append(std::string(kProgressHistoryGroup), StreamName(job_id, attempt),
                               std::span<const InputEvent>(&input, 1))
                      .status());
  // Read back through the same replay as every reader (keeps them in step).
  RETURN_IF_ERROR(SyncLocked({job_id, attempt}, /*create=*/false).status());
  return Status::Ok();
}

Result<std::vector<ProgressPoint>> ProgressHistory::Points(const std::string& job_id,
                                                           int32_t attempt) const {
  std::lock_guard<std::mutex> lock(mu_);
  ASSIGN_OR_RETURN(Series * series, SyncLocked({job_id, attempt}, /*create=*/false));
  std::vector<ProgressPoint> points = series->points;
  std::stable_sort(points.begin(), points.end(),
                   [](const ProgressPoint& a, const ProgressPoint& b) { return a.step < b.step; });
  return points;
}

Result<uint64_t> ProgressHistory::StoredEvents(const std::string& job_id, int32_t attempt) const {
  ASSIGN_OR_RETURN(StreamInfo info, store_->GetStream(std::string(kProgressHistoryGroup),
                                                      StreamName(job_id, attempt)));
  return info.next_sequence - info.first_sequence;
}

}  // namespace lote::logs
