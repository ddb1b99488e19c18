#include "exec/node_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <exception>

#include "common/files.h"

namespace lote::exec {
namespace {

std::atomic<uint64_t> g_tmp_counter{0};

std::optional<int32_t> ParseNonNegative(const std::string& s) {
  if (s.empty() || s.size() > 9) return std::nullopt;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
  }
  return static_cast<int32_t>(std::strtol(s.c_str(), nullptr, 10));
}

NodeOutcome OutcomeFromName(const std::string& s) {
  if (s == "exited") return NodeOutcome::kExited;
  if (s == "signaled") return NodeOutcome::kSignaled;
  if (s == "start_failed") return NodeOutcome::kStartFailed;
  return NodeOutcome::kLost;
}

// Runs a JSON decoder, turning nlohmann's exceptions into a DataLoss status.
template <typename T, typename F>
Result<T> Decode(const char* what, F&& f) {
  try {
    return f();
  } catch (const std::exception& e) {
    return Status::DataLoss(std::string("malformed ") + what + " record: " + e.what());
  }
}

Json KeyJson(const NodeKey& k) {
  return Json{
      {"job_id", k.attempt.job_id}, {"attempt", k.attempt.attempt}, {"node_index", k.node_index}};
}
NodeKey KeyFromJson(const Json& j) {
  NodeKey k;
  k.attempt.job_id = j.at("job_id").get<std::string>();
  k.attempt.attempt = j.at("attempt").get<int32_t>();
  k.node_index = j.at("node_index").get<int32_t>();
  return k;
}

Json IdentityJson(const ProcessIdentity& id) {
  return Json{{"pid", id.pid}, {"start_time", id.start_time}, {"boot_id", id.boot_id}};
}
ProcessIdentity IdentityFromJson(const Json& j) {
  ProcessIdentity id;
  id.pid = j.at("pid").get<int32_t>();
  id.start_time = j.at("start_time").get<uint64_t>();
  id.boot_id = j.value("boot_id", std::string());
  return id;
}

template <typename T, typename F>
Result<T> ReadRecord(const std::string& path, F&& decode) {
  ASSIGN_OR_RETURN(Json j, ReadJsonFile(path));
  return decode(j);
}

}  // namespace

bool IsSafeJobId(const std::string& s) {
  if (s.empty() || s == "." || s == ".." || s.size() > 200) return false;
  for (char c : s) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_' || c == ':' || c == '.';
    if (!ok) return false;
  }
  return true;
}

Result<NodePaths> NodePathsFor(const std::string& home, const NodeKey& node) {
  if (!IsSafeJobId(node.attempt.job_id)) {
    return Status::InvalidArgument(
        "job id '" + node.attempt.job_id +
        "' cannot name a folder: use letters, digits, '-', '_', ':' or '.' (a multi-node "
        "node is given by node_index, not by a '#node' suffix)");
  }
  if (node.attempt.attempt < 1) {
    return Status::InvalidArgument("attempt must be >= 1, got " +
                                   std::to_string(node.attempt.attempt));
  }
  if (node.node_index < 0) {
    return Status::InvalidArgument("node index must be >= 0, got " +
                                   std::to_string(node.node_index));
  }
  if (home.empty()) return Status::InvalidArgument("lote home folder is empty");
  return NodePaths{home + "/jobs/" + node.attempt.job_id + "/" +
                   std::to_string(node.attempt.attempt) + "/" + std::to_string(node.node_index)};
}

std::optional<NodeKey> NodeKeyFromRelative(const std::string& job, const std::string& attempt,
                                           const std::string& node) {
  auto a = ParseNonNegative(attempt);
  auto n = ParseNonNegative(node);
  if (!IsSafeJobId(job) || !a || !n || *a < 1) return std::nullopt;
  return NodeKey{AttemptKey{job, *a}, *n};
}

std::string LiveEntryName(const NodeKey& node) {
  return node.attempt.job_id + "." + std::to_string(node.attempt.attempt) + "." +
         std::to_string(node.node_index);
}

std::optional<NodeKey> NodeKeyFromLiveEntry(const std::string& name) {
  const size_t second = name.rfind('.');
  if (second == std::string::npos || second == 0) return std::nullopt;
  const size_t first = name.rfind('.', second - 1);
  if (first == std::string::npos) return std::nullopt;
  return NodeKeyFromRelative(name.substr(0, first), name.substr(first + 1, second - first - 1),
                             name.substr(second + 1));
}

Json ToJson(const ShimSpec& s) {
  Json rl = Json::array();
  for (const auto& r : s.rlimits) {
    rl.push_back(
        Json{{"name", r.name}, {"resource", r.resource}, {"soft", r.soft}, {"hard", r.hard}});
  }
  Json j{{"node", KeyJson(s.node)},
         {"argv", s.argv},
         {"env", s.env},
         {"working_dir", s.working_dir},
         {"output_path", s.output_path},
         {"gid", s.gid},
         {"groups", s.groups},
         {"rlimits", rl},
         {"notices", s.notices},
         {"cgroup_dir", s.cgroup_dir},
         {"fenced_devices", s.fenced_devices},
         {"devices_cgroup_dir", s.devices_cgroup_dir},
         {"memory_max_bytes", s.memory_max_bytes},
         {"cpu_quota_us", s.cpu_quota_us},
         {"cpu_period_us", s.cpu_period_us},
         {"default_grace_ms", s.default_grace_ms}};
  if (!s.user.empty()) j["user"] = s.user;
  if (s.uid) j["uid"] = *s.uid;
  if (s.container) {
    j["container"] = ToJson(*s.container);
    if (s.container_user) {
      j["container_user"] = Json{{"uid", s.container_user->uid},
                                 {"gid", s.container_user->gid},
                                 {"groups", s.container_user->groups}};
    }
    j["container_memory_mib"] = s.container_memory_mib;
    j["container_vcpu_milli"] = s.container_vcpu_milli;
  }
  if (!s.placement.empty()) {
    j["placement"] = s.placement;
    j["multi_node"] = s.multi_node;
    j["main_node_index"] = s.main_node_index;
    j["emulation"] = s.emulation;
  }
  if (s.fault.Any()) j["fault"] = ToJson(s.fault);
  return j;
}

Result<ShimSpec> ShimSpecFromJson(const Json& j) {
  return Decode<ShimSpec>("spec", [&] {
    ShimSpec s;
    s.node = KeyFromJson(j.at("node"));
    s.argv = j.at("argv").get<std::vector<std::string>>();
    s.env = j.at("env").get<std::vector<std::string>>();
    s.working_dir = j.at("working_dir").get<std::string>();
    s.output_path = j.at("output_path").get<std::string>();
    s.user = j.value("user", std::string());
    if (j.contains("uid")) s.uid = j.at("uid").get<uint32_t>();
    s.gid = j.value("gid", 0u);
    s.groups = j.value("groups", std::vector<uint32_t>{});
    for (const auto& r : j.value("rlimits", Json::array())) {
      s.rlimits.push_back(ShimRlimit{r.at("name").get<std::string>(), r.at("resource").get<int>(),
                                     r.at("soft").get<int64_t>(), r.at("hard").get<int64_t>()});
    }
    s.notices = j.value("notices", std::vector<std::string>{});
    s.cgroup_dir = j.value("cgroup_dir", std::string());
    s.fenced_devices = j.value("fenced_devices", std::vector<std::string>{});
    s.devices_cgroup_dir = j.value("devices_cgroup_dir", std::string());
    s.memory_max_bytes = j.value("memory_max_bytes", int64_t{0});
    s.cpu_quota_us = j.value("cpu_quota_us", int64_t{0});
    s.cpu_period_us = j.value("cpu_period_us", int64_t{100000});
    s.default_grace_ms = j.value("default_grace_ms", int64_t{30000});
    s.placement = j.value("placement", std::string());
    if (j.contains("container")) {
      s.container = ContainerRunFromJson(j.at("container"));
      if (j.contains("container_user")) {
        const Json& u = j.at("container_user");
        s.container_user = UserIds{u.at("uid").get<uint32_t>(), u.at("gid").get<uint32_t>(),
                                   u.value("groups", std::vector<uint32_t>{})};
      }
      s.container_memory_mib = j.value("container_memory_mib", int64_t{0});
      s.container_vcpu_milli = j.value("container_vcpu_milli", int64_t{0});
    }
    s.multi_node = j.value("multi_node", false);
    s.main_node_index = j.value("main_node_index", int32_t{0});
    s.emulation = j.value("emulation", false);
    if (j.contains("fault")) s.fault = NodeFaultFromJson(j.at("fault"));
    if (s.argv.empty() && !s.container) throw std::runtime_error("empty argv");
    return s;
  });
}

Json ToJson(const ProcessRecord& r) {
  Json j{{"process", IdentityJson(r.id)}, {"started_at_ms", r.started_at_ms}};
  if (r.keeper) j["keeper"] = IdentityJson(*r.keeper);
  if (r.agent) j["agent"] = true;
  if (!r.devices.empty()) j["devices"] = r.devices;
  return j;
}
Result<ProcessRecord> ProcessRecordFromJson(const Json& j) {
  return Decode<ProcessRecord>("process", [&] {
    ProcessRecord r{IdentityFromJson(j.at("process")), j.value("started_at_ms", int64_t{0})};
    if (j.contains("keeper")) r.keeper = IdentityFromJson(j.at("keeper"));
    r.agent = j.value("agent", false);
    r.devices = j.value("devices", std::vector<int32_t>{});
    return r;
  });
}

Json ToJson(const TerminateRequest& r) {
  return Json{{"grace_ms", r.grace_ms}, {"requested_at_ms", r.requested_at_ms}};
}
Result<TerminateRequest> TerminateRequestFromJson(const Json& j) {
  return Decode<TerminateRequest>("terminate", [&] {
    return TerminateRequest{j.at("grace_ms").get<int64_t>(),
                            j.value("requested_at_ms", int64_t{0})};
  });
}

Json ToJson(const StatusRecord& r) {
  Json j{{"outcome", std::string(NodeOutcomeName(r.outcome))},
         {"exit_code", r.exit_code},
         {"signal", r.signal},
         {"terminated", r.terminated},
         {"never_started", r.never_started},
         {"bad_command", r.bad_command},
         {"reason", r.reason},
         {"started_at_ms", r.started_at_ms},
         {"stopped_at_ms", r.stopped_at_ms},
         {"pull_started_at_ms", r.pull_started_at_ms},
         {"pull_stopped_at_ms", r.pull_stopped_at_ms}};
  if (!r.injected.empty()) j["injected"] = r.injected;
  return j;
}
Result<StatusRecord> StatusRecordFromJson(const Json& j) {
  return Decode<StatusRecord>("status", [&] {
    StatusRecord r;
    r.outcome = OutcomeFromName(j.at("outcome").get<std::string>());
    r.exit_code = j.value("exit_code", -1);
    r.signal = j.value("signal", 0);
    r.terminated = j.value("terminated", false);
    r.never_started = j.value("never_started", false);
    r.bad_command = j.value("bad_command", false);
    r.reason = j.value("reason", std::string());
    r.started_at_ms = j.value("started_at_ms", int64_t{0});
    r.stopped_at_ms = j.value("stopped_at_ms", int64_t{0});
    r.pull_started_at_ms = j.value("pull_started_at_ms", int64_t{0});
    r.pull_stopped_at_ms = j.value("pull_stopped_at_ms", int64_t{0});
    r.injected = j.value("injected", std::string());
    return r;
  });
}

Result<ShimSpec> ReadShimSpec(const std::string& path) {
  return ReadRecord<ShimSpec>(path, [](const Json& j) { return ShimSpecFromJson(j); });
}
Result<ProcessRecord> ReadProcessRecord(const std::string& path) {
  return ReadRecord<ProcessRecord>(path, [](const Json& j) { return ProcessRecordFromJson(j); });
}
Result<StatusRecord> ReadStatusRecord(const std::string& path) {
  return ReadRecord<StatusRecord>(path, [](const Json& j) { return StatusRecordFromJson(j); });
}
Result<TerminateRequest> ReadTerminateRequest(const std::string& path) {
  return ReadRecord<TerminateRequest>(path,
                                      [](const Json& j) { return TerminateRequestFromJson(j); });
}

namespace {
// Writes `data` to a new temporary file beside `path`; its name.
Result<std::string> WriteAside(const std::string& path, const std::string& data, int mode) {
  std::string tmp =
      path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(++g_tmp_counter);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return Status::Internal("cannot create " + tmp + ": " + std::strerror(errno));
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      Status s = Status::Internal("cannot write " + tmp + ": " + std::strerror(errno));
      ::close(fd);
      ::unlink(tmp.c_str());
      return s;
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  return tmp;
}
}  // namespace

Status CreateJsonRecord(const std::string& path, const Json& j, int mode) {
  ASSIGN_OR_RETURN(std::string tmp, WriteAside(path, j.dump(2) + "\n", mode));
  const int rc = ::link(tmp.c_str(), path.c_str());
  const int err = errno;
  ::unlink(tmp.c_str());
  if (rc == 0) return Status::Ok();
  if (err == EEXIST) return Status::AlreadyExists(path + " exists");
  return Status::Internal("cannot create " + path + ": " + std::strerror(err));
}

Status MakeNodeFolder(const std::string& home, const NodeKey& key, const NodePaths& paths,
                      const std::string& spec_json) {
  // <home>/jobs exists; <job> and <job>/<attempt> with one mkdir each rather
  // than a stat of every component.
  const std::string attempt_dir = paths.dir.substr(0, paths.dir.rfind('/'));
  const std::string job_dir = attempt_dir.substr(0, attempt_dir.rfind('/'));
  if (!MakeDir(job_dir, 0711).ok() || !MakeDir(attempt_dir, 0711).ok()) {
    RETURN_IF_ERROR(MakeDirs(attempt_dir));  // e.g. <home>/jobs was removed
  }
  if (::mkdir(paths.dir.c_str(), 0711) != 0) {
    if (errno == EEXIST) {
      return Status::AlreadyExists("node " + key.ToString() + " was already launched (" +
                                   paths.dir + " exists); a retry must use a new attempt number");
    }
    return Status::Internal("node " + key.ToString() + ": cannot create " + paths.dir + ": " +
                            std::strerror(errno));
  }
  const std::string spec = paths.spec();
  if (Status wrote = WriteNewFile(spec, spec_json + "\n", 0600); !wrote.ok())
    return Status::Internal("cannot write spec.json: " + wrote.message());
  const std::string live = home + "/nodes-live/" + LiveEntryName(key);
  if (::link(spec.c_str(), live.c_str()) != 0) {
    return Status::Internal("cannot list the node in " + home +
                            "/nodes-live: " + std::strerror(errno));
  }
  return Status::Ok();
}

Status WriteJsonRecord(const std::string& path, const Json& j, int mode) {
  // Atomic (write a temporary file, rename) but not fsynced: these records
  // describe processes, which a power loss ends anyway; the control plane
  // stores what it acknowledges in its own durable store.
  ASSIGN_OR_RETURN(std::string tmp, WriteAside(path, j.dump(2) + "\n", mode));
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    Status s =
        Status::Internal("cannot rename " + tmp + " to " + path + ": " + std::strerror(errno));
    ::unlink(tmp.c_str());
    return s;
  }
  return Status::Ok();
}

NodeEvent EventFromStatus(const NodeKey& node, const StatusRecord& s) {
  NodeEvent e;
  e.node = node;
  e.outcome = s.outcome;
  e.exit_code = s.exit_code;
  e.signal = s.signal;
  e.terminated = s.terminated;
  e.never_started = s.never_started;
  e.bad_command = s.bad_command;
  e.reason = s.reason;
  e.started_at_ms = s.started_at_ms;
  e.stopped_at_ms = s.stopped_at_ms;
  e.pull_started_at_ms = s.pull_started_at_ms;
  e.pull_stopped_at_ms = s.pull_stopped_at_ms;
  e.injected = s.injected;
  e.at_ms = s.stopped_at_ms;
  return e;
}

}  // namespace lote::exec
