// The one resolution of what a node runs, shared by every backend: from the
// control plane's NodeSpec to the runner's ShimSpec (node_files.h). The
// environment's defaults, the user, the ulimits and the working directory are
// decided here, once; the backend adds only placement (a cgroup, a Slurm
// allocation) and the runner (`lote exec-shim`, shim.h) carries it out.
// Thread-safe: pure functions apart from the passwd/group lookups.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "exec/backend.h"
#include "exec/node_files.h"
#include "exec/ulimits.h"

namespace lote::exec {

struct ResolvedUser {
  uint32_t uid = 0;
  uint32_t gid = 0;
  std::vector<uint32_t> groups;
  std::string name;
  std::string home;
};

// A user name or numeric uid, from this host's passwd and group files. A
// numeric uid without an entry is itself (gid = uid, home "/"). InvalidArgument
// for an unknown name.
Result<ResolvedUser> ResolveUser(const std::string& user);
// The same answer from `getent passwd` and `getent initgroups`: for the
// statically linked runner (lote-exec-shim), where glibc's NSS modules cannot
// be loaded safely (a lookup that reaches past /etc/passwd crashes it).
Result<ResolvedUser> ResolveUserWithGetent(const std::string& user);

// What the host that resolves a node may grant.
struct RunnerHost {
  bool can_raise_rlimits = false;  // CAP_SYS_RESOURCE
  uint32_t euid = 0;
  std::string user_name;  // of euid
  std::string home_dir;   // $HOME
  std::string host_name;  // for messages
  // False when the node runs elsewhere (Slurm): the rlimits are checked by
  // the runner on the node itself (ShimSpec::placement), a container's
  // devices by podman there.
  bool node_is_here = true;
};
RunnerHost ThisRunnerHost();

struct ResolvedNode {
  ShimSpec spec;
  // Things that are not as asked (emulated fields, lowered limits).
  std::vector<std::string> warnings;
};

// The job's user (spec->user) resolved on the host that runs the node: the one
// step both runtimes share, taken by ResolveNode for a node on this host and
// by the runner on the node itself under Slurm. A container is given its
// numbers (container_user: uid, primary gid, supplementary groups); a process
// is switched to them by a root runner (uid/gid/groups), with HOME, USER and
// LOGNAME set when absent; a non-root runner cannot switch (FailedPrecondition,
// or in emulation a warning and the runner's own user). No user: nothing to
// do. InvalidArgument naming the user and `host_name` when this host lacks it.
using UserResolver = Result<ResolvedUser> (*)(const std::string& user);
Status ResolveJobUser(ShimSpec* spec, uint32_t euid, const std::string& host_name,
                      std::vector<std::string>* warnings, UserResolver resolve = ResolveUser);

// The runner's spec of `node`: argv and the environment (the spec's, plus PATH,
// HOME, USER, LOGNAME when absent, and LOTE_PRIVATE_IPV4_ADDRESS), the user
// (ResolveJobUser, when the node is here), the ulimits (checked here when
// host.node_is_here), the working directory and output (the defaults when the
// spec has none). In container mode with host.node_is_here, a device the host
// does not have is refused (FailedPrecondition naming it), or in emulation
// left out with a warning. `executor` names the backend in messages ("the local
// executor"). Errors as Backend::LaunchGang's.
Result<ResolvedNode> ResolveNode(const NodeSpec& node, const RunnerHost& host,
                                 const std::string& executor, const std::string& default_work,
                                 const std::string& default_output);

}  // namespace lote::exec
