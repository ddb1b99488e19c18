#include "iam/job_privileges.h"

#include <algorithm>
#include <filesystem>

namespace lote::iam {
namespace {

std::string Normal(const std::string& path) {
  std::string p = std::filesystem::path(path).lexically_normal().string();
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  return p;
}

bool Under(const std::string& path, const std::string& folder) {
  if (folder == "/") return true;
  return path == folder ||
         (path.size() > folder.size() && path.starts_with(folder) && path[folder.size()] == '/');
}

std::string LimitText(int64_t v) { return v < 0 ? "unlimited" : std::to_string(v); }

// A ulimit value as given: a number, -1 for unlimited; nullopt when absent or
// not a number (validation answers those).
std::optional<int64_t> LimitValue(const Json& ulimit, const char* key) {
  auto it = ulimit.find(key);
  if (it == ulimit.end() || !it->is_number_integer()) return std::nullopt;
  return it->get<int64_t>();
}

bool IsNeuronDevice(const std::string& path) {
  const std::string prefix = "/dev/neuron";
  if (path.rfind(prefix, 0) != 0 || path.size() == prefix.size() || path.size() > prefix.size() + 6)
    return false;
  for (size_t i = prefix.size(); i < path.size(); ++i)
    if (path[i] < '0' || path[i] > '9') return false;
  return true;
}

// The root-equivalent settings of one container (ContainerProperties shape)
// found at `where`.
void ContainerSettings(const Json& c, const std::string& where, const HostAllowances& host,
                       std::vector<std::string>* out) {
  if (!c.is_object()) return;
  if (c.value("privileged", false) == true) out->push_back(where + ".privileged = true");
  const Json linux = c.value("linuxParameters", Json::object());
  if (linux.is_object()) {
    const Json devices = linux.value("devices", Json::array());
    for (size_t i = 0; devices.is_array() && i < devices.size(); ++i) {
      const Json& d = devices[i];
      const std::string path = d.is_object() ? d.value("hostPath", std::string("?")) : "?";
      // The recipe's /dev/neuronN entries ask for Neuron devices, which the
      // scheduler assigns from the host's inventory (docs/jobs.md,
      // "Accelerators"): an accelerator request, not a host device of the user's choosing.
      if (IsNeuronDevice(path)) continue;
      out->push_back(where + ".linuxParameters.devices[" + std::to_string(i) + "] = " + path);
    }
    auto shm = linux.find("sharedMemorySize");
    if (shm != linux.end() && shm->is_number_integer() &&
        shm->get<int64_t>() > host.max_shared_memory_mib) {
      out->push_back(
          where + ".linuxParameters.sharedMemorySize = " + std::to_string(shm->get<int64_t>()) +
          " MiB (above this server's " + std::to_string(host.max_shared_memory_mib) + " MiB)");
    }
  }
  const Json volumes = c.value("volumes", Json::array());
  for (size_t i = 0; volumes.is_array() && i < volumes.size(); ++i) {
    const Json& v = volumes[i];
    if (!v.is_object() || !v.contains("host") || !v["host"].is_object()) continue;
    const std::string source = v["host"].value("sourcePath", std::string());
    if (source.empty() || source[0] != '/') continue;  // a podman named volume
    const std::string resolved = Normal(host.canonical ? host.canonical(source) : source);
    const bool allowed =
        std::any_of(host.host_paths.begin(), host.host_paths.end(),
                    [&](const std::string& folder) { return Under(resolved, Normal(folder)); });
    if (allowed) continue;
    std::string list;
    for (const std::string& f : host.host_paths) list += (list.empty() ? "" : ", ") + f;
    out->push_back(where + ".volumes[" + std::to_string(i) + "].host.sourcePath = " + source +
                   (resolved != source ? " (" + resolved + ")" : "") +
                   ", outside the allowed host paths (" + (list.empty() ? "none" : list) + ")");
  }
  const Json ulimits = c.value("ulimits", Json::array());
  for (size_t i = 0; ulimits.is_array() && i < ulimits.size(); ++i) {
    const Json& u = ulimits[i];
    if (!u.is_object()) continue;
    auto limit = host.hard_limits.find(u.value("name", std::string()));
    if (limit == host.hard_limits.end() || limit->second < 0) continue;
    for (const char* key : {"softLimit", "hardLimit"}) {
      std::optional<int64_t> v = LimitValue(u, key);
      if (!v || (*v >= 0 && *v <= limit->second)) continue;
      out->push_back(where + ".ulimits[" + std::to_string(i) + "] " + limit->first + " " + key +
                     " = " + LimitText(*v) + " (above the host's hard limit " +
                     LimitText(limit->second) + ")");
      break;
    }
  }
}

}  // namespace

std::vector<std::string> RootEquivalentSettings(const Json& definition,
                                                const HostAllowances& host) {
  std::vector<std::string> out;
  if (!definition.is_object()) return out;
  if (auto c = definition.find("containerProperties"); c != definition.end())
    ContainerSettings(*c, "containerProperties", host, &out);
  if (auto n = definition.find("nodeProperties"); n != definition.end() && n->is_object()) {
    const Json ranges = n->value("nodeRangeProperties", Json::array());
    for (size_t i = 0; ranges.is_array() && i < ranges.size(); ++i) {
      if (!ranges[i].is_object() || !ranges[i].contains("container")) continue;
      ContainerSettings(ranges[i]["container"],
                        "nodeProperties.nodeRangeProperties[" + std::to_string(i) + "].container",
                        host, &out);
    }
  }
  return out;
}

bool MayRunJobsAsRoot(const User& user) {
  return std::any_of(user.unix_users.begin(), user.unix_users.end(),
                     [](const std::string& u) { return u == "*" || u == "root" || u == "0"; });
}

std::optional<std::string> CheckRootEquivalent(const User& user, const std::string& action,
                                               const std::string& resource, const Json& definition,
                                               const HostAllowances& host) {
  if (MayRunJobsAsRoot(user)) return std::nullopt;
  const std::vector<std::string> settings = RootEquivalentSettings(definition, host);
  if (settings.empty()) return std::nullopt;
  std::string more;
  if (settings.size() > 1) more = " and " + std::to_string(settings.size() - 1) + " more";
  return "User: " + user.arn + " is not authorized to perform: " + action +
         " on resource: " + resource + " because the job definition sets " + settings[0] + more +
         ", which is root on the host that runs the job: only a principal that may run jobs as "
         "the Unix user root may use it (lote users set-unix-users " +
         user.name + " root ...; docs/api.md)";
}

}  // namespace lote::iam
