// cgroup v2 support detection and per-node limits for the local backend.
//
// The local backend enforces a node's memory and vCPU limits by running it in
// its own cgroup v2 group <parent>/lote-<job>-<attempt>-<node> with memory.max
// and cpu.max set. That needs a cgroup v2 hierarchy whose `parent` group is
// writable by lote and has the memory and cpu controllers enabled for its
// children (cgroup.subtree_control). When the host does not allow it,
// DetectCgroupV2 says why in one sentence and nodes run without limits, with a
// warning. Thread-safe (no shared state).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace lote::exec {

struct CgroupSupport {
  bool available = false;
  std::string parent;  // absolute path of the parent group when available
  std::string reason;  // why not, when unavailable
};

// `configured_parent` empty: /sys/fs/cgroup/<this process's own group>.
CgroupSupport DetectCgroupV2(const std::string& configured_parent);

// Group folder name of one node: "lote-<job>-<attempt>-<node>".
std::string NodeCgroupName(const std::string& job_id, int32_t attempt, int32_t node_index);

// Creates `dir` and writes memory.max / cpu.max (0 = leave unlimited).
Status PrepareNodeCgroup(const std::string& dir, int64_t memory_max_bytes, int64_t cpu_quota_us,
                         int64_t cpu_period_us);

// Kills what is left in a node's group (cgroup.kill) and removes it, waiting
// up to 1 s for the kernel to let it go.
void RemoveNodeCgroup(const std::string& dir);

// The cgroup v1 devices hierarchy lote may use ("/sys/fs/cgroup/devices" when
// it is mounted and writable), else "" with *why set.
std::string DevicesCgroupRoot(std::string* why);
// Creates the devices group `dir` (and its parent) and denies it the device
// nodes at `paths` (character or block devices; other paths, and the nodes
// every process needs — majors 1, 4, 5 and 136: /dev/null and its kin, the
// terminals — are skipped and named in *skipped). A process joins it through
// dir/cgroup.procs.
Status PrepareDeviceFence(const std::string& dir, const std::vector<std::string>& paths,
                          std::vector<std::string>* skipped);
// Removes a devices group once its processes are gone (best effort, 1 s).
void RemoveDeviceFence(const std::string& dir);

}  // namespace lote::exec
