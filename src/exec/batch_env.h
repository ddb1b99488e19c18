// The private IPv4 address of each virtual instance of the local executor.
// (The AWS_BATCH_* job environment itself is built by control::JobEnvironment;
// the main node's address is filled in by the backend, see backend.h.)
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"

namespace lote::exec {

// The private IPv4 address of virtual instance `instance_index` (0-based):
// 127.0.1.1, 127.0.1.2, ... 127.0.1.254, then 127.0.2.1, ... All of 127.0.0.0/8
// reaches the loopback interface on Linux, so a main node can listen on its
// address and its children connect to it. InvalidArgument past 127.0.254.254.
Result<std::string> InstancePrivateIp(int32_t instance_index);
// The inverse: the instance index of such an address; -1 for any other string.
int32_t InstanceIndexOfPrivateIp(const std::string& ip);

}  // namespace lote::exec
