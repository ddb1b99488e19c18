#include "exec/cgroup.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "common/files.h"

namespace lote::exec {
namespace {

bool HasWord(const std::string& text, const std::string& word) {
  std::istringstream in(text);
  std::string w;
  while (in >> w) {
    if (w == word) return true;
  }
  return false;
}

Status WriteSmallFile(const std::string& path, const std::string& value) {
  std::ofstream out(path);
  if (!out) return Status::Internal("cannot open " + path + ": " + std::strerror(errno));
  out << value;
  out.flush();
  if (!out)
    return Status::Internal("cannot write '" + value + "' to " + path + ": " +
                            std::strerror(errno));
  return Status::Ok();
}

}  // namespace

CgroupSupport DetectCgroupV2(const std::string& configured_parent) {
  CgroupSupport s;
  std::string parent = configured_parent;
  if (parent.empty()) {
    if (!FileExists("/sys/fs/cgroup/cgroup.controllers")) {
      s.reason =
          "this host has no cgroup v2 hierarchy at /sys/fs/cgroup (it uses cgroup v1 or none)";
      return s;
    }
    auto self = ReadFile("/proc/self/cgroup");
    std::string own;
    if (self.ok()) {
      std::istringstream in(*self);
      std::string line;
      while (std::getline(in, line)) {
        if (line.rfind("0::", 0) == 0) own = line.substr(3);
      }
    }
    parent = "/sys/fs/cgroup" + (own == "/" ? std::string() : own);
  }
  auto controllers = ReadFile(parent + "/cgroup.controllers");
  if (!controllers.ok()) {
    s.reason = parent + " is not a cgroup v2 group (no cgroup.controllers)";
    return s;
  }
  for (const char* c : {"memory", "cpu"}) {
    if (!HasWord(*controllers, c)) {
      s.reason = std::string("the ") + c + " controller is not delegated to " + parent;
      return s;
    }
  }
  if (::access(parent.c_str(), W_OK) != 0) {
    s.reason = parent + " is not writable by lote";
    return s;
  }
  auto subtree = ReadFile(parent + "/cgroup.subtree_control");
  if (!subtree.ok() || !HasWord(*subtree, "memory") || !HasWord(*subtree, "cpu")) {
    Status st = WriteSmallFile(parent + "/cgroup.subtree_control", "+memory +cpu");
    if (!st.ok()) {
      s.reason = "cannot enable the memory and cpu controllers for children of " + parent + " (" +
                 st.message() +
                 "); run lote in its own delegated cgroup or pass a cgroup parent that has them";
      return s;
    }
  }
  s.available = true;
  s.parent = parent;
  return s;
}

std::string NodeCgroupName(const std::string& job_id, int32_t attempt, int32_t node_index) {
  std::string name = "lote-";
  for (char c : job_id) name += (c == ':' ? '_' : c);
  return name + "-" + std::to_string(attempt) + "-" + std::to_string(node_index);
}

Status PrepareNodeCgroup(const std::string& dir, int64_t memory_max_bytes, int64_t cpu_quota_us,
                         int64_t cpu_period_us) {
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return Status::Internal("cannot create cgroup " + dir + ": " + std::strerror(errno));
  }
  if (memory_max_bytes > 0) {
    RETURN_IF_ERROR(WriteSmallFile(dir + "/memory.max", std::to_string(memory_max_bytes)));
  }
  if (cpu_quota_us > 0) {
    RETURN_IF_ERROR(WriteSmallFile(
        dir + "/cpu.max", std::to_string(cpu_quota_us) + " " + std::to_string(cpu_period_us)));
  }
  return Status::Ok();
}

void RemoveNodeCgroup(const std::string& dir) {
  int fd = ::open((dir + "/cgroup.kill").c_str(), O_WRONLY | O_CLOEXEC);
  if (fd >= 0) {
    (void)!::write(fd, "1", 1);
    ::close(fd);
  }
  for (int i = 0; i < 50 && ::rmdir(dir.c_str()) != 0 && errno == EBUSY; ++i) ::usleep(20'000);
}

std::string DevicesCgroupRoot(std::string* why) {
  const std::string root = "/sys/fs/cgroup/devices";
  if (::access((root + "/devices.deny").c_str(), F_OK) != 0) {
    *why = "this host has no cgroup v1 devices controller at " + root;
    return "";
  }
  if (::access(root.c_str(), W_OK) != 0) {
    *why = root + " is not writable by lote (" + std::strerror(errno) + ")";
    return "";
  }
  return root;
}

Status PrepareDeviceFence(const std::string& dir, const std::vector<std::string>& paths,
                          std::vector<std::string>* skipped) {
  const std::string parent = dir.substr(0, dir.rfind('/'));
  if (::mkdir(parent.c_str(), 0755) != 0 && errno != EEXIST)
    return Status::Internal("cannot create " + parent + ": " + std::strerror(errno));
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
    return Status::Internal("cannot create " + dir + ": " + std::strerror(errno));
  for (const std::string& path : paths) {
    struct stat st {};
    // Not a device, or one every process needs (/dev/null and its kin, the
    // terminals: an inventory file may name them for devices it fakes).
    if (::stat(path.c_str(), &st) != 0 || !(S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) ||
        (S_ISCHR(st.st_mode) && (major(st.st_rdev) == 1 || major(st.st_rdev) == 4 ||
                                 major(st.st_rdev) == 5 || major(st.st_rdev) == 136))) {
      skipped->push_back(path);
      continue;
    }
    const std::string rule = std::string(S_ISCHR(st.st_mode) ? "c " : "b ") +
                             std::to_string(major(st.st_rdev)) + ":" +
                             std::to_string(minor(st.st_rdev)) + " rwm";
    RETURN_IF_ERROR(WriteSmallFile(dir + "/devices.deny", rule).WithContext("denying " + path));
  }
  return Status::Ok();
}

void RemoveDeviceFence(const std::string& dir) {
  for (int i = 0; i < 50 && ::rmdir(dir.c_str()) != 0 && errno == EBUSY; ++i) ::usleep(20'000);
}

}  // namespace lote::exec
