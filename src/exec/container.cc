#include "exec/container.h"

#include <sys/resource.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <regex>

#include "common/files.h"
#include "exec/command.h"

namespace lote::exec {
namespace {

std::string LimitText(int64_t v) { return v < 0 ? "-1" : std::to_string(v); }

// 1500 -> "1.5".
std::string Cpus(int64_t milli) {
  std::string s = std::to_string(milli / 1000);
  if (milli % 1000 == 0) return s;
  std::string frac = std::to_string(1000 + milli % 1000).substr(1);
  while (frac.back() == '0') frac.pop_back();
  return s + "." + frac;
}

std::string Permissions(const Json& list) {
  std::string out;
  if (!list.is_array()) return out;
  for (const Json& p : list) {
    const std::string v = p.is_string() ? p.get<std::string>() : "";
    if (v == "READ") out += 'r';
    if (v == "WRITE") out += 'w';
    if (v == "MKNOD") out += 'm';
  }
  return out;
}

std::string Str(const Json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : "";
}

}  // namespace

const std::set<std::string>& ContainerModeFields() {
  static const std::set<std::string> f = {"linuxParameters.devices",
                                          "linuxParameters.sharedMemorySize",
                                          "privileged",
                                          "readonlyRootFilesystem",
                                          "volumes",
                                          "mountPoints"};
  return f;
}

Result<ContainerRun> ContainerRunFromAws(const std::string& image, const Json& linux_parameters,
                                         const Json& other) {
  ContainerRun c;
  c.image = image;
  if (image.empty()) return Status::InvalidArgument("container mode needs the job's image");
  if (other.is_object()) {
    c.privileged = other.value("privileged", false);
    c.read_only_root = other.value("readonlyRootFilesystem", false);
  }
  if (linux_parameters.is_object() && linux_parameters.contains("devices") &&
      linux_parameters["devices"].is_array()) {
    for (const Json& d : linux_parameters["devices"]) {
      ContainerDevice dev{
          Str(d, "hostPath"), Str(d, "containerPath"),
          Permissions(d.is_object() ? d.value("permissions", Json::array()) : Json::array())};
      if (dev.host_path.empty())
        return Status::InvalidArgument("linuxParameters.devices: every device needs hostPath");
      c.devices.push_back(dev);
    }
  }
  if (linux_parameters.is_object() && linux_parameters.contains("sharedMemorySize")) {
    const Json& shm = linux_parameters["sharedMemorySize"];
    if (!shm.is_number_integer() || shm.get<int64_t>() < 0)
      return Status::InvalidArgument(
          "linuxParameters.sharedMemorySize must be a whole number of MiB");
    c.shm_mib = shm.get<int64_t>();
  }
  std::map<std::string, std::string> volumes;  // name -> source
  if (other.is_object() && other.contains("volumes") && other["volumes"].is_array()) {
    for (const Json& v : other["volumes"]) {
      const std::string name = Str(v, "name");
      if (name.empty()) return Status::InvalidArgument("volumes: every volume needs a name");
      if (v.contains("efsVolumeConfiguration"))
        return Status::InvalidArgument("volumes: " + name +
                                       ": EFS volumes cannot be mounted by lote; use "
                                       "host.sourcePath");
      const std::string src = v.contains("host") ? Str(v["host"], "sourcePath") : "";
      volumes[name] = src.empty() ? "lote-" + name : src;  // no host path: a podman volume
    }
  }
  if (other.is_object() && other.contains("mountPoints") && other["mountPoints"].is_array()) {
    for (const Json& m : other["mountPoints"]) {
      const std::string vol = Str(m, "sourceVolume");
      const std::string path = Str(m, "containerPath");
      auto it = volumes.find(vol);
      if (it == volumes.end())
        return Status::InvalidArgument("mountPoints: sourceVolume '" + vol +
                                       "' is not one of the job's volumes");
      if (path.empty() || path[0] != '/')
        return Status::InvalidArgument("mountPoints: containerPath '" + path +
                                       "' must be an absolute path");
      c.mounts.push_back(ContainerMount{it->second, path, m.value("readOnly", false)});
    }
  }
  return c;
}

std::string ContainerName(const std::string& job_id, int32_t attempt, int32_t node_index) {
  std::string id = job_id;
  for (char& ch : id)
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '-' && ch != '_' && ch != '.')
      ch = '_';
  return "lote-" + id + "-" + std::to_string(attempt) + "-" + std::to_string(node_index);
}

Json ToJson(const ContainerRun& c) {
  Json devices = Json::array(), mounts = Json::array();
  for (const auto& d : c.devices)
    devices.push_back(
        {{"host", d.host_path}, {"container", d.container_path}, {"permissions", d.permissions}});
  for (const auto& m : c.mounts)
    mounts.push_back(
        {{"source", m.source}, {"container", m.container_path}, {"read_only", m.read_only}});
  return Json{{"image", c.image},
              {"privileged", c.privileged},
              {"read_only_root", c.read_only_root},
              {"devices", devices},
              {"cdi_devices", c.cdi_devices},
              {"mounts", mounts},
              {"shm_mib", c.shm_mib},
              {"containers_conf", c.containers_conf},
              {"registries_conf", c.registries_conf},
              {"auth_file", c.auth_file},
              {"name", c.name}};
}

ContainerRun ContainerRunFromJson(const Json& j) {
  ContainerRun c;
  c.image = j.at("image").get<std::string>();
  c.privileged = j.value("privileged", false);
  c.read_only_root = j.value("read_only_root", false);
  for (const Json& d : j.value("devices", Json::array()))
    c.devices.push_back(ContainerDevice{d.at("host").get<std::string>(),
                                        d.value("container", std::string()),
                                        d.value("permissions", std::string())});
  for (const Json& d : j.value("cdi_devices", Json::array()))
    if (d.is_string()) c.cdi_devices.push_back(d.get<std::string>());
  for (const Json& m : j.value("mounts", Json::array()))
    c.mounts.push_back(ContainerMount{m.at("source").get<std::string>(),
                                      m.at("container").get<std::string>(),
                                      m.value("read_only", false)});
  c.shm_mib = j.value("shm_mib", int64_t{0});
  c.containers_conf = j.value("containers_conf", std::string());
  c.registries_conf = j.value("registries_conf", std::string());
  c.auth_file = j.value("auth_file", std::string());
  c.name = j.value("name", std::string());
  return c;
}

std::string ResolveEcrImage(const std::string& image, const LocalRegistry& registry) {
  static const std::regex kEcrHost("[0-9]{12}\\.dkr\\.ecr\\.[a-z0-9-]+\\.amazonaws\\.com(/.*)");
  std::smatch m;
  if (registry.address.empty() || !std::regex_match(image, m, kEcrHost)) return image;
  return registry.address + m[1].str();
}

void UseLotePodman(ContainerRun* c, const std::pair<std::string, std::string>& conf,
                   const LocalRegistry& registry) {
  c->containers_conf = conf.first;
  c->registries_conf = conf.second;
  c->auth_file = registry.address.empty() ? std::string() : registry.auth_file;
  c->image = ResolveEcrImage(c->image, registry);
}

std::optional<PullPhase> PullPhaseOf(const std::string& output_head, int64_t podman_started_ms,
                                     int64_t container_created_ms, int64_t podman_ended_ms) {
  if (output_head.rfind("Trying to pull ", 0) != 0) return std::nullopt;
  const int64_t end = container_created_ms > 0 ? container_created_ms : podman_ended_ms;
  return PullPhase{podman_started_ms, std::max(end, podman_started_ms)};
}

std::vector<std::string> PodmanRunArgs(const PodmanRunSpec& s, const ContainerUlimit& host_nofile,
                                       const ContainerUlimit& host_nproc) {
  const ContainerRun& c = s.container;
  // Host networking (rendezvous as in process mode), an init process that
  // passes SIGTERM on, the container's output straight into the node's
  // output file, and the image pulled when missing.
  std::vector<std::string> a = {
      "run",    "--rm",           "--name",         c.name,
      "--init", "--network=host", "--pull=missing", "--log-driver=passthrough"};
  if (!s.cid_file.empty()) a.push_back("--cidfile=" + s.cid_file);
  for (const std::string& k : s.env_keys) a.insert(a.end(), {"-e", k});
  if (s.user) {
    a.push_back("--user=" + std::to_string(s.user->uid) + ":" + std::to_string(s.user->gid));
    for (uint32_t g : s.user->groups)
      if (g != s.user->gid) a.push_back("--group-add=" + std::to_string(g));
  }
  // Defence in depth: nothing in the image (a set-uid binary, file
  // capabilities) raises the job's user; a user other than root holds no
  // capability at all.
  if (!c.privileged) a.push_back("--security-opt=no-new-privileges");
  if (s.user && s.user->uid != 0 && !c.privileged) a.push_back("--cap-drop=all");
  bool nofile = false, nproc = false;
  for (const ContainerUlimit& u : s.ulimits) {
    nofile = nofile || u.name == "nofile";
    nproc = nproc || u.name == "nproc";
  }
  std::vector<ContainerUlimit> limits = s.ulimits;
  if (!limits.empty() && !nofile) limits.push_back(host_nofile);
  if (!limits.empty() && !nproc) limits.push_back(host_nproc);
  for (const ContainerUlimit& u : limits)
    a.push_back("--ulimit=" + u.name + "=" + LimitText(u.soft) + ":" + LimitText(u.hard));
  for (const ContainerDevice& d : c.devices) {
    std::string v = d.host_path + ":" + (d.container_path.empty() ? d.host_path : d.container_path);
    if (!d.permissions.empty()) v += ":" + d.permissions;
    a.push_back("--device=" + v);
  }
  for (const std::string& name : c.cdi_devices) a.push_back("--device=" + name);
  if (c.privileged) a.push_back("--privileged");
  if (c.read_only_root) a.push_back("--read-only");
  for (const ContainerMount& m : c.mounts)
    a.push_back("--volume=" + m.source + ":" + m.container_path + (m.read_only ? ":ro" : ""));
  if (s.memory_mib > 0) a.push_back("--memory=" + std::to_string(s.memory_mib) + "m");
  if (s.vcpu_milli > 0) a.push_back("--cpus=" + Cpus(s.vcpu_milli));
  if (c.shm_mib > 0) a.push_back("--shm-size=" + std::to_string(c.shm_mib) + "m");
  a.push_back(c.image);
  a.insert(a.end(), s.command.begin(), s.command.end());
  return a;
}

std::optional<ContainerFailure> ClassifyPodmanExit(int code, const std::string& output_tail) {
  if (code != 125 && code != 126 && code != 127) return std::nullopt;
  const size_t at = output_tail.rfind("Error: ");
  if (at == std::string::npos || (at != 0 && output_tail[at - 1] != '\n')) return std::nullopt;
  std::string msg = output_tail.substr(at + 7);
  while (!msg.empty() && (msg.back() == '\n' || msg.back() == '\r')) msg.pop_back();
  msg = msg.substr(0, msg.find('\n'));
  auto has = [&](const char* s) { return msg.find(s) != std::string::npos; };
  const bool pull = has("initializing source") || has("pulling image") || has("manifest unknown") ||
                    has("name unknown") || has("unable to copy from source") ||
                    has("image not known") || has("short-name");
  ContainerFailure f;
  if (pull) {
    f.reason = "CannotPullContainerError: " + msg;
    f.users_fault = has("manifest unknown") || has("name unknown") || has("not found") ||
                    has("image not known") || has("short-name");
  } else {
    f.reason = "CannotStartContainerError: " + msg;
    f.users_fault = has("executable file not found") || has("no such file or directory") ||
                    has("permission denied");
  }
  return f;
}

Status RemoveContainer(const ContainerRun& c) {
  std::map<std::string, std::string> env = {
      {"PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}};
  if (!c.containers_conf.empty()) env["CONTAINERS_CONF"] = c.containers_conf;
  ASSIGN_OR_RETURN(CommandResult r,
                   RunCommand({"podman", "rm", "-f", "-t", "0", "--ignore", c.name}, env, 60'000,
                              /*inherit_env=*/false));
  if (r.exit_code != 0) return Status::Unavailable("podman rm -f " + c.name + " failed: " + r.err);
  return Status::Ok();
}

Result<std::pair<std::string, std::string>> WritePodmanConfig(const std::string& dir,
                                                              const LocalRegistry& registry) {
  RETURN_IF_ERROR(MakeDirs(dir, 0755));
  struct rlimit nofile, nproc;
  ::getrlimit(RLIMIT_NOFILE, &nofile);
  ::getrlimit(RLIMIT_NPROC, &nproc);
  // podman lowers its own NPROC hard limit to 32768 before starting the
  // runtime, so a container cannot be given more.
  const rlim_t nofile_max = nofile.rlim_max == RLIM_INFINITY ? 1048576 : nofile.rlim_max;
  const rlim_t nproc_max =
      std::min<rlim_t>(nproc.rlim_max == RLIM_INFINITY ? 32768 : nproc.rlim_max, 32768);
  const std::string conf = dir + "/containers.conf";
  const std::string regs = dir + "/registries.conf";
  const std::string text =
      "# Written by lote (docs/containers.md); replaced at every server start.\n"
      "[containers]\n"
      "default_ulimits = [\"nofile=" +
      std::to_string(nofile_max) + ":" + std::to_string(nofile_max) +
      "\", \"nproc=" + std::to_string(nproc_max) + ":" + std::to_string(nproc_max) +
      "\"]\n"
      "[engine]\n"
      "runtime = \"runc\"\n"
      "cgroup_manager = \"cgroupfs\"\n"
      "events_logger = \"file\"\n";
  RETURN_IF_ERROR(WriteFileAtomic(conf, text));
  std::string r = "# Written by lote (docs/containers.md).\nunqualified-search-registries = []\n";
  for (const std::string& insecure : {registry.address, registry.ecr_host})
    if (!insecure.empty()) r += "[[registry]]\nlocation = \"" + insecure + "\"\ninsecure = true\n";
  RETURN_IF_ERROR(WriteFileAtomic(regs, r));
  return std::make_pair(conf, regs);
}

}  // namespace lote::exec
