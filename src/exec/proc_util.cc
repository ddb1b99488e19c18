#include "exec/proc_util.h"

#include <dirent.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "common/files.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif

namespace lote::exec {
namespace {

// Fields of /proc/<pid>/stat after the command name, which may hold spaces and
// parentheses: everything after the last ')'.
Result<std::vector<std::string>> StatFieldsAfterComm(pid_t pid) {
  std::string path = "/proc/" + std::to_string(pid) + "/stat";
  auto text = ReadFile(path);
  if (!text.ok()) return Status::NotFound("process " + std::to_string(pid) + " does not exist");
  size_t close = text->rfind(')');
  if (close == std::string::npos) return Status::DataLoss("malformed " + path);
  std::istringstream in(text->substr(close + 1));
  std::vector<std::string> fields;
  std::string f;
  while (in >> f) fields.push_back(f);
  return fields;
}

}  // namespace

Result<uint64_t> ReadProcStartTime(pid_t pid, bool zombie_is_dead) {
  ASSIGN_OR_RETURN(auto fields, StatFieldsAfterComm(pid));
  // fields[0] is field 3 (state); field 22 (starttime) is fields[19].
  if (fields.size() < 20) return Status::DataLoss("short /proc/" + std::to_string(pid) + "/stat");
  if (zombie_is_dead && (fields[0] == "Z" || fields[0] == "X")) {
    return Status::NotFound("process " + std::to_string(pid) + " has exited (zombie)");
  }
  return static_cast<uint64_t>(std::strtoull(fields[19].c_str(), nullptr, 10));
}

std::string BootId() {
  // Fixed for the life of the system: read once per process.
  static const std::string boot_id = [] {
    auto text = ReadFile("/proc/sys/kernel/random/boot_id");
    if (!text.ok()) return std::string();
    std::string s = *text;
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    return s;
  }();
  return boot_id;
}

Result<ProcessIdentity> CurrentIdentity(pid_t pid) {
  ASSIGN_OR_RETURN(uint64_t start, ReadProcStartTime(pid));
  return ProcessIdentity{static_cast<int32_t>(pid), start, BootId()};
}

bool IdentityAlive(const ProcessIdentity& id) {
  if (id.pid <= 0) return false;
  if (!id.boot_id.empty() && id.boot_id != BootId()) return false;
  auto start = ReadProcStartTime(id.pid);
  return start.ok() && *start == id.start_time;
}

int PidfdOpen(pid_t pid) { return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)); }

int PidfdSendSignal(int pidfd, int sig) {
  return static_cast<int>(::syscall(SYS_pidfd_send_signal, pidfd, sig, nullptr, 0));
}

bool HasEffectiveCapability(int cap) {
  auto text = ReadFile("/proc/self/status");
  if (!text.ok()) return false;
  size_t pos = text->find("CapEff:");
  if (pos == std::string::npos) return false;
  uint64_t mask = std::strtoull(text->c_str() + pos + 7, nullptr, 16);
  return cap >= 0 && cap < 64 && ((mask >> cap) & 1u) != 0;
}

int RlimitResourceByName(const std::string& name) {
  static const struct {
    const char* name;
    int resource;
  } kTable[] = {
      {"core", RLIMIT_CORE},         {"cpu", RLIMIT_CPU},
      {"data", RLIMIT_DATA},         {"fsize", RLIMIT_FSIZE},
      {"locks", RLIMIT_LOCKS},       {"memlock", RLIMIT_MEMLOCK},
      {"msgqueue", RLIMIT_MSGQUEUE}, {"nice", RLIMIT_NICE},
      {"nofile", RLIMIT_NOFILE},     {"nproc", RLIMIT_NPROC},
      {"rss", RLIMIT_RSS},           {"rtprio", RLIMIT_RTPRIO},
      {"rttime", RLIMIT_RTTIME},     {"sigpending", RLIMIT_SIGPENDING},
      {"stack", RLIMIT_STACK},
  };
  for (const auto& e : kTable) {
    if (name == e.name) return e.resource;
  }
  return -1;
}

std::string HostName() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "this host";
  return name;
}

std::string SignalName(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  if (abbrev == nullptr) return "signal " + std::to_string(sig);
  return std::string("SIG") + abbrev;
}

std::vector<pid_t> ListChildPids(pid_t ppid) {
  std::vector<pid_t> out;
  // Fast path: /proc/<ppid>/task/<tid>/children lists each thread's children
  // (CONFIG_PROC_CHILDREN), one small read instead of a scan of every process.
  const std::string task_dir = "/proc/" + std::to_string(ppid) + "/task";
  if (DIR* tasks = ::opendir(task_dir.c_str())) {
    bool have_children_files = true;
    while (struct dirent* e = ::readdir(tasks)) {
      if (e->d_name[0] == '.') continue;
      auto text = ReadFile(task_dir + "/" + e->d_name + "/children");
      if (!text.ok()) {
        // No such file: this kernel lacks CONFIG_PROC_CHILDREN (a thread that
        // just ended also lands here; the scan below covers both).
        have_children_files = false;
        break;
      }
      std::istringstream in(*text);
      long pid = 0;
      while (in >> pid) out.push_back(static_cast<pid_t>(pid));
    }
    ::closedir(tasks);
    if (have_children_files) return out;
    out.clear();
  }
  DIR* dir = ::opendir("/proc");
  if (dir == nullptr) return out;
  while (struct dirent* e = ::readdir(dir)) {
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || pid <= 0) continue;
    auto fields = StatFieldsAfterComm(static_cast<pid_t>(pid));
    // fields[1] is field 4 (ppid).
    if (fields.ok() && fields->size() > 1 &&
        std::strtol((*fields)[1].c_str(), nullptr, 10) == ppid) {
      out.push_back(static_cast<pid_t>(pid));
    }
  }
  ::closedir(dir);
  return out;
}

}  // namespace lote::exec
