#include "exec/batch_env.h"

#include <cstdio>
#include <string>

namespace lote::exec {

Result<std::map<std::string, std::string>> BuildBatchEnvironment(const BatchJobContext& ctx) {
  if (ctx.job_id.empty()) return Status::InvalidArgument("job environment: job_id is empty");
  if (ctx.job_id.find_first_of("#:") != std::string::npos) {
    return Status::InvalidArgument("job environment: job_id '" + ctx.job_id +
                                   "' must be the parent id, without '#node' or ':index'");
  }
  if (ctx.attempt < 1) {
    return Status::InvalidArgument("job environment: attempt must be >= 1, got " +
                                   std::to_string(ctx.attempt));
  }
  if (ctx.job_queue_name.empty() || ctx.compute_environment_name.empty()) {
    return Status::InvalidArgument(
        "job environment: job queue and compute environment names are required");
  }
  if (ctx.array && ctx.multi_node) {
    return Status::InvalidArgument(
        "job environment: a job cannot be both an array child and a multi-node job");
  }
  std::map<std::string, std::string> env;
  std::string id = ctx.job_id;
  if (ctx.array) {
    if (ctx.array->size < 1 || ctx.array->index < 0 || ctx.array->index >= ctx.array->size) {
      return Status::InvalidArgument("job environment: array index " +
                                     std::to_string(ctx.array->index) + " is outside 0.." +
                                     std::to_string(ctx.array->size - 1));
    }
    id += ":" + std::to_string(ctx.array->index);
    env["AWS_BATCH_JOB_ARRAY_INDEX"] = std::to_string(ctx.array->index);
    env["AWS_BATCH_JOB_ARRAY_SIZE"] = std::to_string(ctx.array->size);
  }
  if (ctx.multi_node) {
    const MultiNodeContext& mn = *ctx.multi_node;
    if (mn.num_nodes < 1 || mn.node_index < 0 || mn.node_index >= mn.num_nodes ||
        mn.main_node_index < 0 || mn.main_node_index >= mn.num_nodes) {
      return Status::InvalidArgument("job environment: node index " +
                                     std::to_string(mn.node_index) + " or main node " +
                                     std::to_string(mn.main_node_index) + " is outside 0.." +
                                     std::to_string(mn.num_nodes - 1));
    }
    id += "#" + std::to_string(mn.node_index);
    env["AWS_BATCH_JOB_NODE_INDEX"] = std::to_string(mn.node_index);
    env["AWS_BATCH_JOB_NUM_NODES"] = std::to_string(mn.num_nodes);
    env["AWS_BATCH_JOB_MAIN_NODE_INDEX"] = std::to_string(mn.main_node_index);
    if (mn.node_index != mn.main_node_index) {
      if (mn.main_node_private_ip.empty()) {
        return Status::InvalidArgument(
            "job environment: main_node_private_ip is required for child node " +
            std::to_string(mn.node_index));
      }
      env["AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS"] = mn.main_node_private_ip;
    }
  }
  env["AWS_BATCH_JOB_ID"] = id;
  env["AWS_BATCH_JOB_ATTEMPT"] = std::to_string(ctx.attempt);
  env["AWS_BATCH_JQ_NAME"] = ctx.job_queue_name;
  env["AWS_BATCH_CE_NAME"] = ctx.compute_environment_name;
  return env;
}

Result<std::string> InstancePrivateIp(int32_t instance_index) {
  constexpr int32_t kPerOctet = 254;
  if (instance_index < 0 || instance_index >= kPerOctet * kPerOctet) {
    return Status::InvalidArgument("instance index " + std::to_string(instance_index) +
                                   " is outside 0.." + std::to_string(kPerOctet * kPerOctet - 1) +
                                   " (the 127.0.1.1..127.0.254.254 private addresses)");
  }
  int32_t third = 1 + instance_index / kPerOctet;
  int32_t fourth = 1 + instance_index % kPerOctet;
  return "127.0." + std::to_string(third) + "." + std::to_string(fourth);
}

int32_t InstanceIndexOfPrivateIp(const std::string& ip) {
  int a = 0, b = 0, x = 0, y = 0;
  char extra = 0;
  if (std::sscanf(ip.c_str(), "%d.%d.%d.%d%c", &a, &b, &x, &y, &extra) != 4) return -1;
  if (a != 127 || b != 0 || x < 1 || x > 254 || y < 1 || y > 254) return -1;
  return (x - 1) * 254 + (y - 1);
}

}  // namespace lote::exec
