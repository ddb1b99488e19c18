// The typed client of lote's server: one method per AWS Batch and CloudWatch
// Logs operation the CLI, the workflow commands, the tests' helpers and the
// benchmarks use. Requests and answers are the AWS JSON shapes; the paths,
// paging loops (nextToken), DescribeJobs' 100-id batches and retries live here
// and nowhere else.
//
// Retries: an answer that says the server did not do the request (429 or a
// throttling code → ResourceExhausted, 503 → Unavailable) is retried for every
// operation; a connection failure (Unavailable) only for read-only ones, since
// a mutation may have been done before the connection broke. Up to
// RetryPolicy::attempts tries, with exponential backoff from base_delay_ms.
// Errors are values (see api_client.h for the mapping of AWS error codes).
// Thread safety: one BatchClient per thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/api_client.h"
#include "common/json.h"
#include "common/status.h"

namespace lote::cli {

struct RetryPolicy {
  int attempts = 5;
  int64_t base_delay_ms = 100;
  // Waits between tries; tests pass a fake.
  std::function<void(int64_t millis)> sleep;
};

// One GetLogEvents page.
struct LogEventsPage {
  std::vector<Json> events;        // {timestamp, message, ingestionTime}
  std::string next_forward_token;  // equal to the request's token: nothing more for now
};

class BatchClient {
 public:
  static Result<std::unique_ptr<BatchClient>> Connect(const ClientOptions& options,
                                                      RetryPolicy retry = {});
  BatchClient(std::unique_ptr<ApiClient> api, RetryPolicy retry);
  ~BatchClient();

  const std::string& endpoint() const;

  // Compute environments. Describe* return every page; the one-name form
  // returns nullopt when there is no such environment.
  Result<Json> CreateComputeEnvironment(const Json& request);
  Result<std::vector<Json>> DescribeComputeEnvironments(const std::vector<std::string>& names = {});
  Result<std::optional<Json>> DescribeComputeEnvironment(const std::string& name);
  Status UpdateComputeEnvironment(const Json& request);
  Status DeleteComputeEnvironment(const std::string& name);

  // Job queues.
  Result<Json> CreateJobQueue(const Json& request);
  Result<std::vector<Json>> DescribeJobQueues(const std::vector<std::string>& names = {});
  Result<std::optional<Json>> DescribeJobQueue(const std::string& name);
  Status UpdateJobQueue(const Json& request);
  Status DeleteJobQueue(const std::string& name);

  // Job definitions. `request` of Describe holds the filters
  // (jobDefinitionName, status, jobDefinitions); every page is returned.
  Result<Json> RegisterJobDefinition(const Json& request);
  Result<std::vector<Json>> DescribeJobDefinitions(const Json& request);
  Status DeregisterJobDefinition(const std::string& job_definition);

  // Jobs.
  Result<Json> SubmitJob(const Json& request);
  // lote's own ReleaseNode: ends the node's quarantine.
  Result<Json> ReleaseNode(const std::string& node);
  // lote's own accelerator operations: "describe", "rescan", "drain" or
  // "release" (POST /v1/<operation>accelerator[s]); each answers with the hosts.
  Result<Json> Accelerators(const std::string& operation, const Json& body);
  // In any number: sent in batches of 100; unknown ids are left out, as AWS does.
  Result<std::vector<Json>> DescribeJobs(const std::vector<std::string>& ids);
  // NotFound (with a hint how to find the right id) when there is no such job.
  Result<Json> DescribeJob(const std::string& job_id);
  // Every page of ListJobs for `request` (jobQueue + jobStatus, filters, ...).
  Result<std::vector<Json>> ListJobs(const Json& request);
  Status TerminateJob(const std::string& job_id, const std::string& reason);
  Status CancelJob(const std::string& job_id, const std::string& reason);
  // lote's own operations (docs/api.md): a fault for a running job's node
  // (request: action, nodeIndex, atStep | afterSeconds), and the stack dumps
  // of its nodes.
  Result<Json> InjectFault(const std::string& job_id, const Json& request);
  Result<Json> DumpJob(const std::string& job_id);

  // CloudWatch Logs.
  Result<LogEventsPage> GetLogEvents(const Json& request);
  // Every page of DescribeLogStreams for `request`.
  Result<std::vector<Json>> DescribeLogStreams(const Json& request);

  // EC2 placement groups and launch templates (Query protocol). `request` is
  // the EC2 request as a JSON tree ({"GroupName": ..., "Strategy": ...}),
  // flattened with FlattenQuery. *Exists answer whether one of that name is
  // there.
  Status CreatePlacementGroup(const Json& request);
  Result<bool> PlacementGroupExists(const std::string& name);
  Status DeletePlacementGroup(const std::string& name);
  Status CreateLaunchTemplate(const Json& request);
  Result<bool> LaunchTemplateExists(const std::string& name);
  Status DeleteLaunchTemplate(const std::string& name);

  // The transport, for callers that measure raw operations (benchmarks).
  ApiClient* api() { return api_.get(); }

 private:
  enum class Kind { kRead, kMutation };
  Result<Json> Batch(Kind kind, const std::string& path, const Json& body);
  Result<Json> Logs(Kind kind, const std::string& operation, const Json& body);
  Status Ec2(Kind kind, const std::string& action, const Json& request);
  // Whether `action` (a Describe) finds the one named by `param` = `name`.
  Result<bool> Ec2Exists(const std::string& action, const std::string& param,
                         const std::string& name);
  Result<Json> WithRetries(Kind kind, const std::function<Result<Json>()>& call);
  // Every page of a Batch operation that pages with nextToken; `list_key`
  // names the array of the answer.
  Result<std::vector<Json>> AllPages(const std::string& path, Json request,
                                     const std::string& list_key);

  std::unique_ptr<ApiClient> api_;
  RetryPolicy retry_;
};

}  // namespace lote::cli
