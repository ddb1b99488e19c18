#include "engine/launcher.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "engine/communicator.h"
#include "engine/dataset_cache.h"
#include "engine/gloo_communicator.h"
#include "engine/llama_config.h"
#include "engine/param_layout.h"
#include "engine/rendezvous_store.h"
#include "engine/shm_communicator.h"

namespace lote::engine {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using SteadyClock = std::chrono::steady_clock;

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : "";
}

Result<int> EnvInt(const char* name, int fallback) {
  const std::string v = Env(name);
  if (v.empty()) return fallback;
  char* end = nullptr;
  const long n = std::strtol(v.c_str(), &end, 10);
  if (*end != '\0' || n < 0 || n > 1000000) {
    return Status::InvalidArgument(fmt::format("{}={} is not a whole number", name, v));
  }
  return static_cast<int>(n);
}

// This host's address on the route to `peer` (no packet is sent).
std::string LocalAddressTowards(const std::string& peer) {
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return "127.0.0.1";
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(9);
  std::string out = "127.0.0.1";
  if (::inet_pton(AF_INET, peer.c_str(), &addr.sin_addr) == 1 &&
      ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    socklen_t len = sizeof(addr);
    char buf[INET_ADDRSTRLEN] = {};
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0 &&
        ::inet_ntop(AF_INET, &addr.sin_addr, buf, sizeof(buf)) != nullptr) {
      out = buf;
    }
  }
  ::close(fd);
  return out;
}

int CpuCount() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return 1;
}

std::string DescribeExit(int status) {
  if (WIFEXITED(status)) return fmt::format("exited with code {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return fmt::format("was killed by signal {} ({})", sig, strsignal(sig));
  }
  return fmt::format("ended with status {}", status);
}

// A rank whose collective failed because a peer went away exits with this code; the
// launcher then looks a moment longer for the rank that caused it.
constexpr int kPeerLostExit = 3;

std::atomic<int> g_signal{0};
void OnSignal(int sig) { g_signal = sig; }

void Say(const std::string& line) {
  fmt::print(stderr, "lote train: {}\n", line);
  std::fflush(stderr);
}

// The dataset as a local folder: s3:// datasets are downloaded once per node into the
// cache (checked against the manifest's checksums); local ones are used in place.
Result<std::string> LocalDataset(const std::string& uri) {
  if (uri.empty()) return uri;
  FetchOptions fo;
  fo.log = [](std::string_view line) { Say(std::string(line)); };
  ASSIGN_OR_RETURN(FetchedDataset d, FetchDataset(uri, fo));
  if (d.downloaded) Say(fmt::format("downloaded {} into {}", uri, d.dir));
  return d.dir;
}

// --- one rank --------------------------------------------------------------------

int RunRank(TrainOptions train) {
  auto fail = [](const std::string& who, const Status& s) {
    fmt::print(stderr, "error: {}: {}\n", who, s.ToString());
    std::fflush(stderr);
    return 1;
  };
  const int rank = std::atoi(Env("LOTE_TRAIN_RANK").c_str());
  const int world = std::atoi(Env("LOTE_TRAIN_WORLD_SIZE").c_str());
  const std::string who = fmt::format("rank {}", rank);
  const std::string store = Env("LOTE_TRAIN_STORE");
  const size_t colon = store.rfind(':');
  const int timeout_s = std::max(1, std::atoi(Env("LOTE_TRAIN_TIMEOUT_S").c_str()));
  if (world < 1 || rank < 0 || rank >= world || colon == std::string::npos) {
    return fail(who, Status::InvalidArgument(
                         "LOTE_TRAIN_RANK, LOTE_TRAIN_WORLD_SIZE and LOTE_TRAIN_STORE are set by "
                         "the launcher; run `lote train` without them"));
  }
  if (train.threads == 0) train.threads = std::atoi(Env("LOTE_TRAIN_THREADS").c_str());
  if (!Env("LOTE_TRAIN_DATA_DIR").empty()) train.data_dir = Env("LOTE_TRAIN_DATA_DIR");
  const milliseconds timeout = seconds(timeout_s);
  auto client = StoreClient::Connect(store.substr(0, colon), std::atoi(store.c_str() + colon + 1),
                                     timeout, nullptr);
  if (!client.ok()) return fail(who, client.status());
  Result<RunPlan> plan = PlanRun(train, world, rank);
  if (!plan.ok()) return fail(who, plan.status());
  const ParallelDims& dims = plan->dims;
  const std::string comm = Env("LOTE_TRAIN_COMM").empty() ? "auto" : Env("LOTE_TRAIN_COMM");
  std::vector<std::string> transports;  // rank 0 prints each group's
  auto group = [&](const std::string& prefix, int r,
                   int n) -> Result<std::unique_ptr<Communicator>> {
    if (n == 1) return MakeSingleProcessCommunicator();
    GroupOptions common;
    common.prefix = prefix;
    common.rank = r;
    common.size = n;
    common.rendezvous_timeout = timeout;
    if (comm != "gloo") {
      ShmGroupOptions o;
      static_cast<GroupOptions&>(o) = common;
      std::string why_not;
      ASSIGN_OR_RETURN(std::unique_ptr<Communicator> shm,
                       MakeShmCommunicator(client->get(), o, &why_not));
      if (shm != nullptr) {
        transports.push_back(fmt::format("{} shared memory", prefix));
        return shm;
      }
      if (comm == "shm") {
        return Status::FailedPrecondition(
            fmt::format("--comm shm: the {} group cannot use shared memory: {}", prefix, why_not));
      }
      transports.push_back(fmt::format("{} Gloo ({})", prefix, why_not));
    } else {
      transports.push_back(fmt::format("{} Gloo", prefix));
    }
    GlooGroupOptions g;
    static_cast<GroupOptions&>(g) = common;
    g.bind_address = Env("LOTE_TRAIN_NODE_ADDR");
    return MakeGlooCommunicator(client->get(), g);
  };
  auto world_comm = group("world", rank, world);
  if (!world_comm.ok()) return fail(who, world_comm.status());
  auto tp_comm = group(dims.tp_group(), dims.tp_rank(), dims.tp());
  if (!tp_comm.ok()) return fail(who, tp_comm.status());
  auto dp_comm = group(dims.dp_group(), dims.dp_rank(), dims.dp());
  if (!dp_comm.ok()) return fail(who, dp_comm.status());
  if (rank == 0 && !transports.empty()) {
    fmt::print(stderr, "lote train: rank 0's groups: {}\n", fmt::join(transports, ", "));
  }
  RunGroups groups{world_comm->get(), tp_comm->get(), dp_comm->get()};
  Status s = RunTraining(*plan, stdout, groups);
  if (!s.ok()) {
    if (s.code() == StatusCode::kCancelled) {  // preempted, checkpoint written
      fmt::print(stderr, "lote train: rank {}: {}\n", rank, s.message());
      return kPreemptedExitCode;
    }
    fail(who, s);
    return s.code() == StatusCode::kUnavailable ? kPeerLostExit : 1;
  }
  return 0;
}

// --- the launcher ----------------------------------------------------------------

struct Child {
  pid_t pid = -1;
  int rank = 0, local_rank = 0;
  bool running = true;
};

class Launcher {
 public:
  Launcher(const TrainOptions& train, const LaunchOptions& o, std::vector<std::string> argv)
      : train_(train), o_(o), argv_(std::move(argv)) {}

  int Run();

 private:
  Status Rendezvous();
  Status ServeStore();
  Status JoinStore(SteadyClock::time_point deadline);
  Status WaitForNode(int n, SteadyClock::time_point deadline);
  std::string StoreAddress() const;
  Status StartRanks();
  int Monitor();
  void StopRanks();
  void Heartbeat();
  std::optional<std::string> Problem();

  TrainOptions train_;
  LaunchOptions o_;
  std::vector<std::string> argv_;
  std::unique_ptr<StoreServer> server_;
  std::unique_ptr<StoreClient> control_, work_;
  std::vector<Child> children_;
  std::thread heartbeat_;
  std::atomic<bool> stop_heartbeat_{false};
  std::mutex mu_;
  std::optional<std::string> problem_;  // protected by mu_: abort reason or lost store
};

std::optional<std::string> Launcher::Problem() {
  std::lock_guard<std::mutex> lock(mu_);
  return problem_;
}

void Launcher::Heartbeat() {
  while (!stop_heartbeat_) {
    auto r = control_->Check(kAbortKey);
    std::lock_guard<std::mutex> lock(mu_);
    if (!r.ok()) {
      if (!problem_) {
        problem_ = fmt::format("lost the rendezvous store of the main node (node {}) at {}: {}",
                               o_.main_node, control_->address(), r.status().message());
      }
      return;
    }
    if (r->has_value() && !problem_) problem_ = **r;
    if (problem_) return;
    std::this_thread::sleep_for(milliseconds(250));
  }
}

// The rendezvous: the main node serves the store, every node says hello to it (and
// then beats), announces its ranks and waits until every other node has announced.
Status Launcher::Rendezvous() {
  const auto deadline = SteadyClock::now() + seconds(o_.rdzv_timeout_s);
  if (o_.node_rank == o_.main_node) RETURN_IF_ERROR(ServeStore());
  RETURN_IF_ERROR(JoinStore(deadline));
  RETURN_IF_ERROR(work_->Set(fmt::format("node/{}", o_.node_rank),
                             fmt::format("{} {}", o_.nproc_per_node, o_.node_addr)));
  for (int n = 0; n < o_.nnodes; ++n) {
    if (n != o_.node_rank) RETURN_IF_ERROR(WaitForNode(n, deadline));
  }
  return Status::Ok();
}

std::string Launcher::StoreAddress() const {
  return fmt::format("{}:{}", o_.master_addr, o_.master_port);
}

// The main node's store; port 0 takes a free one.
Status Launcher::ServeStore() {
  StoreServer::Options so;
  so.host = o_.master_addr;
  so.port = o_.master_port;
  so.job_id = o_.job_id;
  so.num_nodes = o_.nnodes;
  // A previous attempt's main node may still hold the port for a moment.
  const auto bind_deadline = SteadyClock::now() + seconds(30);
  while (true) {
    Result<std::unique_ptr<StoreServer>> started = StoreServer::Start(so);
    if (started.ok()) {
      server_ = std::move(*started);
      break;
    }
    if (started.status().message().find("Address already in use") == std::string::npos ||
        SteadyClock::now() > bind_deadline) {
      return started.status();
    }
    Say(fmt::format("node {}: {}; retrying", o_.node_rank, started.status().message()));
    std::this_thread::sleep_for(seconds(1));
  }
  if (o_.master_port == 0) o_.master_port = server_->port();
  Say(fmt::format("node {} of {} serves the rendezvous store at {}", o_.node_rank, o_.nnodes,
                  StoreAddress()));
  return Status::Ok();
}

// The control connection (hello, then the heartbeat thread) and the work connection.
Status Launcher::JoinStore(SteadyClock::time_point deadline) {
  const milliseconds timeout = seconds(o_.rdzv_timeout_s);
  auto waiting = [&](const std::string& line) {
    Say(fmt::format("node {}: {}", o_.node_rank, line));
  };
  // The store of a previous attempt of the same job may linger for a moment (its
  // nodes are being stopped while the retry starts): it refuses this attempt, and
  // this launcher tries again until the right store answers.
  while (true) {
    ASSIGN_OR_RETURN(control_,
                     StoreClient::Connect(o_.master_addr, o_.master_port, timeout, waiting));
    Status hello = control_->Hello(o_.node_rank, o_.job_id);
    if (hello.ok()) break;
    if (hello.message().find("serves job") == std::string::npos || SteadyClock::now() > deadline) {
      return hello;
    }
    Say(fmt::format("node {}: {}; waiting for this attempt's store", o_.node_rank,
                    hello.message()));
    control_.reset();
    std::this_thread::sleep_for(seconds(1));
  }
  heartbeat_ = std::thread([this] { Heartbeat(); });
  ASSIGN_OR_RETURN(work_, StoreClient::Connect(o_.master_addr, o_.master_port, timeout, waiting));
  return Status::Ok();
}

// Until node n has announced its ranks (the same number as this node's).
Status Launcher::WaitForNode(int n, SteadyClock::time_point deadline) {
  const milliseconds timeout = seconds(o_.rdzv_timeout_s);
  bool announced = false;
  while (true) {
    if (auto p = Problem()) return Status::Cancelled(*p);
    const auto now = SteadyClock::now();
    if (now >= deadline) {
      return Status::DeadlineExceeded(fmt::format(
          "timed out after {} s waiting for node {} of {} to join at {} (--rdzv-timeout); is "
          "every node of the job running `lote train` with the same --master-addr/--master-port?",
          o_.rdzv_timeout_s, n, o_.nnodes, StoreAddress()));
    }
    const auto slice = std::min<milliseconds>(
        seconds(announced ? 10 : 1),
        std::chrono::duration_cast<milliseconds>(deadline - now) + milliseconds(1));
    Result<std::string> v = work_->Get(fmt::format("node/{}", n), slice);
    if (v.ok()) {
      const int nproc = std::atoi(v->c_str());
      if (nproc != o_.nproc_per_node) {
        return Status::InvalidArgument(fmt::format(
            "node {} runs --nproc-per-node {} but this node (node {}) runs {}; every node "
            "must start the same number of ranks",
            n, nproc, o_.node_rank, o_.nproc_per_node));
      }
      return Status::Ok();
    }
    if (!v.status().IsNotFound()) return v.status();
    Say(fmt::format(
        "node {}: waiting for node {} of {} at {} ({} s of {} s)", o_.node_rank, n, o_.nnodes,
        StoreAddress(),
        std::chrono::duration_cast<seconds>(SteadyClock::now() - deadline + timeout).count(),
        o_.rdzv_timeout_s));
    announced = true;
  }
}

Status Launcher::StartRanks() {
  const int world = o_.nnodes * o_.nproc_per_node;
  const int threads = std::max(1, CpuCount() / o_.nproc_per_node);
  std::vector<char*> args;
  for (auto& a : argv_) args.push_back(a.data());
  args.push_back(nullptr);
  const pid_t parent = ::getpid();
  for (int l = 0; l < o_.nproc_per_node; ++l) {
    Child c;
    c.local_rank = l;
    c.rank = o_.node_rank * o_.nproc_per_node + l;
    const pid_t pid = ::fork();
    if (pid < 0) return Status::Internal(fmt::format("fork: {}", std::strerror(errno)));
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // a rank never outlives its launcher
      if (::getppid() != parent) ::_exit(1);
      ::signal(SIGTERM, SIG_DFL);
      ::signal(SIGINT, SIG_DFL);
      ::setenv("LOTE_TRAIN_RANK", std::to_string(c.rank).c_str(), 1);
      ::setenv("LOTE_TRAIN_WORLD_SIZE", std::to_string(world).c_str(), 1);
      ::setenv("LOTE_TRAIN_LOCAL_RANK", std::to_string(l).c_str(), 1);
      ::setenv("LOTE_TRAIN_NODE_RANK", std::to_string(o_.node_rank).c_str(), 1);
      ::setenv("LOTE_TRAIN_STORE", fmt::format("{}:{}", o_.master_addr, o_.master_port).c_str(), 1);
      ::setenv("LOTE_TRAIN_NODE_ADDR", o_.node_addr.c_str(), 1);
      ::setenv("LOTE_TRAIN_TIMEOUT_S", std::to_string(o_.rdzv_timeout_s).c_str(), 1);
      ::setenv("LOTE_TRAIN_COMM", o_.comm.c_str(), 1);
      ::setenv("LOTE_TRAIN_THREADS", std::to_string(threads).c_str(), 1);
      ::setenv("LOTE_TRAIN_DATA_DIR", train_.data_dir.c_str(), 1);
      ::execv("/proc/self/exe", args.data());
      fmt::print(stderr, "error: cannot start rank {}: {}\n", c.rank, std::strerror(errno));
      ::_exit(127);
    }
    c.pid = pid;
    children_.push_back(c);
  }
  Say(fmt::format("node {} of {} started ranks {}..{} of {} ({} threads each)", o_.node_rank,
                  o_.nnodes, children_.front().rank, children_.back().rank, world,
                  train_.threads > 0 ? train_.threads : threads));
  return Status::Ok();
}

void Launcher::StopRanks() {
  // SIGKILL: SIGTERM means "checkpoint and stop" to a rank, and a failed job has no
  // consistent state to save.
  for (const Child& c : children_) {
    if (c.running) ::kill(c.pid, SIGKILL);
  }
  const auto deadline = SteadyClock::now() + seconds(5);
  while (SteadyClock::now() < deadline) {
    bool any = false;
    for (Child& c : children_) {
      if (!c.running) continue;
      int status = 0;
      if (::waitpid(c.pid, &status, WNOHANG) == c.pid) {
        c.running = false;
      } else {
        any = true;
      }
    }
    if (!any) return;
    std::this_thread::sleep_for(milliseconds(50));
  }
  for (Child& c : children_) {
    if (!c.running) continue;
    ::kill(c.pid, SIGKILL);
    int status = 0;
    ::waitpid(c.pid, &status, 0);
    c.running = false;
  }
}

int Launcher::Monitor() {
  int forwarded = 0;
  // A rank that failed only because a peer went away (kPeerLostExit) is a consequence;
  // the cause (a rank killed or failing on its own, here or on another node) is
  // looked for until `grace_end` before the consequence is reported.
  std::optional<std::string> consequence;
  SteadyClock::time_point grace_end{};
  bool preempted = false;
  auto stop = [&](const std::string& reason, bool publish) {
    if (publish) (void)control_->Set(kAbortKey, reason);
    Say(fmt::format("node {}: stopping the job: {}", o_.node_rank, reason));
    StopRanks();
    return forwarded != 0 ? 128 + forwarded : 1;
  };
  while (true) {
    if (int sig = g_signal.load(); sig != 0 && sig != forwarded) {
      for (const Child& c : children_) {
        if (c.running) ::kill(c.pid, sig);
      }
      forwarded = sig;
    }
    int running = 0;
    for (Child& c : children_) {
      if (!c.running) continue;
      int status = 0;
      const pid_t r = ::waitpid(c.pid, &status, WNOHANG);
      if (r != c.pid) {
        ++running;
        continue;
      }
      c.running = false;
      if (WIFEXITED(status) && WEXITSTATUS(status) == 0) continue;
      if (WIFEXITED(status) && WEXITSTATUS(status) == kPreemptedExitCode) {
        preempted = true;
        continue;
      }
      const std::string reason =
          fmt::format("rank {} (node {}, local rank {}, pid {}) {}", c.rank, o_.node_rank,
                      c.local_rank, c.pid, DescribeExit(status));
      if (WIFEXITED(status) && WEXITSTATUS(status) == kPeerLostExit) {
        if (!consequence) {
          consequence = reason + " after losing a peer";
          grace_end = SteadyClock::now() + seconds(2);
        }
        continue;
      }
      return stop(reason, true);
    }
    if (auto p = Problem()) return stop(*p, false);
    if (consequence && (SteadyClock::now() >= grace_end || running == 0)) {
      return stop(*consequence, true);
    }
    if (running == 0) break;
    std::this_thread::sleep_for(milliseconds(100));
  }
  // Every rank of this node succeeded (or stopped at an agreed step, preempted).
  stop_heartbeat_ = true;
  if (heartbeat_.joinable()) heartbeat_.join();
  (void)control_->Done();
  if (server_ != nullptr) {
    // The store lives until every node has said Done (or one is lost).
    const auto deadline = SteadyClock::now() + seconds(o_.rdzv_timeout_s);
    while (server_->nodes_done() < o_.nnodes && SteadyClock::now() < deadline) {
      if (auto reason = server_->abort_reason()) {
        Say(fmt::format("node {}: the job failed on another node: {}", o_.node_rank, *reason));
        return 1;
      }
      std::this_thread::sleep_for(milliseconds(100));
    }
  }
  if (preempted) {
    Say(fmt::format("node {}: preempted; the ranks saved a checkpoint (exit {})", o_.node_rank,
                    kPreemptedExitCode));
    return kPreemptedExitCode;
  }
  return 0;
}

int Launcher::Run() {
  ::signal(SIGPIPE, SIG_IGN);
  ::signal(SIGTERM, OnSignal);
  ::signal(SIGINT, OnSignal);
  int code = 1;
  Status s = Rendezvous();
  if (s.ok() && !train_.plan_only) {
    Result<std::string> dir = LocalDataset(train_.data_dir);
    s = dir.status();
    if (dir.ok()) train_.data_dir = *dir;
  }
  if (s.ok()) s = StartRanks();
  if (s.ok()) {
    code = Monitor();
  } else {
    fmt::print(stderr, "error: node {}: {}\n", o_.node_rank, s.ToString());
    if (control_ != nullptr)
      (void)control_->Set(kAbortKey, fmt::format("node {}: {}", o_.node_rank, s.message()));
    StopRanks();
  }
  stop_heartbeat_ = true;
  if (heartbeat_.joinable()) heartbeat_.join();
  return code;
}

}  // namespace

Result<LaunchOptions> ResolveLaunch(LaunchOptions o) {
  if (o.nproc_per_node < 1) {
    return Status::InvalidArgument(
        fmt::format("--nproc-per-node {} must be >= 1", o.nproc_per_node));
  }
  if (o.nnodes == 0) {
    ASSIGN_OR_RETURN(o.nnodes, EnvInt("AWS_BATCH_JOB_NUM_NODES", 1));
    if (o.nnodes == 0) o.nnodes = 1;
  }
  if (o.node_rank < 0) {
    ASSIGN_OR_RETURN(o.node_rank, EnvInt("AWS_BATCH_JOB_NODE_INDEX", 0));
  }
  if (o.main_node < 0) {
    ASSIGN_OR_RETURN(o.main_node, EnvInt("AWS_BATCH_JOB_MAIN_NODE_INDEX", 0));
  }
  if (o.node_rank >= o.nnodes || o.main_node >= o.nnodes) {
    return Status::InvalidArgument(
        fmt::format("node rank {} (main node {}) is outside the job's {} nodes", o.node_rank,
                    o.main_node, o.nnodes));
  }
  const bool is_main = o.node_rank == o.main_node;
  if (o.master_addr.empty()) o.master_addr = Env("AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS");
  if (o.master_addr.empty() && is_main) o.master_addr = Env("LOTE_PRIVATE_IPV4_ADDRESS");
  if (o.master_addr.empty()) {
    if (!is_main && o.nnodes > 1) {
      return Status::InvalidArgument(fmt::format(
          "node {} does not know the main node's address: give --master-addr, or run as an AWS "
          "Batch multi-node job (AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS)",
          o.node_rank));
    }
    o.master_addr = "127.0.0.1";
  }
  if (o.node_addr.empty()) o.node_addr = Env("LOTE_PRIVATE_IPV4_ADDRESS");
  if (o.node_addr.empty())
    o.node_addr = is_main ? o.master_addr : LocalAddressTowards(o.master_addr);
  if (o.job_id.empty()) {
    o.job_id = Env("AWS_BATCH_JOB_ID");
    if (const size_t hash = o.job_id.find('#'); hash != std::string::npos) o.job_id.resize(hash);
    // Each attempt of a job meets at its own store.
    if (!o.job_id.empty() && !Env("AWS_BATCH_JOB_ATTEMPT").empty()) {
      o.job_id += " attempt " + Env("AWS_BATCH_JOB_ATTEMPT");
    }
  }
  if (o.master_port == 0 && o.nnodes > 1) {
    o.master_port = kDefaultMasterPort;
    if (!o.job_id.empty()) {
      uint64_t h = 1469598103934665603ULL;  // FNV-1a
      for (unsigned char c : o.job_id) h = (h ^ c) * 1099511628211ULL;
      o.master_port += static_cast<int>(h % kDerivedPorts);
    }
  }
  // One node: the store may take any free port (0), since only this launcher's own
  // ranks connect to it; two runs on one host then never collide.
  if (o.master_port < 0 || o.master_port > 65535 || (o.master_port == 0 && o.nnodes > 1)) {
    return Status::InvalidArgument(fmt::format("--master-port {} is not a port", o.master_port));
  }
  if (o.rdzv_timeout_s < 1) return Status::InvalidArgument("--rdzv-timeout must be >= 1 second");
  return o;
}

int RunTrainCommand(const TrainOptions& train, const LaunchOptions& launch,
                    const std::vector<std::string>& argv) {
  if (!Env("LOTE_TRAIN_RANK").empty()) return RunRank(train);
  auto fail = [](const Status& s) {
    fmt::print(stderr, "error: {}\n", s.ToString());
    return 1;
  };
  Result<LaunchOptions> lo = ResolveLaunch(launch);
  if (!lo.ok()) return fail(lo.status());
  const int world = lo->nnodes * lo->nproc_per_node;
  // Refuse a layout that cannot work before any rank starts (the plan of rank 0; a
  // single process trains with it).
  Result<RunPlan> plan = PlanRun(train, world, 0);
  if (!plan.ok()) return fail(plan.status());
  if (world == 1 || train.plan_only) {
    if (!train.plan_only) {
      Result<std::string> dir = LocalDataset(train.data_dir);
      if (!dir.ok()) return fail(dir.status());
      plan->options.data_dir = *dir;
    }
    Status s = RunTraining(*plan, stdout);
    if (s.code() == StatusCode::kCancelled) {
      fmt::print(stderr, "lote train: {}\n", s.message());
      return kPreemptedExitCode;
    }
    return s.ok() ? 0 : fail(s);
  }
  Launcher launcher(train, *lo, argv);
  return launcher.Run();
}

}  // namespace lote::engine
