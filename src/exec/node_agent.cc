#include "exec/node_agent.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "common/clock.h"
#include "common/files.h"
#include "exec/node_files.h"
#include "exec/shim.h"

namespace lote::exec {
namespace {

constexpr int kAnswerTimeoutS = 10;  // a client's wait for one answer line
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

class Agent {
 public:
  Agent(std::string home, int listen_fd, int sig_fd, int lock_fd, int64_t idle_exit_ms)
      : home_(std::move(home)),
        paths_(AgentPathsFor(home_)),
        log_(paths_.log()),
        listen_fd_(listen_fd),
        sig_fd_(sig_fd),
        lock_fd_(lock_fd),
        idle_exit_ms_(idle_exit_ms) {}

  int Serve() {
    int64_t idle_since = MonoMs();
    while (true) {
      std::vector<struct pollfd> fds;
      fds.push_back({listen_fd_, POLLIN, 0});
      fds.push_back({sig_fd_, POLLIN, 0});
      for (const Client& c : clients_) fds.push_back({c.fd, POLLIN, 0});
      int r = ::poll(fds.data(), fds.size(), 1000);
      if (r < 0 && errno != EINTR) {
        log_("poll: " + ErrnoText());
        return 1;
      }
      if (r <= 0) {
        if (!StillOurs()) return 0;  // the home (or its agent folder) was removed
        if (clients_.empty() && MonoMs() - idle_since >= idle_exit_ms_) return 0;
        continue;
      }
      if (fds[1].revents != 0 && HandleSignals()) return 0;
      // Clients first (their indexes in fds), then new connections.
      for (size_t i = clients_.size(); i-- > 0;) {
        if (fds[2 + i].revents == 0) continue;
        if (!ReadRequests(clients_[i])) {
          ::close(clients_[i].fd);
          clients_.erase(clients_.begin() + static_cast<std::ptrdiff_t>(i));
          if (clients_.empty()) idle_since = MonoMs();
        }
      }
      if (fds[0].revents != 0) Accept();
    }
  }

 private:
  struct Client {
    int fd = -1;
    std::string in;
  };

  // False once agent.lock at its path is not the file this agent locked.
  bool StillOurs() const {
    struct stat held, now;
    if (::fstat(lock_fd_, &held) != 0 || ::stat(paths_.lock().c_str(), &now) != 0) return false;
    return held.st_dev == now.st_dev && held.st_ino == now.st_ino;
  }

  // True when the agent must stop.
  bool HandleSignals() {
    struct signalfd_siginfo si;
    bool stop = false;
    while (::read(sig_fd_, &si, sizeof(si)) == static_cast<ssize_t>(sizeof(si))) {
      const int sig = static_cast<int>(si.ssi_signo);
      if (sig == SIGCHLD) {
        // Supervisors report through their folders; only reap them here.
        int ignored;
        while (::waitpid(-1, &ignored, WNOHANG) > 0) {
        }
      } else if (sig == SIGTERM || sig == SIGINT || sig == SIGQUIT) {
        stop = true;
      }
    }
    return stop;
  }

  void Accept() {
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
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
    struct timeval tv {
      kAnswerTimeoutS, 0
    };
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    clients_.push_back(Client{fd, ""});
  }

  // Reads what the client sent and answers each whole line. False: the
  // connection is over.
  bool ReadRequests(Client& c) {
    char buf[8192];
    ssize_t n = ::recv(c.fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (n < 0) return errno == EINTR || errno == EAGAIN;
    if (n == 0) return false;
    c.in.append(buf, static_cast<size_t>(n));
    std::string out;
    size_t start = 0;
    for (size_t nl; (nl = c.in.find('\n', start)) != std::string::npos; start = nl + 1) {
      out += Answer(c.in.substr(start, nl - start)) + "\n";
    }
    c.in.erase(0, start);
    if (c.in.size() > 65536) return false;  // not our protocol
    return out.empty() || SendAll(c.fd, out);
  }

  std::string Answer(const std::string& line) {
    if (line.rfind("hello ", 0) == 0) {
      return "hello " + std::to_string(kNodeAgentProtocol) + " " + std::to_string(::getpid());
    }
    if (line.rfind("launch ", 0) != 0) return "err unknown request";
    const std::string dir = line.substr(7);
    if (!IsNodeFolder(home_, dir)) return "err not a node folder of " + home_ + "/jobs: " + dir;
    const pid_t pid = ::fork();
    if (pid < 0) return "err fork: " + ErrnoText();
    if (pid == 0) BecomeSupervisor(dir);
    // Unreaped until the next SIGCHLD is handled: its /proc entry is there.
    Result<uint64_t> start = ReadProcStartTime(pid, /*zombie_is_dead=*/false);
    return "ok " + std::to_string(pid) + " " + std::to_string(start.ok() ? *start : 0);
  }

  const std::string home_;
  const AgentPaths paths_;
  AgentLog log_;
  const int listen_fd_;
  const int sig_fd_;
  const int lock_fd_;
  const int64_t idle_exit_ms_;
  std::vector<Client> clients_;
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
  // Detach: the starter reaps this process at once; the child serves,
  // reparented to init, and keeps the lock (the same open file). It listens
  // itself: the socket's peer credentials are those of its listener.
  const pid_t child = ::fork();
  if (child < 0) {
    say("error: fork: " + ErrnoText());
    return 1;
  }
  if (child > 0) ::_exit(0);
  ::setsid();
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
  int sig_fd = ::signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
  Result<ProcessIdentity> self = CurrentIdentity(::getpid());
  Status recorded = self.ok()
                        ? WriteJsonRecord(p.record(), ToJson(ProcessRecord{*self, NowMs()}), 0600)
                        : self.status();
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
  Agent agent(home, listen_fd, sig_fd, lock_fd, idle_exit_ms);
  return agent.Serve();
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
  std::unique_ptr<NodeAgentClient> client(new NodeAgentClient(fd, rec->id));
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

Result<std::vector<Result<ProcessIdentity>>> NodeAgentClient::Launch(
    const std::vector<std::string>& node_dirs, std::vector<Result<ProcessIdentity>>* answered) {
  std::vector<Result<ProcessIdentity>> local;
  std::vector<Result<ProcessIdentity>>& out = answered != nullptr ? *answered : local;
  out.clear();
  std::string request;
  for (const std::string& dir : node_dirs) {
    if (dir.find('\n') != std::string::npos)
      return Status::InvalidArgument("a node folder with a newline: " + dir);
    request += "launch " + dir + "\n";
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (!SendAll(fd_, request))
    return Status::Unavailable("cannot reach the node agent: " + ErrnoText());
  for (size_t i = 0; i < node_dirs.size(); ++i) {
    ASSIGN_OR_RETURN(std::string line, ReadLineLocked());
    if (line.rfind("ok ", 0) == 0) {
      ProcessIdentity id;
      unsigned long long start = 0;
      int pid = 0;
      if (std::sscanf(line.c_str() + 3, "%d %llu", &pid, &start) != 2)
        return Status::Unavailable("the node agent answered '" + line + "'");
      id.pid = pid;
      id.start_time = start;
      id.boot_id = BootId();
      out.push_back(id);
    } else {
      out.push_back(Status::Internal("the node agent could not start the supervisor: " +
                                     (line.rfind("err ", 0) == 0 ? line.substr(4) : line)));
    }
  }
  return out;
}

}  // namespace lote::exec
