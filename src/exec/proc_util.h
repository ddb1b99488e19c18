// Small Linux process helpers used by the local backend and its supervisor
// shim: process identity (pid + start time + boot id), pidfds, capabilities,
// rlimit names. Thread-safe (no shared state); errors as values.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace lote::exec {

// Identity of a process that survives pid recycling: the pid, its start time
// (/proc/<pid>/stat field 22, clock ticks since boot) and the boot id.
struct ProcessIdentity {
  int32_t pid = 0;
  uint64_t start_time = 0;
  std::string boot_id;
};

// NotFound when the process does not exist (or is a zombie when
// `zombie_is_dead`).
Result<uint64_t> ReadProcStartTime(pid_t pid, bool zombie_is_dead = true);
// The identity of `pid` now (NotFound if it does not exist).
Result<ProcessIdentity> CurrentIdentity(pid_t pid);
// /proc/sys/kernel/random/boot_id, trimmed ("" if unreadable); read once.
std::string BootId();
// True when the process `id` names is alive now (same boot, same start time).
bool IdentityAlive(const ProcessIdentity& id);

// pidfd_open(2) / pidfd_send_signal(2); -1 with errno set on failure.
int PidfdOpen(pid_t pid);
int PidfdSendSignal(int pidfd, int sig);

// Whether this process has capability `cap` (e.g. CAP_SYS_RESOURCE) effective.
bool HasEffectiveCapability(int cap);

// RLIMIT_* for an AWS ulimit name ("nofile" -> RLIMIT_NOFILE); -1 if unknown.
int RlimitResourceByName(const std::string& name);
// This host's name (gethostname), "this host" if it has none.
std::string HostName();
// "SIGKILL" for 9, "signal 77" for unknown numbers.
std::string SignalName(int sig);
// Pids whose parent is `ppid`: from /proc/<ppid>/task/*/children, or by a
// scan of /proc on kernels without those files.
std::vector<pid_t> ListChildPids(pid_t ppid);

}  // namespace lote::exec
