// The pure parts of `lote status`: one row per active job (progress from
// DescribeJobs' extra key `progress`) and the plain-text table.
//
// Plain ASCII, no colours or cursor control, so the table reads the same in
// a terminal, a pipe or a log file.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/json.h"

namespace lote::cli {

struct JobRow {
  std::string queue;
  std::string job_id;
  std::string name;
  std::string status;
  std::string size;                      // "1", "4 nodes", "array 100"
  std::optional<double> fraction;        // 0..1: steps done, or array children done
  std::string steps;                     // "470/1000", "37/100"; empty when unknown
  std::optional<double> loss;            // the main node's latest `loss`
  std::optional<int64_t> eta_seconds;    // progress.etaSeconds
  std::optional<int64_t> quiet_seconds;  // since progress.lastProgressAt
};

// A row from a DescribeJobs entry (or a ListJobs summary, which has no
// progress). Reads progress.{step,total_steps,etaSeconds,lastProgressAt} and
// progress.nodes[].{node,loss}; for array parents arrayProperties.{size,statusSummary}.
JobRow JobRowFromJson(const Json& job, const std::string& queue, int64_t now_ms);

// "[########............]  40%" (`width` characters inside the brackets);
// blanks inside the brackets when the fraction is unknown.
std::string ProgressBar(std::optional<double> fraction, int width);

// The table: a header, then each queue's rows; a queue without active jobs
// gets one line saying so. Columns are as wide as their widest cell.
std::string RenderStatusTable(const std::vector<std::string>& queues,
                              const std::vector<JobRow>& rows);

}  // namespace lote::cli
