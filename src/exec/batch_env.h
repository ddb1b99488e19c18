// The AWS Batch job environment, built from job fields, and the private IPv4
// address of each virtual instance. Pure functions; thread-safe.
//
// Variables set exactly as AWS Batch sets them:
//   AWS_BATCH_JOB_ID            the job id; multi-node nodes carry "#<node>",
//                               array children are "<id>:<index>"
//   AWS_BATCH_JOB_ATTEMPT       1-based attempt number
//   AWS_BATCH_JQ_NAME           job queue name
//   AWS_BATCH_CE_NAME           compute environment name
//   AWS_BATCH_JOB_ARRAY_INDEX   array children only
//   AWS_BATCH_JOB_ARRAY_SIZE    array children only (size of the parent array)
//   AWS_BATCH_JOB_NODE_INDEX, AWS_BATCH_JOB_NUM_NODES, AWS_BATCH_JOB_MAIN_NODE_INDEX
//                               multi-node parallel jobs only
//   AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS
//                               multi-node child nodes only (absent on the main node)
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "common/status.h"

namespace lote::exec {

struct MultiNodeContext {
  int32_t num_nodes = 1;
  int32_t main_node_index = 0;
  int32_t node_index = 0;
  std::string main_node_private_ip;  // InstancePrivateIp of the main node's instance
};

struct ArrayContext {
  int32_t index = 0;
  int32_t size = 0;
};

struct BatchJobContext {
  // The parent job id: no "#node" and no ":index" suffix (they are added here).
  std::string job_id;
  int32_t attempt = 1;
  std::string job_queue_name;
  std::string compute_environment_name;
  std::optional<ArrayContext> array;           // set for array children
  std::optional<MultiNodeContext> multi_node;  // set for multi-node parallel jobs
};

// The AWS_BATCH_* variables of one node. InvalidArgument for inconsistent input
// (node index out of range, array and multi-node together, empty names...).
Result<std::map<std::string, std::string>> BuildBatchEnvironment(const BatchJobContext& ctx);

// The private IPv4 address of virtual instance `instance_index` (0-based):
// 127.0.1.1, 127.0.1.2, ... 127.0.1.254, then 127.0.2.1, ... All of 127.0.0.0/8
// reaches the loopback interface on Linux, so a main node can listen on its
// address and its children connect to it. InvalidArgument past 127.0.254.254.
Result<std::string> InstancePrivateIp(int32_t instance_index);
// The inverse: the instance index of such an address; -1 for any other string.
int32_t InstanceIndexOfPrivateIp(const std::string& ip);

}  // namespace lote::exec
