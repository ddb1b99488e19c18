// iam::CheckRootEquivalent: the settings of a job definition that make a job
// root on the host that runs it, and who may use them. On a shared host a
// container's `privileged`, its `linuxParameters.devices`, a bind mount of a
// host folder outside the server's allow-list, a `sharedMemorySize` above the
// server's limit and a `ulimits` entry above the host's hard limit each give
// the job what only root has; so they are allowed only to a principal that
// may run jobs as root (its Unix users hold "root", "0" or "*", see
// unix_users.h). RegisterJobDefinition and SubmitJob refuse the others with
// AccessDeniedException (docs/api.md "Root-equivalent settings").
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/json.h"
#include "iam/directory.h"

namespace lote::iam {

// What a host lets any principal's jobs have (server.conf, docs/deploy.md).
struct HostAllowances {
  // Host folders a job may bind-mount (a folder or anything under it),
  // absolute and lexically normal; the server adds its home's jobs/ folder.
  std::vector<std::string> host_paths;
  // linuxParameters.sharedMemorySize (MiB) allowed at most.
  int64_t max_shared_memory_mib = 0;
  // The host's hard limit of each ulimit by its AWS name ("memlock",
  // "nofile", ...): -1 unlimited. A name not in the map is not limited.
  std::map<std::string, int64_t> hard_limits;
  // A host path as the host resolves it (symbolic links followed where the
  // path exists); empty: the lexically normal path.
  std::function<std::string(const std::string&)> canonical;
};

// The root-equivalent settings of `definition` (AWS JobDefinition shape,
// RegisterJobDefinition's request or a stored definition): one phrase each,
// naming where it is, e.g. "containerProperties.privileged = true" or
// "nodeProperties.nodeRangeProperties[1].container.volumes[0].host.sourcePath
// = /etc (outside the allowed host paths /data)". Empty: none.
std::vector<std::string> RootEquivalentSettings(const Json& definition, const HostAllowances& host);

// Whether `user` may run jobs as root: its Unix users hold "root", "0" or "*".
bool MayRunJobsAsRoot(const User& user);

// nullopt when `user` may use every root-equivalent setting of `definition`;
// else AWS's AccessDeniedException message for `action` on `resource` naming
// the first such setting and how to be granted it.
std::optional<std::string> CheckRootEquivalent(const User& user, const std::string& action,
                                               const std::string& resource, const Json& definition,
                                               const HostAllowances& host);

}  // namespace lote::iam
