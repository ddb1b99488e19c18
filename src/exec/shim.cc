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
#include "exec/node_resolve.h"
#include "exec/node_run.h"
#include "exec/proc_util.h"
#include "exec/slurm_placement.h"
#include "exec/stack_dump.h"
#include "exec/ulimits.h"

extern char** environ;

namespace lote::exec {
namespace {

int64_t NowMs() { return SystemClock::Default()->NowMillis(); }
int64_t MonoMs() { return SystemClock::Default()->MonotonicNanos() / 1'000'000; }

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

void KillRemainingDescendants(pid_t leader, const NodeLog& log) {
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
  spec.fenced_devices.clear();  // a container is fenced by its device list
  spec.devices_cgroup_dir.clear();
}

// A bind mount's host folder that does not exist is made (root-owned), as
// Docker does for an ECS host volume; podman would refuse it ("statfs: no
// such file or directory"), and does when it cannot be made.
void MakeBindMountSources(const ContainerRun& c, const NodeLog& log) {
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

int Finish(const NodePaths& p, const StatusRecord& st, const NodeLog& log, ShimMode mode) {
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
// placement's variables, the job's user resolved on this node
// (ResolveJobUser: one missing here is the job's own error) and the rlimits
// checked against it. A refusal is the node's start failure (returned), a
// lowered limit a notice.
std::optional<StatusRecord> ApplyPlacement(ShimSpec& spec, const NodeLog& log) {
  if (spec.placement != "slurm") return std::nullopt;
  MergeEnv(&spec.env, SlurmPlacementEnv(OwnEnvironment(), spec.node.node_index, spec.multi_node,
                                        spec.main_node_index));
  const std::string host = HostName();
  std::vector<std::string> warnings;
  // getent, not getpwnam: this runner may be the statically linked one.
  if (Status s = ResolveJobUser(&spec, ::geteuid(), host, &warnings, ResolveUserWithGetent);
      !s.ok())
    return StartFailure(s.message(), /*bad_command=*/s.IsInvalidArgument());
  for (const std::string& w : warnings) log("notice: " + w + " (on " + host + ")");
  const bool can_raise = HasEffectiveCapability(CAP_SYS_RESOURCE);
  for (ShimRlimit& r : spec.rlimits) {
    struct rlimit cur;
    ::getrlimit(r.resource, &cur);
    std::string warning;
    Result<ShimRlimit> checked =
        ResolveRlimit(Ulimit{r.name, r.soft, r.hard}, cur, can_raise, spec.emulation, &warning);
    if (!checked.ok()) return StartFailure(checked.status().message() + " (on " + host + ")");
    if (!warning.empty()) log("notice: " + warning + " (on " + host + ")");
    r = *checked;
  }
  return std::nullopt;
}

// The stack dumps of this node's command (stack_dump.h), asked in dump.json:
// SIGUSR2 from the local backend, or found by the runner's poll on a node the
// server cannot signal (Slurm: a signal for a step reaches every process of
// it, the command's too, so requests come as files only). A child
// of the runner collects them (gdb takes seconds; supervision goes on) and
// writes dump.txt whole (the backend waits for it); the runner reaps it as
// any other child.
void StartStackDump(const NodePaths& p, pid_t group, const std::string& output_path,
                    const NodeLog& log) {
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
  NodeLog log(p.shim_log(), "shim[" + std::to_string(::getpid()) + "]");

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

  auto spec_or = ReadShimSpec(p.spec());
  if (!spec_or.ok()) {
    return Finish(p, StartFailure("cannot read the node's spec: " + spec_or.status().ToString()),
                  log, mode);
  }
  ShimSpec& spec = *spec_or;
  if (std::optional<StatusRecord> refused = ApplyPlacement(spec, log)) {
    return Finish(p, *refused, log, mode);
  }
  std::string injected;
  if (spec.fault.action == FaultAction::kUploadFail) {  // lote train obeys the variables
    MergeEnv(&spec.env, UploadFailEnv(spec.fault));
    injected = DescribeInjected(spec.fault, spec.node.node_index, 0, -1);
    (void)WriteJsonRecord(p.fault(), Json{{"injected", injected}, {"at_ms", NowMs()}});
    log(injected);
  }
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  int sig_fd = ::signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
  if (spec.container) {
    MakeBindMountSources(*spec.container, log);
    PrepareContainer(spec, p.container_id());
  }

  // The folders the command needs are made here, off the server's launch path.
  ForkedCommand command = ForkCommand(p, spec, log);
  if (command.failed) {
    command.failed->injected = injected;
    return Finish(p, *command.failed, log, mode);
  }
  const pid_t child = command.pid;
  const std::string& start_error = command.start_error;
  // It exec'd (the command runs from then: the real start), or failed first.
  const int64_t started_at_ms = start_error.empty() ? command.started_at_ms : command.forked_at_ms;
  CommandSupervision supervision(p, spec, child, &log, injected);
  if (start_error.empty()) supervision.Started(MonoMs());

  // Supervise until the command (the group leader) exits.
  // On a node the server cannot signal (Slurm), requests are files it looks for.
  const bool poll_requests = spec.placement == "slurm";
  const std::string output_path = spec.output_path.empty() ? p.default_output() : spec.output_path;
  // The command's end wakes the poll through its pidfd, not only through
  // SIGCHLD: a thread this process did not start (a library's, before main)
  // does not block SIGCHLD, and the kernel may hand the signal to it.
  const int child_fd = PidfdOpen(child);
  while (true) {
    siginfo_t info{};
    if (::waitid(P_PID, child, &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == child) {
      break;
    }
    int timeout = supervision.TimeoutMs(MonoMs());
    if (poll_requests) timeout = timeout < 0 ? kRequestPollMs : std::min(timeout, kRequestPollMs);
    struct pollfd pfds[2] = {{sig_fd, POLLIN, 0}, {child_fd, POLLIN, 0}};
    int r = ::poll(pfds, child_fd >= 0 ? 2 : 1, timeout);
    if (r < 0 && errno != EINTR) {
      log(std::string("poll: ") + std::strerror(errno));
      ::usleep(100'000);
    }
    if (poll_requests && !supervision.terminating() && start_error.empty()) {
      if (FileExists(p.dump_request())) StartStackDump(p, child, output_path, log);
      if (FileExists(p.inject())) supervision.TakeFaultRequest(MonoMs());
    }
    supervision.Tick(MonoMs());
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
        supervision.TakeFaultRequest(MonoMs());
        continue;
      }
      supervision.Terminate(ReadGraceMs(p, spec.default_grace_ms), MonoMs());
    }
  }

  if (child_fd >= 0) ::close(child_fd);
  supervision.End();  // the group's leftovers, if any, must not stay stopped
  siginfo_t leader_info{};
  ::waitid(P_PID, child, &leader_info, WEXITED | WNOWAIT);
  // The real stop: the command has exited (its group's leftovers are
  // cleaned up below).
  const int64_t stopped_at_ms = NowMs();
  const bool exited = leader_info.si_code == CLD_EXITED;
  // podman killed leaves its container behind.
  if (spec.container && (!exited || supervision.terminating())) {
    if (Status s = RemoveContainer(*spec.container); !s.ok()) log(s.message());
  }
  std::optional<ContainerFailure> container_failure;
  if (spec.container && exited)
    container_failure =
        ClassifyPodmanExit(leader_info.si_status, Tail(spec.output_path, command.output_start));
  KillRemainingDescendants(child, log);
  if (!command.cgroup_dir.empty()) RemoveNodeCgroup(command.cgroup_dir);
  if (!command.devices_cgroup_dir.empty()) RemoveDeviceFence(command.devices_cgroup_dir);
  StatusRecord st = CommandOutcome(leader_info, start_error, supervision.terminating());
  if (start_error.empty() && container_failure) {
    st.outcome = NodeOutcome::kStartFailed;
    st.exit_code = leader_info.si_status;
    st.bad_command = container_failure->users_fault;
    st.reason = container_failure->reason;
    if (supervision.terminating()) st.reason += " after a terminate request";
  }
  st.started_at_ms = started_at_ms;
  st.stopped_at_ms = stopped_at_ms;
  st.injected = supervision.injected();
  if (spec.container) {
    if (std::optional<PullPhase> pull =
            PullPhaseOf(ReadPart(spec.output_path, command.output_start, 64, false),
                        st.started_at_ms, ModifiedAtMs(p.container_id()), st.stopped_at_ms)) {
      st.pull_started_at_ms = pull->started_at_ms;
      st.pull_stopped_at_ms = pull->stopped_at_ms;
    }
  }
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
