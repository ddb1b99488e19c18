#include "control/job_env.h"

#include <algorithm>
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
    // AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS: only the backend knows
    // where the main node runs; it sets it on the others (exec/backend.h).
  }
  return env;
}

std::vector<std::string> ContainerFieldsSet(const ContainerSpec& c) {
  std::vector<std::string> fields;
  if (!c.image.empty()) fields.push_back("image");
  if (!c.command.empty()) fields.push_back("command");
  if (!c.environment.empty()) fields.push_back("environment");
  if (!c.resource_requirements.empty()) fields.push_back("resourceRequirements");
  if (c.vcpus) fields.push_back("vcpus");
  if (c.memory) fields.push_back("memory");
  if (!c.user.empty()) fields.push_back("user");
  if (!c.instance_type.empty()) fields.push_back("instanceType");
  if (!c.ulimits.empty()) fields.push_back("ulimits");
  if (c.linux_parameters.is_object()) {
    for (auto it = c.linux_parameters.begin(); it != c.linux_parameters.end(); ++it) {
      if (!it.value().is_null()) fields.push_back("linuxParameters." + it.key());
    }
  }
  if (c.other.is_object()) {
    for (auto it = c.other.begin(); it != c.other.end(); ++it) {
      const Json& v = it.value();
      const bool unset =
          v.is_null() || v == Json(false) || ((v.is_array() || v.is_object()) && v.empty());
      if (!unset) fields.push_back(it.key());
    }
  }
  std::sort(fields.begin(), fields.end());
  return fields;
}

Result<NodeLaunch> MakeNodeLaunch(const Job& job, int32_t node_index) {
  ASSIGN_OR_RETURN(std::vector<EnvVar> env, JobEnvironment(job, node_index));
  const Attempt& attempt = *job.CurrentAttempt();
  const NodeAttempt& node = *attempt.Node(node_index);
  const ContainerSpec& c = *job.ContainerFor(node_index);
  NodeLaunch launch;
  launch.job_id = job.IsMultiNode() ? NodeJobId(job.id, node_index) : job.id;
  launch.attempt = static_cast<int32_t>(job.attempts.size());
  launch.node_index = node_index;
  launch.compute_environment = attempt.compute_environment;
  launch.instance_id = node.instance_id;
  launch.private_ipv4 = node.private_ipv4;
  launch.devices = node.devices;
  launch.image = c.image;
  launch.command = c.command;
  launch.environment = std::move(env);
  launch.user = c.user;
  launch.ulimits = c.ulimits;
  launch.linux_parameters = c.linux_parameters;
  launch.other = c.other;
  launch.milli_vcpu = c.MilliVcpu();
  launch.memory_mib = c.MemoryMib();
  launch.gpus = c.Gpus();
  launch.timeout_seconds = job.timeout_seconds;
  launch.fields_set = ContainerFieldsSet(c);
  return launch;
}

std::string DefaultLogStreamName(const std::string& definition_name, const std::string& task_id) {
  return definition_name + "/default/" + task_id;
}

}  // namespace lote::control
