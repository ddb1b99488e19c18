// AWS `ulimits` entries checked against what a host grants: the one check
// used by the local backend at launch and by the node runner on a node it
// cannot see from the server (Slurm). Pure; thread-safe.
#pragma once

#include <sys/resource.h>

#include <cstdint>
#include <map>
#include <string>

#include "common/status.h"
#include "exec/backend.h"
#include "exec/node_files.h"

namespace lote::exec {

// `host` is the host's getrlimit of the entry's resource. InvalidArgument for
// an unknown name or a soft limit above the hard one. A hard limit above the
// host's that cannot be raised (no CAP_SYS_RESOURCE) is FailedPrecondition,
// or, in emulation, lowered to the host's with `*warning` saying so.
Result<ShimRlimit> ResolveRlimit(const Ulimit& u, const struct rlimit& host, bool can_raise,
                                 bool emulation, std::string* warning);

// This process's hard limit of every ulimit AWS names ("core", "memlock",
// "nofile", ...): -1 for unlimited.
std::map<std::string, int64_t> HostHardLimits();

}  // namespace lote::exec
