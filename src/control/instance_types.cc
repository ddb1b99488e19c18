#include "control/instance_types.h"

#include <unistd.h>

#include <thread>

namespace lote::control {

namespace {

constexpr int64_t kGiB = 1024;  // in MiB

// Published AWS numbers: vCPUs, memory, accelerators per instance.
const InstanceType kAwsTypes[] = {
    {"trn1.2xlarge", 8, 32 * kGiB, 1, "Trainium"},
    {"trn1.32xlarge", 128, 512 * kGiB, 16, "Trainium"},
    {"trn1n.32xlarge", 128, 512 * kGiB, 16, "Trainium"},
    {"inf2.xlarge", 4, 16 * kGiB, 1, "Inferentia2"},
    {"inf2.48xlarge", 192, 768 * kGiB, 12, "Inferentia2"},
    {"p5.48xlarge", 192, 2048 * kGiB, 8, "H100"},
    {"p4d.24xlarge", 96, 1152 * kGiB, 8, "A100"},
    {"p3.2xlarge", 8, 61 * kGiB, 1, "V100"},
    {"p3.8xlarge", 32, 244 * kGiB, 4, "V100"},
    {"p3.16xlarge", 64, 488 * kGiB, 8, "V100"},
    {"g5.xlarge", 4, 16 * kGiB, 1, "A10G"},
    {"g5.2xlarge", 8, 32 * kGiB, 1, "A10G"},
    {"g5.12xlarge", 48, 192 * kGiB, 4, "A10G"},
    {"g5.48xlarge", 192, 768 * kGiB, 8, "A10G"},
    {"g4dn.xlarge", 4, 16 * kGiB, 1, "T4"},
    {"g4dn.12xlarge", 48, 192 * kGiB, 4, "T4"},
    {"c5.large", 2, 4 * kGiB, 0, ""},
    {"c5.xlarge", 4, 8 * kGiB, 0, ""},
    {"c5.2xlarge", 8, 16 * kGiB, 0, ""},
    {"c5.4xlarge", 16, 32 * kGiB, 0, ""},
    {"c5.9xlarge", 36, 72 * kGiB, 0, ""},
    {"c5.18xlarge", 72, 144 * kGiB, 0, ""},
    {"m5.large", 2, 8 * kGiB, 0, ""},
    {"m5.xlarge", 4, 16 * kGiB, 0, ""},
    {"m5.2xlarge", 8, 32 * kGiB, 0, ""},
    {"m5.4xlarge", 16, 64 * kGiB, 0, ""},
    {"r5.xlarge", 4, 32 * kGiB, 0, ""},
    {"r5.2xlarge", 8, 64 * kGiB, 0, ""},
};

}  // namespace

HostResources HostResources::Detect() {
  HostResources host;
  unsigned n = std::thread::hardware_concurrency();
  host.vcpus = n > 0 ? static_cast<int32_t>(n) : 1;
  long pages = sysconf(_SC_PHYS_PAGES);
  long page_size = sysconf(_SC_PAGE_SIZE);
  if (pages > 0 && page_size > 0) {
    host.memory_mib = static_cast<int64_t>(pages) * page_size / (1024 * 1024);
  }
  return host;
}

InstanceCatalog::InstanceCatalog(HostResources host) {
  for (const InstanceType& t : kAwsTypes) types_[t.name] = t;
  types_["local"] = InstanceType{"local", host.vcpus, host.memory_mib, 0, ""};
}

Result<InstanceType> InstanceCatalog::Lookup(std::string_view name) const {
  auto it = types_.find(name);
  if (it != types_.end()) return it->second;
  std::string known;
  for (const auto& [n, t] : types_) known += (known.empty() ? "" : ", ") + n;
  return Status::InvalidArgument("instance type '" + std::string(name) +
                                 "' is not in lote's instance catalog; use one of: " + known);
}

std::vector<std::string> InstanceCatalog::Names() const {
  std::vector<std::string> names;
  for (const auto& [n, t] : types_) names.push_back(n);
  return names;
}

}  // namespace lote::control
