#include "exec/nvml.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>

namespace lote::exec {
namespace {

// NVML's C types, as its API reference gives them.
using nvmlReturn_t = int;
using nvmlDevice_t = struct nvmlDevice_st*;
struct NvmlMemory {
  unsigned long long total, free, used;
};
struct NvmlPciInfoV3 {  // nvmlPciInfo_t of nvmlDeviceGetPciInfo_v3
  char bus_id_legacy[16];
  unsigned int domain, bus, device, pci_device_id, pci_subsystem_id;
  char bus_id[32];
};
struct NvmlUtilization {
  unsigned int gpu, memory;
};
constexpr unsigned int kMaxNvLinks = 18;  // NVML_NVLINK_MAX_LINKS

struct Nvml {
  void* lib = nullptr;
  std::string problem;
  nvmlReturn_t (*init)() = nullptr;
  const char* (*error_string)(nvmlReturn_t) = nullptr;
  nvmlReturn_t (*count)(unsigned int*) = nullptr;
  nvmlReturn_t (*by_index)(unsigned int, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*name)(nvmlDevice_t, char*, unsigned int) = nullptr;
  nvmlReturn_t (*uuid)(nvmlDevice_t, char*, unsigned int) = nullptr;
  nvmlReturn_t (*memory)(nvmlDevice_t, NvmlMemory*) = nullptr;
  nvmlReturn_t (*pci)(nvmlDevice_t, NvmlPciInfoV3*) = nullptr;
  nvmlReturn_t (*minor)(nvmlDevice_t, unsigned int*) = nullptr;
  nvmlReturn_t (*link_state)(nvmlDevice_t, unsigned int, int*) = nullptr;
  nvmlReturn_t (*link_remote_pci)(nvmlDevice_t, unsigned int, NvmlPciInfoV3*) = nullptr;
  nvmlReturn_t (*utilization)(nvmlDevice_t, NvmlUtilization*) = nullptr;
};

template <typename F>
bool Bind(void* lib, const char* symbol, F* out) {
  *out = reinterpret_cast<F>(dlsym(lib, symbol));
  return *out != nullptr;
}

const Nvml& Load() {
  static Nvml nvml;
  static std::once_flag once;
  std::call_once(once, [] {
    void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) return;  // no driver here: not a problem
    bool ok =
        Bind(lib, "nvmlInit_v2", &nvml.init) && Bind(lib, "nvmlErrorString", &nvml.error_string) &&
        Bind(lib, "nvmlDeviceGetCount_v2", &nvml.count) &&
        Bind(lib, "nvmlDeviceGetHandleByIndex_v2", &nvml.by_index) &&
        Bind(lib, "nvmlDeviceGetName", &nvml.name) && Bind(lib, "nvmlDeviceGetUUID", &nvml.uuid) &&
        Bind(lib, "nvmlDeviceGetMemoryInfo", &nvml.memory) &&
        Bind(lib, "nvmlDeviceGetPciInfo_v3", &nvml.pci) &&
        Bind(lib, "nvmlDeviceGetMinorNumber", &nvml.minor);
    if (!ok) {
      nvml.problem = "libnvidia-ml.so.1 lacks a function lote needs: " + std::string(dlerror());
      return;
    }
    Bind(lib, "nvmlDeviceGetNvLinkState", &nvml.link_state);
    Bind(lib, "nvmlDeviceGetNvLinkRemotePciInfo_v2", &nvml.link_remote_pci);
    Bind(lib, "nvmlDeviceGetUtilizationRates", &nvml.utilization);
    if (nvmlReturn_t r = nvml.init(); r != 0) {
      nvml.problem = std::string("nvmlInit_v2 failed: ") + nvml.error_string(r);
      return;
    }
    nvml.lib = lib;
  });
  return nvml;
}

}  // namespace

NvmlResult NvmlDiscover() {
  NvmlResult out;
  const Nvml& n = Load();
  out.problem = n.problem;
  if (n.lib == nullptr) return out;
  out.loaded = true;
  unsigned int count = 0;
  if (n.count(&count) != 0) {
    out.problem = "nvmlDeviceGetCount_v2 failed";
    return out;
  }
  std::map<std::string, int32_t> index_of_bus;
  std::vector<nvmlDevice_t> handles;
  for (unsigned int i = 0; i < count; ++i) {
    nvmlDevice_t h = nullptr;
    if (n.by_index(i, &h) != 0) continue;
    Accelerator a;
    a.kind = AcceleratorKind::kGpu;
    unsigned int minor = i;
    a.index = n.minor(h, &minor) == 0 ? static_cast<int32_t>(minor) : static_cast<int32_t>(i);
    char buf[256] = {0};
    if (n.name(h, buf, sizeof(buf)) == 0) a.name = buf;
    std::memset(buf, 0, sizeof(buf));
    if (n.uuid(h, buf, sizeof(buf)) == 0) a.uuid = buf;
    NvmlMemory mem{};
    if (n.memory(h, &mem) == 0) a.memory_mib = static_cast<int64_t>(mem.total >> 20);
    NvmlPciInfoV3 pci{};
    if (n.pci(h, &pci) == 0) a.pci_bus_id = pci.bus_id;
    index_of_bus[a.pci_bus_id] = a.index;
    handles.push_back(h);
    out.devices.push_back(std::move(a));
  }
  if (n.link_state != nullptr && n.link_remote_pci != nullptr) {
    for (size_t d = 0; d < handles.size(); ++d) {
      for (unsigned int link = 0; link < kMaxNvLinks; ++link) {
        int active = 0;
        if (n.link_state(handles[d], link, &active) != 0 || active == 0) continue;
        NvmlPciInfoV3 remote{};
        if (n.link_remote_pci(handles[d], link, &remote) != 0) continue;
        auto it = index_of_bus.find(remote.bus_id);
        if (it == index_of_bus.end()) continue;  // an NVSwitch, not a GPU
        std::vector<int32_t>& links = out.devices[d].links;
        if (std::find(links.begin(), links.end(), it->second) == links.end())
          links.push_back(it->second);
      }
    }
  }
  return out;
}

std::optional<std::vector<GpuSample>> NvmlSample(const std::vector<int32_t>& indices) {
  const Nvml& n = Load();
  if (n.lib == nullptr || n.utilization == nullptr) return std::nullopt;
  std::vector<GpuSample> out;
  unsigned int count = 0;
  if (n.count(&count) != 0) return std::nullopt;
  for (unsigned int i = 0; i < count; ++i) {
    nvmlDevice_t h = nullptr;
    if (n.by_index(i, &h) != 0) continue;
    unsigned int minor = i;
    const int32_t index =
        n.minor(h, &minor) == 0 ? static_cast<int32_t>(minor) : static_cast<int32_t>(i);
    if (std::find(indices.begin(), indices.end(), index) == indices.end()) continue;
    GpuSample s;
    s.index = index;
    NvmlUtilization u{};
    if (n.utilization(h, &u) == 0) s.utilization_pct = static_cast<int32_t>(u.gpu);
    NvmlMemory mem{};
    if (n.memory(h, &mem) == 0) s.memory_used_mib = static_cast<int64_t>(mem.used >> 20);
    out.push_back(s);
  }
  return out;
}

}  // namespace lote::exec
