#include "sched/resources.h"

#include <algorithm>

namespace lote::sched {

Resources Max(const Resources& a, const Resources& b) {
  return Resources{std::max(a.milli_vcpu, b.milli_vcpu), std::max(a.memory_mib, b.memory_mib),
                   std::max(a.accelerators, b.accelerators)};
}

int64_t WholeVcpus(int64_t milli_vcpu) {
  if (milli_vcpu <= 0) return 0;
  return (milli_vcpu + 999) / 1000;
}

std::string FormatVcpus(int64_t milli_vcpu) {
  std::string out = std::to_string(milli_vcpu / 1000);
  int64_t frac = milli_vcpu % 1000;
  if (frac < 0) frac = -frac;
  if (frac != 0) {
    std::string digits = std::to_string(frac);
    digits.insert(0, 3 - digits.size(), '0');
    while (!digits.empty() && digits.back() == '0') digits.pop_back();
    out += "." + digits;
  }
  return out;
}

std::string Describe(const Resources& r) {
  std::string out = FormatVcpus(r.milli_vcpu) + " vCPU, " + std::to_string(r.memory_mib) + " MiB";
  if (r.accelerators > 0) {
    out += ", " + std::to_string(r.accelerators) +
           (r.accelerators == 1 ? " accelerator" : " accelerators");
  }
  return out;
}

}  // namespace lote::sched
