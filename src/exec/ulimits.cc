#include "exec/ulimits.h"

#include "exec/proc_util.h"

namespace lote::exec {
namespace {

std::string DescribeLimit(int64_t v) { return v < 0 ? "unlimited" : std::to_string(v); }

}  // namespace

Result<ShimRlimit> ResolveRlimit(const Ulimit& u, const struct rlimit& host, bool can_raise,
                                 bool emulation, std::string* warning) {
  const int resource = RlimitResourceByName(u.name);
  if (resource < 0) {
    return Status::InvalidArgument("ulimits: unknown name '" + u.name +
                                   "' (use core, cpu, data, fsize, locks, memlock, msgqueue, "
                                   "nice, nofile, nproc, rss, rtprio, rttime, sigpending, stack)");
  }
  if (u.soft_limit < -1 || u.hard_limit < -1 ||
      (u.hard_limit >= 0 && (u.soft_limit < 0 || u.soft_limit > u.hard_limit))) {
    return Status::InvalidArgument("ulimits " + u.name + ": softLimit " +
                                   DescribeLimit(u.soft_limit) + " exceeds hardLimit " +
                                   DescribeLimit(u.hard_limit) + " or is negative");
  }
  ShimRlimit r{u.name, resource, u.soft_limit, u.hard_limit};
  const bool host_unlimited = host.rlim_max == RLIM_INFINITY;
  const bool wants_above =
      !host_unlimited && (u.hard_limit < 0 || static_cast<rlim_t>(u.hard_limit) > host.rlim_max);
  if (!wants_above || can_raise) return r;
  std::string msg = "ulimits " + u.name + ": hardLimit " + DescribeLimit(u.hard_limit) +
                    " is above this host's limit " + std::to_string(host.rlim_max) +
                    " and lote lacks CAP_SYS_RESOURCE to raise it";
  if (!emulation) {
    return Status::FailedPrecondition(msg +
                                      "; lower it, run lote with CAP_SYS_RESOURCE, or mark "
                                      "the compute environment as emulation");
  }
  r.hard = static_cast<int64_t>(host.rlim_max);
  if (r.soft < 0 || r.soft > r.hard) r.soft = r.hard;
  *warning = "emulation: " + msg + "; using " + std::to_string(r.soft) + "/" +
             std::to_string(r.hard) + " instead";
  return r;
}

std::map<std::string, int64_t> HostHardLimits() {
  std::map<std::string, int64_t> out;
  for (const char* name : {"core", "cpu", "data", "fsize", "locks", "memlock", "msgqueue", "nice",
                           "nofile", "nproc", "rss", "rtprio", "rttime", "sigpending", "stack"}) {
    struct rlimit rl;
    if (::getrlimit(RlimitResourceByName(name), &rl) != 0) continue;
    out[name] = rl.rlim_max == RLIM_INFINITY ? -1 : static_cast<int64_t>(rl.rlim_max);
  }
  return out;
}

}  // namespace lote::exec
