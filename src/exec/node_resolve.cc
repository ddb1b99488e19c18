#include "exec/node_resolve.h"

#include <arpa/inet.h>
#include <grp.h>
#include <linux/capability.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>
#include <sstream>

#include "common/files.h"
#include "exec/command.h"
#include "exec/proc_util.h"
#include "exec/ulimits.h"

namespace lote::exec {

Result<ResolvedUser> ResolveUser(const std::string& user) {
  struct passwd pw;
  struct passwd* found = nullptr;
  std::vector<char> buf(16384);
  bool numeric = !user.empty() && std::all_of(user.begin(), user.end(), ::isdigit);
  int rc = numeric ? ::getpwuid_r(static_cast<uid_t>(std::strtoul(user.c_str(), nullptr, 10)), &pw,
                                  buf.data(), buf.size(), &found)
                   : ::getpwnam_r(user.c_str(), &pw, buf.data(), buf.size(), &found);
  if (rc != 0 || found == nullptr) {
    if (numeric) {
      uint32_t id = static_cast<uint32_t>(std::strtoul(user.c_str(), nullptr, 10));
      return ResolvedUser{id, id, {id}, user, "/"};
    }
    return Status::InvalidArgument("user '" + user +
                                   "' does not exist on this host: create it or change the job "
                                   "definition's user");
  }
  ResolvedUser r{pw.pw_uid, pw.pw_gid, {}, pw.pw_name, pw.pw_dir ? pw.pw_dir : "/"};
  int n = 64;
  std::vector<gid_t> groups(static_cast<size_t>(n));
  if (::getgrouplist(pw.pw_name, pw.pw_gid, groups.data(), &n) < 0) {
    groups.resize(static_cast<size_t>(n));
    ::getgrouplist(pw.pw_name, pw.pw_gid, groups.data(), &n);
  }
  groups.resize(static_cast<size_t>(std::max(n, 0)));
  r.groups.assign(groups.begin(), groups.end());
  return r;
}

Result<ResolvedUser> ResolveUserWithGetent(const std::string& user) {
  const std::map<std::string, std::string> env = {{"PATH", "/usr/bin:/bin"}};
  ASSIGN_OR_RETURN(CommandResult pw, RunCommand({"getent", "passwd", user}, env, 30'000, false));
  const bool numeric = !user.empty() && std::all_of(user.begin(), user.end(), ::isdigit);
  if (pw.exit_code == 2 && numeric) {  // a uid without an entry is itself
    const uint32_t id = static_cast<uint32_t>(std::strtoul(user.c_str(), nullptr, 10));
    return ResolvedUser{id, id, {id}, user, "/"};
  }
  if (pw.exit_code == 2)
    return Status::InvalidArgument("user '" + user + "' does not exist on this host");
  if (pw.exit_code != 0) return Status::Unavailable("getent passwd " + user + ": " + pw.err);
  // name:password:uid:gid:gecos:home:shell
  std::vector<std::string> f;
  std::string line = pw.out.substr(0, pw.out.find('\n'));
  for (size_t start = 0;;) {
    const size_t colon = line.find(':', start);
    f.push_back(line.substr(start, colon - start));
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  if (f.size() < 7) return Status::Unavailable("getent passwd " + user + ": '" + line + "'");
  ResolvedUser r{static_cast<uint32_t>(std::strtoul(f[2].c_str(), nullptr, 10)),
                 static_cast<uint32_t>(std::strtoul(f[3].c_str(), nullptr, 10)),
                 {},
                 f[0],
                 f[5].empty() ? "/" : f[5]};
  r.groups.push_back(r.gid);
  // "name  gid gid ...": the supplementary groups (the primary one left out).
  ASSIGN_OR_RETURN(CommandResult in,
                   RunCommand({"getent", "initgroups", r.name}, env, 30'000, false));
  std::istringstream words(in.exit_code == 0 ? in.out : std::string());
  std::string word;
  words >> word;  // the name
  while (words >> word) {
    const uint32_t g = static_cast<uint32_t>(std::strtoul(word.c_str(), nullptr, 10));
    if (std::find(r.groups.begin(), r.groups.end(), g) == r.groups.end()) r.groups.push_back(g);
  }
  return r;
}

namespace {

// Container mode: podman refuses to start a container whose device the host
// lacks ("stat /dev/neuron0: no such file or directory"). Refused here instead,
// naming the device, or in emulation (the recipe's accelerators on a host
// without them) left out with a warning.
Status LeaveOutMissingDevices(ContainerRun* c, bool emulation, const std::string& who,
                              std::vector<std::string>* warnings) {
  std::vector<ContainerDevice> kept;
  for (ContainerDevice& d : c->devices) {
    struct stat st;
    if (::stat(d.host_path.c_str(), &st) == 0) {
      kept.push_back(std::move(d));
      continue;
    }
    const std::string what = "linuxParameters.devices " + d.host_path;
    if (!emulation) {
      return Status::FailedPrecondition(who + ": " + what +
                                        " does not exist on this host; remove it from the job "
                                        "definition, or mark the compute environment as "
                                        "emulation to run without it");
    }
    warnings->push_back("emulation: skipped " + what + " (not on this host)");
  }
  c->devices = std::move(kept);
  return Status::Ok();
}

}  // namespace

RunnerHost ThisRunnerHost() {
  RunnerHost host;
  host.can_raise_rlimits = HasEffectiveCapability(CAP_SYS_RESOURCE);
  host.euid = ::geteuid();
  auto me = ResolveUser(std::to_string(host.euid));
  host.user_name = me.ok() ? me->name : std::to_string(host.euid);
  host.home_dir = HomeDir();
  host.host_name = HostName();
  return host;
}

Result<ResolvedNode> ResolveNode(const NodeSpec& spec, const RunnerHost& host,
                                 const std::string& executor, const std::string& default_work,
                                 const std::string& default_output) {
  const std::string who = "node " + spec.node.ToString();
  const bool in_container = spec.container.has_value();
  if (!in_container && (spec.command.empty() || spec.command[0].empty())) {
    return Status::InvalidArgument(who +
                                   ": the command is empty; set the job definition's command");
  }
  for (const auto& [k, v] : spec.environment) {
    if (k.empty() || k.find('=') != std::string::npos || k.find('\0') != std::string::npos) {
      return Status::InvalidArgument(who + ": environment variable name '" + k + "' is not valid");
    }
  }
  if (!spec.private_ip.empty()) {
    in_addr addr;
    if (::inet_pton(AF_INET, spec.private_ip.c_str(), &addr) != 1) {
      return Status::InvalidArgument(who + ": private_ip '" + spec.private_ip +
                                     "' is not an IPv4 address");
    }
  }
  if (!spec.working_dir.empty() && spec.working_dir[0] != '/') {
    return Status::InvalidArgument(who + ": working directory '" + spec.working_dir +
                                   "' must be an absolute path");
  }
  ResolvedNode out;
  ShimSpec& shim = out.spec;
  shim.node = spec.node;
  shim.emulation = spec.emulation;
  auto warn = [&](const std::string& text) { out.warnings.push_back(text); };

  if (!spec.unsupported_fields.empty()) {
    std::string list;
    for (const auto& f : spec.unsupported_fields) list += (list.empty() ? "" : ", ") + f;
    if (!spec.emulation) {
      return Status::FailedPrecondition(
          who + ": " + executor + " cannot honour " + list +
          "; remove it from the job definition, or mark the compute environment as emulation "
          "to run without it");
    }
    for (const auto& f : spec.unsupported_fields) {
      warn("emulation: skipped " + f + " (" + executor + " cannot honour it)");
    }
  }

  std::set<std::string> seen;
  for (const auto& u : spec.ulimits) {
    if (!seen.insert(u.name).second) {
      return Status::InvalidArgument(who + ": ulimits: '" + u.name + "' is given twice");
    }
    struct rlimit cur {
      RLIM_INFINITY, RLIM_INFINITY
    };
    const int resource = RlimitResourceByName(u.name);
    if (host.node_is_here && resource >= 0) ::getrlimit(resource, &cur);
    std::string warning;
    Result<ShimRlimit> r = ResolveRlimit(u, cur, host.can_raise_rlimits, spec.emulation, &warning);
    if (!r.ok()) return Status(r.status().code(), who + ": " + r.status().message());
    if (!warning.empty()) warn(warning);
    shim.rlimits.push_back(*r);
  }

  shim.argv = spec.command;
  shim.output_path = spec.output_path.empty() ? default_output : spec.output_path;
  shim.fault = spec.fault;
  shim.working_dir = spec.working_dir.empty() ? default_work : spec.working_dir;
  shim.user = spec.user;
  if (in_container) {
    // The image's PATH and HOME: only the job's own variables.
    shim.container = spec.container;
    if (host.node_is_here)
      RETURN_IF_ERROR(LeaveOutMissingDevices(&*shim.container, spec.emulation, who, &out.warnings));
    shim.container_memory_mib = spec.memory_mib;
    shim.container_vcpu_milli = spec.vcpu_milli;
    for (const auto& [k, v] : spec.environment) shim.env.push_back(k + "=" + v);
    if (!spec.private_ip.empty())
      shim.env.push_back("LOTE_PRIVATE_IPV4_ADDRESS=" + spec.private_ip);
  } else {
    std::map<std::string, std::string> env = spec.environment;
    env.try_emplace("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
    if (spec.user.empty()) {  // the runner's own user
      env.try_emplace("HOME", host.home_dir);
      env.try_emplace("USER", host.user_name);
      env.try_emplace("LOGNAME", host.user_name);
    }
    if (!spec.private_ip.empty()) env["LOTE_PRIVATE_IPV4_ADDRESS"] = spec.private_ip;
    for (const auto& [k, v] : env) shim.env.push_back(k + "=" + v);
  }
  // A node elsewhere (Slurm) resolves its user on the node it lands on.
  if (host.node_is_here) {
    Status s = ResolveJobUser(&shim, host.euid, host.host_name, &out.warnings);
    if (!s.ok()) return Status(s.code(), who + ": " + s.message());
  }
  return out;
}

Status ResolveJobUser(ShimSpec* spec, uint32_t euid, const std::string& host_name,
                      std::vector<std::string>* warnings, UserResolver resolve) {
  if (spec->user.empty()) return Status::Ok();
  Result<ResolvedUser> found = resolve(spec->user);
  if (!found.ok()) {
    return Status::InvalidArgument("user '" + spec->user + "' does not exist on host " + host_name +
                                   ": create it there or change the job definition's user");
  }
  const ResolvedUser& u = *found;
  if (spec->container) {
    // Numbers, never the name: the image's /etc/passwd does not decide.
    spec->container_user = UserIds{u.uid, u.gid, u.groups};
    return Status::Ok();
  }
  auto set_absent = [spec](const std::string& key, const std::string& value) {
    for (const std::string& kv : spec->env)
      if (kv.compare(0, key.size() + 1, key + "=") == 0) return;
    spec->env.push_back(key + "=" + value);
  };
  set_absent("HOME", u.home);
  set_absent("USER", u.name);
  set_absent("LOGNAME", u.name);
  if (u.uid == euid) return Status::Ok();
  if (euid != 0) {
    const std::string msg =
        "running as user '" + spec->user + "' needs a lote server running as root";
    if (!spec->emulation) {
      return Status::FailedPrecondition(msg +
                                        "; remove the user from the job definition or mark the "
                                        "compute environment as emulation");
    }
    warnings->push_back("emulation: " + msg + "; running as uid " + std::to_string(euid) +
                        " instead");
    return Status::Ok();
  }
  spec->uid = u.uid;
  spec->gid = u.gid;
  spec->groups = u.groups;
  return Status::Ok();
}

}  // namespace lote::exec
