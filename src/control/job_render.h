// Rendering jobs in the AWS Batch API shapes, and ListJobs selection.
//
// Pure functions of Job values (botocore's batch model is the spec):
// DescribeJobJson -> JobDetail, JobSummaryJson -> JobSummary. lote extras
// (`progress`, `failureCategory`) are added as extra keys, which AWS clients
// ignore. Thread-compatible; no I/O.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "control/job_model.h"

namespace lote::control {

// JobDetail for DescribeJobs. For a multi-node job pass the parent for `<id>`
// and NodeJob(parent, n) for `<id>#<n>`. attempts[] lists finished attempts;
// `container` carries the last attempt's exit code, reason, task ARN and log
// stream name (for a failed gang attempt: the node that failed it).
Json DescribeJobJson(const Job& job);

// JobSummary for ListJobs.
Json JobSummaryJson(const Job& job);

// A parsed ListJobs request.
struct ListJobsQuery {
  std::string job_queue;  // name or ARN, as given
  std::string array_job_id;
  std::string multi_node_job_id;
  std::optional<JobStatus> job_status;  // effective status filter; nullopt = any status
  std::string filter_name;  // "", JOB_NAME, JOB_DEFINITION, BEFORE_CREATED_AT, AFTER_CREATED_AT,
                            // SHARE_IDENTIFIER
  std::string filter_value;
  int32_t max_results = 100;
  std::string next_token;
};

// Validates a ListJobsRequest: exactly one of jobQueue, arrayJobId,
// multiNodeJobId; at most one filter with one value; the status defaults to
// RUNNING and is ignored when a filter other than SHARE_IDENTIFIER is given
// (AWS); maxResults 1..1000.
Result<ListJobsQuery> ParseListJobsRequest(const Json& request);

// ASCII letters to lower case (JOB_NAME is matched case-insensitively, as
// SQLite's lower() does for the stored finished jobs).
std::string Lower(std::string s);

// Whether `job` belongs in the answer. Queue listings hold top-level jobs
// only (array parents, not their children; multi-node parents, not their
// nodes); arrayJobId lists the children, multiNodeJobId the node views.
bool MatchesListJobs(const ListJobsQuery& query, const Job& job);

// Orders a ListJobs answer: with a filter newest first (AWS), otherwise by
// createdAt then id; array children by index; nodes by node index.
void SortForListJobs(const ListJobsQuery& query, std::vector<Job>& jobs);

// A place in a ListJobs answer's order (SortForListJobs): (createdAt, jobId)
// for a queue's jobs, (index, "") for array children and node views. The
// nextToken is the place of a page's last job, so that a page follows it
// whatever was submitted or left memory meanwhile.
struct ListPosition {
  int64_t at = 0;
  std::string id;
  friend bool operator==(const ListPosition&, const ListPosition&) = default;
};
ListPosition ListPositionOf(const ListJobsQuery& query, const Job& job);
// Whether `job` comes after `position` in the query's order.
bool ListedAfter(const ListJobsQuery& query, const ListPosition& position, const Job& job);
// The opaque nextToken of a position, and back (InvalidArgument for a token
// this server did not issue).
std::string ListJobsToken(const ListPosition& position);
Result<ListPosition> ParseListJobsToken(const std::string& token);

// The node views `<id>#0` .. `<id>#n-1` of a multi-node job (empty otherwise).
std::vector<Job> NodeJobs(const Job& parent);

}  // namespace lote::control
