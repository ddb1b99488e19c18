#include "control/job_env.h"

#include <string>

#include "common/ids.h"

namespace lote::control {

Result<std::vector<EnvVar>> JobEnvironment(const Job& job, int32_t node_index) {
  const Attempt* attempt = job.CurrentAttempt();
  if (attempt == nullptr) {
    return Status::FailedPrecondition(
        "job " + job.id + " is " + std::string(JobStatusName(job.status)) +
        ": its environment exists only while an attempt is STARTING or RUNNING");
  }
  const ContainerSpec* container = job.ContainerFor(node_index);
  if (container == nullptr || attempt->Node(node_index) == nullptr) {
    return Status::NotFound("job " + job.id + " has no node " + std::to_string(node_index) +
                            " (it has " + std::to_string(job.NumNodes()) + ")");
  }
  std::vector<EnvVar> env;
  for (const EnvVar& e : container->environment) {
    if (e.name.rfind("AWS_BATCH", 0) == 0) continue;  // reserved; rejected at submit
    env.push_back(e);
  }
  Result<Arn> queue = Arn::Parse(job.queue_arn);
  const std::string queue_name = queue.ok() ? queue->ResourceName() : job.queue_arn;
  const bool multi_node = job.IsMultiNode();
  env.push_back({"AWS_BATCH_JOB_ID", multi_node ? NodeJobId(job.id, node_index) : job.id});
  env.push_back({"AWS_BATCH_JOB_ATTEMPT", std::to_string(job.attempts.size())});
  env.push_back({"AWS_BATCH_JQ_NAME", queue_name});
  env.push_back({"AWS_BATCH_CE_NAME", attempt->compute_environment});
  if (job.IsArrayChild()) {
    env.push_back({"AWS_BATCH_JOB_ARRAY_INDEX", std::to_string(job.array->index)});
    env.push_back({"AWS_BATCH_JOB_ARRAY_SIZE", std::to_string(job.array->size)});
  }
  if (multi_node) {
    const int32_t main = job.MainNode();
    env.push_back({"AWS_BATCH_JOB_NODE_INDEX", std::to_string(node_index)});
    env.push_back({"AWS_BATCH_JOB_NUM_NODES", std::to_string(job.NumNodes())});
    env.push_back({"AWS_BATCH_JOB_MAIN_NODE_INDEX", std::to_string(main)});
    if (node_index != main) {
      const NodeAttempt* main_node = attempt->Node(main);
      env.push_back({"AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS",
                     main_node ? main_node->private_ipv4 : ""});
    }
  }
  return env;
}

std::string DefaultLogStreamName(const std::string& definition_name, const std::string& task_id) {
  return definition_name + "/default/" + task_id;
}

}  // namespace lote::control
