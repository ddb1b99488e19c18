#include "control/instance_types.h"

#include <unistd.h>

#include <cctype>
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

std::string AcceleratorKindOf(const InstanceType& type) {
  if (type.accelerators <= 0) return "";
  std::string k = type.accelerator_kind;
  for (char& c : k) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (k.find("trainium") != std::string::npos || k.find("inferentia") != std::string::npos ||
      k.find("neuron") != std::string::npos)
    return "neuron";
  return "gpu";
}

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
  types_["local"] =
      InstanceType{"local", host.vcpus, host.memory_mib, host.accelerators, host.accelerator_kind};
}

namespace {

bool IsFamily(std::string_view f) {
  // "c5", "p4d", "m7i-flex", "u-6tb1": a lowercase letter, then letters,
  // digits and '-', with at least one digit (AWS families are versioned).
  if (f.empty() || f.size() > 24 || f[0] < 'a' || f[0] > 'z') return false;
  bool digit = false;
  for (char c : f) {
    if (c >= '0' && c <= '9') {
      digit = true;
    } else if (!((c >= 'a' && c <= 'z') || c == '-')) {
      return false;
    }
  }
  return digit;
}

// vCPUs of an EC2 size word, or 0 when it is not one.
int32_t SizeVcpus(std::string_view size) {
  if (size == "nano" || size == "micro" || size == "small" || size == "medium") return 1;
  if (size == "large") return 2;
  if (size == "xlarge") return 4;
  if (size == "metal" || size.rfind("metal-", 0) == 0) return 96;
  if (size.size() > 6 && size.substr(size.size() - 6) == "xlarge") {
    int32_t n = 0;
    for (char c : size.substr(0, size.size() - 6)) {
      if (c < '0' || c > '9' || n > 1000) return 0;
      n = n * 10 + (c - '0');
    }
    return n > 0 ? 4 * n : 0;
  }
  return 0;
}

int64_t MemoryPerVcpuMib(std::string_view family) {
  switch (family[0]) {
    case 'c':
      return 2 * kGiB;
    case 'r':
    case 'x':
    case 'z':
    case 'u':
    case 'i':
    case 'd':
      return 8 * kGiB;
    default:
      return 4 * kGiB;
  }
}

}  // namespace

Result<InstanceType> InstanceCatalog::Lookup(std::string_view name) const {
  auto it = types_.find(name);
  if (it != types_.end()) return it->second;
  const InstanceType& local = types_.at("local");
  auto as = [&name](InstanceType t) {
    t.name = std::string(name);
    return t;
  };
  if (name == "optimal" || name == "default_x86_64" || name == "default_arm64") return as(local);
  const size_t dot = name.find('.');
  if (dot == std::string_view::npos && IsFamily(name)) {
    // The family's largest member in the catalog, else this host.
    const InstanceType* largest = nullptr;
    for (const auto& [n, t] : types_) {
      if (n.size() > name.size() && n.compare(0, name.size(), name) == 0 && n[name.size()] == '.' &&
          (largest == nullptr || t.vcpus > largest->vcpus)) {
        largest = &t;
      }
    }
    return as(largest != nullptr ? *largest : local);
  }
  if (dot != std::string_view::npos && IsFamily(name.substr(0, dot))) {
    const int32_t vcpus = SizeVcpus(name.substr(dot + 1));
    if (vcpus > 0) {
      return InstanceType{std::string(name), vcpus, vcpus * MemoryPerVcpuMib(name), 0, ""};
    }
  }
  std::string known;
  for (const auto& [n, t] : types_) known += (known.empty() ? "" : ", ") + n;
  return Status::InvalidArgument(
      "instance type '" + std::string(name) +
      "' is not an EC2 instance type: give one in lote's instance catalog (" + known +
      "), another EC2 type (family.size, e.g. t3.micro), a family (c5), optimal, "
      "default_x86_64 or default_arm64");
}

std::vector<std::string> InstanceCatalog::Names() const {
  std::vector<std::string> names;
  for (const auto& [n, t] : types_) names.push_back(n);
  return names;
}

}  // namespace lote::control
