// The AWS Batch resource model: compute environments, job queues, job
// definitions (all revisions), scheduling policies and tags.
//
// Contract:
// - Each operation takes the AWS request shape as JSON (as the botocore model
//   names its fields; path and query parameters already merged in by the api
//   layer) and returns the AWS response shape. Errors are Status values:
//   InvalidArgument / NotFound / AlreadyExists / FailedPrecondition /
//   ResourceExhausted are the caller's fault (HTTP 400 ClientException), with
//   messages that name the problem and the fix; Internal is ours (HTTP 500).
// - A mutation returns only after its rows are committed to the Store. All
//   state lives in memory (loaded from the Store by Open) and reads are served
//   from it; a read may observe a mutation whose commit is in flight.
// - Asynchronous AWS states are modelled: creates leave status CREATING,
//   updates UPDATING, deletes DELETING; Reconcile() (called periodically by the
//   server) moves them to VALID, or removes deleted resources.
// - If the Store fails a commit the control plane stops accepting requests
//   (Internal error) until the server restarts and reloads the committed state.
// - Thread safety: every method may be called concurrently.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/json.h"
#include "common/status.h"
#include "control/instance_types.h"
#include "control/validation.h"
#include "store/store.h"

namespace lote::control {

struct ControlConfig {
  std::string region = "us-east-1";
  std::string account_id = "000000000000";
  HostResources host = HostResources::Detect();
  // 32 bytes: the AES-256-GCM key of SSM SecureString values (the server
  // keeps it in $LOTE_HOME/secrets.key). Empty: SecureString is refused.
  std::string secret_key;
};

// A tag on a compute environment that makes the local backend emulate its
// instance type (run virtual instances of e.g. trn1.32xlarge on this host
// instead of requiring that hardware): tags {"lote:emulation": "true"}.
inline constexpr const char* kEmulationTag = "lote:emulation";

// A compute environment as the executor and scheduler see it (typed view of
// the AWS document). Managed environments scale virtual instances of
// `instance_types` between min_vcpus and max_vcpus, starting at desired_vcpus.
struct ComputeEnvironmentSpec {
  std::string name;
  std::string arn;
  bool managed = true;
  bool enabled = true;
  std::string status;  // CREATING, UPDATING, VALID, DELETING, INVALID
  int32_t min_vcpus = 0;
  int32_t max_vcpus = 0;
  int32_t desired_vcpus = 0;
  int32_t unmanaged_vcpus = 0;
  std::vector<InstanceType> instance_types;
  std::string placement_group;
  bool emulation = false;  // tag lote:emulation=true
  bool fargate = false;    // computeResources.type FARGATE or FARGATE_SPOT
  // Its tags whose key starts with "lote:" (lote:backend, lote:slurm-partition,
  // lote:slurm-conf, lote:runtime, ...): which backend serves it.
  std::map<std::string, std::string> lote_tags;
};

// A job queue as the scheduler sees it.
struct JobQueueSpec {
  std::string name;
  std::string arn;
  bool enabled = true;
  std::string status;
  int32_t priority = 0;
  std::vector<std::string> compute_environment_arns;  // in `order`
  std::string scheduling_policy_arn;                  // empty: FIFO
  // "ECS" (container jobs, SubmitJob), or "SAGEMAKER_TRAINING" (service jobs,
  // SubmitServiceJob, on the service environments below).
  std::string type = "ECS";
  std::vector<std::string> service_environment_arns;  // in `order`
};

class ControlPlane {
 public:
  // Loads every committed resource from `store` (not owned; must outlive the
  // control plane). `clock` is not owned either.
  static Result<std::unique_ptr<ControlPlane>> Open(store::Store* store, const Clock* clock,
                                                    ControlConfig config);

  // --- AWS Batch operations (request and response shapes as in the model) ---
  Result<Json> CreateComputeEnvironment(const Json& request);
  Result<Json> DescribeComputeEnvironments(const Json& request);
  // What the backend serving an UNMANAGED environment holds (null: unknown),
  // shown by DescribeComputeEnvironments as the extra key loteCapacity. Kept in
  // memory only: the backend reports it again after a restart.
  void SetBackendCapacity(const std::string& name, const Json& capacity);
  // The environment's quarantined nodes (null: none), shown as the extra key
  // loteQuarantinedNodes; set by the job loop (rebuilt after a restart).
  void SetQuarantinedNodes(const std::string& name, const Json& nodes);
  // This host's accelerators as the environment's nodes get them (null: none),
  // shown as the extra key loteAccelerators; set by the job loop each pass.
  void SetAccelerators(const std::string& name, const Json& accelerators);
  Result<Json> UpdateComputeEnvironment(const Json& request);
  Result<Json> DeleteComputeEnvironment(const Json& request);

  Result<Json> CreateJobQueue(const Json& request);
  Result<Json> DescribeJobQueues(const Json& request);
  Result<Json> UpdateJobQueue(const Json& request);
  Result<Json> DeleteJobQueue(const Json& request);

  Result<Json> RegisterJobDefinition(const Json& request);
  Result<Json> DescribeJobDefinitions(const Json& request);
  Result<Json> DeregisterJobDefinition(const Json& request);

  // Service environments (service_environments.cc): SageMaker training
  // capacity in instances, what SAGEMAKER_TRAINING queues run service jobs on.
  Result<Json> CreateServiceEnvironment(const Json& request);
  Result<Json> DescribeServiceEnvironments(const Json& request);
  Result<Json> UpdateServiceEnvironment(const Json& request);
  Result<Json> DeleteServiceEnvironment(const Json& request);

  // Quota shares (quota_shares.cc): virtual queues of a SAGEMAKER_TRAINING
  // queue with a quota-share scheduling policy. Described by ARN only.
  Result<Json> CreateQuotaShare(const Json& request);
  Result<Json> DescribeQuotaShare(const Json& request);
  Result<Json> UpdateQuotaShare(const Json& request);
  Result<Json> DeleteQuotaShare(const Json& request);
  Result<Json> ListQuotaShares(const Json& request);

  Result<Json> CreateSchedulingPolicy(const Json& request);
  Result<Json> DescribeSchedulingPolicies(const Json& request);
  Result<Json> ListSchedulingPolicies(const Json& request);
  Result<Json> UpdateSchedulingPolicy(const Json& request);
  Result<Json> DeleteSchedulingPolicy(const Json& request);

  // --- EC2 (ec2_resources.cc): Query parameters as a JSON tree in, the
  // answer's members by their XML locationNames out (api/query_protocol.h).
  // NotFound / AlreadyExists / FailedPrecondition name the resource; the EC2
  // layer maps them to EC2's codes.
  Result<Json> CreatePlacementGroup(const Json& request);
  Result<Json> DescribePlacementGroups(const Json& request) const;
  Result<Json> DeletePlacementGroup(const Json& request);
  Result<Json> CreateLaunchTemplate(const Json& request);
  Result<Json> CreateLaunchTemplateVersion(const Json& request);
  Result<Json> DescribeLaunchTemplates(const Json& request) const;
  Result<Json> DescribeLaunchTemplateVersions(const Json& request);
  Result<Json> DeleteLaunchTemplate(const Json& request);
  Result<Json> DescribeInstanceTypes(const Json& request) const;

  // --- SSM Parameter Store (ssm_parameters.cc): the json protocol's shapes.
  // NotFound → ParameterNotFound, AlreadyExists → ParameterAlreadyExists,
  // FailedPrecondition → ParameterVersionNotFound, InvalidArgument →
  // ValidationException. "/aws/service/ecs/optimized-ami/.../recommended[/image_id]"
  // answer PublicAmiId().
  Result<Json> PutParameter(const Json& request);
  Result<Json> GetParameter(const Json& request) const;
  Result<Json> GetParameters(const Json& request) const;
  Result<Json> GetParametersByPath(const Json& request) const;
  // DeleteParameter (Name) and DeleteParameters (Names).
  Result<Json> DeleteParameters(const Json& request);
  Result<Json> DescribeParameters(const Json& request) const;
  // The plain value of a job secret's valueFrom (a parameter name or ARN,
  // decrypted); InvalidArgument naming it when it cannot be had (a Secrets
  // Manager ARN, a missing parameter).
  Result<std::string> SecretValue(const std::string& value_from) const;
  // The image id lote's nodes "run" (this host, or the job's container image).
  std::string PublicAmiId() const;

  // resourceArn (from the path), tags / tagKeys.
  Result<Json> TagResource(const Json& request);
  Result<Json> UntagResource(const Json& request);
  Result<Json> ListTagsForResource(const Json& request);

  // Completes asynchronous transitions (CREATING/UPDATING → VALID, DELETING →
  // removed). Returns how many resources changed.
  Result<int32_t> Reconcile();

  // --- Lookups for the job layer (next issue) ---
  // A queue by name or ARN.
  Result<JobQueueSpec> FindJobQueue(const std::string& name_or_arn) const;
  // A compute environment by name or ARN.
  Result<ComputeEnvironmentSpec> FindComputeEnvironment(const std::string& name_or_arn) const;
  std::vector<ComputeEnvironmentSpec> ComputeEnvironments() const;
  std::vector<JobQueueSpec> JobQueues() const;
  // A job definition document by "name" (latest ACTIVE revision),
  // "name:revision" or ARN, as DescribeJobDefinitions returns it.
  Result<Json> FindJobDefinition(const std::string& reference) const;

  // The job layer's scaling decision: the vCPUs of a managed compute
  // environment's instances, shown as computeResources.desiredvCpus. Written
  // without waiting for the commit (the scheduler recomputes it after a crash).
  Status SetDesiredVcpus(const std::string& compute_environment, int32_t vcpus);

  const ControlConfig& config() const { return config_; }
  const InstanceCatalog& catalog() const { return catalog_; }
  // "arn:aws:batch:<region>:<account>:<resource>"
  std::string MakeArn(const std::string& resource) const;

 private:
  ControlPlane(store::Store* store, const Clock* clock, ControlConfig config);
  Status LoadFrom(const store::Snapshot& snapshot);
  // Replaces every resource (backend capacity aside) with the snapshot's.
  Status LoadLocked(const store::Snapshot& snapshot);

  // Resolves a name or ARN of `type` ("compute-environment", ...) to a name.
  Result<std::string> NameFromReference(const std::string& ref, const std::string& type,
                                        const std::string& field) const;
  // Writes `batch` with mu_ held (store order is memory order, and nobody
  // sees a change before it is stored). When the store refuses it, memory is
  // reloaded from what is committed and Unavailable (ServerException) says why.
  Status CommitLocked(std::unique_lock<std::mutex>& lock, store::WriteBatch batch);

  Result<Json> ValidateComputeResources(const Json& cr, bool for_update,
                                        const Json* existing) const;
  Result<Json> ValidateComputeEnvironmentOrder(const Json& orders) const;
  Result<Json> ValidateServiceEnvironmentOrder(const Json& orders) const;
  // "<queue>/<share>" of a quota share ARN (InvalidArgument when it is not one).
  Result<std::string> QuotaShareKeyOfArn(const std::string& arn) const;
  // InvalidArgument unless every capacityUnit of `limits` is one the queue's
  // service environments list. mu_ held.
  Status CheckQuotaShareUnitsLocked(const std::string& queue, const Json& limits) const;
  // A quota-managed queue's service environments: exactly one, in instance
  // types, used by no other queue than `queue`. mu_ held.
  Status CheckQuotaManagedEnvironmentsLocked(const std::string& queue, const Json& order) const;
  // Whether the scheduling policy with this ARN is a quota-share policy. mu_ held.
  bool IsQuotaSharePolicyLocked(const std::string& arn) const;
  Result<Json> ValidateFairsharePolicy(const Json& policy) const;
  // The ARN of the scheduling policy `ref` (name or ARN) names, for a job
  // queue's schedulingPolicyArn; NotFound when there is none. mu_ held.
  Result<std::string> SchedulingPolicyArnLocked(const std::string& ref) const;
  Result<Json> ValidateContainerProperties(const Json& props, const std::string& path) const;
  Result<Json> ValidateNodeProperties(const Json& props) const;

  Json WithTags(const Json& doc, const std::string& arn) const;
  // DescribeComputeEnvironments and DescribeJobQueues: the documents of
  // `docs` (one of the maps below, read under mu_) that the request's
  // `list_field` names (names or ARNs of `type`), or all of them, in name
  // order, with their tags, one page (maxResults, nextToken) at a time.
  Result<Json> DescribeByName(const Json& request, const char* list_field, const char* type,
                              const std::map<std::string, Json>& docs, const char* arn_field) const;
  // One page of `sorted_keys` after `next_token`: `item(i)` for at most
  // `max_results` (default kMaxPageSize) keys as the list `list_field`, and a
  // nextToken when keys remain.
  static Result<Json> Page(const std::vector<std::string>& sorted_keys,
                           const std::optional<std::string>& next_token,
                           std::optional<int64_t> max_results, const char* list_field,
                           const std::function<Json(size_t)>& item);
  void PutResource(store::WriteBatch* batch, store::ResourceKind kind, const Json& doc,
                   const std::string& arn, const std::string& name, int64_t revision) const;
  bool ResourceExistsLocked(const std::string& arn) const;
  ComputeEnvironmentSpec CeSpecLocked(const Json& doc) const;
  JobQueueSpec QueueSpecLocked(const Json& doc) const;
  Result<const Json*> FindJobDefinitionLocked(const std::string& reference) const;
  // EC2 helpers (ec2_resources.cc).
  std::string Ec2Arn(const std::string& resource) const;
  // The template a request's LaunchTemplateId or LaunchTemplateName names.
  Result<Json*> FindLaunchTemplateLocked(const Json& request);
  // Version numbers of "$Latest", "$Default" or "N" (NotFound when absent).
  Result<std::vector<int64_t>> ResolveVersionsLocked(const Json& doc,
                                                     const std::vector<std::string>& wanted) const;
  static Json LaunchTemplateSummary(const Json& doc);
  // InvalidArgument unless computeResources' placementGroup and launchTemplate
  // (name or id, and version) name ones that exist.
  Status CheckEc2ReferencesLocked(const Json& compute_resources);
  // SSM helpers (ssm_parameters.cc).
  std::string ParameterArn(const std::string& name) const;
  Result<Json> PublicParameter(const std::string& name) const;
  Result<Json> ParameterAnswerLocked(const Json& doc, bool decrypt) const;
  Result<Json> GetParameterLocked(std::string name, bool decrypt) const;
  static Json LaunchTemplateVersionJson(const Json& doc, const Json& version);

  store::Store* const store_;
  const Clock* const clock_;
  const ControlConfig config_;
  const InstanceCatalog catalog_;

  mutable std::mutex mu_;
  // All below protected by mu_. Documents are the AWS detail shapes (tags
  // excluded; they live in tags_).
  std::map<std::string, Json> compute_environments_;                // by name
  std::map<std::string, Json> backend_capacity_;                    // by name (SetBackendCapacity)
  std::map<std::string, Json> quarantined_nodes_;                   // by name (SetQuarantinedNodes)
  std::map<std::string, Json> accelerators_;                        // by name (SetAccelerators)
  std::map<std::string, Json> job_queues_;                          // by name
  std::map<std::string, std::map<int64_t, Json>> job_definitions_;  // name → revision → doc
  std::map<std::string, int64_t> last_revision_;                    // name → highest revision
  std::map<std::string, Json> scheduling_policies_;                 // by name
  std::map<std::string, Json> service_environments_;                // by name
  std::map<std::string, Json> quota_shares_;                        // by "<queue>/<share>"
  std::map<std::string, Json> placement_groups_;                    // EC2, by name
  std::map<std::string, Json> ssm_parameters_;  // by name; SecureString values sealed
  std::map<std::string, Json>
      launch_templates_;                // EC2, by name; doc["versions"] holds every version
  std::map<std::string, TagMap> tags_;  // by resource ARN
};

}  // namespace lote::control
