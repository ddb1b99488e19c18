#include "exec/shim.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <poll.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/files.h"
#include "exec/cgroup.h"
#include "exec/container.h"
#include "exec/node_fault.h"
#include "exec/node_files.h"
#include "exec/proc_util.h"
#include "exec/slurm_placement.h"
#include "exec/stack_dump.h"
#include "exec/ulimits.h"

extern char** environ;

namespace lote::exec {
namespace {

int64_t NowMs() { return SystemClock::Default()->NowMillis(); }
int64_t MonoMs() { return SystemClock::Default()->MonotonicNanos() / 1'000'000; }

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

// shim.log: what did not go the usual way (a refusal, a failed step, a
// terminate request, a grace period running out). Created on the first line,
// so a node that simply runs costs no file for it.
class ShimLog {
 public:
  explicit ShimLog(std::string path) : path_(std::move(path)) {}
  ~ShimLog() {
    if (fd_ >= 0) ::close(fd_);
  }
  void operator()(const std::string& msg) const {
    if (fd_ < 0) fd_ = ::open(path_.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ >= 0)
      WriteAll(fd_, std::to_string(NowMs()) + " shim[" + std::to_string(::getpid()) + "]: " + msg +
                        "\n");
  }

 private:
  std::string path_;
  mutable int fd_ = -1;
};

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

// In the forked child: report a setup failure to the parent (it becomes the
// node's reason; the job's output holds only what the command writes), exit.
[[noreturn]] void ChildFail(int err_fd, const std::string& what) {
  std::string msg = what + ": " + std::strerror(errno);
  WriteAll(err_fd, msg);
  ::_exit(127);
}

// Reaps every exited child except `leader` (orphans that came back to this
// subreaper), without a scan of /proc: waitid(WNOWAIT) peeks at one exited
// child at a time. Stops at the leader, which must stay unreaped while its
// process group may still be signalled.
void ReapOrphans(pid_t leader) {
  while (true) {
    siginfo_t info{};
    if (::waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) != 0) return;  // ECHILD
    if (info.si_pid == 0 || info.si_pid == leader) return;
    int ignored;
    ::waitpid(info.si_pid, &ignored, 0);
  }
}

void KillRemainingDescendants(pid_t leader, const ShimLog& log) {
  // The leader is a zombie here, so its pid (= the group id) cannot be reused.
  ::kill(-leader, SIGKILL);
  int status = 0;
  while (::waitpid(leader, &status, 0) < 0 && errno == EINTR) {
  }
  // Everything else: orphans reparented to this subreaper, and what they
  // started. Usually there is nothing: the first waitpid says ECHILD.
  int64_t deadline = MonoMs() + 5000;
  while (MonoMs() < deadline) {
    bool reaped = false;
    while (true) {
      pid_t r = ::waitpid(-1, &status, WNOHANG);
      if (r > 0) {
        reaped = true;
        continue;
      }
      if (r < 0 && errno == EINTR) continue;
      if (r < 0 && errno == ECHILD) return;  // no child left
      break;                                 // children remain, none exited yet
    }
    for (pid_t child : ListChildPids(::getpid())) {
      ::kill(-child, SIGKILL);  // if it leads a group of its own
      ::kill(child, SIGKILL);
    }
    if (!reaped) ::usleep(10'000);
  }
  log("some descendants did not exit within 5 s of SIGKILL");
}

// How often a runner on a node the server cannot signal (Slurm) looks for
// dump.json and inject.json.
constexpr int kRequestPollMs = 250;

constexpr char kHostPath[] = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

// Container mode: the command becomes `podman run ...` (container.h), with the
// job's variables passed by name from podman's environment and the user,
// rlimits and limits given to podman rather than applied here.
void PrepareContainer(ShimSpec& spec, const std::string& cid_file) {
  const ContainerRun& c = *spec.container;
  PodmanRunSpec run;
  run.container = c;
  run.cid_file = cid_file;
  run.command = spec.argv;
  run.user = spec.container_user;
  run.memory_mib = spec.container_memory_mib;
  run.vcpu_milli = spec.container_vcpu_milli;
  bool has_path = false;
  for (const std::string& kv : spec.env) {
    run.env_keys.push_back(kv.substr(0, kv.find('=')));
    has_path = has_path || kv.rfind("PATH=", 0) == 0;
  }
  for (const ShimRlimit& r : spec.rlimits) run.ulimits.push_back({r.name, r.soft, r.hard});
  struct rlimit nofile, nproc;
  ::getrlimit(RLIMIT_NOFILE, &nofile);
  ::getrlimit(RLIMIT_NPROC, &nproc);
  auto limit = [](rlim_t v, int64_t cap) {
    return v == RLIM_INFINITY ? cap : std::min<int64_t>(static_cast<int64_t>(v), cap);
  };
  // podman lowers its own NPROC hard limit to 32768 (container.h).
  const ContainerUlimit host_nofile{"nofile", limit(nofile.rlim_cur, 1 << 20),
                                    limit(nofile.rlim_max, 1 << 20)};
  const ContainerUlimit host_nproc{"nproc", limit(nproc.rlim_cur, 32768),
                                   limit(nproc.rlim_max, 32768)};
  spec.argv = {"podman"};
  for (std::string& a : PodmanRunArgs(run, host_nofile, host_nproc)) spec.argv.push_back(a);
  if (!c.containers_conf.empty()) spec.env.push_back("CONTAINERS_CONF=" + c.containers_conf);
  if (!c.registries_conf.empty())
    spec.env.push_back("CONTAINERS_REGISTRIES_CONF=" + c.registries_conf);
  if (!c.auth_file.empty()) spec.env.push_back("REGISTRY_AUTH_FILE=" + c.auth_file);
  if (!has_path) spec.env.push_back("PATH=" + std::string(kHostPath));
  spec.rlimits.clear();
  spec.uid.reset();
  spec.cgroup_dir.clear();
}

// A bind mount's host folder that does not exist is made (root-owned), as
// Docker does for an ECS host volume; podman would refuse it ("statfs: no
// such file or directory"), and does when it cannot be made.
void MakeBindMountSources(const ContainerRun& c, const ShimLog& log) {
  for (const ContainerMount& m : c.mounts) {
    if (m.source.empty() || m.source[0] != '/' || FileExists(m.source)) continue;
    if (Status s = MakeDirs(m.source); !s.ok()) log("volume " + m.source + ": " + s.message());
  }
}

// Of the bytes of `path` from `offset` on, at most `max` from the start of
// them (`from_end` false) or from their end.
std::string ReadPart(const std::string& path, off_t offset, off_t max, bool from_end) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  struct stat st;
  std::string out;
  if (::fstat(fd, &st) == 0) {
    off_t from = from_end ? std::max<off_t>(offset, st.st_size - max) : offset;
    out.resize(static_cast<size_t>(std::clamp<off_t>(st.st_size - from, 0, max)));
    ssize_t n = ::pread(fd, out.data(), out.size(), from);
    out.resize(n > 0 ? static_cast<size_t>(n) : 0);
  }
  ::close(fd);
  return out;
}

// The end of `path` from `offset` on (at most 4 KiB).
std::string Tail(const std::string& path, off_t offset) {
  return ReadPart(path, offset, 4096, true);
}

// When `path` was last written (ms since the epoch); 0 if it does not exist.
int64_t ModifiedAtMs(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return 0;
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000 + st.st_mtim.tv_nsec / 1'000'000;
}

// The runner's exit status as a task (ShimMode::kTask): the command's own.
int TaskExitStatus(const StatusRecord& st) {
  switch (st.outcome) {
    case NodeOutcome::kExited:
      return st.exit_code;
    case NodeOutcome::kSignaled:
      return 128 + st.signal;
    default:
      return st.bad_command ? 127 : 1;
  }
}

int Finish(const NodePaths& p, const StatusRecord& st, const ShimLog& log, ShimMode mode) {
  Status s = WriteJsonRecord(p.status(), ToJson(st));
  if (!s.ok()) {
    log("cannot record the outcome: " + s.ToString());
    return 1;
  }
  return mode == ShimMode::kTask ? TaskExitStatus(st) : 0;
}

std::map<std::string, std::string> OwnEnvironment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string kv = *e;
    const size_t eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return env;
}

// On a node the server cannot see (ShimSpec::placement "slurm"): the
// placement's variables, and the rlimits checked against this node. A
// refused limit is the node's start failure (returned), a lowered one a notice.
std::optional<std::string> ApplyPlacement(ShimSpec& spec, const ShimLog& log) {
  if (spec.placement != "slurm") return std::nullopt;
  MergeEnv(&spec.env, SlurmPlacementEnv(OwnEnvironment(), spec.node.node_index, spec.multi_node,
                                        spec.main_node_index));
  char host[256] = "this node";
  ::gethostname(host, sizeof(host) - 1);
  const bool can_raise = HasEffectiveCapability(CAP_SYS_RESOURCE);
  for (ShimRlimit& r : spec.rlimits) {
    struct rlimit cur;
    ::getrlimit(r.resource, &cur);
    std::string warning;
    Result<ShimRlimit> checked =
        ResolveRlimit(Ulimit{r.name, r.soft, r.hard}, cur, can_raise, spec.emulation, &warning);
    if (!checked.ok()) return checked.status().message() + " (on " + host + ")";
    if (!warning.empty()) log("notice: " + warning + " (on " + std::string(host) + ")");
    r = *checked;
  }
  return std::nullopt;
}

// Fires the fault the job asked for on this node (node_fault.h) at the
// command's process group, records it in fault.json and shim.log, and
// returns the sentence for status.json. A preemption sets `kill_deadline`; a
// slow node starts `throttle` (its turns are the supervise loop's).
std::string InjectFault(const FaultWatch& watch, const NodePaths& p, int32_t node_index,
                        pid_t group, std::optional<int64_t>* kill_deadline,
                        std::optional<Throttle>* throttle, const ShimLog& log) {
  const NodeFault& f = watch.fault();
  const std::string what =
      DescribeInjected(f, node_index, watch.step_seen(), watch.after_ms_seen());
  switch (f.action) {
    case FaultAction::kKill:
      ::kill(-group, SIGKILL);
      break;
    case FaultAction::kPreempt:
      ::kill(-group, SIGTERM);
      if (!*kill_deadline || MonoMs() + f.grace_ms < **kill_deadline)
        *kill_deadline = MonoMs() + f.grace_ms;
      break;
    case FaultAction::kStop:
      ::kill(-group, SIGSTOP);
      break;
    case FaultAction::kSlow:
      throttle->emplace(f.slow_percent, MonoMs());
      break;
    case FaultAction::kUploadFail:  // not a signal: given at the start (UploadFailEnv)
    case FaultAction::kNone:
      return "";
  }
  log(what);
  (void)WriteJsonRecord(p.fault(), Json{{"injected", what}, {"at_ms", NowMs()}});
  return what;
}

// The stack dumps of this node's command (stack_dump.h), asked in dump.json:
// SIGUSR2 from the local backend, or found by the runner's poll on a node the
// server cannot signal (Slurm: a signal for a step reaches every process of
// it, the command's too, so requests come as files only). A child
// of the runner collects them (gdb takes seconds; supervision goes on) and
// writes dump.txt whole (the backend waits for it); the runner reaps it as
// any other child.
void StartStackDump(const NodePaths& p, pid_t group, const std::string& output_path,
                    const ShimLog& log) {
  Result<Json> asked = ReadJsonFile(p.dump_request());
  if (!asked.ok()) return;
  (void)::unlink(p.dump_request().c_str());
  const int64_t timeout_ms = asked->value("timeout_ms", int64_t{60'000});
  const pid_t pid = ::fork();
  if (pid < 0) {
    log(std::string("stack dump: fork: ") + std::strerror(errno));
    return;
  }
  if (pid > 0) {
    log("stack dump asked: collecting in process " + std::to_string(pid));
    return;
  }
  // The runner's blocked signals would be gdb's too (a mask survives exec),
  // and gdb waits for its inferiors' SIGCHLD.
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  const std::string dump = DumpNodeStacks(group, output_path, timeout_ms);
  (void)WriteFileAtomic(p.dump_result(), dump, 0644);
  ::_exit(0);
}

int64_t ReadGraceMs(const NodePaths& p, int64_t default_ms) {
  auto req = ReadTerminateRequest(p.terminate());
  if (!req.ok()) return default_ms;
  return std::max<int64_t>(0, req->grace_ms);
}

}  // namespace

int RunExecShim(const std::string& node_dir, ShimMode mode) {
  NodePaths p{node_dir};
  // Signals arrive through a signalfd; block them before anything else so a
  // terminate request sent early is never lost.
  sigset_t mask;
  sigemptyset(&mask);
  for (int s : {SIGCHLD, SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2}) sigaddset(&mask, s);
  ::sigprocmask(SIG_BLOCK, &mask, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  ShimLog log(p.shim_log());

  int lock_fd = ::open(p.lock().c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd < 0 || ::flock(lock_fd, LOCK_EX | LOCK_NB) != 0) {
    log(std::string("another supervisor holds the node lock (or it cannot be taken: ") +
        std::strerror(errno) + "); not starting the command");
    return 75;
  }
  if (FileExists(p.status())) {
    log("the node already has an outcome (status.json); not starting the command");
    Result<StatusRecord> had = ReadStatusRecord(p.status());
    return mode == ShimMode::kTask && had.ok() ? TaskExitStatus(*had) : 0;
  }
  auto self = CurrentIdentity(::getpid());
  if (!self.ok()) {
    log("cannot read own identity: " + self.status().ToString());
    return 1;
  }
  if (Status s = WriteJsonRecord(p.shim(), ToJson(ProcessRecord{*self, NowMs()})); !s.ok()) {
    log("cannot write shim.json: " + s.ToString());
    return 1;
  }

  StatusRecord st;
  auto spec_or = ReadShimSpec(p.spec());
  if (!spec_or.ok()) {
    st.outcome = NodeOutcome::kStartFailed;
    st.reason = "cannot read the node's spec: " + spec_or.status().ToString();
    st.stopped_at_ms = NowMs();
    return Finish(p, st, log, mode);
  }
  ShimSpec& spec = *spec_or;
  if (std::optional<std::string> refused = ApplyPlacement(spec, log)) {
    st.outcome = NodeOutcome::kStartFailed;
    st.reason = *refused;
    st.stopped_at_ms = NowMs();
    return Finish(p, st, log, mode);
  }
  if (spec.fault.action == FaultAction::kUploadFail) {  // lote train obeys the variables
    MergeEnv(&spec.env, UploadFailEnv(spec.fault));
    st.injected = DescribeInjected(spec.fault, spec.node.node_index, 0, -1);
    (void)WriteJsonRecord(p.fault(), Json{{"injected", st.injected}, {"at_ms", NowMs()}});
    log(st.injected);
  }
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  int sig_fd = ::signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);

  // The folders the command needs are made here, off the server's launch path.
  const std::string out_parent = spec.output_path.substr(0, spec.output_path.rfind('/'));
  if (!out_parent.empty() && out_parent != node_dir) {
    if (Status s = MakeDirs(out_parent); !s.ok()) {
      st.outcome = NodeOutcome::kStartFailed;
      st.reason = "cannot create the output folder: " + s.message();
      st.stopped_at_ms = NowMs();
      return Finish(p, st, log, mode);
    }
  }
  // The job's output may hold secrets: the server's user alone reads it.
  int out_fd = ::open(spec.output_path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
  if (out_fd < 0) {
    st.outcome = NodeOutcome::kStartFailed;
    st.reason = "cannot open the output file " + spec.output_path + ": " + std::strerror(errno);
    st.stopped_at_ms = NowMs();
    return Finish(p, st, log, mode);
  }
  // lote's notices go to the supervisor's log, never into the job's output
  // (an AWS log stream holds only the container's output).
  for (const auto& n : spec.notices) log("notice: " + n);

  std::string cgroup_dir = spec.cgroup_dir;
  if (!cgroup_dir.empty()) {
    Status s =
        PrepareNodeCgroup(cgroup_dir, spec.memory_max_bytes, spec.cpu_quota_us, spec.cpu_period_us);
    if (!s.ok()) {
      log("cgroup setup failed, memory/vCPU limits are NOT enforced: " + s.ToString());
      cgroup_dir.clear();
    }
  }

  if (Status s = MakeCommandDir(spec.working_dir, spec.uid, spec.gid); !s.ok()) {
    std::string msg = "working directory: " + s.message();
    st.outcome = NodeOutcome::kStartFailed;
    st.reason = msg;
    st.stopped_at_ms = NowMs();
    return Finish(p, st, log, mode);
  }

  if (spec.container) {
    MakeBindMountSources(*spec.container, log);
    PrepareContainer(spec, p.container_id());
  }
  auto exe = spec.container ? ResolveExecutable("podman", {"PATH=" + std::string(kHostPath)})
                            : ResolveExecutable(spec.argv[0], spec.env);
  if (!exe && spec.container) {
    st.outcome = NodeOutcome::kStartFailed;
    st.reason = "CannotStartContainerError: podman is not installed on this host (" +
                std::string(kHostPath) + "); install scripts/deps/containers.txt";
    st.stopped_at_ms = NowMs();
    return Finish(p, st, log, mode);
  }
  if (!exe) {
    std::string msg = "command '" + spec.argv[0] + "' was not found in the job's PATH";
    st.outcome = NodeOutcome::kStartFailed;
    st.bad_command = true;
    st.exit_code = 127;
    st.reason = msg;
    st.stopped_at_ms = NowMs();
    return Finish(p, st, log, mode);
  }
  std::vector<char*> argv;
  for (const auto& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (const auto& e : spec.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  std::vector<gid_t> groups(spec.groups.begin(), spec.groups.end());
  std::string cgroup_procs = cgroup_dir.empty() ? "" : cgroup_dir + "/cgroup.procs";

  int go_pipe[2];
  int err_pipe[2];
  if (::pipe2(go_pipe, O_CLOEXEC) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0) {
    log(std::string("pipe: ") + std::strerror(errno));
    return 1;
  }
  int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  const off_t output_start = ::lseek(out_fd, 0, SEEK_END);
  pid_t child = ::fork();
  if (child < 0) {
    st.outcome = NodeOutcome::kStartFailed;
    st.reason = std::string("fork failed: ") + std::strerror(errno);
    st.stopped_at_ms = NowMs();
    return Finish(p, st, log, mode);
  }
  if (child == 0) {
    // The command's process. Single-threaded parent, so plain calls are safe.
    ::close(go_pipe[1]);
    ::close(err_pipe[0]);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::signal(SIGPIPE, SIG_DFL);
    ::prctl(PR_SET_CHILD_SUBREAPER, 0);
    if (::setsid() < 0) ChildFail(err_pipe[1], "setsid");
    if (::dup2(devnull, 0) < 0 || ::dup2(out_fd, 1) < 0 || ::dup2(out_fd, 2) < 0) {
      ChildFail(err_pipe[1], "redirecting stdin/stdout/stderr");
    }
    if (!cgroup_procs.empty()) {
      int fd = ::open(cgroup_procs.c_str(), O_WRONLY | O_CLOEXEC);
      if (fd < 0 || ::write(fd, "0", 1) != 1)
        ChildFail(err_pipe[1], "joining cgroup " + cgroup_dir);
      ::close(fd);
    }
    for (const auto& r : spec.rlimits) {
      struct rlimit rl;
      rl.rlim_cur = r.soft < 0 ? RLIM_INFINITY : static_cast<rlim_t>(r.soft);
      rl.rlim_max = r.hard < 0 ? RLIM_INFINITY : static_cast<rlim_t>(r.hard);
      if (::setrlimit(r.resource, &rl) != 0) ChildFail(err_pipe[1], "ulimits " + r.name);
    }
    if (spec.uid) {
      if (::setgroups(groups.size(), groups.data()) != 0) ChildFail(err_pipe[1], "setgroups");
      if (::setgid(spec.gid) != 0) ChildFail(err_pipe[1], "setgid " + std::to_string(spec.gid));
      if (::setuid(*spec.uid) != 0) ChildFail(err_pipe[1], "setuid " + std::to_string(*spec.uid));
    }
    if (::chdir(spec.working_dir.c_str()) != 0) {
      ChildFail(err_pipe[1], "working directory " + spec.working_dir);
    }
    char go = 0;
    ssize_t n;
    do {
      n = ::read(go_pipe[0], &go, 1);
    } while (n < 0 && errno == EINTR);
    if (n != 1) ::_exit(126);  // the supervisor died before recording us
    ::execve(exe->c_str(), argv.data(), envp.data());
    ChildFail(err_pipe[1], "exec " + *exe);
  }

  ::close(go_pipe[0]);
  ::close(err_pipe[1]);
  ::close(devnull);
  st.started_at_ms = NowMs();
  auto child_id = CurrentIdentity(child);
  ProcessIdentity cid = child_id.ok() ? *child_id : ProcessIdentity{child, 0, BootId()};
  if (Status s = WriteJsonRecord(p.command(), ToJson(ProcessRecord{cid, st.started_at_ms}));
      !s.ok()) {
    log("cannot write command.json: " + s.ToString());  // the child sees EOF and exits 126
  } else {
    char go = 1;
    WriteAll(go_pipe[1], std::string(1, go));
  }
  ::close(go_pipe[1]);
  std::string start_error;
  char buf[512];
  while (true) {
    ssize_t n = ::read(err_pipe[0], buf, sizeof(buf));
    if (n > 0) {
      start_error.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    break;
  }
  ::close(err_pipe[0]);
  // The error pipe closes on exec (O_CLOEXEC) with nothing in it: the
  // command runs from now, the real start.
  if (start_error.empty()) st.started_at_ms = NowMs();

  // Supervise until the command (the group leader) exits.
  bool terminating = false;
  std::optional<int64_t> kill_deadline;
  FaultWatch faults(spec.fault, MonoMs());
  std::optional<Throttle> throttle;  // a slow node's turns (kSlow)
  // On a node the server cannot signal (Slurm), requests are files it looks for.
  const bool poll_requests = spec.placement == "slurm";
  const std::string output_path = spec.output_path.empty() ? p.default_output() : spec.output_path;
  auto take_fault_request = [&] {
    Result<Json> asked = ReadJsonFile(p.inject());
    if (!asked.ok()) return;
    // Taken: it is not armed again by a later request.
    (void)::unlink(p.inject().c_str());
    faults = FaultWatch(NodeFaultFromJson(*asked), MonoMs());
    log("fault requested: " + asked->dump());
  };
  // A throttled group continues for good: to end (a stopped process does not
  // act on SIGTERM) or when the command has exited.
  auto end_throttle = [&] {
    if (!throttle) return;
    if (throttle->stopped()) ::kill(-child, SIGCONT);
    log("slow node: " + std::to_string(throttle->stops()) + " stops, continued for good");
    throttle.reset();
  };
  while (true) {
    siginfo_t info{};
    if (::waitid(P_PID, child, &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == child) {
      break;
    }
    int timeout = faults.PollTimeoutMs(MonoMs());
    if (poll_requests) timeout = timeout < 0 ? kRequestPollMs : std::min(timeout, kRequestPollMs);
    if (throttle) {
      const int until_turn = throttle->PollTimeoutMs(MonoMs());
      timeout = timeout < 0 ? until_turn : std::min(timeout, until_turn);
    }
    if (kill_deadline) {
      const int until_kill = static_cast<int>(std::max<int64_t>(0, *kill_deadline - MonoMs()));
      timeout = timeout < 0 ? until_kill : std::min(timeout, until_kill);
    }
    struct pollfd pfd {
      sig_fd, POLLIN, 0
    };
    int r = ::poll(&pfd, 1, timeout);
    if (r < 0 && errno != EINTR) {
      log(std::string("poll: ") + std::strerror(errno));
      ::usleep(100'000);
    }
    if (poll_requests && !terminating && start_error.empty()) {
      if (FileExists(p.dump_request())) StartStackDump(p, child, output_path, log);
      if (FileExists(p.inject())) take_fault_request();
    }
    if (!terminating && start_error.empty() && faults.Due(MonoMs())) {
      st.injected =
          InjectFault(faults, p, spec.node.node_index, child, &kill_deadline, &throttle, log);
    }
    if (throttle && !terminating) {
      if (int sig = throttle->Due(MonoMs()); sig != 0) ::kill(-child, sig);
    }
    if (kill_deadline && MonoMs() >= *kill_deadline) {
      log("grace period over: SIGKILL to process group " + std::to_string(child));
      ::kill(-child, SIGKILL);
      kill_deadline.reset();
    }
    if (r <= 0) continue;
    struct signalfd_siginfo si;
    while (::read(sig_fd, &si, sizeof(si)) == static_cast<ssize_t>(sizeof(si))) {
      int sig = static_cast<int>(si.ssi_signo);
      if (sig == SIGCHLD) {
        ReapOrphans(child);  // never the leader here
        continue;
      }
      if (sig == SIGHUP) continue;
      if (sig == SIGUSR2) {  // stack dumps asked for (dump.json)
        StartStackDump(p, child, output_path, log);
        continue;
      }
      if (sig == SIGUSR1) {  // a fault asked for now (inject.json)
        take_fault_request();
        continue;
      }
      int64_t grace = ReadGraceMs(p, spec.default_grace_ms);
      end_throttle();
      if (!terminating) {
        terminating = true;
        log("terminate requested: SIGTERM to process group " + std::to_string(child) + ", grace " +
            std::to_string(grace) + " ms");
        ::kill(-child, SIGTERM);
      }
      int64_t deadline = MonoMs() + grace;
      if (!kill_deadline || deadline < *kill_deadline) kill_deadline = deadline;
    }
  }

  end_throttle();  // the group's leftovers, if any, must not stay stopped
  siginfo_t leader_info{};
  ::waitid(P_PID, child, &leader_info, WEXITED | WNOWAIT);
  // The real stop: the command has exited (its group's leftovers are
  // cleaned up below).
  const int64_t stopped_at_ms = NowMs();
  const bool exited = leader_info.si_code == CLD_EXITED;
  // podman killed leaves its container behind.
  if (spec.container && (!exited || terminating)) {
    if (Status s = RemoveContainer(*spec.container); !s.ok()) log(s.message());
  }
  std::optional<ContainerFailure> container_failure;
  if (spec.container && exited)
    container_failure =
        ClassifyPodmanExit(leader_info.si_status, Tail(spec.output_path, output_start));
  KillRemainingDescendants(child, log);
  if (!cgroup_dir.empty()) {
    int fd = ::open((cgroup_dir + "/cgroup.kill").c_str(), O_WRONLY | O_CLOEXEC);
    if (fd >= 0) {
      WriteAll(fd, "1");
      ::close(fd);
    }
    for (int i = 0; i < 50 && ::rmdir(cgroup_dir.c_str()) != 0 && errno == EBUSY; ++i) {
      ::usleep(20'000);
    }
  }
  st.stopped_at_ms = stopped_at_ms;
  st.terminated = terminating;
  if (spec.container) {
    if (std::optional<PullPhase> pull =
            PullPhaseOf(ReadPart(spec.output_path, output_start, 64, false), st.started_at_ms,
                        ModifiedAtMs(p.container_id()), st.stopped_at_ms)) {
      st.pull_started_at_ms = pull->started_at_ms;
      st.pull_stopped_at_ms = pull->stopped_at_ms;
    }
  }
  if (!start_error.empty()) {
    st.outcome = NodeOutcome::kStartFailed;
    st.exit_code = 127;
    st.bad_command = start_error.rfind("exec ", 0) == 0;  // ChildFail(..., "exec " + path)
    st.reason = "cannot start the command: " + start_error;
  } else if (container_failure) {
    st.outcome = NodeOutcome::kStartFailed;
    st.exit_code = leader_info.si_status;
    st.bad_command = container_failure->users_fault;
    st.reason = container_failure->reason;
  } else if (exited) {
    st.outcome = NodeOutcome::kExited;
    st.exit_code = leader_info.si_status;
    st.reason = "exited with code " + std::to_string(st.exit_code);
  } else {
    st.outcome = NodeOutcome::kSignaled;
    st.signal = leader_info.si_status;
    st.reason =
        "killed by signal " + std::to_string(st.signal) + " (" + SignalName(st.signal) + ")";
  }
  if (terminating) st.reason += " after a terminate request";
  ::close(out_fd);
  return Finish(p, st, log, mode);
}

std::vector<std::string> DefaultShimCommand() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return {};
  std::string self(buf, static_cast<size_t>(n));
  std::string beside = self.substr(0, self.rfind('/') + 1) + "lote-exec-shim";
  if (::access(beside.c_str(), X_OK) == 0) return {beside};
  return {self, "exec-shim"};
}

int ExecShimMain(const std::string& node_dir, const std::string& attempt_dir) {
  if (node_dir.empty() == attempt_dir.empty()) {
    std::fprintf(stderr, "lote exec-shim: give exactly one of --node-dir and --attempt-dir\n");
    return 2;
  }
  if (!node_dir.empty()) return RunExecShim(node_dir, ShimMode::kSupervisor);
  Result<std::string> dir = SlurmNodeDir(attempt_dir, std::getenv("SLURM_NODEID"));
  if (!dir.ok()) {
    std::fprintf(stderr, "lote exec-shim: %s\n", dir.status().message().c_str());
    return 2;
  }
  return RunExecShim(*dir, ShimMode::kTask);
}

}  // namespace lote::exec
