#include "exec/batch_env.h"

#include <cstdio>
#include <string>

namespace lote::exec {

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
