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

// "gpu" / "neuron" for a type with accelerators (Trainium and Inferentia are
// Neuron devices, every other accelerator a GPU), "" for one without.
std::string AcceleratorKindOf(const InstanceType& type);

// The virtual instance of a FARGATE / FARGATE_SPOT compute environment: the
// largest Fargate task (16 vCPU, 120 GiB), so any valid Fargate job fits one.
inline const InstanceType kFargateInstance{"fargate", 16, 122880, 0, ""};

// What this machine offers to `local` instances.
struct HostResources {
  int32_t vcpus = 1;
  int64_t memory_mib = 1024;
  // Its accelerators of the kind it schedules (control/accelerators.h): a
  // `local` instance has them all. accelerator_kind names them ("NVIDIA H100
  // 80GB HBM3", "Trainium"); Detect() leaves both empty.
  int32_t accelerators = 0;
  std::string accelerator_kind;
  // Reads the CPU count and physical memory of this host.
  static HostResources Detect();
};

// Every instanceTypes value AWS accepts resolves to a shape (docs/jobs.md,
// "Instance types"); `name` keeps what was given:
// - a catalog entry ("trn1.32xlarge", "local"): its published shape;
// - "optimal", "default_x86_64", "default_arm64": this host (`local`);
// - a family ("c5", "p4d", "t2"): the family's largest catalog entry, or this
//   host for a family the catalog does not list;
// - any other EC2 type "family.size" ("t2.micro", "c7g.16xlarge"): vCPUs from
//   the size (nano..medium 1, large 2, xlarge 4, Nxlarge 4N, metal 96) and
//   memory per vCPU from the family's class letter (c 2 GiB; r, x, z, u, i, d
//   8 GiB; others 4 GiB), no accelerators.
class InstanceCatalog {
 public:
  explicit InstanceCatalog(HostResources host);
  // InvalidArgument (a ClientException) naming the type and what is accepted
  // when `name` is none of the above.
  Result<InstanceType> Lookup(std::string_view name) const;
  std::vector<std::string> Names() const;

 private:
  std::map<std::string, InstanceType, std::less<>> types_;
};

}  // namespace lote::control
