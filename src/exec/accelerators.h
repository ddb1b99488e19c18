// Accelerators: the GPUs and Neuron devices of a host, and what a node given
// some of them sees.
//
// An Inventory is the only source of device ids (DESIGN.md, "Accelerators").
// It comes from an inventory file (`accelerators = PATH` in server.conf: one
// device per line, Slurm's fake-GPU idea, for hosts where discovery fails and
// for tests) or from discovery: NVIDIA GPUs through NVML (libnvidia-ml.so.1
// loaded with dlopen where present), else /proc/driver/nvidia/gpus/*/information
// and /dev/nvidiaN; Neuron devices through sysfs
// (/sys/devices/virtual/neuron_device/neuronN). The scheduler sees one kind per
// host (the kind it has most devices of) as device positions 0..n-1 in index
// order; DevicesForPositions maps a node's positions back to devices.
//
// Free functions over values; the discovery functions read the files under
// the roots they are given (tests pass a fake tree). Thread-compatible.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace lote::exec {

enum class AcceleratorKind { kGpu, kNeuron };

// "gpu" / "neuron".
std::string_view KindName(AcceleratorKind kind);
// "gpu" (also "nvidia") or "neuron"; nullopt otherwise.
std::optional<AcceleratorKind> ParseKind(std::string_view text);
// "GPU" / "Neuron device" with a plural: for messages ("4 GPUs", "1 Neuron device").
std::string CountPhrase(AcceleratorKind kind, int64_t count);

struct Accelerator {
  AcceleratorKind kind = AcceleratorKind::kGpu;
  int32_t index = 0;           // the vendor's index: NVML index / /dev/nvidiaN minor, neuronN
  std::string path;            // its device node: /dev/nvidia0, /dev/neuron3
  std::string name;            // the model: "NVIDIA H100 80GB HBM3", "Trainium"
  std::string uuid;            // GPU-...; empty when unknown
  std::string pci_bus_id;      // 0000:18:00.0; empty when unknown
  int64_t memory_mib = 0;      // 0 when unknown
  int32_t numa_node = -1;      // -1 when unknown
  int32_t cores = 0;           // Neuron cores of the device (Neuron only; 0 when unknown)
  std::vector<int32_t> links;  // indices of devices it has a direct link to (NVLink, Neuron)
  std::string cdi;             // its fully qualified CDI name (nvidia.com/gpu=0) when known

  friend bool operator==(const Accelerator&, const Accelerator&) = default;
};

struct Inventory {
  std::string source = "none";       // "file PATH", "nvml", "proc", "sysfs", "none"
  std::vector<Accelerator> devices;  // sorted by kind, then index
  std::vector<std::string> notes;    // what discovery could not do, in plain words

  // The kind the scheduler hands out on this host: the one with the most
  // devices (GPUs on a tie); nullopt when there are none.
  std::optional<AcceleratorKind> ScheduledKind() const;
  // The devices of `kind`, in index order: the scheduler's positions 0..n-1.
  std::vector<const Accelerator*> Of(AcceleratorKind kind) const;
};

// The inventory file: '#' starts a comment; each other line is
//   KIND DEVICE-FILE [key=value ...]
// KIND gpu|neuron; keys: index (default: the count of that kind's earlier
// lines), name, uuid, pci, memory_mib, numa, cores, links (comma list of
// indices), cdi. InvalidArgument naming the line and the fix on anything else,
// or on two devices of one kind with the same index.
Result<Inventory> ParseInventoryFile(std::string_view text, std::string_view path);
Result<Inventory> ReadInventoryFile(const std::string& path);

// Where discovery looks (tests pass a fake tree and nvml = false).
struct DiscoveryRoots {
  std::string proc = "/proc";
  std::string sys = "/sys";
  std::string dev = "/dev";
  std::vector<std::string> cdi_dirs = {"/etc/cdi", "/var/run/cdi"};
  bool nvml = true;  // try libnvidia-ml.so.1 first
};

// What this host has: NVML, else /proc/driver/nvidia, for GPUs; sysfs for
// Neuron; each device's CDI name when a spec in `cdi_dirs` names it. Never
// fails: what it cannot read is said in `notes`.
Inventory Discover(const DiscoveryRoots& roots = {});

// The inventory file when `file` is set (its errors are returned), else Discover().
Result<Inventory> LoadInventory(const std::string& file, const DiscoveryRoots& roots = {});

// Per device of `devices` (one kind, index order): its island, a small
// number shared by devices linked to each other (NVLink, Neuron links:
// connected components), or, when none has links, by devices on one NUMA
// node. All 0 when neither is known.
std::vector<int32_t> Islands(const std::vector<const Accelerator*>& devices);

// The devices at `positions` of `devices` (one kind, index order).
// InvalidArgument naming the position when one is out of range.
Result<std::vector<Accelerator>> DevicesForPositions(const std::vector<const Accelerator*>& devices,
                                                     const std::vector<int32_t>& positions);

// What a node given `given` (one kind) sees, on every runtime:
//   GPUs: CUDA_VISIBLE_DEVICES (the devices' indices, or 0..n-1 when
//   `renumbered`: a container or fenced process sees only its own devices),
//   CUDA_DEVICE_ORDER=PCI_BUS_ID, NVIDIA_VISIBLE_DEVICES (UUIDs when all are
//   known, else indices);
//   Neuron: NEURON_RT_VISIBLE_CORES (the devices' cores, numbered across the
//   host as the Neuron runtime does: device d's cores follow those of every
//   device with a lower index in `all`), AWS_NEURON_VISIBLE_DEVICES (indices).
// Plus LOTE_ACCELERATORS (the indices) on both.
std::map<std::string, std::string> AcceleratorEnvironment(
    const std::vector<Accelerator>& given, const std::vector<const Accelerator*>& all,
    bool renumbered);

// The vendor's control nodes that exist under `dev_root` (/dev/nvidiactl,
// /dev/nvidia-uvm, /dev/nvidia-uvm-tools, /dev/nvidia-modeset for GPUs; none
// for Neuron): a container given device nodes needs them too.
std::vector<std::string> ControlDeviceNodes(AcceleratorKind kind,
                                            const std::string& dev_root = "/dev");

// One line per device for `lote nodes list` and logs: "gpu 0 /dev/nvidia0 NVIDIA
// H100 (81559 MiB, numa 0, uuid GPU-...)".
std::string Describe(const Accelerator& device);

// GPU utilisation and memory in use, from NVML: nullopt when NVML is absent
// (an inventory file has nothing to sample, and lote never invents numbers).
struct GpuSample {
  int32_t index = 0;
  int32_t utilization_pct = 0;
  int64_t memory_used_mib = 0;
};
std::optional<std::vector<GpuSample>> SampleGpus(const std::vector<int32_t>& indices);

}  // namespace lote::exec
