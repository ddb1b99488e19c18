// The environment of a job's node process, as AWS Batch sets it.
//
// Pure: computed from the Job (its open attempt gives the attempt number,
// the compute environment and the main node's address). Thread-compatible.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "control/job_model.h"

namespace lote::control {

// The node's container environment (definition, then overrides) followed by
// the variables AWS Batch sets:
//   AWS_BATCH_JOB_ID        "<id>", "<id>:<index>" (array child), "<id>#<node>" (multi-node)
//   AWS_BATCH_JOB_ATTEMPT   1, 2, ... (the open attempt)
//   AWS_BATCH_JQ_NAME, AWS_BATCH_CE_NAME
//   AWS_BATCH_JOB_ARRAY_INDEX, AWS_BATCH_JOB_ARRAY_SIZE           array children only
//   AWS_BATCH_JOB_NODE_INDEX, AWS_BATCH_JOB_NUM_NODES,
//   AWS_BATCH_JOB_MAIN_NODE_INDEX                                 multi-node jobs only
// AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS (multi-node child nodes) is not
// here: the backend sets it when the nodes start (exec::kMainNodeAddressVar).
// FailedPrecondition when the job has no open attempt (not STARTING/RUNNING);
// NotFound when the node does not exist. User variables named AWS_BATCH* are
// rejected at submit; any that reach here are dropped, never passed on.
Result<std::vector<EnvVar>> JobEnvironment(const Job& job, int32_t node_index);

// Everything an executor needs to start one node of the open attempt.
struct NodeLaunch {
  std::string job_id;   // the node's AWS_BATCH_JOB_ID form
  int32_t attempt = 0;  // 1-based
  int32_t node_index = 0;
  std::string compute_environment;
  std::string instance_id;
  std::string private_ipv4;
  std::vector<int32_t> devices;  // accelerator device indices
  std::string image;
  std::vector<std::string> command;  // after Ref:: substitution
  std::vector<EnvVar> environment;   // JobEnvironment()
  std::string user;
  Json ulimits = Json::array();
  Json linux_parameters = Json::object();
  Json other = Json::object();  // ContainerSpec::other (privileged, volumes, mountPoints, ...)
  int64_t milli_vcpu = 0;
  int64_t memory_mib = 0;
  int32_t gpus = 0;
  std::optional<int32_t> timeout_seconds;
  // Every container field that is set, as paths ("user", "ulimits",
  // "linuxParameters.devices", "volumes", ...): a backend fails the attempt
  // (INFRASTRUCTURE) naming each one it cannot honour, never ignores it.
  std::vector<std::string> fields_set;
};

// The launch of `node_index` for the job's open attempt. Same errors as JobEnvironment.
Result<NodeLaunch> MakeNodeLaunch(const Job& job, int32_t node_index);

// The paths of the fields set in a container (see NodeLaunch::fields_set), sorted.
std::vector<std::string> ContainerFieldsSet(const ContainerSpec& container);

// The CloudWatch Logs stream name AWS gives a container:
// "<job definition name>/default/<task id>" (log group /aws/batch/job).
std::string DefaultLogStreamName(const std::string& definition_name, const std::string& task_id);

}  // namespace lote::control
