#include "exec/local_backend.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <spawn.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <set>
#include <thread>

#include "common/files.h"
#include "exec/shim.h"
#include "exec/stack_dump.h"

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

namespace lote::exec {
namespace {

constexpr int64_t kFallbackPollMs = 100;
// After the node agent could not be started or reached: how long nodes take
// the other path before the next try.
constexpr int64_t kAgentRetryMs = 10'000;

// Wait blocks in real time whatever clock stamps the events (a FakeClock must
// not make it spin forever).
int64_t SteadyMillis() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string ErrnoText() { return std::strerror(errno); }

// 1500 -> "1.5", 2000 -> "2", 250 -> "0.25".
std::string FormatVcpu(int64_t milli) {
  std::string out = std::to_string(milli / 1000);
  int64_t frac = milli % 1000;
  if (frac == 0) return out;
  std::string f = std::to_string(1000 + frac).substr(1);
  while (!f.empty() && f.back() == '0') f.pop_back();
  return out + "." + f;
}

// Opens the node lock and tries to take it. Returns the fd (lock held) or -1
// when another process holds it (errno EWOULDBLOCK) or on error.
int TryNodeLock(const NodePaths& paths) {
  int fd = ::open(paths.lock().c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return -1;
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int e = errno;
    ::close(fd);
    errno = e;
    return -1;
  }
  return fd;
}

// epoll tokens of the wake eventfd and of the agent's notices; nodes get
// tokens from 1 up.
constexpr uint64_t kWakeToken = 0;
constexpr uint64_t kWatchToken = ~uint64_t{0};
// How long the outcome of an orphaned command (its agent gone) is awaited from
// its keeper once the command has ended.
constexpr int64_t kSettleMs = 10'000;
constexpr int64_t kSettlePollMs = 10;
// How often orphaned commands' keepers are looked at.
constexpr int64_t kOrphanCheckMs = 500;

}  // namespace

Result<std::unique_ptr<LocalBackend>> LocalBackend::Create(LocalBackendOptions options) {
  if (options.home.empty()) {
    return Status::InvalidArgument("local executor: the lote home folder is not set");
  }
  if (options.shim_command.empty()) {
    options.shim_command = DefaultShimCommand();
    if (options.shim_command.empty())
      return Status::Internal("local executor: cannot read /proc/self/exe");
  }
  if (::access(options.shim_command[0].c_str(), X_OK) != 0) {
    return Status::InvalidArgument("local executor: supervisor program " + options.shim_command[0] +
                                   " is not executable: " + ErrnoText());
  }
  if (options.clock == nullptr) options.clock = SystemClock::Default();
  RETURN_IF_ERROR(MakeDirs(options.home + "/jobs"));
  // Nobody lists another job's folders. A root server runs jobs as other
  // users, who must pass through home and jobs/ to their own working
  // directory (0700, theirs): 0711, search without read; otherwise 0700. The
  // home itself is only ever opened from 0700 to 0711 (a home shared with
  // other files, e.g. /tmp, is left as it is).
  const bool root = ::geteuid() == 0;
  const std::string jobs_dir = options.home + "/jobs";
  if (::chmod(jobs_dir.c_str(), root ? 0711 : 0700) != 0) {
    return Status::Internal("local executor: cannot set the mode of " + jobs_dir + ": " +
                            ErrnoText());
  }
  struct stat home_st;
  if (root && ::stat(options.home.c_str(), &home_st) == 0 && (home_st.st_mode & 07777) == 0700 &&
      ::chmod(options.home.c_str(), 0711) != 0) {
    return Status::Internal("local executor: cannot let jobs pass through " + options.home + ": " +
                            ErrnoText());
  }
  CgroupSupport cg;
  if (options.use_cgroups) {
    cg = DetectCgroupV2(options.cgroup_parent);
  } else {
    cg.reason = "cgroup limits are disabled in lote's configuration";
  }
  HostFacts host;
  static_cast<RunnerHost&>(host) = ThisRunnerHost();
  host.boot_id = BootId();
  int wake = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake < 0) return Status::Internal("local executor: eventfd: " + ErrnoText());
  int epoll = ::epoll_create1(EPOLL_CLOEXEC);
  if (epoll < 0) {
    ::close(wake);
    return Status::Internal("local executor: epoll_create1: " + ErrnoText());
  }
  struct epoll_event ev {};
  ev.events = EPOLLIN;
  ev.data.u64 = kWakeToken;
  if (::epoll_ctl(epoll, EPOLL_CTL_ADD, wake, &ev) != 0) {
    Status s = Status::Internal("local executor: epoll_ctl: " + ErrnoText());
    ::close(wake);
    ::close(epoll);
    return s;
  }
  // Container mode's podman configuration (container.h), rewritten at every start.
  Result<std::pair<std::string, std::string>> podman =
      WritePodmanConfig(options.home + "/containers", options.registry);
  if (!podman.ok()) {
    ::close(wake);
    ::close(epoll);
    return podman.status();
  }
  // The live nodes' list (LiveEntry); a home without one is an older home.
  const std::string live_dir = options.home + "/nodes-live";
  const bool older_home = !FileExists(live_dir);
  if (Status made = MakeDir(live_dir, 0700); !made.ok()) {
    ::close(wake);
    ::close(epoll);
    return Status::Internal("local executor: cannot create " + live_dir + ": " + ErrnoText());
  }
  auto backend = std::unique_ptr<LocalBackend>(
      new LocalBackend(std::move(options), std::move(cg), std::move(host), wake, epoll));
  backend->podman_conf_ = *podman;
  backend->scan_every_folder_ = older_home;
  return backend;
}

LocalBackend::LocalBackend(LocalBackendOptions options, CgroupSupport cgroups, HostFacts host,
                           int wake_fd, int epoll_fd)
    : options_(std::move(options)),
      cgroups_(std::move(cgroups)),
      host_(std::move(host)),
      wake_fd_(wake_fd),
      epoll_fd_(epoll_fd) {}

LocalBackend::~LocalBackend() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [key, node] : nodes_) {
    if (node.pidfd >= 0) ::close(node.pidfd);
  }
  ::close(epoll_fd_);
  ::close(wake_fd_);
}

void LocalBackend::WatchLocked(Node& node) {
  node.token = next_token_++;
  by_token_.emplace(node.token, node.key);
  if (node.watch == Watch::kAgent) {
    by_dir_[node.paths.dir] = node.key;
    return;
  }
  if (node.settle_until_ms > 0) {
    ++settling_;
    return;
  }
  if (node.watch == Watch::kOrphan) ++orphans_;
  if (node.pidfd < 0) {
    ++unwatched_;
    return;
  }
  struct epoll_event ev {};
  ev.events = EPOLLIN;
  ev.data.u64 = node.token;
  if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, node.pidfd, &ev) != 0) {
    // Cannot happen for a fresh pidfd; fall back to polling the identity.
    ::close(node.pidfd);
    node.pidfd = -1;
    ++unwatched_;
  }
}

LocalBackend::Node LocalBackend::UnwatchLocked(std::map<NodeKey, Node>::iterator it) {
  Node node = std::move(it->second);
  nodes_.erase(it);
  by_token_.erase(node.token);
  kill_at_.erase(node.key);
  if (node.watch == Watch::kAgent) {
    by_dir_.erase(node.paths.dir);
  } else if (node.settle_until_ms > 0) {
    --settling_;
  } else {
    if (node.watch == Watch::kOrphan) --orphans_;
    if (node.pidfd >= 0) {
      ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, node.pidfd, nullptr);
    } else {
      --unwatched_;
    }
  }
  return node;
}

Result<LocalBackend::PreparedNode> LocalBackend::PrepareNode(const NodeSpec& spec) {
  ASSIGN_OR_RETURN(NodePaths paths, NodePathsFor(options_.home, spec.node));
  const std::string who = "node " + spec.node.ToString();
  ASSIGN_OR_RETURN(
      ResolvedNode resolved,
      ResolveNode(spec, host_, "the local executor", paths.default_work(), paths.default_output()));
  ShimSpec& shim = resolved.spec;
  shim.default_grace_ms = options_.default_grace_ms;
  PreparedNode prepared;
  prepared.key = spec.node;
  prepared.paths = paths;
  prepared.container = shim.container.has_value();
  LaunchResult& result = prepared.result;
  // Returned to the caller (the server log, DescribeJobs), never written into
  // the node's output: that holds only what the command prints.
  result.warnings = std::move(resolved.warnings);
  auto warn = [&](const std::string& text) { result.warnings.push_back(text); };

  if (shim.container) {
    // podman applies the limits (container.h).
    UseLotePodman(&*shim.container, podman_conf_, options_.registry);
    shim.container->name =
        ContainerName(spec.node.attempt.job_id, spec.node.attempt.attempt, spec.node.node_index);
  } else if (spec.vcpu_milli > 0 || spec.memory_mib > 0) {
    // Memory / vCPU limits.
    std::string what;
    if (spec.vcpu_milli > 0) what += FormatVcpu(spec.vcpu_milli) + " vCPU";
    if (spec.memory_mib > 0)
      what += (what.empty() ? "" : ", ") + std::to_string(spec.memory_mib) + " MiB";
    if (cgroups_.available) {
      shim.cgroup_dir =
          cgroups_.parent + "/" +
          NodeCgroupName(spec.node.attempt.job_id, spec.node.attempt.attempt, spec.node.node_index);
      shim.memory_max_bytes = spec.memory_mib * 1024 * 1024;
      shim.cpu_period_us = 100'000;
      shim.cpu_quota_us = spec.vcpu_milli > 0 ? spec.vcpu_milli * shim.cpu_period_us / 1000 : 0;
    } else {
      warn("the limits of this node (" + what + ") are NOT enforced: " + cgroups_.reason);
    }
  }

  if (!shim.container && !spec.fenced_devices.empty()) {
    // The host's other accelerators, denied to this process.
    std::string why;
    const std::string root = DevicesCgroupRoot(&why);
    if (root.empty()) {
      warn("the host's other accelerators are NOT fenced off from this node: " + why);
    } else {
      shim.fenced_devices = spec.fenced_devices;
      shim.devices_cgroup_dir =
          root + "/lote/" +
          NodeCgroupName(spec.node.attempt.job_id, spec.node.attempt.attempt, spec.node.node_index);
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (nodes_.count(spec.node) != 0) return Status::AlreadyExists(who + " is already running");
  }
  // The node folder is created exactly once, ever (MakeNodeFolder): a second
  // Launch of the same node (also after a restart) fails, so a node never
  // runs twice. Looked for here too, so that a gang with such a node starts
  // none of its nodes.
  if (FileExists(paths.dir)) {
    return Status::AlreadyExists(who + " was already launched (" + paths.dir +
                                 " exists); a retry must use a new attempt number");
  }
  // The working directory and the output's folder are made by the runner (a
  // failure there is a kStartFailed event), not on this launch path.
  prepared.spec_json = ToJson(shim).dump();
  result.node_dir = paths.dir;
  result.output_path = shim.output_path;
  return prepared;
}

Status LocalBackend::PutOnDisk(PreparedNode& node) {
  if (node.on_disk) return Status::Ok();
  Status made = MakeNodeFolder(options_.home, node.key, node.paths, node.spec_json);
  if (made.IsAlreadyExists()) return made;  // another launch's folder: not ours to record
  if (!made.ok()) return FailStart(node, made.message());
  node.on_disk = true;
  return Status::Ok();
}

void LocalBackend::AdoptFolderOfALostAgent(PreparedNode& node) {
  if (!node.on_disk && FileExists(node.paths.spec())) node.on_disk = true;
}

std::string LocalBackend::LiveEntry(const NodeKey& key) const {
  return options_.home + "/nodes-live/" + LiveEntryName(key);
}

void LocalBackend::ForgetLive(const NodeKey& key) const { (void)::unlink(LiveEntry(key).c_str()); }

std::vector<NodeKey> LocalBackend::LiveNodes() const {
  std::vector<NodeKey> keys;
  const std::string dir = options_.home + "/nodes-live";
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return keys;
  while (struct dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    if (std::optional<NodeKey> key = NodeKeyFromLiveEntry(name)) {
      keys.push_back(*key);
    } else {
      (void)::unlinkat(::dirfd(d), name.c_str(), 0);  // names no node
    }
  }
  ::closedir(d);
  return keys;
}

Status LocalBackend::FailStart(const PreparedNode& node, const std::string& why) {
  ForgetLive(node.key);  // its outcome is written here
  StatusRecord st;
  st.outcome = NodeOutcome::kStartFailed;
  st.reason = why;
  st.stopped_at_ms = options_.clock->NowMillis();
  (void)WriteJsonRecord(node.paths.status(), ToJson(st));
  return Status::Internal("node " + node.key.ToString() + ": " + why);
}

Status LocalBackend::SpawnSupervisor(const PreparedNode& node) {
  // Start the supervisor in a session of its own, with nothing of the server's
  // open files (closefrom) and default signal handling.
  std::vector<std::string> args = options_.shim_command;
  args.push_back("--node-dir");
  args.push_back(node.paths.dir);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::string path_env = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
  char* envp[] = {path_env.data(), nullptr};
  posix_spawnattr_t attr;
  posix_spawn_file_actions_t fa;
  posix_spawnattr_init(&attr);
  posix_spawn_file_actions_init(&fa);
  // The supervisor starts with its signals blocked, so a Terminate that
  // arrives before it has set up its signalfd stays pending instead of
  // killing it.
  sigset_t shim_mask, defaults;
  sigemptyset(&shim_mask);
  for (int s : {SIGTERM, SIGINT, SIGHUP, SIGCHLD, SIGQUIT, SIGUSR1}) sigaddset(&shim_mask, s);
  sigemptyset(&defaults);
  for (int s : {SIGTERM, SIGINT, SIGHUP, SIGCHLD, SIGPIPE, SIGQUIT, SIGUSR1, SIGUSR2}) {
    sigaddset(&defaults, s);
  }
  posix_spawnattr_setsigmask(&attr, &shim_mask);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addclosefrom_np(&fa, 3);
  pid_t pid = 0;
  int rc = ::posix_spawn(&pid, argv[0], &fa, &attr, argv.data(), envp);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    return FailStart(node, "cannot start the supervisor " + args[0] + ": " + std::strerror(rc));
  }
  // Our unreaped child: its pid cannot be reused yet.
  auto start = ReadProcStartTime(pid, /*zombie_is_dead=*/false);
  WatchStarted(node, ProcessIdentity{pid, start.ok() ? *start : 0, host_.boot_id});
  return Status::Ok();
}

void LocalBackend::WatchStarted(const PreparedNode& prepared, const ProcessIdentity& shim) {
  Node node;
  node.key = prepared.key;
  node.paths = prepared.paths;
  node.watched = shim;
  node.pidfd = PidfdOpen(shim.pid);
  // Checked after opening: a supervisor the agent forked may already have
  // ended and been reaped (its pid even reused). Then it is polled, found
  // gone, and its status.json read as for any other.
  if (node.pidfd >= 0) {
    Result<uint64_t> start = ReadProcStartTime(shim.pid, /*zombie_is_dead=*/false);
    if (!start.ok() || *start != shim.start_time) {
      ::close(node.pidfd);
      node.pidfd = -1;
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto [it, inserted] = nodes_.emplace(prepared.key, std::move(node));
  WatchLocked(it->second);
  if (it->second.pidfd < 0) {
    // A Wait in progress must switch to polling identities.
    uint64_t one = 1;
    (void)!::write(wake_fd_, &one, sizeof(one));
  }
}

std::unique_ptr<NodeAgentClient> LocalBackend::TakeAgent() {
  std::lock_guard<std::mutex> lock(agent_mu_);
  if (!idle_agents_.empty()) {
    std::unique_ptr<NodeAgentClient> agent = std::move(idle_agents_.back());
    idle_agents_.pop_back();
    return agent;
  }
  if (SteadyMillis() < agent_retry_at_ms_) return nullptr;
  Result<std::unique_ptr<NodeAgentClient>> agent =
      NodeAgentClient::ConnectOrStart(options_.home, options_.shim_command);
  if (!agent.ok()) {
    agent_ = ProcessIdentity{};
    agent_problem_ = agent.status().message();
    agent_retry_at_ms_ = SteadyMillis() + kAgentRetryMs;
    spdlog::warn(
        "local executor: no node agent ({}); each node's supervisor is started as a program of "
        "its own (slower), trying again in {} s",
        agent_problem_, kAgentRetryMs / 1000);
    return nullptr;
  }
  if ((*agent)->agent().pid != agent_.pid)
    spdlog::info("local executor: node agent pid {} starts the supervisors", (*agent)->agent().pid);
  agent_ = (*agent)->agent();
  agent_problem_.clear();
  return std::move(*agent);
}

void LocalBackend::ReturnAgent(std::unique_ptr<NodeAgentClient> agent) {
  std::lock_guard<std::mutex> lock(agent_mu_);
  if (agent->agent().pid == agent_.pid) idle_agents_.push_back(std::move(agent));
}

void LocalBackend::DropAgent(const ProcessIdentity& lost, const Status& why) {
  std::lock_guard<std::mutex> lock(agent_mu_);
  if (lost.pid != agent_.pid) return;  // already dropped by another launch
  spdlog::warn("local executor: node agent pid {} lost: {}", lost.pid, why.message());
  agent_ = ProcessIdentity{};
  agent_problem_ = why.message();
  idle_agents_.clear();
}

std::vector<size_t> LocalBackend::StartThroughAgent(std::vector<PreparedNode>& nodes,
                                                    std::vector<size_t> todo,
                                                    std::vector<Status>* out) {
  // A second round when the agent was lost on the way (e.g. killed): a new
  // one takes what the first did not answer. A node the lost agent started
  // anyway is found taken (its shim.json exists) and watched as its records say.
  for (int round = 0; round < 2 && !todo.empty(); ++round) {
    std::unique_ptr<NodeAgentClient> agent = TakeAgent();
    if (agent == nullptr) break;
    std::optional<ProcessIdentity> replaced;
    {
      // Its notices are read before any node can end (Wait reads them).
      std::lock_guard<std::mutex> lock(agent_mu_);
      if (watch_ == nullptr || watch_->agent().pid != agent->agent().pid) {
        if (watch_ != nullptr) replaced = watch_->agent();
        if (Status w = WatchAgentLocked(agent->agent()); !w.ok())
          spdlog::warn("local executor: cannot watch node agent pid {}: {}", agent->agent().pid,
                       w.message());
      }
    }
    if (replaced) OrphanNodesOf(*replaced, /*gone=*/false);
    std::vector<AgentLaunchRequest> requests;
    for (size_t i : todo) {
      PreparedNode& node = nodes[i];
      if (round > 0) AdoptFolderOfALostAgent(node);
      requests.push_back({node.paths.dir, node.on_disk ? std::string() : node.spec_json});
    }
    std::vector<Result<AgentLaunch>> answered;
    Result<std::vector<Result<AgentLaunch>>> all = agent->Launch(requests, &answered);
    for (size_t k = 0; k < answered.size(); ++k) {
      PreparedNode& node = nodes[todo[k]];
      if (!answered[k].ok()) {
        // A folder made before is another launch's: nothing of it is recorded here.
        (*out)[todo[k]] = answered[k].status().IsAlreadyExists()
                              ? answered[k].status()
                              : FailStart(node, answered[k].status().message());
        continue;
      }
      node.on_disk = true;
      switch (answered[k]->kind) {
        case AgentLaunch::Kind::kDirect:
          WatchDirect(node.key, node.paths, agent->agent(), agent->keeper(), answered[k]->process);
          break;
        case AgentLaunch::Kind::kSupervisor:
          WatchStarted(node, answered[k]->process);
          break;
        case AgentLaunch::Kind::kEnded:
        case AgentLaunch::Kind::kTaken:
          WatchAnswered(node);
          break;
      }
    }
    todo.erase(todo.begin(), todo.begin() + static_cast<std::ptrdiff_t>(answered.size()));
    if (all.ok()) {
      ReturnAgent(std::move(agent));
      break;
    }
    DropAgent(agent->agent(), all.status());
  }
  return todo;
}

bool LocalBackend::RecorderAlive(const Node& node) {
  return (!node.agent_gone && IdentityAlive(node.agent)) ||
         (node.keeper && IdentityAlive(*node.keeper));
}

void LocalBackend::OrphanNodesOf(const ProcessIdentity& agent, bool gone) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [key, node] : nodes_) {
    if (node.watch != Watch::kAgent || node.agent.pid != agent.pid) continue;
    node.agent_gone = gone;
    OrphanLocked(node);
  }
  uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof(one));
}

Status LocalBackend::WatchAgentLocked(const ProcessIdentity& agent) {
  if (watch_ != nullptr) {
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, watch_->fd(), nullptr);
    watch_.reset();
  }
  ASSIGN_OR_RETURN(std::unique_ptr<NodeAgentClient> c, NodeAgentClient::Connect(options_.home));
  if (c->agent().pid != agent.pid)
    return Status::Unavailable("the home's agent is now pid " + std::to_string(c->agent().pid));
  RETURN_IF_ERROR(c->Watch());
  struct epoll_event ev {};
  ev.events = EPOLLIN;
  ev.data.u64 = kWatchToken;
  if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, c->fd(), &ev) != 0)
    return Status::Internal("epoll_ctl: " + ErrnoText());
  watch_ = std::move(c);
  return Status::Ok();
}

ProcessIdentity LocalBackend::WatchedAgent() const {
  std::lock_guard<std::mutex> lock(agent_mu_);
  return watch_ != nullptr ? watch_->agent() : ProcessIdentity{};
}

void LocalBackend::WatchDirect(const NodeKey& key, const NodePaths& paths,
                               const ProcessIdentity& agent,
                               const std::optional<ProcessIdentity>& keeper,
                               const ProcessIdentity& command) {
  const ProcessIdentity watched = WatchedAgent();
  std::lock_guard<std::mutex> lock(mu_);
  Node node;
  node.key = key;
  node.paths = paths;
  node.watch = Watch::kAgent;
  node.watched = command;
  node.agent = agent;
  node.keeper = keeper;
  auto [it, inserted] = nodes_.emplace(key, std::move(node));
  if (watched.pid == agent.pid) {
    WatchLocked(it->second);
  } else {
    OrphanLocked(it->second);  // its notices do not reach us: its pidfd
  }
  // A command that ended before it was listed here: its notice was read
  // before its folder was known, but its status.json came first.
  if (Result<StatusRecord> st = ReadStatusRecord(paths.status()); st.ok()) {
    Node ended = UnwatchLocked(it);
    if (ended.pidfd >= 0) ::close(ended.pidfd);
    pending_.push_back(EventFromStatus(key, *st));
    ForgetLive(key);
  }
  uint64_t one = 1;  // Wait may have to look at it (settling) or return its event
  (void)!::write(wake_fd_, &one, sizeof(one));
}

void LocalBackend::WatchAnswered(const PreparedNode& node) {
  const ProcessIdentity watched = WatchedAgent();
  std::lock_guard<std::mutex> lock(mu_);
  RecoverReport ignored;
  RecoverExpected(node.key, watched, &ignored);
  uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof(one));
}

void LocalBackend::OrphanLocked(Node& node) {
  if (node.token != 0) {  // a kAgent node: out of by_dir_, a new token below
    by_token_.erase(node.token);
    by_dir_.erase(node.paths.dir);
  }
  node.watch = Watch::kOrphan;
  const bool recorder = RecorderAlive(node);
  int pidfd = PidfdOpen(node.watched.pid);
  // Checked after opening: the pidfd is the command's while it is alive (or
  // unreaped) with the recorded start time.
  Result<uint64_t> start = ReadProcStartTime(node.watched.pid, /*zombie_is_dead=*/false);
  const bool running = start.ok() && *start == node.watched.start_time;
  if (!running || !recorder) {
    // Ended: its outcome is awaited. Nobody left to record it: collected at
    // once (as lost; a command still running is killed then).
    if (pidfd >= 0) ::close(pidfd);
    pidfd = -1;
    node.settle_until_ms = recorder ? SteadyMillis() + kSettleMs : 1;
  }
  node.pidfd = pidfd;
  WatchLocked(node);
}

std::vector<Status> LocalBackend::StartNodes(std::vector<PreparedNode>& nodes) {
  std::vector<Status> out(nodes.size(), Status::Ok());
  std::vector<size_t> by_agent, by_spawn;
  for (size_t i = 0; i < nodes.size(); ++i)
    (options_.use_node_agent && !nodes[i].container ? by_agent : by_spawn).push_back(i);
  if (!by_agent.empty()) {
    for (size_t i : StartThroughAgent(nodes, std::move(by_agent), &out)) by_spawn.push_back(i);
  }
  for (size_t i : by_spawn) {
    // Not taken by an agent: made here.
    AdoptFolderOfALostAgent(nodes[i]);
    out[i] = PutOnDisk(nodes[i]);
    if (out[i].ok()) out[i] = SpawnSupervisor(nodes[i]);
  }
  return out;
}

Result<LaunchResult> LocalBackend::LaunchNode(const NodeSpec& spec) {
  ASSIGN_OR_RETURN(PreparedNode node, PrepareNode(spec));
  std::vector<PreparedNode> one;
  one.push_back(std::move(node));
  RETURN_IF_ERROR(StartNodes(one).front());
  return std::move(one.front().result);
}

ProcessIdentity LocalBackend::node_agent() const {
  std::lock_guard<std::mutex> lock(agent_mu_);
  return agent_;
}

std::string LocalBackend::node_agent_problem() const {
  std::lock_guard<std::mutex> lock(agent_mu_);
  return agent_problem_;
}

const Capabilities& LocalBackend::capabilities() const {
  static const Capabilities caps{
      {"image", "command", "environment", "resourceRequirements", "vcpus", "memory", "user",
       "ulimits", "instanceType", "jobRoleArn", "executionRoleArn",
       // Fargate settings: recorded and returned, nothing to do on this host.
       "networkConfiguration", "fargatePlatformConfiguration", "runtimePlatform"},
      /*accelerators=*/false};
  return caps;
}

Result<GangLaunch> LocalBackend::LaunchGang(const GangSpec& gang) {
  if (gang.nodes.empty())
    return Status::InvalidArgument("job " + gang.attempt.job_id + ": a gang needs a node");
  const NodeSpec* main = nullptr;
  for (const NodeSpec& n : gang.nodes)
    if (n.node.node_index == gang.main_node_index) main = &n;
  if (gang.multi_node && main == nullptr)
    return Status::InvalidArgument("job " + gang.attempt.job_id + ": the main node " +
                                   std::to_string(gang.main_node_index) + " is not in the gang");
  GangLaunch out;
  ASSIGN_OR_RETURN(NodePaths first, NodePathsFor(options_.home, gang.nodes.front().node));
  out.backend_ref = first.dir.substr(0, first.dir.rfind('/'));
  // 1. Every node's spec; a node refused here leaves the others unstarted
  // (nothing of the gang is on disk yet: no folder a later launch or a
  // recovery could start).
  std::vector<PreparedNode> prepared;
  for (const NodeSpec& node : gang.nodes) {
    if (node.node.attempt != gang.attempt)
      return Status::InvalidArgument("node " + node.node.ToString() + " is not of attempt " +
                                     gang.attempt.job_id + "/" +
                                     std::to_string(gang.attempt.attempt));
    NodeSpec spec = node;
    if (gang.multi_node && node.node.node_index != gang.main_node_index)
      spec.environment[kMainNodeAddressVar] = main->private_ip;
    if (spec.fault.at_step > 0) {
      // The step comes from the main node's LOTE_PROGRESS lines (one process
      // of a job prints them), all nodes being on this host.
      const NodeSpec& progress = main != nullptr ? *main : node;
      ASSIGN_OR_RETURN(NodePaths at, NodePathsFor(options_.home, progress.node));
      spec.fault.progress_path =
          progress.output_path.empty() ? at.default_output() : progress.output_path;
    }
    Result<PreparedNode> p = PrepareNode(spec);
    if (!p.ok()) return p.status();
    prepared.push_back(std::move(*p));
  }
  // 2. Their folders and runners, all at once (one round trip to the agent,
  // which makes the folders of the nodes it starts). The
  // start is stamped before it is asked for: a command may end before the
  // answer arrives, and its stop (the runner's stamp) must not come first.
  const int64_t now = options_.clock->NowMillis();
  std::vector<Status> started = StartNodes(prepared);
  for (const Status& s : started) {
    if (!s.ok()) {
      // Gang: nothing of it may go on running.
      (void)Terminate(gang.attempt, 0);
      return s;
    }
  }
  for (PreparedNode& p : prepared) {
    if (!p.result.warnings.empty()) out.warnings[p.key.node_index] = std::move(p.result.warnings);
    NodeEvent running;
    running.node = p.key;
    running.kind = NodeEventKind::kRunning;
    running.at_ms = now;
    running.started_at_ms = now;
    running.output_path = p.result.output_path;
    out.events.push_back(std::move(running));
  }
  return out;
}

Result<RecoverReport> LocalBackend::Recover(const std::vector<RecoverItem>& expected) {
  std::vector<NodeKey> keys;
  keys.reserve(expected.size());
  for (const RecoverItem& item : expected) keys.push_back(item.node);
  return RecoverNodes(keys);
}

Status LocalBackend::RemoveJobFiles(const std::string& job_id) {
  // A node folder's path checks the id (one safe path component).
  ASSIGN_OR_RETURN(NodePaths paths, NodePathsFor(options_.home, NodeKey{AttemptKey{job_id, 1}, 0}));
  const std::string attempt_dir = paths.dir.substr(0, paths.dir.rfind('/'));
  const std::string job_dir = attempt_dir.substr(0, attempt_dir.rfind('/'));
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = nodes_.lower_bound(NodeKey{AttemptKey{job_id, 0}, 0});
    if (it != nodes_.end() && it->first.attempt.job_id == job_id) {
      return Status::FailedPrecondition("local executor: node " + it->first.ToString() +
                                        " of job " + job_id + " runs; its files are kept");
    }
  }
  std::error_code ec;
  std::filesystem::remove_all(job_dir, ec);
  if (ec) return Status::Internal("local executor: cannot remove " + job_dir + ": " + ec.message());
  return Status::Ok();
}

Result<std::string> LocalBackend::OutputPath(const NodeKey& node) const {
  ASSIGN_OR_RETURN(NodePaths paths, NodePathsFor(options_.home, node));
  Result<ShimSpec> spec = ReadShimSpec(paths.spec());
  if (spec.ok() && !spec->output_path.empty()) return spec->output_path;
  if (!FileExists(paths.dir))
    return Status::NotFound("node " + node.ToString() + " was never launched here");
  return paths.default_output();
}

void LocalBackend::SignalNode(const Node& node, int64_t grace_ms) {
  TerminateRequest req{grace_ms, options_.clock->NowMillis()};
  (void)WriteJsonRecord(node.paths.terminate(), ToJson(req));
  if (node.watch != Watch::kSupervisor) return;  // the agent's, or SignalCommandLocked
  if (node.pidfd >= 0) {
    PidfdSendSignal(node.pidfd, SIGTERM);
  } else if (IdentityAlive(node.watched)) {
    ::kill(node.watched.pid, SIGTERM);
  }
}

void LocalBackend::SignalCommandLocked(const Node& node, int64_t grace_ms) {
  if (!IdentityAlive(node.watched)) return;
  if (grace_ms <= 0) {
    ::kill(-node.watched.pid, SIGKILL);
    ::kill(node.watched.pid, SIGKILL);
    return;
  }
  ::kill(-node.watched.pid, SIGTERM);
  const int64_t at = SteadyMillis() + grace_ms;
  auto [it, inserted] = kill_at_.emplace(node.key, at);
  if (!inserted) it->second = std::min(it->second, at);
  uint64_t one = 1;  // Wait's timeout must cover the deadline
  (void)!::write(wake_fd_, &one, sizeof(one));
}

Status LocalBackend::AskAgent(const ProcessIdentity& agent, const std::string& node_dir,
                              std::optional<int64_t> terminate_grace_ms) {
  std::unique_ptr<NodeAgentClient> client;
  {
    std::lock_guard<std::mutex> lock(agent_mu_);
    for (auto it = idle_agents_.begin(); it != idle_agents_.end(); ++it) {
      if ((*it)->agent().pid != agent.pid) continue;
      client = std::move(*it);
      idle_agents_.erase(it);
      break;
    }
  }
  if (client == nullptr) {
    Result<std::unique_ptr<NodeAgentClient>> c = NodeAgentClient::Connect(options_.home);
    if (!c.ok()) return Status::Unavailable(c.status().message());
    if ((*c)->agent().pid != agent.pid)
      return Status::Unavailable("the node agent pid " + std::to_string(agent.pid) + " is gone");
    client = std::move(*c);
  }
  Status s = terminate_grace_ms ? client->Terminate(node_dir, *terminate_grace_ms)
                                : client->Inject(node_dir);
  if (s.ok() || s.IsNotFound()) ReturnAgent(std::move(client));
  return s;
}

Status LocalBackend::Terminate(const AttemptKey& attempt, std::optional<int64_t> grace_ms) {
  int64_t grace = std::max<int64_t>(0, grace_ms.value_or(options_.default_grace_ms));
  std::vector<std::pair<NodeKey, Node>> by_agent;  // asked outside mu_ (agent_mu_ order)
  {
    std::lock_guard<std::mutex> lock(mu_);
    int count = 0;
    for (const auto& [key, node] : nodes_) {
      if (key.attempt != attempt) continue;
      ++count;
      SignalNode(node, grace);
      if (node.watch == Watch::kAgent) {
        by_agent.emplace_back(key, node);
      } else if (node.watch == Watch::kOrphan) {
        SignalCommandLocked(node, grace);
      }
    }
    if (count == 0) {
      return Status::NotFound("no running node of job " + attempt.job_id + " attempt " +
                              std::to_string(attempt.attempt) + " on this host");
    }
  }
  for (const auto& [key, node] : by_agent) {
    Status asked = AskAgent(node.agent, node.paths.dir, grace);
    if (asked.ok() || asked.IsNotFound()) continue;  // NotFound: it has just ended
    // The agent cannot be reached: the command is signalled from here.
    std::lock_guard<std::mutex> lock(mu_);
    auto it = nodes_.find(key);
    if (it != nodes_.end()) SignalCommandLocked(it->second, grace);
  }
  return Status::Ok();
}

Result<std::map<int32_t, std::string>> LocalBackend::CollectStackDumps(const AttemptKey& attempt,
                                                                       int64_t timeout_ms) {
  std::vector<std::pair<int32_t, NodePaths>> nodes;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [key, node] : nodes_)
      if (key.attempt == attempt) nodes.emplace_back(key.node_index, node.paths);
  }
  if (nodes.empty())
    return Status::NotFound("no running node of job " + attempt.job_id + " attempt " +
                            std::to_string(attempt.attempt) + " on this host");
  std::vector<std::string> dumps(nodes.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < nodes.size(); ++i) {
    threads.emplace_back([&, i] {
      const NodePaths& p = nodes[i].second;
      Result<ProcessRecord> command = ReadProcessRecord(p.command());
      if (!command.ok()) {
        dumps[i] =
            "(no stack: the command's record is unreadable: " + command.status().message() + ")\n";
        return;
      }
      Result<ShimSpec> spec = ReadShimSpec(p.spec());
      const std::string output =
          spec.ok() && !spec->output_path.empty() ? spec->output_path : p.default_output();
      dumps[i] = DumpNodeStacks(command->id.pid, output, timeout_ms);
    });
  }
  for (std::thread& t : threads) t.join();
  std::map<int32_t, std::string> out;
  for (size_t i = 0; i < nodes.size(); ++i) out[nodes[i].first] = std::move(dumps[i]);
  return out;
}

Status LocalBackend::InjectFault(const NodeKey& key, const NodeFault& fault,
                                 int32_t main_node_index) {
  Node node;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = nodes_.find(key);
    if (it == nodes_.end())
      return Status::NotFound("node " + key.ToString() + " does not run on this host");
    node = it->second;
  }
  if (node.watch == Watch::kOrphan)
    return Status::FailedPrecondition("node " + key.ToString() +
                                      " runs without its node agent (it is gone): no fault can "
                                      "be injected into it");
  NodeFault f = fault;
  if (f.at_step > 0) {
    ASSIGN_OR_RETURN(NodePaths main,
                     NodePathsFor(options_.home, NodeKey{key.attempt, main_node_index}));
    Result<ShimSpec> spec = ReadShimSpec(main.spec());
    f.progress_path =
        spec.ok() && !spec->output_path.empty() ? spec->output_path : main.default_output();
  }
  RETURN_IF_ERROR(WriteJsonRecord(node.paths.inject(), ToJson(f)));
  if (node.watch == Watch::kAgent) {
    Status asked = AskAgent(node.agent, node.paths.dir, std::nullopt);
    if (!asked.ok())
      return Status::Internal("cannot reach the node agent of node " + key.ToString() + ": " +
                              asked.message());
    return Status::Ok();
  }
  if (::kill(node.watched.pid, SIGUSR1) != 0)
    return Status::Internal("cannot signal the runner of node " + key.ToString() + ": " +
                            ErrnoText());
  return Status::Ok();
}

std::string LocalBackend::InjectedFault(const AttemptKey& attempt, int32_t num_nodes) {
  for (int32_t i = 0; i < num_nodes; ++i) {
    Result<NodePaths> p = NodePathsFor(options_.home, NodeKey{attempt, i});
    if (!p.ok()) return "";
    Result<Json> fault = ReadJsonFile(p->fault());
    if (fault.ok() && fault->value("injected", Json()).is_string())
      return (*fault)["injected"].get<std::string>();
  }
  return "";
}

void LocalBackend::Wake() {
  wake_requested_ = true;
  uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof(one));
}

std::vector<NodeKey> LocalBackend::Running() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<NodeKey> out;
  for (const auto& [key, node] : nodes_) out.push_back(key);
  return out;
}

NodeEvent LocalBackend::DeclareLost(const NodeKey& key, const NodePaths& paths,
                                    const std::string& why, bool never_started) {
  std::string reason = why;
  auto cmd = ReadProcessRecord(paths.command());
  if (cmd.ok() && IdentityAlive(cmd->id)) {
    // The command outlived its supervisor: it must not run unwatched.
    ::kill(-cmd->id.pid, SIGKILL);
    ::kill(cmd->id.pid, SIGKILL);
    // SIGKILL takes effect asynchronously: report the loss once it is gone.
    for (int i = 0; i < 400 && IdentityAlive(cmd->id); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    reason +=
        "; its command (pid " + std::to_string(cmd->id.pid) + ") was still running and was killed";
  }
  // A container node's podman killed (with its runner) leaves the container.
  if (cmd.ok()) {
    Result<ShimSpec> spec = ReadShimSpec(paths.spec());
    if (spec.ok() && spec->container) {
      if (Status s = RemoveContainer(*spec->container); !s.ok()) reason += "; " + s.message();
    }
  }
  StatusRecord st;
  st.outcome = NodeOutcome::kLost;
  st.never_started = never_started && !cmd.ok();
  st.reason = reason;
  st.started_at_ms = cmd.ok() ? cmd->started_at_ms : 0;
  st.stopped_at_ms = options_.clock->NowMillis();
  if (!FileExists(paths.dir)) return EventFromStatus(key, st);
  (void)WriteJsonRecord(paths.status(), ToJson(st));  // tombstone: a late shim will not start
  return EventFromStatus(key, st);
}

std::optional<NodeEvent> LocalBackend::CollectEnded(const Node& node) {
  if (node.pidfd >= 0) {
    siginfo_t info;
    // Reaps the supervisor if it is our child; ECHILD (adopted) is fine.
    ::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(node.pidfd), &info,
             WEXITED | WNOHANG);
  } else {
    int ignored;
    ::waitpid(node.watched.pid, &ignored, WNOHANG);
  }
  auto st = ReadStatusRecord(node.paths.status());
  if (st.ok()) return EventFromStatus(node.key, *st);
  int lock_fd = TryNodeLock(node.paths);
  if (lock_fd < 0) {
    // Another supervisor holds the node: this one found it taken and left
    // (a node handed over twice when the agent was lost on the way). The
    // holder is the node's.
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (nodes_.count(node.key) == 0 && Adopt(node.key, node.paths)) return std::nullopt;
    }
    st = ReadStatusRecord(node.paths.status());  // the holder may just have ended
    if (st.ok()) return EventFromStatus(node.key, *st);
    NodeEvent e;
    e.node = node.key;
    e.outcome = NodeOutcome::kLost;
    e.reason = "supervisor (pid " + std::to_string(node.watched.pid) +
               ") ended without an outcome and the node lock is held by another process";
    e.stopped_at_ms = options_.clock->NowMillis();
    e.at_ms = e.stopped_at_ms;
    return e;
  }
  st = ReadStatusRecord(node.paths.status());
  NodeEvent e =
      st.ok() ? EventFromStatus(node.key, *st)
              : DeclareLost(node.key, node.paths,
                            "supervisor (pid " + std::to_string(node.watched.pid) + ") of node " +
                                node.key.ToString() + " ended without recording an outcome");
  ::close(lock_fd);
  return e;
}

void LocalBackend::ReadAgentNotices(std::vector<Node>* ended) {
  std::vector<std::string> dirs;
  Status read = Status::Ok();
  ProcessIdentity agent;
  {
    std::lock_guard<std::mutex> lock(agent_mu_);
    if (watch_ == nullptr) return;
    agent = watch_->agent();
    read = watch_->ReadEnded(&dirs);
    if (!read.ok()) {  // the agent is gone
      ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, watch_->fd(), nullptr);
      watch_.reset();
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const std::string& dir : dirs) {
      auto key = by_dir_.find(dir);
      if (key == by_dir_.end()) continue;  // not (yet) ours: WatchDirect reads its status
      auto it = nodes_.find(key->second);
      if (it != nodes_.end()) ended->push_back(UnwatchLocked(it));
    }
  }
  if (!read.ok()) {
    spdlog::warn(
        "local executor: node agent pid {} lost ({}); its nodes are watched by their "
        "commands, their outcomes recorded by its keeper",
        agent.pid, read.message());
    DropAgent(agent, read);
    OrphanNodesOf(agent, /*gone=*/true);  // its socket closed: it is exiting
  }
}

void LocalBackend::CollectNodes(std::vector<Node> ended, std::vector<NodeEvent>* out) {
  for (Node& node : ended) {
    if (node.pidfd >= 0) {
      ::close(node.pidfd);
      node.pidfd = -1;
    }
    if (node.watch == Watch::kSupervisor) {
      if (std::optional<NodeEvent> e = CollectEnded(node)) {
        out->push_back(std::move(*e));
        // Listed until its outcome is on disk (a lost node whose lock another
        // process holds has none: a later recovery must still look at it).
        if (FileExists(node.paths.status())) ForgetLive(node.key);
      }
      continue;
    }
    // The agent's command: the agent, else its keeper, records the outcome.
    Result<StatusRecord> st = ReadStatusRecord(node.paths.status());
    if (st.ok()) {
      out->push_back(EventFromStatus(node.key, *st));
      ForgetLive(node.key);
      continue;
    }
    const bool recorder = RecorderAlive(node);
    const int64_t now = SteadyMillis();
    if (node.watch == Watch::kOrphan && recorder &&
        (node.settle_until_ms == 0 || now < node.settle_until_ms)) {
      if (node.settle_until_ms == 0) node.settle_until_ms = now + kSettleMs;
      std::lock_guard<std::mutex> lock(mu_);
      auto [it, inserted] = nodes_.emplace(node.key, std::move(node));
      WatchLocked(it->second);
      continue;
    }
    out->push_back(DeclareLost(
        node.key, node.paths,
        "node agent pid " + std::to_string(node.agent.pid) + " ran node " + node.key.ToString() +
            (recorder ? ", and no outcome was recorded within " + std::to_string(kSettleMs / 1000) +
                            " s of its command's end"
                      : "; the agent and its keeper are gone and recorded no outcome")));
    ForgetLive(node.key);
  }
}

Result<std::vector<NodeEvent>> LocalBackend::Wait(int64_t timeout_ms) {
  if (waiting_.exchange(true)) {
    return Status::FailedPrecondition("LocalBackend::Wait: another thread is already waiting");
  }
  struct Release {
    std::atomic<bool>* flag;
    ~Release() { *flag = false; }
  } release{&waiting_};
  const int64_t deadline = SteadyMillis() + std::max<int64_t>(0, timeout_ms);
  std::vector<NodeEvent> out;
  constexpr int kMaxReady = 512;
  struct epoll_event ready[kMaxReady];
  while (true) {
    int64_t timeout = std::max<int64_t>(0, deadline - SteadyMillis());
    bool any_unwatched = false, any_settling = false, check_orphans = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      while (!pending_.empty()) {
        out.push_back(std::move(pending_.front()));
        pending_.pop_front();
      }
      if (!out.empty()) return out;
      any_unwatched = unwatched_ > 0;
      any_settling = settling_ > 0;
      if (any_unwatched) timeout = std::min(timeout, kFallbackPollMs);
      if (any_settling) timeout = std::min(timeout, kSettlePollMs);
      if (orphans_ > 0) {
        // Their agent is gone: their keeper may go too, and then nobody
        // would record their outcome (they are collected as lost).
        const int64_t until_check = next_orphan_check_ms_ - SteadyMillis();
        check_orphans = until_check <= 0;
        timeout = std::min(timeout, std::max<int64_t>(0, until_check));
      }
      for (const auto& [key, at] : kill_at_)
        timeout = std::min(timeout, std::max<int64_t>(0, at - SteadyMillis()));
    }
    // Only the pidfds of ended supervisors and orphaned commands, the agent's
    // notices and the wake eventfd come back, however many nodes run.
    int r = ::epoll_wait(epoll_fd_, ready, kMaxReady, static_cast<int>(timeout));
    if (r < 0 && errno != EINTR)
      return Status::Internal("LocalBackend::Wait: epoll_wait: " + ErrnoText());
    std::vector<Node> ended;
    bool notices = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (int i = 0; i < r; ++i) {
        const uint64_t token = ready[i].data.u64;
        if (token == kWakeToken) {
          uint64_t v;
          (void)!::read(wake_fd_, &v, sizeof(v));
          continue;
        }
        if (token == kWatchToken) {
          notices = true;
          continue;
        }
        auto key = by_token_.find(token);
        if (key == by_token_.end()) continue;
        auto it = nodes_.find(key->second);
        if (it == nodes_.end()) continue;
        ended.push_back(UnwatchLocked(it));
      }
      if (check_orphans) next_orphan_check_ms_ = SteadyMillis() + kOrphanCheckMs;
      if (any_unwatched || any_settling || check_orphans) {
        for (auto it = nodes_.begin(); it != nodes_.end();) {
          const Node& n = it->second;
          const bool polled = n.watch != Watch::kAgent && n.pidfd < 0 && n.settle_until_ms == 0;
          const bool unrecorded = check_orphans && n.watch == Watch::kOrphan &&
                                  n.settle_until_ms == 0 && !RecorderAlive(n);
          if ((polled && !IdentityAlive(n.watched)) || n.settle_until_ms > 0 || unrecorded) {
            ended.push_back(UnwatchLocked(it++));
          } else {
            ++it;
          }
        }
      }
      const int64_t now = SteadyMillis();
      for (auto it = kill_at_.begin(); it != kill_at_.end();) {
        auto node = nodes_.find(it->first);
        if (it->second > now) {
          ++it;
          continue;
        }
        if (node != nodes_.end() && IdentityAlive(node->second.watched)) {
          ::kill(-node->second.watched.pid, SIGKILL);
          ::kill(node->second.watched.pid, SIGKILL);
        }
        it = kill_at_.erase(it);
      }
    }
    if (notices) ReadAgentNotices(&ended);
    CollectNodes(std::move(ended), &out);
    if (!out.empty()) return out;
    if (wake_requested_.exchange(false)) return out;
    if (SteadyMillis() >= deadline) return out;
  }
}

bool LocalBackend::Adopt(const NodeKey& key, const NodePaths& paths) {
  // The supervisor takes the lock before writing shim.json: allow it a moment.
  Result<ProcessRecord> rec = Status::NotFound("");
  for (int i = 0; i < 100; ++i) {
    rec = ReadProcessRecord(paths.shim());
    if (rec.ok()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (!rec.ok()) return false;
  int pidfd = PidfdOpen(rec->id.pid);
  // Verify after opening the pidfd: if the identity matches now, the pidfd
  // refers to that very process (a recycled pid would have another start time).
  if (!IdentityAlive(rec->id)) {
    if (pidfd >= 0) ::close(pidfd);
    return false;
  }
  Node node;
  node.key = key;
  node.paths = paths;
  node.watched = rec->id;
  node.pidfd = pidfd;
  auto [it, inserted] = nodes_.emplace(key, std::move(node));
  WatchLocked(it->second);
  return true;
}

void LocalBackend::RecoverDirect(const NodeKey& key, const NodePaths& paths,
                                 const ProcessRecord& runner, const ProcessIdentity& watched,
                                 RecoverReport* report) {
  Result<ProcessRecord> command = ReadProcessRecord(paths.command());
  // Claimed but not recorded yet: a live agent is finishing the launch (one
  // request, handled whole); allow it a moment.
  for (int i = 0; i < 200 && !command.ok() && IdentityAlive(runner.id); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (FileExists(paths.status())) break;
    command = ReadProcessRecord(paths.command());
  }
  if (Result<StatusRecord> st = ReadStatusRecord(paths.status()); st.ok()) {
    pending_.push_back(EventFromStatus(key, *st));
    (st->outcome == NodeOutcome::kLost ? report->lost : report->finished).push_back(key);
    ForgetLive(key);
    return;
  }
  if (!command.ok()) {
    // The agent ended before the command was recorded: the child, held
    // before exec, saw the agent's end and never ran anything.
    NodeEvent lost = DeclareLost(key, paths,
                                 "the node agent (pid " + std::to_string(runner.id.pid) +
                                     ") ended before it started node " + key.ToString(),
                                 /*never_started=*/true);
    pending_.push_back(std::move(lost));
    report->lost.push_back(key);
    report->never_started.push_back(key);
    ForgetLive(key);
    return;
  }
  Node node;
  node.key = key;
  node.paths = paths;
  node.watch = Watch::kAgent;
  node.watched = command->id;
  node.agent = runner.id;
  node.keeper = runner.keeper;
  auto [it, inserted] = nodes_.emplace(key, std::move(node));
  if (watched.pid == runner.id.pid && IdentityAlive(runner.id)) {
    WatchLocked(it->second);
  } else {
    OrphanLocked(it->second);
  }
  // Watched from here on; an end before that left its status.json.
  if (Result<StatusRecord> st = ReadStatusRecord(paths.status()); st.ok()) {
    Node ended = UnwatchLocked(it);
    if (ended.pidfd >= 0) ::close(ended.pidfd);
    pending_.push_back(EventFromStatus(key, *st));
    report->finished.push_back(key);
    ForgetLive(key);
    return;
  }
  report->adopted.push_back(key);
}

void LocalBackend::RecoverExpected(const NodeKey& key, const ProcessIdentity& watched,
                                   RecoverReport* report) {
  auto paths_or = NodePathsFor(options_.home, key);
  if (!paths_or.ok()) {
    NodeEvent e;
    e.node = key;
    e.reason = "node cannot be recovered: " + paths_or.status().message();
    e.stopped_at_ms = options_.clock->NowMillis();
    pending_.push_back(e);
    report->lost.push_back(key);
    return;
  }
  const NodePaths& paths = *paths_or;
  if (nodes_.count(key) != 0) {
    report->adopted.push_back(key);
    return;
  }
  if (!FileExists(paths.dir)) {
    pending_.push_back(DeclareLost(key, paths,
                                   "node " + key.ToString() + " has no folder on this host (" +
                                       paths.dir + "): it was never launched",
                                   /*never_started=*/true));
    report->lost.push_back(key);
    report->never_started.push_back(key);
    return;
  }
  for (int round = 0; round < 2; ++round) {
    auto st = ReadStatusRecord(paths.status());
    if (st.ok()) {
      pending_.push_back(EventFromStatus(key, *st));
      (st->outcome == NodeOutcome::kLost ? report->lost : report->finished).push_back(key);
      if (st->never_started) report->never_started.push_back(key);
      ForgetLive(key);
      return;
    }
    if (Result<ProcessRecord> runner = ReadProcessRecord(paths.shim());
        runner.ok() && runner->agent) {
      RecoverDirect(key, paths, *runner, watched, report);  // no node lock: the agent's
      return;
    }
    int lock_fd = TryNodeLock(paths);
    if (lock_fd >= 0) {
      st = ReadStatusRecord(paths.status());
      if (st.ok()) {
        ::close(lock_fd);
        continue;  // finished just now
      }
      auto shim = ReadProcessRecord(paths.shim());
      std::string why = shim.ok()
                            ? "supervisor (pid " + std::to_string(shim->id.pid) + ") of node " +
                                  key.ToString() + " is gone and recorded no outcome"
                            : "node " + key.ToString() + " never started a supervisor";
      // No supervisor record with the lock free: no supervisor ever got as
      // far as starting the command (it writes its record first), and the
      // tombstone stops one that is still on its way.
      NodeEvent lost = DeclareLost(key, paths, why, /*never_started=*/!shim.ok());
      if (lost.never_started) report->never_started.push_back(key);
      pending_.push_back(std::move(lost));
      ForgetLive(key);
      ::close(lock_fd);
      report->lost.push_back(key);
      return;
    }
    if (Adopt(key, paths)) {
      report->adopted.push_back(key);
      return;
    }
    // Could not verify the supervisor: it may just have finished; look again.
  }
  NodeEvent e;
  e.node = key;
  e.reason = "node " + key.ToString() +
             " holds its lock but its supervisor record matches no live process";
  e.stopped_at_ms = options_.clock->NowMillis();
  pending_.push_back(e);
  report->lost.push_back(key);
}

void LocalBackend::RecoverUnknown(const NodeKey& key, const NodePaths& paths,
                                  RecoverReport* report) {
  if (FileExists(paths.status()) || !FileExists(paths.dir)) {
    ForgetLive(key);
    return;
  }
  if (Result<ProcessRecord> runner = ReadProcessRecord(paths.shim());
      runner.ok() && runner->agent) {
    // The agent's command: killed here; the agent (or its keeper) records its
    // end, and the entry is dropped by the recovery that sees it.
    Result<ProcessRecord> command = ReadProcessRecord(paths.command());
    if (command.ok() && IdentityAlive(command->id)) {
      (void)WriteJsonRecord(paths.terminate(),
                            ToJson(TerminateRequest{0, options_.clock->NowMillis()}));
      ::kill(-command->id.pid, SIGKILL);
      ::kill(command->id.pid, SIGKILL);
      report->orphans_terminated.push_back(key);
    } else if (!IdentityAlive(runner->id) && !(runner->keeper && IdentityAlive(*runner->keeper))) {
      (void)DeclareLost(key, paths,
                        "node " + key.ToString() + " was unknown to the control plane at recovery");
      ForgetLive(key);
    }
    return;
  }
  int lock_fd = TryNodeLock(paths);
  if (lock_fd >= 0) {
    if (!FileExists(paths.status())) {
      auto cmd = ReadProcessRecord(paths.command());
      bool was_running = cmd.ok() && IdentityAlive(cmd->id);
      (void)DeclareLost(key, paths,
                        "node " + key.ToString() + " was unknown to the control plane at recovery");
      if (was_running) report->orphans_terminated.push_back(key);
    }
    ForgetLive(key);
    ::close(lock_fd);
    return;
  }
  if (Adopt(key, paths)) {
    // Unknown to the control plane: stop it at once; its event is not reported.
    Node node = UnwatchLocked(nodes_.find(key));
    SignalNode(node, 0);
    if (node.pidfd >= 0) ::close(node.pidfd);
    report->orphans_terminated.push_back(key);
  }
}

Result<RecoverReport> LocalBackend::RecoverNodes(const std::vector<NodeKey>& expected) {
  // The live agent's notices are read before any of its nodes is looked at,
  // so none of their ends can be missed.
  ProcessIdentity watched;
  if (options_.use_node_agent) {
    Result<std::unique_ptr<NodeAgentClient>> agent = NodeAgentClient::Connect(options_.home);
    std::lock_guard<std::mutex> lock(agent_mu_);
    if (agent.ok()) {
      if (watch_ == nullptr || watch_->agent().pid != (*agent)->agent().pid) {
        if (Status w = WatchAgentLocked((*agent)->agent()); !w.ok())
          spdlog::warn("local executor: cannot watch node agent pid {}: {}", (*agent)->agent().pid,
                       w.message());
      }
      agent_ = (*agent)->agent();
      idle_agents_.push_back(std::move(*agent));
    }
    if (watch_ != nullptr) watched = watch_->agent();
  }
  std::lock_guard<std::mutex> lock(mu_);
  RecoverReport report;
  std::set<NodeKey> wanted(expected.begin(), expected.end());
  for (const auto& key : wanted) RecoverExpected(key, watched, &report);

  // Any other node without an outcome: never leave it running unknown. The
  // nodes listed live are the candidates (every node this home launched and
  // whose outcome was not seen); an older home's folders are all read once.
  if (!scan_every_folder_) {
    for (const NodeKey& key : LiveNodes()) {
      if (wanted.count(key) != 0 || nodes_.count(key) != 0) continue;
      auto paths = NodePathsFor(options_.home, key);
      if (paths.ok()) RecoverUnknown(key, *paths, &report);
    }
    uint64_t one = 1;
    (void)!::write(wake_fd_, &one, sizeof(one));
    return report;
  }
  scan_every_folder_ = false;
  const std::string jobs = options_.home + "/jobs";
  auto list = [](const std::string& dir) {
    std::vector<std::string> names;
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) return names;
    while (struct dirent* e = ::readdir(d)) {
      std::string n = e->d_name;
      if (n != "." && n != "..") names.push_back(n);
    }
    ::closedir(d);
    return names;
  };
  for (const auto& job : list(jobs)) {
    for (const auto& attempt : list(jobs + "/" + job)) {
      for (const auto& node : list(jobs + "/" + job + "/" + attempt)) {
        auto key = NodeKeyFromRelative(job, attempt, node);
        if (!key || wanted.count(*key) != 0 || nodes_.count(*key) != 0) continue;
        auto paths = NodePathsFor(options_.home, *key);
        if (paths.ok()) RecoverUnknown(*key, *paths, &report);
      }
    }
  }
  uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof(one));
  return report;
}

}  // namespace lote::exec
