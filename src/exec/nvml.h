// NVML, the NVIDIA management library, loaded at run time (dlopen of
// libnvidia-ml.so.1) so that lote runs on hosts without the driver. Only the
// calls lote needs are bound; their signatures are NVML's documented C API.
// Thread-safe: the library is loaded and initialised once, on first use.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "exec/accelerators.h"

namespace lote::exec {

struct NvmlResult {
  bool loaded = false;               // libnvidia-ml.so.1 was found and nvmlInit_v2 succeeded
  std::vector<Accelerator> devices;  // kind, index, name, uuid, pci_bus_id, memory_mib, links
  std::string problem;               // why not, when a library was found but failed
};

// The GPUs NVML lists. `path` and `numa_node` are left for the caller (they are files).
NvmlResult NvmlDiscover();

// Utilisation and memory in use of the GPUs with these NVML indices; nullopt
// when NVML is not loaded.
std::optional<std::vector<GpuSample>> NvmlSample(const std::vector<int32_t>& indices);

}  // namespace lote::exec
