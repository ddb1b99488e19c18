// The built-in instance-type catalog: what a compute environment's
// `instanceTypes` resolve to. `local` is this host (its vCPUs and memory);
// the other entries are real AWS types with their published vCPU, memory and
// accelerator counts, so templates written for AWS resolve unchanged. The local
// backend runs "virtual instances" of these shapes as processes on this host.
// Thread safety: immutable after construction; safe to share.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace lote::control {

struct InstanceType {
  std::string name;  // "trn1.32xlarge"
  int32_t vcpus = 0;
  int64_t memory_mib = 0;
  int32_t accelerators = 0;      // devices per instance
  std::string accelerator_kind;  // "Trainium", "H100", ... or empty
};

// What this machine offers to `local` instances.
struct HostResources {
  int32_t vcpus = 1;
  int64_t memory_mib = 1024;
  // Reads the CPU count and physical memory of this host.
  static HostResources Detect();
};

class InstanceCatalog {
 public:
  explicit InstanceCatalog(HostResources host);
  // InvalidArgument (a ClientException) naming the type and the known ones.
  Result<InstanceType> Lookup(std::string_view name) const;
  std::vector<std::string> Names() const;

 private:
  std::map<std::string, InstanceType, std::less<>> types_;
};

}  // namespace lote::control
