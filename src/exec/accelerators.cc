#include "exec/accelerators.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <numeric>
#include <set>
#include <sstream>

#include "common/files.h"
#include "common/json.h"
#include "exec/nvml.h"

namespace lote::exec {
namespace {

namespace fs = std::filesystem;

std::string Trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && (s[b] == ' ' || s[b] == '\t' || s[b] == '\r' || s[b] == '\n')) ++b;
  while (e > b && (s[e - 1] == ' ' || s[e - 1] == '\t' || s[e - 1] == '\r' || s[e - 1] == '\n'))
    --e;
  return std::string(s.substr(b, e - b));
}

std::optional<int64_t> ParseInt(std::string_view s) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

std::string ReadTrimmed(const std::string& path) {
  Result<std::string> r = ReadFile(path);
  return r.ok() ? Trim(*r) : std::string();
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

void SortDevices(std::vector<Accelerator>* devices) {
  std::sort(devices->begin(), devices->end(), [](const Accelerator& a, const Accelerator& b) {
    if (a.kind != b.kind) return a.kind < b.kind;
    return a.index < b.index;
  });
}

int32_t NumaOfPci(const std::string& sys, const std::string& bus_id) {
  if (bus_id.empty()) return -1;
  std::string text = ReadTrimmed(sys + "/bus/pci/devices/" + Lower(bus_id) + "/numa_node");
  std::optional<int64_t> n = ParseInt(text);
  return n && *n >= 0 ? static_cast<int32_t>(*n) : -1;
}

// "key: value" lines of /proc/driver/nvidia/gpus/*/information.
std::map<std::string, std::string> ColonPairs(const std::string& text) {
  std::map<std::string, std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    out[Trim(line.substr(0, colon))] = Trim(line.substr(colon + 1));
  }
  return out;
}

void DiscoverNvidiaProc(const DiscoveryRoots& roots, Inventory* inv) {
  std::error_code ec;
  const fs::path dir = fs::path(roots.proc) / "driver/nvidia/gpus";
  if (!fs::is_directory(dir, ec)) return;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    Result<std::string> text = ReadFile((e.path() / "information").string());
    if (!text.ok()) {
      inv->notes.push_back("cannot read " + (e.path() / "information").string());
      continue;
    }
    std::map<std::string, std::string> kv = ColonPairs(*text);
    std::optional<int64_t> minor = ParseInt(kv["Device Minor"]);
    if (!minor) {
      inv->notes.push_back((e.path() / "information").string() + " has no Device Minor");
      continue;
    }
    Accelerator a;
    a.kind = AcceleratorKind::kGpu;
    a.index = static_cast<int32_t>(*minor);
    a.path = roots.dev + "/nvidia" + std::to_string(*minor);
    a.name = kv["Model"];
    a.uuid = kv["GPU UUID"];
    a.pci_bus_id = kv.count("Bus Location") ? kv["Bus Location"] : e.path().filename().string();
    a.numa_node = NumaOfPci(roots.sys, a.pci_bus_id);
    inv->devices.push_back(std::move(a));
  }
  if (!inv->devices.empty()) {
    inv->source = "proc";
    inv->notes.push_back(
        "GPUs read from /proc/driver/nvidia (NVML not loaded): no memory, NVLink or "
        "utilisation figures");
  }
}

void DiscoverNeuron(const DiscoveryRoots& roots, Inventory* inv) {
  std::error_code ec;
  const fs::path dir = fs::path(roots.sys) / "devices/virtual/neuron_device";
  if (!fs::is_directory(dir, ec)) return;
  size_t before = inv->devices.size();
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("neuron", 0) != 0) continue;
    std::optional<int64_t> n = ParseInt(std::string_view(name).substr(6));
    if (!n) continue;
    Accelerator a;
    a.kind = AcceleratorKind::kNeuron;
    a.index = static_cast<int32_t>(*n);
    a.path = roots.dev + "/" + name;
    a.name = ReadTrimmed((e.path() / "info/architecture/device_name").string());
    if (a.name.empty()) a.name = "Neuron";
    if (std::optional<int64_t> c = ParseInt(ReadTrimmed((e.path() / "core_count").string())))
      a.cores = static_cast<int32_t>(*c);
    std::istringstream links(ReadTrimmed((e.path() / "connected_devices").string()));
    std::string tok;
    while (std::getline(links, tok, ',')) {
      if (std::optional<int64_t> l = ParseInt(Trim(tok)))
        a.links.push_back(static_cast<int32_t>(*l));
    }
    std::optional<int64_t> numa = ParseInt(ReadTrimmed((e.path() / "device/numa_node").string()));
    a.numa_node = numa && *numa >= 0 ? static_cast<int32_t>(*numa) : -1;
    inv->devices.push_back(std::move(a));
  }
  if (inv->devices.size() > before)
    inv->source = inv->source == "none" ? "sysfs" : inv->source + "+sysfs";
}

// CDI specs: which fully qualified names exist. JSON specs are parsed; YAML
// ones (what nvidia-ctk writes by default) are read for their `kind:` and the
// `- name:` entries of their devices, which is all lote needs.
std::set<std::string> CdiNames(const std::vector<std::string>& dirs) {
  std::set<std::string> out;
  for (const std::string& d : dirs) {
    std::error_code ec;
    if (!fs::is_directory(d, ec)) continue;
    for (const fs::directory_entry& e : fs::directory_iterator(d, ec)) {
      Result<std::string> text = ReadFile(e.path().string());
      if (!text.ok()) continue;
      const std::string ext = e.path().extension().string();
      if (ext == ".json") {
        Result<Json> j = ParseJson(*text);
        if (!j.ok() || !j->is_object() || !j->contains("kind")) continue;
        const std::string kind = j->value("kind", "");
        for (const Json& dev : j->value("devices", Json::array()))
          if (dev.is_object() && dev.contains("name") && dev["name"].is_string())
            out.insert(kind + "=" + dev["name"].get<std::string>());
      } else if (ext == ".yaml" || ext == ".yml") {
        std::string kind;
        std::istringstream in(*text);
        std::string line;
        while (std::getline(in, line)) {
          std::string t = Trim(line);
          auto unquote = [](std::string v) {
            if (v.size() >= 2 && (v.front() == '"' || v.front() == '\''))
              v = v.substr(1, v.size() - 2);
            return v;
          };
          if (t.rfind("kind:", 0) == 0 && line.rfind("kind:", 0) == 0)
            kind = unquote(Trim(t.substr(5)));
          if (t.rfind("- name:", 0) == 0 && !kind.empty())
            out.insert(kind + "=" + unquote(Trim(t.substr(7))));
        }
      }
    }
  }
  return out;
}

void AttachCdiNames(const std::vector<std::string>& dirs, Inventory* inv) {
  std::set<std::string> names = CdiNames(dirs);
  if (names.empty()) return;
  for (Accelerator& a : inv->devices) {
    if (!a.cdi.empty()) continue;
    const std::string kind =
        a.kind == AcceleratorKind::kGpu ? "nvidia.com/gpu" : "aws.amazon.com/neuron";
    for (const std::string& candidate :
         {kind + "=" + std::to_string(a.index), kind + "=" + a.uuid}) {
      if (names.count(candidate)) {
        a.cdi = candidate;
        break;
      }
    }
  }
}

std::string RangeList(const std::vector<int32_t>& values) {
  std::string out;
  for (size_t i = 0; i < values.size();) {
    size_t j = i;
    while (j + 1 < values.size() && values[j + 1] == values[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += std::to_string(values[i]);
    if (j > i) out += "-" + std::to_string(values[j]);
    i = j + 1;
  }
  return out;
}

}  // namespace

std::string_view KindName(AcceleratorKind kind) {
  return kind == AcceleratorKind::kGpu ? "gpu" : "neuron";
}

std::optional<AcceleratorKind> ParseKind(std::string_view text) {
  if (text == "gpu" || text == "nvidia") return AcceleratorKind::kGpu;
  if (text == "neuron") return AcceleratorKind::kNeuron;
  return std::nullopt;
}

std::string CountPhrase(AcceleratorKind kind, int64_t count) {
  std::string out = std::to_string(count);
  if (kind == AcceleratorKind::kGpu) return out + (count == 1 ? " GPU" : " GPUs");
  return out + (count == 1 ? " Neuron device" : " Neuron devices");
}

std::optional<AcceleratorKind> Inventory::ScheduledKind() const {
  int64_t gpus = 0, neurons = 0;
  for (const Accelerator& a : devices) (a.kind == AcceleratorKind::kGpu ? gpus : neurons)++;
  if (gpus == 0 && neurons == 0) return std::nullopt;
  return gpus >= neurons ? AcceleratorKind::kGpu : AcceleratorKind::kNeuron;
}

std::vector<const Accelerator*> Inventory::Of(AcceleratorKind kind) const {
  std::vector<const Accelerator*> out;
  for (const Accelerator& a : devices)
    if (a.kind == kind) out.push_back(&a);
  return out;
}

Result<Inventory> ParseInventoryFile(std::string_view text, std::string_view path) {
  Inventory inv;
  inv.source = "file " + std::string(path);
  std::istringstream in{std::string(text)};
  std::string line;
  int lineno = 0;
  std::map<AcceleratorKind, std::set<int32_t>> seen;
  while (std::getline(in, line)) {
    ++lineno;
    if (size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream words(line);
    std::vector<std::string> w;
    for (std::string t; words >> t;) w.push_back(t);
    if (w.empty()) continue;
    const std::string where = std::string(path) + ":" + std::to_string(lineno);
    auto bad = [&](const std::string& why) {
      return Status::InvalidArgument(
          where + ": " + why +
          " (a line is: KIND DEVICE-FILE [index=N name=... uuid=... pci=... memory_mib=N numa=N "
          "cores=N links=1,2 cdi=vendor.com/class=name], KIND gpu or neuron)");
    };
    std::optional<AcceleratorKind> kind = ParseKind(w[0]);
    if (!kind) return bad("unknown kind '" + w[0] + "'");
    if (w.size() < 2 || w[1].find('=') != std::string::npos) return bad("no device file");
    Accelerator a;
    a.kind = *kind;
    a.path = w[1];
    a.index = static_cast<int32_t>(seen[*kind].size());
    if (a.kind == AcceleratorKind::kNeuron) a.name = "Neuron";
    for (size_t i = 2; i < w.size(); ++i) {
      size_t eq = w[i].find('=');
      if (eq == std::string::npos) return bad("'" + w[i] + "' is not key=value");
      const std::string key = w[i].substr(0, eq), value = w[i].substr(eq + 1);
      auto number = [&](int64_t lo) -> Result<int64_t> {
        std::optional<int64_t> n = ParseInt(value);
        if (!n || *n < lo) return bad(key + " must be a whole number >= " + std::to_string(lo));
        return *n;
      };
      if (key == "index") {
        ASSIGN_OR_RETURN(int64_t n, number(0));
        a.index = static_cast<int32_t>(n);
      } else if (key == "name") {
        a.name = value;
        std::replace(a.name.begin(), a.name.end(), '_', ' ');
      } else if (key == "uuid") {
        a.uuid = value;
      } else if (key == "pci") {
        a.pci_bus_id = value;
      } else if (key == "memory_mib") {
        ASSIGN_OR_RETURN(a.memory_mib, number(0));
      } else if (key == "numa") {
        ASSIGN_OR_RETURN(int64_t n, number(0));
        a.numa_node = static_cast<int32_t>(n);
      } else if (key == "cores") {
        ASSIGN_OR_RETURN(int64_t n, number(0));
        a.cores = static_cast<int32_t>(n);
      } else if (key == "links") {
        std::istringstream ls(value);
        for (std::string t; std::getline(ls, t, ',');) {
          std::optional<int64_t> n = ParseInt(t);
          if (!n || *n < 0) return bad("links must be a comma list of device indices");
          a.links.push_back(static_cast<int32_t>(*n));
        }
      } else if (key == "cdi") {
        if (value.find('=') == std::string::npos || value.find('/') == std::string::npos)
          return bad("cdi must be a fully qualified CDI name such as nvidia.com/gpu=0");
        a.cdi = value;
      } else {
        return bad("unknown key '" + key + "'");
      }
    }
    if (!seen[*kind].insert(a.index).second)
      return bad("a second " + std::string(KindName(*kind)) + " with index " +
                 std::to_string(a.index));
    inv.devices.push_back(std::move(a));
  }
  SortDevices(&inv.devices);
  return inv;
}

Result<Inventory> ReadInventoryFile(const std::string& path) {
  Result<std::string> text = ReadFile(path);
  if (!text.ok()) {
    return Status::InvalidArgument("accelerators inventory file " + path +
                                   " cannot be read: " + text.status().message());
  }
  return ParseInventoryFile(*text, path);
}

Inventory Discover(const DiscoveryRoots& roots) {
  Inventory inv;
  if (roots.nvml) {
    NvmlResult nvml = NvmlDiscover();
    if (nvml.loaded) {
      for (Accelerator& a : nvml.devices) {
        a.path = roots.dev + "/nvidia" + std::to_string(a.index);
        a.numa_node = NumaOfPci(roots.sys, a.pci_bus_id);
        inv.devices.push_back(std::move(a));
      }
      if (!inv.devices.empty()) inv.source = "nvml";
    }
    if (!nvml.problem.empty()) inv.notes.push_back(nvml.problem);
  }
  if (inv.devices.empty()) DiscoverNvidiaProc(roots, &inv);
  if (inv.devices.empty()) {
    // Device nodes without the driver's /proc files: indices only.
    std::error_code ec;
    for (int32_t i = 0; i < 64; ++i) {
      const std::string p = roots.dev + "/nvidia" + std::to_string(i);
      if (!fs::exists(p, ec)) continue;
      Accelerator a;
      a.index = i;
      a.path = p;
      a.name = "NVIDIA GPU";
      inv.devices.push_back(std::move(a));
    }
    if (!inv.devices.empty()) {
      inv.source = "dev";
      inv.notes.push_back("GPUs found as /dev/nvidiaN only: no model, memory or topology");
    }
  }
  DiscoverNeuron(roots, &inv);
  AttachCdiNames(roots.cdi_dirs, &inv);
  SortDevices(&inv.devices);
  return inv;
}

Result<Inventory> LoadInventory(const std::string& file, const DiscoveryRoots& roots) {
  if (file.empty()) return Discover(roots);
  ASSIGN_OR_RETURN(Inventory inv, ReadInventoryFile(file));
  return inv;
}

std::vector<int32_t> Islands(const std::vector<const Accelerator*>& devices) {
  const size_t n = devices.size();
  std::vector<int32_t> parent(n);
  std::iota(parent.begin(), parent.end(), 0);
  auto find = [&](int32_t x) {
    while (parent[x] != x) x = parent[x] = parent[parent[x]];
    return x;
  };
  std::map<int32_t, int32_t> position_of;
  for (size_t i = 0; i < n; ++i) position_of[devices[i]->index] = static_cast<int32_t>(i);
  bool any_links = false;
  for (size_t i = 0; i < n; ++i) {
    for (int32_t peer : devices[i]->links) {
      auto it = position_of.find(peer);
      if (it == position_of.end()) continue;
      any_links = true;
      parent[find(static_cast<int32_t>(i))] = find(it->second);
    }
  }
  std::vector<int32_t> out(n, 0);
  std::map<int32_t, int32_t> number;  // root or NUMA node -> island number
  for (size_t i = 0; i < n; ++i) {
    const int32_t key =
        any_links ? find(static_cast<int32_t>(i)) : std::max(devices[i]->numa_node, 0);
    auto [it, added] = number.try_emplace(key, static_cast<int32_t>(number.size()));
    out[i] = it->second;
  }
  return out;
}

Result<std::vector<Accelerator>> DevicesForPositions(const std::vector<const Accelerator*>& devices,
                                                     const std::vector<int32_t>& positions) {
  std::vector<Accelerator> out;
  for (int32_t p : positions) {
    if (p < 0 || static_cast<size_t>(p) >= devices.size()) {
      return Status::InvalidArgument("device position " + std::to_string(p) +
                                     " is not in this host's inventory of " +
                                     std::to_string(devices.size()) + " devices");
    }
    out.push_back(*devices[p]);
  }
  return out;
}

std::map<std::string, std::string> AcceleratorEnvironment(
    const std::vector<Accelerator>& given, const std::vector<const Accelerator*>& all,
    bool renumbered) {
  std::map<std::string, std::string> env;
  if (given.empty()) return env;
  std::string indices, visible, uuids;
  bool all_uuids = true;
  for (size_t i = 0; i < given.size(); ++i) {
    const std::string sep = i == 0 ? "" : ",";
    indices += sep + std::to_string(given[i].index);
    visible += sep + std::to_string(renumbered ? static_cast<int32_t>(i) : given[i].index);
    uuids += sep + given[i].uuid;
    all_uuids = all_uuids && !given[i].uuid.empty();
  }
  env["LOTE_ACCELERATORS"] = indices;
  if (given.front().kind == AcceleratorKind::kGpu) {
    env["CUDA_VISIBLE_DEVICES"] = visible;
    env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID";
    env["NVIDIA_VISIBLE_DEVICES"] = all_uuids ? uuids : indices;
    return env;
  }
  // Neuron: cores numbered across the host in device index order.
  std::map<int32_t, int32_t> first_core;
  int32_t next = 0;
  std::vector<const Accelerator*> sorted = all;
  std::sort(sorted.begin(), sorted.end(),
            [](const Accelerator* a, const Accelerator* b) { return a->index < b->index; });
  for (const Accelerator* a : sorted) {
    first_core[a->index] = next;
    next += std::max(a->cores, 1);
  }
  std::vector<int32_t> cores;
  for (const Accelerator& g : given) {
    auto it = first_core.find(g.index);
    const int32_t base = it == first_core.end() ? g.index * std::max(g.cores, 1) : it->second;
    const int32_t base_renumbered = renumbered ? static_cast<int32_t>(cores.size()) : base;
    for (int32_t c = 0; c < std::max(g.cores, 1); ++c) cores.push_back(base_renumbered + c);
  }
  std::sort(cores.begin(), cores.end());
  env["NEURON_RT_VISIBLE_CORES"] = RangeList(cores);
  env["AWS_NEURON_VISIBLE_DEVICES"] = indices;
  return env;
}

std::vector<std::string> ControlDeviceNodes(AcceleratorKind kind, const std::string& dev_root) {
  std::vector<std::string> out;
  if (kind != AcceleratorKind::kGpu) return out;
  std::error_code ec;
  for (const char* name : {"nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset"}) {
    const std::string p = dev_root + "/" + name;
    if (fs::exists(p, ec)) out.push_back(p);
  }
  return out;
}

std::string Describe(const Accelerator& d) {
  std::string out = std::string(KindName(d.kind)) + " " + std::to_string(d.index) + " " + d.path;
  if (!d.name.empty()) out += " " + d.name;
  std::vector<std::string> extra;
  if (d.memory_mib > 0) extra.push_back(std::to_string(d.memory_mib) + " MiB");
  if (d.cores > 0) extra.push_back(std::to_string(d.cores) + " cores");
  if (d.numa_node >= 0) extra.push_back("numa " + std::to_string(d.numa_node));
  if (!d.links.empty()) {
    std::string l = "links";
    for (size_t i = 0; i < d.links.size(); ++i)
      l += (i == 0 ? " " : ",") + std::to_string(d.links[i]);
    extra.push_back(l);
  }
  if (!d.pci_bus_id.empty()) extra.push_back("pci " + d.pci_bus_id);
  if (!d.uuid.empty()) extra.push_back(d.uuid);
  if (!d.cdi.empty()) extra.push_back("cdi " + d.cdi);
  if (!extra.empty()) {
    out += " (";
    for (size_t i = 0; i < extra.size(); ++i) out += (i == 0 ? "" : ", ") + extra[i];
    out += ")";
  }
  return out;
}

std::optional<std::vector<GpuSample>> SampleGpus(const std::vector<int32_t>& indices) {
  return NvmlSample(indices);
}

}  // namespace lote::exec
