// The job model of the control plane: one Job value per AWS Batch job (plain
// job, array parent, array child, multi-node parent), with the AWS names and
// lote's extras (failure category, progress), and its Json form for the store.
//
// Value types only: no I/O, no clock, no globals; thread-compatible. A
// multi-node job is ONE Job (the gang): its nodes `<id>#<n>` are views
// computed by NodeJob() from the parent, so attempts are counted per job.
// Array children `<id>:<i>` are Jobs of their own with their own events.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "control/consumables.h"

namespace lote::control {

enum class JobStatus { kSubmitted, kPending, kRunnable, kStarting, kRunning, kSucceeded, kFailed };

inline constexpr JobStatus kAllJobStatuses[] = {
    JobStatus::kSubmitted, JobStatus::kPending,   JobStatus::kRunnable, JobStatus::kStarting,
    JobStatus::kRunning,   JobStatus::kSucceeded, JobStatus::kFailed};

// "SUBMITTED", ... as in the AWS JobStatus enum.
std::string_view JobStatusName(JobStatus status);
// InvalidArgument naming the valid values when `name` is not one.
Result<JobStatus> ParseJobStatus(std::string_view name);
// SUCCEEDED or FAILED.
bool IsFinal(JobStatus status);

// Why an attempt failed (lote extra; also the prefix of the attempt's reason).
enum class FailureCategory {
  kNone,
  kUserError,       // a node exited non-zero
  kTimeout,         // timeout.attemptDurationSeconds passed
  kNodeLost,        // a node's process or host disappeared
  kTerminated,      // TerminateJob
  kInfrastructure,  // lote could not start or run the node (launch error, unsupported field)
  kCapacity,        // the job can never fit the queue's compute environments
  kHang,            // no progress for too long
  kPreempted,       // stopped cooperatively: exited kPreemptedExitCode after a checkpoint
  kNotStarted,      // lote lost the node before its command ever ran (server restart)
};
// The exit code with which a node says "I was asked to stop (SIGTERM), saved my state,
// and can be resumed" (`lote train` with --checkpoint-uri; EX_TEMPFAIL). Such an
// attempt fails with category PREEMPTED.
inline constexpr int kPreemptedExitCode = 75;
// PREEMPTED and NOT_STARTED attempts are retried without counting against
// retryStrategy.attempts: the job's own command did not fail.
bool ConsumesAttempt(FailureCategory category);
// The category of a node whose command exited non-zero (code = 128 + n for signal n):
// PREEMPTED for a plain kPreemptedExitCode, else USER_ERROR.
FailureCategory CategoryOfExit(int32_t code, bool signaled);

// "USER_ERROR", ...; "" for kNone.
std::string_view FailureCategoryName(FailureCategory category);
Result<FailureCategory> ParseFailureCategory(std::string_view name);

enum class DependencyType { kNone, kNToN, kSequential };
std::string_view DependencyTypeName(DependencyType type);  // "" for kNone

// One entry of dependsOn, as submitted (and rendered).
struct JobDependency {
  std::string job_id;  // empty for a SEQUENTIAL dependency without jobId
  DependencyType type = DependencyType::kNone;
  friend bool operator==(const JobDependency&, const JobDependency&) = default;
};

enum class RetryAction { kRetry, kExit };

// One evaluateOnExit rule; an empty pattern means "not specified".
struct EvaluateOnExit {
  std::string on_status_reason;
  std::string on_reason;
  std::string on_exit_code;
  RetryAction action = RetryAction::kRetry;
  // The action as given ("retry", "Exit"): AWS takes it in any case and
  // returns it as given. Empty: rendered as RETRY / EXIT.
  std::string action_text;
  // action_text, or RETRY / EXIT.
  std::string ActionText() const;
  friend bool operator==(const EvaluateOnExit&, const EvaluateOnExit&) = default;
};

struct RetryStrategy {
  int32_t attempts = 1;  // 1..10; 1 = no retries
  std::vector<EvaluateOnExit> evaluate_on_exit;
  bool specified = false;  // rendered in DescribeJobs only when set
  friend bool operator==(const RetryStrategy&, const RetryStrategy&) = default;
};

struct EnvVar {
  std::string name;
  std::string value;
  friend bool operator==(const EnvVar&, const EnvVar&) = default;
};

struct ResourceRequirement {
  std::string type;  // VCPU, MEMORY, GPU
  std::string value;
  friend bool operator==(const ResourceRequirement&, const ResourceRequirement&) = default;
};

// The largest resource amount (and legacy vcpus/memory) AWS accepts: its Integer range.
inline constexpr int64_t kMaxResourceValue = 2147483647;

// The one rule for a resourceRequirement value, used by RegisterJobDefinition,
// containerOverrides and nodePropertyOverrides alike (docs/jobs.md): VCPU a
// decimal number (digits, optionally '.' and digits) > 0; MEMORY a whole number
// >= 1; GPU a whole number >= 0; none above kMaxResourceValue. No sign, exponent
// or spaces. InvalidArgument naming `field`, the value and the rule.
Status ValidateResourceValue(const std::string& type, const std::string& value,
                             const std::string& field);

// The accelerators a node asks for (docs/jobs.md, "Accelerators").
struct AcceleratorRequest {
  int32_t count = 0;
  std::string kind;  // "gpu", "neuron"; "" when count is 0
};

// A container after overrides and `Ref::` substitution (ContainerProperties shape).
struct ContainerSpec {
  std::string image;
  std::vector<std::string> command;
  std::vector<EnvVar> environment;
  std::vector<ResourceRequirement> resource_requirements;
  std::optional<int64_t> vcpus;   // legacy field, as given
  std::optional<int64_t> memory;  // legacy field (MiB), as given
  std::string user;
  std::string instance_type;
  Json ulimits = Json::array();            // [{name, softLimit, hardLimit}]
  Json linux_parameters = Json::object();  // devices, sharedMemorySize, ...
  Json other = Json::object();             // every other ContainerProperties key, verbatim

  // Effective amounts: resourceRequirements win over the legacy fields. Values
  // outside 0..kMaxResourceValue (only in jobs stored before submit checked them)
  // are clamped into it, so that such a job never fits rather than overflows.
  int64_t MilliVcpu() const;
  int64_t MemoryMib() const;
  int32_t Gpus() const;
  // GPUs (resourceRequirements GPU; EKS nvidia.com/gpu becomes one), else one
  // Neuron device per /dev/neuronN in linuxParameters.devices (the recipe's
  // form: Batch has no Neuron resource type).
  AcceleratorRequest Accelerators() const;
  friend bool operator==(const ContainerSpec&, const ContainerSpec&) = default;
};

// N of a "/dev/neuronN" path, or -1.
int32_t NeuronDeviceIndex(const std::string& path);

// A run of nodes [start, end] (inclusive) sharing one container, after overrides.
struct NodeRange {
  int32_t start = 0;
  int32_t end = 0;
  ContainerSpec container;
  std::vector<std::string> instance_types;
  // Consumable resources each node of the range needs (consumables.h).
  std::vector<ConsumableNeed> consumables;
  std::string TargetNodes() const;  // "start:end"
  friend bool operator==(const NodeRange&, const NodeRange&) = default;
};

// Multi-node parallel job: disjoint ranges covering 0..num_nodes-1 in order.
struct NodeProperties {
  int32_t num_nodes = 0;
  int32_t main_node = 0;
  std::vector<NodeRange> ranges;
  // The container of node `index`; nullptr when out of range.
  const ContainerSpec* ContainerFor(int32_t index) const;
  friend bool operator==(const NodeProperties&, const NodeProperties&) = default;
};

// One node of one attempt (a single-node job has one, index 0).
struct NodeAttempt {
  int32_t node_index = 0;
  JobStatus status = JobStatus::kStarting;  // STARTING, RUNNING, SUCCEEDED or FAILED
  std::string instance_id;
  std::string private_ipv4;
  std::vector<int32_t> devices;  // accelerator device indices
  std::string task_arn;
  std::string log_stream_name;
  std::optional<int32_t> exit_code;
  std::string reason;  // "USER_ERROR: Essential container in task exited", ...
  // lote's own notices about this node (limits not enforced, emulated fields):
  // shown by DescribeJobs as container.loteNotices, never in the job's log.
  std::vector<std::string> notices;
  int64_t started_at = 0;
  int64_t stopped_at = 0;
  // Container mode: the image pull the node's runner saw (0 when cached).
  int64_t pull_started_at = 0;
  int64_t pull_stopped_at = 0;
  friend bool operator==(const NodeAttempt&, const NodeAttempt&) = default;
};

// One attempt: from placement (STARTING) to its end.
struct Attempt {
  std::string compute_environment;
  int64_t scheduled_at = 0;
  int64_t started_at = 0;     // main node RUNNING
  int64_t stopped_at = 0;     // 0 while open
  std::string status_reason;  // AWS text, e.g. "Essential container in task exited"
  std::string reason;  // with the category prefix: "USER_ERROR: Essential container in task exited"
  FailureCategory failure_category = FailureCategory::kNone;
  int32_t failed_node = -1;  // the node that failed the attempt, if one did
  // What the backend answered when the gang was handed to it (a Slurm job id,
  // the local attempt folder): how a restarted server finds the nodes again.
  std::string backend_ref;
  // Which backend the gang was handed to, recorded at launch: {"managed":
  // bool, "tags": the compute environment's lote: tags}. Its nodes are
  // recovered and ended through that backend even once the environment is
  // deleted (null: an attempt launched before this was recorded).
  Json backend;
  // Set while the backend holds the attempt waiting (Slurm PENDING): its
  // reason. The job is then shown RUNNABLE with this statusReason.
  std::string pending_reason;
  std::vector<NodeAttempt> nodes;  // node_index order
  const NodeAttempt* Node(int32_t index) const;
  NodeAttempt* MutableNode(int32_t index);
  friend bool operator==(const Attempt&, const Attempt&) = default;
};

// Array parent: size > 0 and index -1; array child: index >= 0 and the parent's size.
struct ArrayInfo {
  int32_t size = 0;
  int32_t index = -1;
  std::map<std::string, int32_t> status_summary;  // parents: count per JobStatusName
  int64_t status_summary_updated_at = 0;
  friend bool operator==(const ArrayInfo&, const ArrayInfo&) = default;
};

struct Job {
  std::string id;  // uuid, "<uuid>:<index>" (array child) or "<uuid>#<node>" (node view)
  std::string arn;
  std::string name;
  std::string queue_arn;
  std::string definition_arn;  // with ":<revision>"
  std::string definition_name;
  int32_t definition_revision = 0;
  // The IAM principal that submitted it (its user name); empty when the
  // server runs with --insecure-no-auth. Array children carry their parent's.
  std::string owner;

  JobStatus status = JobStatus::kSubmitted;
  std::string status_reason;
  int64_t created_at = 0;
  int64_t started_at = 0;  // last attempt's RUNNING time; 0 = never
  int64_t stopped_at = 0;  // final time; 0 = not final

  std::map<std::string, std::string> parameters;
  std::optional<ContainerSpec> container;         // container jobs and array children
  std::optional<NodeProperties> node_properties;  // multi-node jobs (and their node views)
  int32_t node_index = -1;                        // node views only
  std::optional<ArrayInfo> array;
  std::string array_parent_id;  // array children only

  std::vector<JobDependency> depends_on;  // as rendered in DescribeJobs
  std::vector<std::string> wait_for;      // concrete job ids that must SUCCEED first
  RetryStrategy retry_strategy;
  std::optional<int32_t> timeout_seconds;  // attemptDurationSeconds
  std::map<std::string, std::string> tags;
  bool propagate_tags = false;
  std::string share_identifier;
  std::optional<int32_t> scheduling_priority;
  // Consumable resources the job needs once, whatever its nodes (its
  // consumableResourceProperties); a multi-node job's ranges add theirs per node.
  std::vector<ConsumableNeed> consumables;
  std::string platform_capability;  // "EC2" (rendered as platformCapabilities)
  // EKS jobs: the definition's eksProperties (its pod), rendered as
  // eksProperties and eksAttempts instead of container and attempts[].container.
  Json eks_properties;

  std::vector<Attempt> attempts;  // all attempts; the last is open while STARTING/RUNNING
  FailureCategory failure_category = FailureCategory::kNone;  // of the last failure
  bool is_cancelled = false;
  bool is_terminated = false;
  Json progress;  // null until the first LOTE_PROGRESS line

  bool IsArrayParent() const { return array.has_value() && array->index < 0; }
  bool IsArrayChild() const { return array.has_value() && array->index >= 0; }
  bool IsMultiNode() const { return node_properties.has_value(); }
  int32_t NumNodes() const { return node_properties ? node_properties->num_nodes : 1; }
  int32_t MainNode() const { return node_properties ? node_properties->main_node : 0; }
  // The container of node `index` (the job's container for single-node jobs).
  const ContainerSpec* ContainerFor(int32_t index) const;
  // The open attempt (STARTING/RUNNING), else nullptr.
  const Attempt* CurrentAttempt() const;
  // The value of one of lote's own keys (lote:progressTimeoutSeconds,
  // lote:inject...): the job's parameters first, then its tags; nullptr when
  // neither has it.
  const std::string* LoteSetting(const std::string& key) const;
  friend bool operator==(const Job&, const Job&) = default;
};

// Units of each consumable resource the job holds while it runs: its own
// list, plus each node range's list once per node of the range.
std::map<std::string, int64_t> ConsumableUnits(const Job& job);

// Json for the store (lossless; not the API shape: see job_render.h).
Json ContainerToJson(const ContainerSpec& container);  // ContainerProperties shape
// Fargate's resource rules (the service model's ResourceRequirement): VCPU one
// of 0.25, 0.5, 1, 2, 4, 8, 16 with MEMORY one of the values allowed for it
// (0.25: 512-2048, 0.5: 1024-4096, 1: 2048-8192, 2: 4096-16384, 4:
// 8192-30720, in 1024 steps; 8: 16384-61440 in 4096 steps; 16: 32768-122880
// in 8192 steps), no GPU, no legacy vcpus/memory. InvalidArgument naming
// `field` and the allowed values.
Status ValidateFargateResources(const ContainerSpec& c, const std::string& field);

// The attempts of `job` that count against retryStrategy.attempts.
int32_t AttemptsConsumed(const Job& job);

Result<ContainerSpec> ContainerFromJson(const Json& json);
Json JobToJson(const Job& job);
Result<Job> JobFromJson(const Json& json);

// "<parent>:<index>" and "<parent>#<node>".
std::string ArrayChildId(std::string_view parent_id, int32_t index);
// The status AWS clients see: RUNNABLE while the open attempt waits inside
// its backend (Attempt::pending_reason, e.g. Slurm PENDING), else the status.
JobStatus ShownStatus(const Job& job);
// The statusReason shown with it (the backend's reason while it waits).
const std::string& ShownStatusReason(const Job& job);

std::string NodeJobId(std::string_view parent_id, int32_t node);
// Splits "<parent>#<node>": the parent id and node index, or nullopt.
std::optional<std::pair<std::string, int32_t>> ParseNodeJobId(std::string_view id);
// Splits "<parent>:<index>": the parent id and index, or nullopt.
std::optional<std::pair<std::string, int32_t>> ParseArrayChildId(std::string_view id);

// The node `<id>#<node>` of a multi-node job as a Job of its own (for
// DescribeJobs and ListJobs(multiNodeJobId)): its container, nodeDetails, and
// per attempt only its own node. NotFound when the job is not multi-node or
// the node is out of range.
Result<Job> NodeJob(const Job& parent, int32_t node_index);

}  // namespace lote::control
