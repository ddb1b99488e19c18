#include "exec/node_agent.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <thread>
#include <unordered_map>

#include "common/clock.h"
#include "common/files.h"
#include "exec/cgroup.h"
#include "exec/node_files.h"
#include "exec/node_run.h"
#include "exec/shim.h"
#include "exec/slurm_placement.h"

namespace lote::exec {
namespace {

constexpr int kAnswerTimeoutS = 10;  // a client's wait for one answer line
// The longest request line (a create holds the node's spec: its environment).
constexpr size_t kMaxRequestBytes = size_t{16} << 20;
constexpr int kReadyTimeoutMs = 10'000;

int64_t NowMs() { return SystemClock::Default()->NowMillis(); }
int64_t MonoMs() { return SystemClock::Default()->MonotonicNanos() / 1'000'000; }
std::string ErrnoText() { return std::strerror(errno); }

bool SendAll(int fd, const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    ssize_t n = ::send(fd, s.data() + done, s.size() - done, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    done += static_cast<size_t>(n);
  }
  return true;
}

void WriteFd(int fd, const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    ssize_t n = ::write(fd, s.data() + done, s.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

// The signals of a supervisor (shim.cc blocks the same set): blocked in the
// agent, so a child it forks starts with them blocked and a SIGTERM or
// SIGUSR1 sent as soon as the launch is answered waits for its signalfd.
sigset_t AgentSignals() {
  sigset_t mask;
  sigemptyset(&mask);
  for (int s : {SIGCHLD, SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2}) sigaddset(&mask, s);
  return mask;
}

// agent.log: what did not go the usual way; created on the first line.
class AgentLog {
 public:
  explicit AgentLog(std::string path) : path_(std::move(path)) {}
  ~AgentLog() {
    if (fd_ >= 0) ::close(fd_);
  }
  void operator()(const std::string& msg) {
    if (fd_ < 0) fd_ = ::open(path_.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (fd_ >= 0)
      WriteFd(fd_, std::to_string(NowMs()) + " agent[" + std::to_string(::getpid()) + "]: " + msg +
                       "\n");
  }

 private:
  std::string path_;
  int fd_ = -1;
};

// A folder the agent may start a supervisor for: <home>/jobs/<...>, no "..".
bool IsNodeFolder(const std::string& home, const std::string& dir) {
  const std::string prefix = home + "/jobs/";
  return dir.size() > prefix.size() && dir.compare(0, prefix.size(), prefix) == 0 &&
         dir.find("/..") == std::string::npos && dir.find('\n') == std::string::npos;
}

// The forked child: a node's supervisor, as if started on its own.
[[noreturn]] void BecomeSupervisor(const std::string& node_dir) {
  ::closefrom(3);  // the agent's lock, socket and connections are not the node's
  ::setsid();
  ::_exit(RunExecShim(node_dir, ShimMode::kSupervisor));
}

// /proc/<pid>/stat's process group and session (fields 5 and 6); {0, 0}
// when it cannot be read.
std::pair<pid_t, pid_t> GroupAndSession(pid_t pid) {
  Result<std::string> stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  if (!stat.ok()) return {0, 0};
  const size_t paren = stat->rfind(')');
  if (paren == std::string::npos) return {0, 0};
  char state = 0;
  int ppid = 0, pgrp = 0, session = 0;
  if (std::sscanf(stat->c_str() + paren + 1, " %c %d %d %d", &state, &ppid, &pgrp, &session) != 4)
    return {0, 0};
  return {pgrp, session};
}

// The value of `key` in /proc/<pid>/environ (the environment it was started
// with); nullopt when absent or unreadable.
std::optional<std::string> StartEnvironmentValue(pid_t pid, const std::string& key) {
  Result<std::string> env = ReadFile("/proc/" + std::to_string(pid) + "/environ");
  if (!env.ok()) return std::nullopt;
  const std::string prefix = key + "=";
  size_t start = 0;
  while (start < env->size()) {
    size_t end = env->find('\0', start);
    if (end == std::string::npos) end = env->size();
    if (env->compare(start, prefix.size(), prefix) == 0)
      return env->substr(start + prefix.size(), end - start - prefix.size());
    start = end + 1;
  }
  return std::nullopt;
}

// The value of `key` in a "K=V" list.
std::optional<std::string> EnvValue(const std::vector<std::string>& env, const std::string& key) {
  const std::string prefix = key + "=";
  for (const std::string& kv : env)
    if (kv.rfind(prefix, 0) == 0) return kv.substr(prefix.size());
  return std::nullopt;
}

// The keeper's part in a termination once the agent is gone: each command
// whose node has a terminate.json past its grace period has its process group
// killed (SIGKILL: the request's SIGTERM was the agent's or the backend's to
// send). Returns how long to wait before looking again (at most a second: a
// request may be written later).
int64_t KillOverdueCommands(const std::map<std::pair<pid_t, uint64_t>, NodePaths>& commands) {
  const int64_t now = NowMs();
  int64_t wait_ms = 1000;
  for (const auto& [command, paths] : commands) {
    Result<TerminateRequest> req = ReadTerminateRequest(paths.terminate());
    if (!req.ok()) continue;
    const int64_t deadline = (req->requested_at_ms > 0 ? req->requested_at_ms : now) +
                             std::max<int64_t>(0, req->grace_ms);
    if (deadline <= now) {
      // Only while it is the command recorded (one the agent ended and reaped
      // before it died may have left its pid to another process); then it is
      // our child, not reaped: its group id is not reused either.
      Result<uint64_t> start = ReadProcStartTime(command.first, /*zombie_is_dead=*/false);
      if (!start.ok() || *start != command.second) continue;
      ::kill(-command.first, SIGKILL);
      ::kill(command.first, SIGKILL);
    } else {
      wait_ms = std::min(wait_ms, deadline - now);
    }
  }
  return std::max<int64_t>(wait_ms, 1);
}

// The keeper: the agent's parent, a child subreaper that only waits. While
// the agent lives its one child is the agent. Once the agent is gone, the
// agent's commands are its children: for each that exits it kills what is
// left of its process group, records the node's outcome (if the agent did
// not) and reaps it; unknown children are only reaped. A command whose
// termination was asked (terminate.json, by the backend, before or after the
// agent died) has its process group killed once the request's grace period
// is over: the agent that would have done it is gone, and so may be the
// server. It ends when it has no child left. Every catchable signal stays
// blocked: it ends by SIGKILL only.
[[noreturn]] void RunKeeper(const std::string& home, pid_t agent) {
  std::map<std::pair<pid_t, uint64_t>, NodePaths> commands;  // the agent's, once it is gone
  bool agent_gone = false;
  while (true) {
    siginfo_t info{};
    // Once the agent is gone and commands remain, a wait that times out: their
    // terminations' deadlines are looked at every second and on every exit.
    const bool timed = agent_gone && !commands.empty();
    if (::waitid(P_ALL, 0, &info, WEXITED | WNOWAIT | (timed ? WNOHANG : 0)) != 0) {
      if (errno == EINTR) continue;
      ::_exit(0);  // ECHILD: nothing left to keep
    }
    if (info.si_pid == 0) {  // timed, and no child has exited
      const int64_t wait_ms = KillOverdueCommands(commands);
      sigset_t chld;
      sigemptyset(&chld);
      sigaddset(&chld, SIGCHLD);  // blocked: pending until taken here
      const struct timespec ts = {static_cast<time_t>(wait_ms / 1000),
                                  static_cast<long>(wait_ms % 1000) * 1'000'000};
      (void)::sigtimedwait(&chld, nullptr, &ts);
      continue;
    }
    const pid_t pid = info.si_pid;
    if (pid == agent) {
      agent_gone = true;
      // The nodes whose outcome the backend has not seen, and their commands.
      const std::string live = home + "/nodes-live";
      if (DIR* d = ::opendir(live.c_str())) {
        while (struct dirent* e = ::readdir(d)) {
          std::optional<NodeKey> key = NodeKeyFromLiveEntry(e->d_name);
          if (!key) continue;
          Result<NodePaths> paths = NodePathsFor(home, *key);
          if (!paths.ok()) continue;
          Result<ProcessRecord> command = ReadProcessRecord(paths->command());
          if (command.ok()) commands[{command->id.pid, command->id.start_time}] = *paths;
        }
        ::closedir(d);
      }
    } else if (agent_gone) {
      Result<uint64_t> start = ReadProcStartTime(pid, /*zombie_is_dead=*/false);
      auto it = start.ok() ? commands.find({pid, *start}) : commands.end();
      if (it != commands.end()) {
        ::kill(-pid, SIGKILL);  // the leader is a zombie: its group id cannot be reused
        const NodePaths& p = it->second;
        if (!FileExists(p.status())) {
          StatusRecord st = CommandOutcome(info, "", FileExists(p.terminate()));
          Result<ProcessRecord> command = ReadProcessRecord(p.command());
          st.started_at_ms = command.ok() ? command->started_at_ms : 0;
          st.stopped_at_ms = NowMs();
          Result<Json> fault = ReadJsonFile(p.fault());
          if (fault.ok() && fault->value("injected", Json()).is_string())
            st.injected = (*fault)["injected"].get<std::string>();
          (void)WriteJsonRecord(p.status(), ToJson(st));
        }
        commands.erase(it);
      }
    }
    int ignored;
    while (::waitpid(pid, &ignored, 0) < 0 && errno == EINTR) {
    }
  }
}

// One node whose command the agent runs as its own child.
struct DirectNode {
  NodePaths paths;
  std::unique_ptr<NodeLog> log;
  ShimSpec spec;
  pid_t pid = 0;
  std::string start_error;  // why it failed before its exec ("" it exec'd)
  int64_t started_at_ms = 0;
  std::string cgroup_dir;
  std::string devices_cgroup_dir;
  std::unique_ptr<CommandSupervision> supervision;
};

class Agent {
 public:
  Agent(std::string home, int listen_fd, int sig_fd, int lock_fd, int64_t idle_exit_ms,
        ProcessIdentity self, ProcessIdentity keeper)
      : home_(std::move(home)),
        paths_(AgentPathsFor(home_)),
        log_(paths_.log()),
        listen_fd_(listen_fd),
        sig_fd_(sig_fd),
        lock_fd_(lock_fd),
        idle_exit_ms_(idle_exit_ms),
        self_(std::move(self)),
        keeper_(std::move(keeper)) {}

  int Serve() {
    int64_t idle_since = MonoMs();
    while (true) {
      std::vector<struct pollfd> fds;
      fds.push_back({listen_fd_, POLLIN, 0});
      fds.push_back({sig_fd_, POLLIN, 0});
      for (const Client& c : clients_)
        fds.push_back({c.fd, static_cast<short>(POLLIN | (c.out.empty() ? 0 : POLLOUT)), 0});
      int r = ::poll(fds.data(), fds.size(), TimeoutMs());
      if (r < 0 && errno != EINTR) {
        log_("poll: " + ErrnoText());
        return 1;
      }
      if (r > 0 && fds[1].revents != 0 && HandleSignals()) return 0;
      const int64_t now = MonoMs();
      for (auto& [pid, node] : nodes_) node.supervision->Tick(now);
      if (r > 0) {
        // Clients first (their indexes in fds), then new connections.
        for (size_t i = clients_.size(); i-- > 0;) {
          const short ev = fds[2 + i].revents;
          if (ev == 0) continue;
          bool keep = true;
          if (ev & (POLLIN | POLLHUP | POLLERR)) keep = ReadRequests(clients_[i]);
          if (keep && (ev & POLLOUT)) keep = Flush(clients_[i]);
          if (!keep) {
            ::close(clients_[i].fd);
            clients_.erase(clients_.begin() + static_cast<std::ptrdiff_t>(i));
          }
        }
        if (fds[0].revents != 0) Accept();
      }
      if (!clients_.empty() || !nodes_.empty()) idle_since = MonoMs();
      if (r == 0 || MonoMs() - last_check_ms_ >= 1000) {
        last_check_ms_ = MonoMs();
        if (!StillOurs()) {  // the home (or its agent folder) was removed
          KillEveryNode();
          return 0;
        }
        if (clients_.empty() && nodes_.empty() && MonoMs() - idle_since >= idle_exit_ms_) return 0;
      }
    }
  }

 private:
  struct Client {
    int fd = -1;
    std::string in;
    std::string out;  // answers and notices not sent yet
    bool watcher = false;
  };

  int TimeoutMs() const {
    int timeout = 1000;
    const int64_t now = MonoMs();
    for (const auto& [pid, node] : nodes_) {
      const int t = node.supervision->TimeoutMs(now);
      if (t >= 0) timeout = std::min(timeout, t);
    }
    return timeout;
  }

  // False once agent.lock at its path is not the file this agent locked.
  bool StillOurs() const {
    struct stat held, now;
    if (::fstat(lock_fd_, &held) != 0 || ::stat(paths_.lock().c_str(), &now) != 0) return false;
    return held.st_dev == now.st_dev && held.st_ino == now.st_ino;
  }

  // The home is gone: no outcome can be recorded nor read again, and no
  // runner will take the nodes over (the keeper finds no nodes-live). Every
  // node's group is killed, a stopped one too (its termination may still be
  // in its grace period); the keeper reaps the leaders once the agent exits.
  void KillEveryNode() {
    for (auto& [pid, node] : nodes_) {
      (*node.log)("the lote home was removed: killing the node's processes");
      ::kill(-pid, SIGKILL);
      ::kill(pid, SIGKILL);
    }
  }

  // True when the agent must stop.
  bool HandleSignals() {
    struct signalfd_siginfo si;
    bool stop = false;
    while (::read(sig_fd_, &si, sizeof(si)) == static_cast<ssize_t>(sizeof(si))) {
      const int sig = static_cast<int>(si.ssi_signo);
      if (sig == SIGCHLD) {
        ReapChildren();
      } else if (sig == SIGTERM || sig == SIGINT || sig == SIGQUIT) {
        stop = true;
      }
    }
    return stop;
  }

  // Every child that has exited: a node's command ends its node; anything
  // else (a container node's supervisor, an orphan that came back to this
  // subreaper) is only reaped.
  void ReapChildren() {
    while (true) {
      siginfo_t info{};
      if (::waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) != 0 || info.si_pid == 0) return;
      auto it = nodes_.find(info.si_pid);
      if (it == nodes_.end()) {
        int ignored;
        ::waitpid(info.si_pid, &ignored, 0);
        continue;
      }
      EndNode(it, info);
    }
  }

  // The leader of a node has exited (not reaped yet: its pid, the group's id,
  // cannot be reused): what is left of the node is killed, the outcome
  // recorded, then the leader reaped and the watchers told.
  void EndNode(std::map<pid_t, DirectNode>::iterator it, const siginfo_t& info) {
    DirectNode& node = it->second;
    const pid_t pid = it->first;
    const int64_t stopped_at_ms = NowMs();
    node.supervision->End();
    ::kill(-pid, SIGKILL);
    KillLeftovers(node, pid);
    if (!node.cgroup_dir.empty()) RemoveNodeCgroup(node.cgroup_dir);
    if (!node.devices_cgroup_dir.empty()) RemoveDeviceFence(node.devices_cgroup_dir);
    // Terminated: asked here, or the backend signalled the command itself
    // (its terminate.json is written first either way).
    const bool terminated = node.supervision->terminating() || FileExists(node.paths.terminate());
    StatusRecord st = CommandOutcome(info, node.start_error, terminated);
    st.started_at_ms = node.started_at_ms;
    st.stopped_at_ms = stopped_at_ms;
    st.injected = node.supervision->injected();
    Finish(node.paths, st, *node.log);
    int ignored;
    while (::waitpid(pid, &ignored, 0) < 0 && errno == EINTR) {
    }
    by_dir_.erase(node.paths.dir);
    nodes_.erase(it);
  }

  // The node's other processes that came back to this subreaper when their
  // parents ended: those in the command's session or process group, and those
  // started with the node's AWS_BATCH_JOB_ID and attempt (a process that left
  // the session with setsid). Killed in rounds, as killing one hands its own
  // children to this process; bounded to 5 s.
  void KillLeftovers(const DirectNode& node, pid_t leader) {
    std::set<pid_t> sessions{leader};
    const std::optional<std::string> job = EnvValue(node.spec.env, "AWS_BATCH_JOB_ID");
    const std::optional<std::string> attempt = EnvValue(node.spec.env, "AWS_BATCH_JOB_ATTEMPT");
    const int64_t deadline = MonoMs() + 5000;
    std::set<pid_t> killed;
    while (MonoMs() < deadline) {
      bool found = false;
      for (pid_t child : ListChildPids(::getpid())) {
        if (child == leader || nodes_.count(child) != 0) continue;
        const auto [group, session] = GroupAndSession(child);
        bool ours =
            sessions.count(session) != 0 || sessions.count(group) != 0 || killed.count(child) != 0;
        if (!ours && job && attempt) {
          ours = StartEnvironmentValue(child, "AWS_BATCH_JOB_ID") == job &&
                 StartEnvironmentValue(child, "AWS_BATCH_JOB_ATTEMPT") == attempt;
        }
        if (!ours) continue;
        found = true;
        sessions.insert(session);
        killed.insert(child);
        ::kill(-child, SIGKILL);  // if it leads a group of its own
        ::kill(child, SIGKILL);
      }
      if (!found) return;
      // Reap those that died (and only those: other nodes' leaders stay).
      for (auto k = killed.begin(); k != killed.end();) {
        int ignored;
        if (::waitpid(*k, &ignored, WNOHANG) != 0) {
          k = killed.erase(k);
        } else {
          ++k;
        }
      }
      if (!killed.empty()) ::usleep(2'000);
    }
    (*node.log)("some descendants did not exit within 5 s of SIGKILL");
  }

  // Records the node's outcome and tells the watchers.
  void Finish(const NodePaths& p, const StatusRecord& st, const NodeLog& log) {
    if (Status s = WriteJsonRecord(p.status(), ToJson(st)); !s.ok())
      log("cannot record the outcome: " + s.ToString());
    for (Client& c : clients_) {
      if (!c.watcher) continue;
      c.out += "end " + p.dir + "\n";
      (void)Flush(c);
    }
  }

  void Accept() {
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) return;
    struct ucred cred {};
    socklen_t len = sizeof(cred);
    const uid_t me = ::geteuid();
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 ||
        (cred.uid != me && cred.uid != 0)) {
      log_("refused a connection of uid " + std::to_string(cred.uid));
      ::close(fd);
      return;
    }
    clients_.push_back(Client{fd, "", "", false});
  }

  // Sends what the client has pending. False: the connection is over.
  bool Flush(Client& c) {
    while (!c.out.empty()) {
      ssize_t n = ::send(c.fd, c.out.data(), c.out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0) {
        if (errno == EINTR) continue;
        return errno == EAGAIN;
      }
      c.out.erase(0, static_cast<size_t>(n));
    }
    return true;
  }

  // Reads what the client sent and answers each whole line. False: the
  // connection is over.
  bool ReadRequests(Client& c) {
    char buf[8192];
    ssize_t n = ::recv(c.fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (n < 0) return errno == EINTR || errno == EAGAIN;
    if (n == 0) return false;
    c.in.append(buf, static_cast<size_t>(n));
    size_t start = 0;
    for (size_t nl; (nl = c.in.find('\n', start)) != std::string::npos; start = nl + 1) {
      const std::string line = c.in.substr(start, nl - start);
      if (line == "watch") {
        c.watcher = true;
        c.out += "watching\n";
        continue;
      }
      c.out += Answer(line) + "\n";
    }
    c.in.erase(0, start);
    if (c.in.size() > kMaxRequestBytes) return false;  // not our protocol
    return Flush(c);
  }

  std::string Answer(const std::string& line) {
    if (line.rfind("hello ", 0) == 0) {
      return "hello " + std::to_string(kNodeAgentProtocol) + " " + std::to_string(::getpid());
    }
    if (line.rfind("launch ", 0) == 0) return Launch(line.substr(7));
    if (line.rfind("create ", 0) == 0) return Create(line.substr(7));
    if (line.rfind("term ", 0) == 0) {
      const size_t sp = line.rfind(' ');
      DirectNode* node = Find(line.substr(5, sp - 5));
      if (node == nullptr) return "err no node of that folder is supervised here";
      node->supervision->Terminate(std::atoll(line.c_str() + sp + 1), MonoMs());
      return "ok";
    }
    if (line.rfind("inject ", 0) == 0) {
      DirectNode* node = Find(line.substr(7));
      if (node == nullptr) return "err no node of that folder is supervised here";
      node->supervision->TakeFaultRequest(MonoMs());
      return "ok";
    }
    return "err unknown request";
  }

  DirectNode* Find(const std::string& dir) {
    auto it = by_dir_.find(dir);
    return it == by_dir_.end() ? nullptr : &nodes_.at(it->second);
  }

  // "create <node folder> <spec JSON>": the node's folder made here
  // (MakeNodeFolder), then launched.
  std::string Create(const std::string& request) {
    const size_t sp = request.find(' ');
    if (sp == std::string::npos) return "err a create request is: create <node folder> <spec>";
    const std::string dir = request.substr(0, sp);
    if (!IsNodeFolder(home_, dir)) return "err not a node folder of " + home_ + "/jobs: " + dir;
    const std::string text = request.substr(sp + 1);
    Result<Json> json = ParseJson(text);
    Result<ShimSpec> spec = json.ok() ? ShimSpecFromJson(*json) : Result<ShimSpec>(json.status());
    if (!spec.ok()) return "err the node's spec: " + spec.status().message();
    const NodePaths p{dir};
    Result<NodePaths> expected = NodePathsFor(home_, spec->node);
    if (!expected.ok() || expected->dir != dir)
      return "err the spec is of node " + spec->node.ToString() + ", not of " + dir;
    if (Status made = MakeNodeFolder(home_, spec->node, p, text); !made.ok()) {
      return made.IsAlreadyExists() ? "exists" : "err " + made.message();
    }
    return Start(dir, std::move(spec));
  }

  // "launch <node folder>": its spec.json read, then started.
  std::string Launch(const std::string& dir) {
    if (!IsNodeFolder(home_, dir)) return "err not a node folder of " + home_ + "/jobs: " + dir;
    return Start(dir, ReadShimSpec(NodePaths{dir}.spec()));
  }

  // The node of `dir` started with `spec` (its folder made, checked a node folder).
  std::string Start(const std::string& dir, Result<ShimSpec> spec) {
    const NodePaths p{dir};
    if (spec.ok() && spec->container) {
      // podman's steps are the supervisor's (shim.cc): one of its own.
      const pid_t pid = ::fork();
      if (pid < 0) return "err fork: " + ErrnoText();
      if (pid == 0) BecomeSupervisor(dir);
      Result<uint64_t> start = ReadProcStartTime(pid, /*zombie_is_dead=*/false);
      return "ok " + std::to_string(pid) + " " + std::to_string(start.ok() ? *start : 0) +
             " supervisor";
    }
    // The claim: shim.json made only if absent, so a node starts once, ever
    // (a launch handed over again after an agent was lost finds it taken).
    ProcessRecord runner{self_, NowMs()};
    runner.keeper = keeper_;
    runner.agent = true;
    if (Status claimed = CreateJsonRecord(p.shim(), ToJson(runner)); !claimed.ok()) {
      return claimed.IsAlreadyExists() ? "taken" : "err " + claimed.message();
    }
    auto log = std::make_unique<NodeLog>(p.shim_log(), "agent[" + std::to_string(::getpid()) + "]");
    if (FileExists(p.status())) {  // a tombstone: the node was declared lost
      (*log)("the node already has an outcome (status.json); not starting the command");
      return "ended";
    }
    if (!spec.ok()) {
      Finish(p, StartFailure("cannot read the node's spec: " + spec.status().ToString()), *log);
      return "ended";
    }
    std::string injected;
    if (spec->fault.action == FaultAction::kUploadFail) {  // lote train obeys the variables
      MergeEnv(&spec->env, UploadFailEnv(spec->fault));
      injected = DescribeInjected(spec->fault, spec->node.node_index, 0, -1);
      (void)WriteJsonRecord(p.fault(), Json{{"injected", injected}, {"at_ms", NowMs()}});
      (*log)(injected);
    }
    ForkedCommand command = ForkCommand(p, *spec, *log);
    if (command.failed) {
      command.failed->injected = injected;
      Finish(p, *command.failed, *log);
      return "ended";
    }
    DirectNode& node = nodes_[command.pid];
    node.paths = p;
    node.log = std::move(log);
    node.pid = command.pid;
    node.start_error = command.start_error;
    // It exec'd (the command runs from then: the real start), or failed
    // first; either way its end comes as SIGCHLD.
    node.started_at_ms = command.start_error.empty() ? command.started_at_ms : command.forked_at_ms;
    node.cgroup_dir = command.cgroup_dir;
    node.devices_cgroup_dir = command.devices_cgroup_dir;
    node.spec = std::move(*spec);
    node.supervision =
        std::make_unique<CommandSupervision>(p, node.spec, command.pid, node.log.get(), injected);
    if (command.start_error.empty()) node.supervision->Started(MonoMs());
    by_dir_[dir] = command.pid;
    return "ok " + std::to_string(command.pid) + " " + std::to_string(command.id.start_time) +
           " direct";
  }

  const std::string home_;
  const AgentPaths paths_;
  AgentLog log_;
  const int listen_fd_;
  const int sig_fd_;
  const int lock_fd_;
  const int64_t idle_exit_ms_;
  const ProcessIdentity self_;
  const ProcessIdentity keeper_;
  int64_t last_check_ms_ = 0;
  std::vector<Client> clients_;
  std::map<pid_t, DirectNode> nodes_;  // by the command's pid
  std::unordered_map<std::string, pid_t> by_dir_;
};

}  // namespace

AgentPaths AgentPathsFor(const std::string& home) { return AgentPaths{home + "/agent"}; }

int RunNodeAgent(const std::string& home, int64_t idle_exit_ms) {
  sigset_t mask = AgentSignals();
  ::sigprocmask(SIG_BLOCK, &mask, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  auto say = [](const std::string& line) { WriteFd(1, line + "\n"); };
  const AgentPaths p = AgentPathsFor(home);
  if (Status s = MakeDirs(p.dir, 0700); !s.ok()) {
    say("error: " + s.message());
    return 1;
  }
  ::chmod(p.dir.c_str(), 0700);
  int lock_fd = ::open(p.lock().c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock_fd < 0) {
    say("error: cannot open " + p.lock() + ": " + ErrnoText());
    return 1;
  }
  if (::flock(lock_fd, LOCK_EX | LOCK_NB) != 0) {
    say("busy");  // another agent serves this home
    return 75;
  }
  // Detach: the starter reaps this process at once; its child, the keeper,
  // is reparented to init and forks the agent, which keeps the lock (the same
  // open file) and listens itself (the socket's peer credentials are its own).
  const pid_t keeper = ::fork();
  if (keeper < 0) {
    say("error: fork: " + ErrnoText());
    return 1;
  }
  if (keeper > 0) ::_exit(0);
  ::setsid();
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  Result<ProcessIdentity> keeper_id = CurrentIdentity(::getpid());
  const pid_t agent = ::fork();
  if (agent < 0) {
    say("error: fork: " + ErrnoText());
    return 1;
  }
  if (agent > 0) {
    ::close(lock_fd);  // the agent alone holds the home's lock
    int devnull = ::open("/dev/null", O_RDWR | O_CLOEXEC);
    if (devnull >= 0) {
      ::dup2(devnull, 0);
      ::dup2(devnull, 1);
      ::dup2(devnull, 2);
    }
    sigset_t all;
    sigfillset(&all);
    ::sigprocmask(SIG_BLOCK, &all, nullptr);
    RunKeeper(home, agent);
  }
  struct sockaddr_un addr {};
  addr.sun_family = AF_UNIX;
  if (p.socket().size() >= sizeof(addr.sun_path)) {
    say("error: the socket path " + p.socket() + " is longer than a Unix socket address allows");
    return 1;
  }
  std::memcpy(addr.sun_path, p.socket().c_str(), p.socket().size() + 1);
  ::unlink(p.socket().c_str());
  int listen_fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd < 0 ||
      ::bind(listen_fd, reinterpret_cast<struct sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::chmod(p.socket().c_str(), 0600) != 0 || ::listen(listen_fd, 128) != 0) {
    say("error: cannot listen on " + p.socket() + ": " + ErrnoText());
    return 1;
  }
  // The agent's orphans (a command's processes whose parent ended) come back
  // to it, so that what is left of a node is killed when it ends.
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  int sig_fd = ::signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
  Result<ProcessIdentity> self = CurrentIdentity(::getpid());
  Status recorded = self.ok() && keeper_id.ok() ? Status::Ok()
                    : self.ok()                 ? keeper_id.status()
                                                : self.status();
  if (recorded.ok()) {
    ProcessRecord record{*self, NowMs()};
    record.keeper = *keeper_id;
    recorded = WriteJsonRecord(p.record(), ToJson(record), 0600);
  }
  if (sig_fd < 0 || !recorded.ok()) {
    say("error: cannot record the agent: " + (recorded.ok() ? ErrnoText() : recorded.message()));
    return 1;
  }
  say("ready");
  int devnull = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (devnull >= 0) {
    ::dup2(devnull, 1);
    ::close(devnull);
  }
  Agent served(home, listen_fd, sig_fd, lock_fd, idle_exit_ms, *self, *keeper_id);
  return served.Serve();
}

// ---- the backend's side ----

NodeAgentClient::~NodeAgentClient() { ::close(fd_); }

Result<std::unique_ptr<NodeAgentClient>> NodeAgentClient::Connect(const std::string& home) {
  const AgentPaths p = AgentPathsFor(home);
  Result<ProcessRecord> rec = ReadProcessRecord(p.record());
  if (!rec.ok()) return Status::NotFound("no node agent recorded in " + p.dir);
  int lock_fd = ::open(p.lock().c_str(), O_RDONLY | O_CLOEXEC);
  if (lock_fd < 0) return Status::NotFound("no node agent lock in " + p.dir);
  const bool held = ::flock(lock_fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  ::close(lock_fd);
  if (!held || !IdentityAlive(rec->id))
    return Status::NotFound("the node agent recorded in " + p.dir + " is gone");
  struct sockaddr_un addr {};
  addr.sun_family = AF_UNIX;
  if (p.socket().size() >= sizeof(addr.sun_path))
    return Status::FailedPrecondition("the node agent's socket path " + p.socket() +
                                      " is too long for a Unix socket");
  std::memcpy(addr.sun_path, p.socket().c_str(), p.socket().size() + 1);
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::Internal("socket: " + ErrnoText());
  if (::connect(fd, reinterpret_cast<struct sockaddr*>(&addr), sizeof(addr)) != 0) {
    Status s =
        Status::NotFound("cannot connect to the node agent at " + p.socket() + ": " + ErrnoText());
    ::close(fd);
    return s;
  }
  struct ucred cred {};
  socklen_t len = sizeof(cred);
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || cred.pid != rec->id.pid) {
    ::close(fd);
    return Status::NotFound("the process at " + p.socket() + " is not the recorded agent (pid " +
                            std::to_string(rec->id.pid) + ")");
  }
  struct timeval tv {
    kAnswerTimeoutS, 0
  };
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  std::unique_ptr<NodeAgentClient> client(new NodeAgentClient(fd, rec->id, rec->keeper));
  std::lock_guard<std::mutex> lock(client->mu_);
  if (!SendAll(fd, "hello " + std::to_string(kNodeAgentProtocol) + "\n"))
    return Status::Unavailable("the node agent closed the connection");
  ASSIGN_OR_RETURN(std::string hello, client->ReadLineLocked());
  const std::string want = "hello " + std::to_string(kNodeAgentProtocol) + " ";
  if (hello.rfind(want, 0) != 0)
    return Status::FailedPrecondition("the node agent (pid " + std::to_string(rec->id.pid) +
                                      ") speaks another protocol: '" + hello + "'");
  return client;
}

Result<std::unique_ptr<NodeAgentClient>> NodeAgentClient::ConnectOrStart(
    const std::string& home, const std::vector<std::string>& runner) {
  {
    Result<std::unique_ptr<NodeAgentClient>> c = Connect(home);
    if (c.ok() || !c.status().IsNotFound()) return c;
  }
  if (runner.empty()) return Status::InvalidArgument("no program to start the node agent with");
  std::vector<std::string> args = runner;
  args.push_back("--agent");
  args.push_back(home);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::string path_env = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
  char* envp[] = {path_env.data(), nullptr};
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return Status::Internal("pipe: " + ErrnoText());
  posix_spawnattr_t attr;
  posix_spawn_file_actions_t fa;
  posix_spawnattr_init(&attr);
  posix_spawn_file_actions_init(&fa);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  for (int s : {SIGTERM, SIGINT, SIGHUP, SIGCHLD, SIGPIPE, SIGQUIT, SIGUSR1, SIGUSR2})
    sigaddset(&defaults, s);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, pipe_fds[1], 1);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addclosefrom_np(&fa, 3);
  pid_t pid = 0;
  int rc = ::posix_spawn(&pid, argv[0], &fa, &attr, argv.data(), envp);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  ::close(pipe_fds[1]);
  if (rc != 0) {
    ::close(pipe_fds[0]);
    return Status::Unavailable("cannot start the node agent " + args[0] + ": " + std::strerror(rc));
  }
  // Its first line: "ready", "busy" (another agent won the race) or why not.
  std::string line;
  const int64_t deadline = MonoMs() + kReadyTimeoutMs;
  while (line.find('\n') == std::string::npos) {
    struct pollfd pfd {
      pipe_fds[0], POLLIN, 0
    };
    const int64_t left = deadline - MonoMs();
    if (left <= 0 || ::poll(&pfd, 1, static_cast<int>(left)) == 0) {
      ::kill(pid, SIGKILL);
      break;
    }
    char buf[256];
    ssize_t n = ::read(pipe_fds[0], buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    line.append(buf, static_cast<size_t>(n));
  }
  ::close(pipe_fds[0]);
  int ignored;
  while (::waitpid(pid, &ignored, 0) < 0 && errno == EINTR) {
  }
  line = line.substr(0, line.find('\n'));
  if (line != "ready" && line != "busy") {
    return Status::Unavailable("the node agent did not start: " +
                               (line.empty() ? std::string("it said nothing") : line));
  }
  // "busy": the other agent may still be on its way to listening.
  for (int i = 0;; ++i) {
    Result<std::unique_ptr<NodeAgentClient>> c = Connect(home);
    if (c.ok() || !c.status().IsNotFound() || i == 100) return c;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

Result<std::string> NodeAgentClient::ReadLineLocked() {
  while (true) {
    size_t nl = buffer_.find('\n');
    if (nl != std::string::npos) {
      std::string line = buffer_.substr(0, nl);
      buffer_.erase(0, nl + 1);
      return line;
    }
    char buf[4096];
    ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
    if (n > 0) {
      buffer_.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) return Status::Unavailable("the node agent closed the connection");
    if (errno == EAGAIN || errno == EWOULDBLOCK)
      return Status::Unavailable("the node agent did not answer within " +
                                 std::to_string(kAnswerTimeoutS) + " s");
    return Status::Unavailable("reading from the node agent: " + ErrnoText());
  }
}

Result<std::vector<Result<AgentLaunch>>> NodeAgentClient::Launch(
    const std::vector<AgentLaunchRequest>& nodes, std::vector<Result<AgentLaunch>>* answered) {
  std::vector<Result<AgentLaunch>> local;
  std::vector<Result<AgentLaunch>>& out = answered != nullptr ? *answered : local;
  out.clear();
  std::string request;
  for (const AgentLaunchRequest& node : nodes) {
    if (node.dir.find_first_of("\n ") != std::string::npos ||
        node.spec_json.find('\n') != std::string::npos)
      return Status::InvalidArgument("a node folder with a space or a newline: " + node.dir);
    if (node.spec_json.empty()) {
      request += "launch " + node.dir + "\n";
    } else {
      request += "create " + node.dir + " " + node.spec_json + "\n";
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (!SendAll(fd_, request))
    return Status::Unavailable("cannot reach the node agent: " + ErrnoText());
  for (size_t i = 0; i < nodes.size(); ++i) {
    ASSIGN_OR_RETURN(std::string line, ReadLineLocked());
    AgentLaunch launch;
    if (line == "exists") {
      out.push_back(Status::AlreadyExists(nodes[i].dir + " exists: the node was launched before"));
      continue;
    }
    if (line == "ended") {
      launch.kind = AgentLaunch::Kind::kEnded;
    } else if (line == "taken") {
      launch.kind = AgentLaunch::Kind::kTaken;
    } else if (line.rfind("ok ", 0) == 0) {
      unsigned long long start = 0;
      int pid = 0;
      char kind[16] = "";
      if (std::sscanf(line.c_str() + 3, "%d %llu %15s", &pid, &start, kind) != 3)
        return Status::Unavailable("the node agent answered '" + line + "'");
      launch.kind = std::string(kind) == "supervisor" ? AgentLaunch::Kind::kSupervisor
                                                      : AgentLaunch::Kind::kDirect;
      launch.process = ProcessIdentity{pid, start, BootId()};
    } else {
      out.push_back(Status::Internal("the node agent could not start the node: " +
                                     (line.rfind("err ", 0) == 0 ? line.substr(4) : line)));
      continue;
    }
    out.push_back(launch);
  }
  return out;
}

Status NodeAgentClient::SimpleRequest(const std::string& line) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!SendAll(fd_, line + "\n"))
    return Status::Unavailable("cannot reach the node agent: " + ErrnoText());
  ASSIGN_OR_RETURN(std::string answer, ReadLineLocked());
  if (answer == "ok") return Status::Ok();
  if (answer.rfind("err ", 0) == 0) return Status::NotFound("the node agent: " + answer.substr(4));
  return Status::Unavailable("the node agent answered '" + answer + "'");
}

Status NodeAgentClient::Terminate(const std::string& node_dir, int64_t grace_ms) {
  return SimpleRequest("term " + node_dir + " " + std::to_string(std::max<int64_t>(0, grace_ms)));
}

Status NodeAgentClient::Inject(const std::string& node_dir) {
  return SimpleRequest("inject " + node_dir);
}

Status NodeAgentClient::Watch() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!SendAll(fd_, "watch\n"))
    return Status::Unavailable("cannot reach the node agent: " + ErrnoText());
  ASSIGN_OR_RETURN(std::string answer, ReadLineLocked());
  if (answer != "watching")
    return Status::Unavailable("the node agent answered '" + answer + "' to watch");
  return Status::Ok();
}

Status NodeAgentClient::ReadEnded(std::vector<std::string>* ended) {
  std::lock_guard<std::mutex> lock(mu_);
  Status closed = Status::Ok();
  while (true) {
    char buf[8192];
    ssize_t n = ::recv(fd_, buf, sizeof(buf), MSG_DONTWAIT);
    if (n > 0) {
      buffer_.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) closed = Status::Unavailable("the node agent closed the connection");
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
      closed = Status::Unavailable("reading from the node agent: " + ErrnoText());
    break;
  }
  size_t start = 0;
  for (size_t nl; (nl = buffer_.find('\n', start)) != std::string::npos; start = nl + 1) {
    if (buffer_.compare(start, 4, "end ") == 0)
      ended->push_back(buffer_.substr(start + 4, nl - start - 4));
  }
  buffer_.erase(0, start);
  return closed;
}

}  // namespace lote::exec
