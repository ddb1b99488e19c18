#include "cli/status_table.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "cli/durations.h"

namespace lote::cli {
namespace {

std::optional<int64_t> OptInt(const Json& j, const char* key) {
  if (!j.is_object()) return std::nullopt;
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return std::nullopt;
  return it->is_number_float() ? static_cast<int64_t>(std::llround(it->get<double>()))
                               : it->get<int64_t>();
}

std::optional<double> OptDouble(const Json& j, const char* key) {
  if (!j.is_object()) return std::nullopt;
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

// The loss to show: the main node's (node 0 unless told), else the first node reporting one.
std::optional<double> LossOf(const Json& progress, int64_t main_node) {
  const Json nodes = progress.value("nodes", Json::array());
  std::optional<double> first;
  if (!nodes.is_array()) return OptDouble(progress, "loss");
  for (const Json& n : nodes) {
    std::optional<double> loss = OptDouble(n, "loss");
    if (!loss) continue;
    if (OptInt(n, "node").value_or(-1) == main_node) return loss;
    if (!first) first = loss;
  }
  return first ? first : OptDouble(progress, "loss");
}

}  // namespace

JobRow JobRowFromJson(const Json& job, const std::string& queue, int64_t now_ms) {
  JobRow row;
  row.queue = queue;
  row.job_id = job.value("jobId", "");
  row.name = job.value("jobName", "");
  row.status = job.value("status", "");
  row.size = "1";
  int64_t main_node = 0;
  const Json nodes = job.value("nodeProperties", Json::object());
  if (nodes.is_object() && nodes.contains("numNodes")) {
    row.size = std::to_string(OptInt(nodes, "numNodes").value_or(1)) + " nodes";
    main_node = OptInt(nodes, "mainNode").value_or(0);
  }
  const Json array = job.value("arrayProperties", Json::object());
  if (array.is_object() && array.contains("size")) {
    int64_t size = OptInt(array, "size").value_or(0);
    row.size = "array " + std::to_string(size);
    const Json summary = array.value("statusSummary", Json::object());
    if (size > 0 && summary.is_object()) {
      int64_t done =
          OptInt(summary, "SUCCEEDED").value_or(0) + OptInt(summary, "FAILED").value_or(0);
      row.fraction = std::clamp(static_cast<double>(done) / static_cast<double>(size), 0.0, 1.0);
      row.steps = std::to_string(done) + "/" + std::to_string(size);
    }
  }
  const Json progress = job.value("progress", Json::object());
  if (progress.is_object() && !progress.empty()) {
    std::optional<int64_t> step = OptInt(progress, "step");
    std::optional<int64_t> total = OptInt(progress, "total_steps");
    if (step && total && *total > 0) {
      row.fraction = std::clamp(static_cast<double>(*step) / static_cast<double>(*total), 0.0, 1.0);
      row.steps = std::to_string(*step) + "/" + std::to_string(*total);
    } else if (step) {
      row.steps = std::to_string(*step);
    }
    row.loss = LossOf(progress, main_node);
    row.eta_seconds = OptInt(progress, "etaSeconds");
    if (std::optional<int64_t> at = OptInt(progress, "lastProgressAt")) {
      row.quiet_seconds = std::max<int64_t>(0, (now_ms - *at) / 1000);
    }
  }
  return row;
}

std::string ProgressBar(std::optional<double> fraction, int width) {
  std::string bar = "[";
  if (!fraction) {
    bar += std::string(static_cast<size_t>(width), ' ') + "]     ";
    return bar;
  }
  double f = std::clamp(*fraction, 0.0, 1.0);
  int filled = static_cast<int>(std::floor(f * width + 1e-9));
  bar += std::string(static_cast<size_t>(filled), '#');
  bar += std::string(static_cast<size_t>(width - filled), '.');
  char pct[16];
  std::snprintf(pct, sizeof pct, "] %3d%%", static_cast<int>(std::floor(f * 100 + 1e-9)));
  return bar + pct;
}

std::string RenderStatusTable(const std::vector<std::string>& queues,
                              const std::vector<JobRow>& rows) {
  using Cells = std::vector<std::string>;
  std::vector<Cells> table;
  table.push_back({"QUEUE", "JOB ID", "NAME", "STATUS", "SIZE", "PROGRESS", "STEP", "LOSS", "ETA",
                   "LAST PROGRESS"});
  for (const std::string& q : queues) {
    bool any = false;
    for (const JobRow& r : rows) {
      if (r.queue != q) continue;
      any = true;
      char loss[32] = "-";
      if (r.loss) std::snprintf(loss, sizeof loss, "%.4f", *r.loss);
      table.push_back({r.queue, r.job_id, r.name, r.status, r.size, ProgressBar(r.fraction, 20),
                       r.steps.empty() ? "-" : r.steps, loss,
                       r.eta_seconds ? FormatDuration(*r.eta_seconds) : "-",
                       r.quiet_seconds ? FormatDuration(*r.quiet_seconds) + " ago" : "-"});
    }
    if (!any) table.push_back({q, "(no active jobs)"});
  }
  std::vector<size_t> width(table.front().size(), 0);
  for (const Cells& row : table) {
    if (row.size() != width.size()) continue;  // a "no active jobs" line does not size columns
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  width[0] = std::max(width[0], std::string("QUEUE").size());
  for (const Cells& row : table) {
    if (row.size() != width.size()) width[0] = std::max(width[0], row[0].size());
  }
  std::string out;
  for (const Cells& row : table) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(width[i] - row[i].size() + 2, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

}  // namespace lote::cli
