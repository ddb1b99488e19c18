// SubmitJob: validates a SubmitJob request against its resolved job
// definition and turns it into Jobs (the job, plus its array children).
//
// Pure: the caller injects the new job id, the time, the queue facts and a
// lookup for dependencies; nothing is stored here. Every violation is
// InvalidArgument whose message names the field and the fix (the API maps it
// to ClientException). Multi-node nodes are not separate Jobs: NodeJob()
// (job_model.h) renders `<id>#<n>` from the returned job.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "control/job_model.h"

namespace lote::control {

// The request key that carries the submitting principal into SubmitJob. The
// server sets it from the request's signer (replacing whatever a client
// sent); PrepareSubmit records it as Job::owner.
inline constexpr char kSubmitOwnerKey[] = "loteOwner";

struct SubmitContext {
  std::string job_id;  // a fresh NewUuid()
  std::string queue_arn;
  bool queue_has_fair_share = false;  // the queue has a schedulingPolicyArn
  // The resolved job definition in the JobDefinition shape RegisterJobDefinition
  // stores (jobDefinitionName, jobDefinitionArn, revision, type, status,
  // parameters, containerProperties | nodeProperties, retryStrategy, timeout,
  // propagateTags, schedulingPriority, platformCapabilities).
  Json job_definition;
  int64_t now_ms = 0;
  // Looks up a job named in dependsOn (any id form); nullopt when it does not exist.
  std::function<std::optional<Job>(const std::string& job_id)> find_job;
  // Whether the consumable resource a reference (name or ARN) names exists
  // (null: not checked).
  std::function<bool(const std::string& reference)> consumable_exists;
};

struct SubmittedJobs {
  Job job;                          // status SUBMITTED
  std::vector<Job> array_children;  // "<id>:<i>" for array jobs, status SUBMITTED
};

// Validates and normalises `request` (SubmitJobRequest Json, with jobQueue and
// jobDefinition already resolved by the caller into the context).
Result<SubmittedJobs> PrepareSubmit(const Json& request, const SubmitContext& context);

// An eksProperties job definition's pod as the containerProperties lote runs
// (its single container: image, command followed by args, env, resources
// limits or else requests: cpu "1"/"500m"/"0.5", memory "2048Mi"/"2Gi"/"2G"/
// bytes, "nvidia.com/gpu"; securityContext.runAsUser as user), with
// `override` (eksPropertiesOverride.podProperties) applied first. A pod with
// no container, more than one, or initContainers is InvalidArgument naming
// `field`: lote runs one process per node.
Result<Json> EksPodContainer(const Json& pod_properties, const Json& override,
                             const std::string& field);

// Parses and validates a RetryStrategy Json (`field` names it in messages).
Result<RetryStrategy> ParseRetryStrategy(const Json& json, const std::string& field);

// Replaces every command argument that is exactly "Ref::<name>" with the
// parameter's value; arguments naming unknown parameters stay as they are (AWS).
std::vector<std::string> SubstituteParameters(const std::vector<std::string>& command,
                                              const std::map<std::string, std::string>& parameters);

}  // namespace lote::control
