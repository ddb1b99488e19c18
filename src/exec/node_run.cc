#include "exec/node_run.h"

#include <fcntl.h>
#include <grp.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "common/clock.h"
#include "common/files.h"
#include "exec/cgroup.h"

namespace lote::exec {
namespace {

int64_t NowMs() { return SystemClock::Default()->NowMillis(); }

void WriteAll(int fd, const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    ssize_t n = ::write(fd, s.data() + done, s.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;
    }
    done += static_cast<size_t>(n);
  }
}

// Makes `dir` (and missing parents) for the command, 0700 and owned by
// `uid`/`gid` when set: another job's user cannot look in. An existing folder
// is left as it is.
Status MakeCommandDir(const std::string& dir, std::optional<uint32_t> uid, uint32_t gid) {
  if (::mkdir(dir.c_str(), 0700) != 0) {
    if (errno == EEXIST) return Status::Ok();
    if (errno != ENOENT) {
      return Status::Internal("cannot create " + dir + ": " + std::strerror(errno));
    }
    RETURN_IF_ERROR(MakeDirs(dir));
    if (::chmod(dir.c_str(), 0700) != 0) {
      return Status::Internal("cannot make " + dir + " private: " + std::strerror(errno));
    }
  }
  if (uid && ::chown(dir.c_str(), *uid, gid) != 0) {
    return Status::Internal("cannot give " + dir + " to uid " + std::to_string(*uid) + ": " +
                            std::strerror(errno));
  }
  return Status::Ok();
}

// PATH lookup in the command's own environment.
std::optional<std::string> ResolveExecutable(const std::string& arg0,
                                             const std::vector<std::string>& env) {
  if (arg0.find('/') != std::string::npos) return arg0;
  std::string path = "/usr/local/bin:/usr/bin:/bin";
  for (const auto& kv : env) {
    if (kv.rfind("PATH=", 0) == 0) path = kv.substr(5);
  }
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find(':', start);
    if (end == std::string::npos) end = path.size();
    std::string dir = path.substr(start, end - start);
    if (dir.empty()) dir = ".";
    std::string candidate = dir + "/" + arg0;
    struct stat st;
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 0111) != 0) {
      return candidate;
    }
    start = end + 1;
  }
  return std::nullopt;
}

// In the child: report a setup failure to the parent (it becomes the node's
// reason; the job's output holds only what the command writes), exit. Plain
// writes of prepared text: the child of vfork allocates nothing.
[[noreturn]] void ChildFail(int err_fd, const std::string& what) {
  const char* why = std::strerror(errno);
  (void)!::write(err_fd, what.data(), what.size());
  (void)!::write(err_fd, ": ", 2);
  (void)!::write(err_fd, why, std::strlen(why));
  ::_exit(127);
}

// Everything the child needs, made before the vfork: the child shares the
// runner's memory until it execs, so it only reads this and makes system
// calls (no allocation, no locks).
struct ChildPlan {
  std::string exe;
  std::vector<char*> argv, envp;
  std::vector<gid_t> groups;
  std::string cgroup_procs;          // "" no cgroup
  std::string devices_cgroup_procs;  // "" not fenced
  // What each step is called in a failure's reason.
  std::string cgroup_step, setgid_step, setuid_step, chdir_step, exec_step;
  std::vector<std::string> rlimit_steps;  // one per spec.rlimits entry
  // command.json, written by the child itself (aside, then renamed in): its
  // pid and start time between `record_head` and `record_tail`.
  std::string record_path, record_aside, record_head, record_tail, record_step;
  int devnull = -1, out_fd = -1, err_write = -1;
};

// Field 22 of /proc/self/stat (the start time in clock ticks), read into a
// stack buffer; 0 if unreadable.
unsigned long long OwnStartTime() {
  char buf[1024];
  int fd = ::open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t n = ::read(fd, buf, sizeof(buf) - 1);
  ::close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  const char* p = std::strrchr(buf, ')');  // after the command name
  if (p == nullptr) return 0;
  int field = 2;  // ')' ends field 2
  for (++p; *p != '\0' && field < 22; ++p)
    if (*p == ' ') ++field;
  unsigned long long v = 0;
  for (; *p >= '0' && *p <= '9'; ++p) v = v * 10 + static_cast<unsigned long long>(*p - '0');
  return v;
}

}  // namespace

std::vector<int32_t> RecordedDevices(const std::vector<std::string>& env) {
  std::vector<int32_t> out;
  static const std::string kKey = "LOTE_ACCELERATORS=";
  for (const std::string& kv : env) {
    if (kv.compare(0, kKey.size(), kKey) != 0) continue;
    // "0,1", "2-3" or "0,2-3"; anything else records nothing.
    std::string list = kv.substr(kKey.size());
    size_t start = 0;
    while (start <= list.size()) {
      size_t comma = list.find(',', start);
      if (comma == std::string::npos) comma = list.size();
      const std::string item = list.substr(start, comma - start);
      const size_t dash = item.find('-');
      char* end = nullptr;
      const long first = std::strtol(item.c_str(), &end, 10);
      long last = first;
      if (end == item.c_str() || (dash == std::string::npos && *end != '\0')) return {};
      if (dash != std::string::npos) {
        const char* tail = item.c_str() + dash + 1;
        last = std::strtol(tail, &end, 10);
        if (end == tail || *end != '\0') return {};
      }
      if (first < 0 || last < first || last > 1023) return {};
      for (long d = first; d <= last; ++d) out.push_back(static_cast<int32_t>(d));
      start = comma + 1;
    }
  }
  return out;
}

namespace {

// The child's own record (command.json), before it runs anything: a command
// never runs unrecorded, whatever happens to the runner meanwhile.
bool RecordSelf(const ChildPlan& c) {
  char buf[64];
  const int n = std::snprintf(buf, sizeof(buf), "%d, \"start_time\": %llu",
                              static_cast<int>(::getpid()), OwnStartTime());
  if (n <= 0) return false;
  int fd = ::open(c.record_aside.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  const bool written = ::write(fd, c.record_head.data(), c.record_head.size()) ==
                           static_cast<ssize_t>(c.record_head.size()) &&
                       ::write(fd, buf, static_cast<size_t>(n)) == n &&
                       ::write(fd, c.record_tail.data(), c.record_tail.size()) ==
                           static_cast<ssize_t>(c.record_tail.size());
  ::close(fd);
  return written && ::rename(c.record_aside.c_str(), c.record_path.c_str()) == 0;
}

[[noreturn]] void RunChild(const ShimSpec& spec, const ChildPlan& c) {
  // A single-threaded parent, suspended until this child execs or exits.
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  for (int s : {SIGPIPE, SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGCHLD})
    ::signal(s, SIG_DFL);
  ::prctl(PR_SET_CHILD_SUBREAPER, 0);
  if (::setsid() < 0) ChildFail(c.err_write, "setsid");
  if (::dup2(c.devnull, 0) < 0 || ::dup2(c.out_fd, 1) < 0 || ::dup2(c.out_fd, 2) < 0) {
    ChildFail(c.err_write, "redirecting stdin/stdout/stderr");
  }
  if (!c.cgroup_procs.empty()) {
    int fd = ::open(c.cgroup_procs.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0 || ::write(fd, "0", 1) != 1) ChildFail(c.err_write, c.cgroup_step);
    ::close(fd);
  }
  if (!c.devices_cgroup_procs.empty()) {
    int fd = ::open(c.devices_cgroup_procs.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0 || ::write(fd, "0", 1) != 1) ChildFail(c.err_write, "joining the devices cgroup");
    ::close(fd);
  }
  // As the runner's user (the node folder is its own), and before the job's
  // limits (a small fsize or nofile could refuse the write).
  if (!RecordSelf(c)) ChildFail(c.err_write, c.record_step);
  for (size_t i = 0; i < spec.rlimits.size(); ++i) {
    const ShimRlimit& r = spec.rlimits[i];
    struct rlimit rl;
    rl.rlim_cur = r.soft < 0 ? RLIM_INFINITY : static_cast<rlim_t>(r.soft);
    rl.rlim_max = r.hard < 0 ? RLIM_INFINITY : static_cast<rlim_t>(r.hard);
    if (::setrlimit(r.resource, &rl) != 0) ChildFail(c.err_write, c.rlimit_steps[i]);
  }
  if (spec.uid) {
    if (::setgroups(c.groups.size(), c.groups.data()) != 0) ChildFail(c.err_write, "setgroups");
    if (::setgid(spec.gid) != 0) ChildFail(c.err_write, c.setgid_step);
    if (::setuid(*spec.uid) != 0) ChildFail(c.err_write, c.setuid_step);
  }
  if (::chdir(spec.working_dir.c_str()) != 0) ChildFail(c.err_write, c.chdir_step);
  ::execve(c.exe.c_str(), c.argv.data(), c.envp.data());
  ChildFail(c.err_write, c.exec_step);
}

}  // namespace

NodeLog::~NodeLog() {
  if (fd_ >= 0) ::close(fd_);
}

void NodeLog::operator()(const std::string& msg) const {
  if (fd_ < 0) fd_ = ::open(path_.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ >= 0) WriteAll(fd_, std::to_string(NowMs()) + " " + who_ + ": " + msg + "\n");
}

StatusRecord StartFailure(std::string reason, bool bad_command) {
  StatusRecord st;
  st.outcome = NodeOutcome::kStartFailed;
  st.reason = std::move(reason);
  st.bad_command = bad_command;
  if (bad_command) st.exit_code = 127;
  st.stopped_at_ms = NowMs();
  return st;
}

ForkedCommand ForkCommand(const NodePaths& p, const ShimSpec& spec, const NodeLog& log) {
  ForkedCommand out;
  const std::string out_parent = spec.output_path.substr(0, spec.output_path.rfind('/'));
  if (!out_parent.empty() && out_parent != p.dir) {
    if (Status s = MakeDirs(out_parent); !s.ok()) {
      out.failed = StartFailure("cannot create the output folder: " + s.message());
      return out;
    }
  }
  // The job's output may hold secrets: the server's user alone reads it.
  int out_fd = ::open(spec.output_path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
  if (out_fd < 0) {
    out.failed = StartFailure("cannot open the output file " + spec.output_path + ": " +
                              std::strerror(errno));
    return out;
  }
  struct CloseOutput {
    int fd;
    ~CloseOutput() { ::close(fd); }
  } close_output{out_fd};
  // lote's notices go to the runner's log, never into the job's output (an
  // AWS log stream holds only the container's output).
  for (const auto& n : spec.notices) log("notice: " + n);
  out.cgroup_dir = spec.cgroup_dir;
  if (!out.cgroup_dir.empty()) {
    Status s = PrepareNodeCgroup(out.cgroup_dir, spec.memory_max_bytes, spec.cpu_quota_us,
                                 spec.cpu_period_us);
    if (!s.ok()) {
      log("cgroup setup failed, memory/vCPU limits are NOT enforced: " + s.ToString());
      out.cgroup_dir.clear();
    }
  }
  if (!spec.fenced_devices.empty() && !spec.devices_cgroup_dir.empty()) {
    std::vector<std::string> skipped;
    Status s = PrepareDeviceFence(spec.devices_cgroup_dir, spec.fenced_devices, &skipped);
    if (s.ok()) {
      out.devices_cgroup_dir = spec.devices_cgroup_dir;
      for (const std::string& path : skipped)
        log("notice: " + path + " is not a device node: not fenced");
    } else {
      log("notice: the host's other accelerators are NOT fenced off: " + s.ToString());
      RemoveDeviceFence(spec.devices_cgroup_dir);
    }
  }
  if (Status s = MakeCommandDir(spec.working_dir, spec.uid, spec.gid); !s.ok()) {
    out.failed = StartFailure("working directory: " + s.message());
    return out;
  }
  ChildPlan plan;
  std::optional<std::string> exe =
      spec.container ? ResolveExecutable("podman", {"PATH=" + std::string(kHostPath)})
                     : ResolveExecutable(spec.argv[0], spec.env);
  if (!exe && spec.container) {
    out.failed = StartFailure("CannotStartContainerError: podman is not installed on this host (" +
                              std::string(kHostPath) + "); install scripts/deps/containers.txt");
    return out;
  }
  if (!exe) {
    out.failed =
        StartFailure("command '" + spec.argv[0] + "' was not found in the job's PATH", true);
    return out;
  }
  plan.exe = *exe;
  for (const auto& a : spec.argv) plan.argv.push_back(const_cast<char*>(a.c_str()));
  plan.argv.push_back(nullptr);
  for (const auto& e : spec.env) plan.envp.push_back(const_cast<char*>(e.c_str()));
  plan.envp.push_back(nullptr);
  plan.groups.assign(spec.groups.begin(), spec.groups.end());
  if (!out.cgroup_dir.empty()) plan.cgroup_procs = out.cgroup_dir + "/cgroup.procs";
  if (!out.devices_cgroup_dir.empty())
    plan.devices_cgroup_procs = out.devices_cgroup_dir + "/cgroup.procs";
  plan.cgroup_step = "joining cgroup " + out.cgroup_dir;
  for (const ShimRlimit& r : spec.rlimits) plan.rlimit_steps.push_back("ulimits " + r.name);
  plan.setgid_step = "setgid " + std::to_string(spec.gid);
  plan.setuid_step = spec.uid ? "setuid " + std::to_string(*spec.uid) : "";
  plan.chdir_step = "working directory " + spec.working_dir;
  plan.exec_step = "exec " + plan.exe;
  plan.record_path = p.command();
  plan.record_aside = p.command() + ".child";
  plan.record_step = "recording the command in " + plan.record_path;
  out.forked_at_ms = NowMs();
  plan.record_head = "{\"process\": {\"pid\": ";
  const std::vector<int32_t> devices = RecordedDevices(spec.env);
  plan.record_tail = ", \"boot_id\": " + Json(BootId()).dump() +
                     "}, \"started_at_ms\": " + std::to_string(out.forked_at_ms) +
                     (devices.empty() ? "" : ", \"devices\": " + Json(devices).dump()) + "}\n";

  int err_pipe[2];
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    out.failed = StartFailure(std::string("pipe: ") + std::strerror(errno));
    return out;
  }
  plan.devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  plan.out_fd = out_fd;
  plan.err_write = err_pipe[1];
  out.output_start = ::lseek(out_fd, 0, SEEK_END);
  // vfork: no copy of the runner's address space, no copy-on-write faults,
  // nothing to unmap at the exec; the runner waits until the child has
  // exec'd (or failed), by which time the child has recorded itself.
  const pid_t child = ::vfork();
  if (child == 0) RunChild(spec, plan);
  const int fork_errno = errno;
  ::close(err_pipe[1]);
  if (plan.devnull >= 0) ::close(plan.devnull);
  if (child < 0) {
    ::close(err_pipe[0]);
    out.failed = StartFailure(std::string("fork failed: ") + std::strerror(fork_errno));
    return out;
  }
  out.pid = child;
  // The pipe closed on exec (O_CLOEXEC) with nothing in it, or holds why not.
  char buf[512];
  while (true) {
    ssize_t n = ::read(err_pipe[0], buf, sizeof(buf));
    if (n > 0) {
      out.start_error.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    break;
  }
  ::close(err_pipe[0]);
  out.started_at_ms = NowMs();
  Result<uint64_t> start = ReadProcStartTime(child, /*zombie_is_dead=*/false);
  out.id = ProcessIdentity{child, start.ok() ? *start : 0, BootId()};
  return out;
}

StatusRecord CommandOutcome(const siginfo_t& leader, const std::string& start_error,
                            bool terminating) {
  StatusRecord st;
  if (!start_error.empty()) {
    st.outcome = NodeOutcome::kStartFailed;
    st.exit_code = 127;
    st.bad_command = start_error.rfind("exec ", 0) == 0;  // ChildFail(..., "exec " + path)
    st.reason = "cannot start the command: " + start_error;
  } else if (leader.si_code == CLD_EXITED) {
    st.outcome = NodeOutcome::kExited;
    st.exit_code = leader.si_status;
    st.reason = "exited with code " + std::to_string(st.exit_code);
  } else {
    st.outcome = NodeOutcome::kSignaled;
    st.signal = leader.si_status;
    st.reason =
        "killed by signal " + std::to_string(st.signal) + " (" + SignalName(st.signal) + ")";
  }
  st.terminated = terminating;
  if (terminating) st.reason += " after a terminate request";
  return st;
}

CommandSupervision::CommandSupervision(const NodePaths& p, const ShimSpec& spec, pid_t group,
                                       const NodeLog* log, std::string injected)
    : paths_(p),
      node_index_(spec.node.node_index),
      group_(group),
      log_(log),
      fault_(spec.fault),
      injected_(std::move(injected)) {}

void CommandSupervision::Started(int64_t now_mono_ms) {
  started_ = true;
  faults_.emplace(fault_, now_mono_ms);
  // A request that came before: its group exists now (setsid came before exec).
  if (terminating_) ::kill(-group_, SIGTERM);
}

void CommandSupervision::End() {
  if (!throttle_) return;
  if (throttle_->stopped()) ::kill(-group_, SIGCONT);
  (*log_)("slow node: " + std::to_string(throttle_->stops()) + " stops, continued for good");
  throttle_.reset();
}

void CommandSupervision::Terminate(int64_t grace_ms, int64_t now_mono_ms) {
  End();
  if (!terminating_) {
    terminating_ = true;
    (*log_)("terminate requested: SIGTERM to process group " + std::to_string(group_) + ", grace " +
            std::to_string(grace_ms) + " ms");
    ::kill(-group_, SIGTERM);
  }
  const int64_t deadline = now_mono_ms + std::max<int64_t>(0, grace_ms);
  if (!kill_deadline_ || deadline < *kill_deadline_) kill_deadline_ = deadline;
}

void CommandSupervision::TakeFaultRequest(int64_t now_mono_ms) {
  Result<Json> asked = ReadJsonFile(paths_.inject());
  if (!asked.ok()) return;
  // Taken: it is not armed again by a later request.
  (void)::unlink(paths_.inject().c_str());
  fault_ = NodeFaultFromJson(*asked);
  if (started_) faults_.emplace(fault_, now_mono_ms);
  (*log_)("fault requested: " + asked->dump());
}

void CommandSupervision::Tick(int64_t now_mono_ms) {
  if (!terminating_ && faults_ && faults_->Due(now_mono_ms)) {
    const NodeFault& f = faults_->fault();
    const std::string what =
        DescribeInjected(f, node_index_, faults_->step_seen(), faults_->after_ms_seen());
    bool fired = true;
    switch (f.action) {
      case FaultAction::kKill:
        ::kill(-group_, SIGKILL);
        break;
      case FaultAction::kPreempt:
        ::kill(-group_, SIGTERM);
        if (!kill_deadline_ || now_mono_ms + f.grace_ms < *kill_deadline_)
          kill_deadline_ = now_mono_ms + f.grace_ms;
        break;
      case FaultAction::kStop:
        ::kill(-group_, SIGSTOP);
        break;
      case FaultAction::kSlow:
        throttle_.emplace(f.slow_percent, now_mono_ms);
        break;
      case FaultAction::kUploadFail:  // not a signal: given at the start (UploadFailEnv)
      case FaultAction::kNone:
        fired = false;
        break;
    }
    if (fired) {
      (*log_)(what);
      (void)WriteJsonRecord(paths_.fault(), Json{{"injected", what}, {"at_ms", NowMs()}});
      injected_ = what;
    }
  }
  if (throttle_ && !terminating_) {
    if (int sig = throttle_->Due(now_mono_ms); sig != 0) ::kill(-group_, sig);
  }
  if (kill_deadline_ && started_ && now_mono_ms >= *kill_deadline_) {
    (*log_)("grace period over: SIGKILL to process group " + std::to_string(group_));
    ::kill(-group_, SIGKILL);
    kill_deadline_.reset();
  }
}

int CommandSupervision::TimeoutMs(int64_t now_mono_ms) const {
  int timeout = faults_ ? faults_->PollTimeoutMs(now_mono_ms) : -1;
  auto at_most = [&timeout](int ms) { timeout = timeout < 0 ? ms : std::min(timeout, ms); };
  if (throttle_) at_most(throttle_->PollTimeoutMs(now_mono_ms));
  if (kill_deadline_ && started_)
    at_most(static_cast<int>(std::max<int64_t>(0, *kill_deadline_ - now_mono_ms)));
  return timeout;
}

}  // namespace lote::exec
