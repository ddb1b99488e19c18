// The environment of a job's node process, as AWS Batch sets it.
//
// Pure: computed from the Job (its open attempt gives the attempt number,
// the compute environment and the main node's address). Thread-compatible.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

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
//   AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS                  multi-node child nodes only
// FailedPrecondition when the job has no open attempt (not STARTING/RUNNING);
// NotFound when the node does not exist. User variables named AWS_BATCH* are
// rejected at submit; any that reach here are dropped, never passed on.
Result<std::vector<EnvVar>> JobEnvironment(const Job& job, int32_t node_index);

// The CloudWatch Logs stream name AWS gives a container:
// "<job definition name>/default/<task id>" (log group /aws/batch/job).
std::string DefaultLogStreamName(const std::string& definition_name, const std::string& task_id);

}  // namespace lote::control
