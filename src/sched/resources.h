// Resources: what a job node asks for and what a virtual instance holds, as integers.
//
// Fixed point throughout: vCPUs in thousandths (milli-vCPU), memory in MiB,
// accelerators as a device count. A value type; thread-compatible.
#pragma once

#include <cstdint>
#include <string>

namespace lote::sched {

struct Resources {
  int64_t milli_vcpu = 0;  // 1000 = one vCPU
  int64_t memory_mib = 0;
  int32_t accelerators = 0;  // number of accelerator devices

  // From AWS resourceRequirements: VCPU (may be fractional, e.g. 0.25), MEMORY in
  // MiB, GPU count. vCPUs are rounded to the nearest milli-vCPU.
  static Resources FromAws(double vcpus, int64_t memory_mib, int32_t gpus) {
    return Resources{static_cast<int64_t>(vcpus * 1000.0 + 0.5), memory_mib, gpus};
  }

  // True when every component of *this is <= the same component of `capacity`.
  bool FitsIn(const Resources& capacity) const {
    return milli_vcpu <= capacity.milli_vcpu && memory_mib <= capacity.memory_mib &&
           accelerators <= capacity.accelerators;
  }
  bool IsZeroOrPositive() const { return milli_vcpu >= 0 && memory_mib >= 0 && accelerators >= 0; }
  Resources& operator+=(const Resources& o) {
    milli_vcpu += o.milli_vcpu;
    memory_mib += o.memory_mib;
    accelerators += o.accelerators;
    return *this;
  }
  Resources& operator-=(const Resources& o) {
    milli_vcpu -= o.milli_vcpu;
    memory_mib -= o.memory_mib;
    accelerators -= o.accelerators;
    return *this;
  }
  friend bool operator==(const Resources&, const Resources&) = default;
};

// Componentwise maximum.
Resources Max(const Resources& a, const Resources& b);

// Whole vCPUs, rounded up (how AWS counts vCPUs against minvCpus/maxvCpus).
int64_t WholeVcpus(int64_t milli_vcpu);

// "96", "0.5", "1.25": a vCPU amount for messages.
std::string FormatVcpus(int64_t milli_vcpu);

// "96 vCPU, 500000 MiB" or "96 vCPU, 500000 MiB, 16 accelerators".
std::string Describe(const Resources& r);

}  // namespace lote::sched
