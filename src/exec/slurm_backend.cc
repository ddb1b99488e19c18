#include "exec/slurm_backend.h"

#include <dirent.h>
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <set>
#include <sstream>
#include <thread>

#include "common/files.h"
#include "common/thread_name.h"
#include "exec/command.h"
#include "exec/node_files.h"
#include "exec/node_resolve.h"
#include "exec/shim.h"
#include "exec/slurm_placement.h"

namespace lote::exec {
namespace {

int64_t SteadyMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  size_t i = 0;
  while (i < s.size() && s[i] == ' ') ++i;
  return s.substr(i);
}

// Slurm itself is asked at most this often while every job's nodes can
// speak for themselves (started / status records).
constexpr int64_t kSqueueEveryMs = 1000;

const std::set<std::string>& TerminalStates() {
  static const std::set<std::string> s = {"COMPLETED",     "FAILED",      "CANCELLED", "TIMEOUT",
                                          "NODE_FAIL",     "PREEMPTED",   "BOOT_FAIL", "DEADLINE",
                                          "OUT_OF_MEMORY", "SPECIAL_EXIT"};
  return s;
}

// The folder of node k's runner in an attempt folder.
NodePaths NodeFolder(const std::string& dir, int32_t k) {
  return NodePaths{dir + "/node-" + std::to_string(k)};
}

// Number of node folders (with their spec) in an attempt folder.
int32_t CountNodes(const std::string& dir) {
  int32_t n = 0;
  while (FileExists(NodeFolder(dir, n).spec())) ++n;
  return n;
}

// A new file of the attempt's folder (made by this launch, read by Slurm's
// nodes once): written plainly, no fsync (a power loss ends the job anyway).
Status WriteNew(const std::string& path, std::string_view data, mode_t mode) {
  const int fd = ::open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, mode);
  if (fd < 0) return Status::Internal("cannot create " + path + ": " + std::strerror(errno));
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = std::strerror(errno);
      ::close(fd);
      return Status::Internal("cannot write " + path + ": " + why);
    }
    done += static_cast<size_t>(n);
  }
  if (::fchmod(fd, mode) != 0 || ::close(fd) != 0)
    return Status::Internal("cannot write " + path + ": " + std::strerror(errno));
  return Status();
}

}  // namespace

int64_t ParseSlurmTime(const std::string& text) {
  struct tm tm {};
  const char* end = ::strptime(text.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (end == nullptr || *end != '\0') return 0;
  tm.tm_isdst = -1;
  const time_t t = ::mktime(&tm);
  return t < 0 ? 0 : int64_t{t} * 1000;
}

int64_t SlurmTimeMinutes(int64_t seconds) { return std::max<int64_t>(1, (seconds + 59) / 60); }

SlurmBackend::SlurmBackend(SlurmBackendOptions options)
    : options_(std::move(options)), host_(ThisRunnerHost()) {
  host_.node_is_here = false;
}

Result<std::unique_ptr<SlurmBackend>> SlurmBackend::Create(SlurmBackendOptions options) {
  if (options.partition.empty())
    return Status::InvalidArgument(
        "a Slurm compute environment needs the tag lote:slurm-partition=NAME");
  if (options.state_dir.empty()) return Status::InvalidArgument("SlurmBackend: no state_dir");
  if (!options.slurm_conf.empty() && !FileExists(options.slurm_conf))
    return Status::InvalidArgument("lote:slurm-conf names " + options.slurm_conf +
                                   ", which does not exist");
  RETURN_IF_ERROR(MakeDirs(options.state_dir, 0755));
  if (options.shim_command.empty()) options.shim_command = DefaultShimCommand();
  if (options.shim_command.empty())
    return Status::Internal("SlurmBackend: cannot find the node runner (/proc/self/exe)");
  ASSIGN_OR_RETURN(auto podman,
                   WritePodmanConfig(options.state_dir + "/containers", options.registry));
  std::unique_ptr<SlurmBackend> b(new SlurmBackend(std::move(options)));
  b->podman_conf_ = podman;
  Result<Capacity> c = b->ReadCapacity();
  {
    std::lock_guard<std::mutex> lock(b->mu_);
    if (c.ok()) {
      b->capacity_ = *c;
    } else {
      spdlog::warn("slurm: partition {}: {}", b->options_.partition, c.status().ToString());
    }
    b->capacity_at_ms_ = SteadyMs();
  }
  b->poller_ = NamedThread("lote-slurm", [p = b.get()] { p->Poll(); });
  return b;
}

SlurmBackend::~SlurmBackend() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  poll_cv_.notify_all();
  events_cv_.notify_all();
  if (poller_.joinable()) poller_.join();
}

const Capabilities& SlurmBackend::capabilities() const {
  static const Capabilities caps{
      {"image", "command", "environment", "resourceRequirements", "vcpus", "memory", "user",
       "ulimits", "instanceType", "jobRoleArn", "executionRoleArn", "networkConfiguration",
       "fargatePlatformConfiguration", "runtimePlatform"},
      /*accelerators=*/true};
  return caps;
}

std::map<std::string, std::string> SlurmBackend::SlurmEnv() const {
  std::map<std::string, std::string> env;
  if (!options_.slurm_conf.empty()) env["SLURM_CONF"] = options_.slurm_conf;
  return env;
}

Result<Capacity> SlurmBackend::ReadCapacity() const {
  ASSIGN_OR_RETURN(CommandResult r,
                   RunCommand({"sinfo", "-h", "-N", "-p", options_.partition, "-o", "%N %c %m %G"},
                              SlurmEnv(), 30'000));
  if (r.exit_code != 0) return Status::Unavailable("sinfo: " + Trim(r.err.empty() ? r.out : r.err));
  std::set<std::string> names;
  int64_t cpus = 0, mem = 0;
  int32_t gpus = 0;
  std::istringstream in(r.out);
  for (std::string line; std::getline(in, line);) {
    std::istringstream f(line);
    std::string name, c, m, g;
    if (!(f >> name >> c >> m)) continue;
    f >> g;
    if (!names.insert(name).second) continue;
    int64_t ci = std::atoll(c.c_str()), mi = std::atoll(m.c_str());
    const int32_t gi = GresGpus(g);
    cpus = names.size() == 1 ? ci : std::min(cpus, ci);
    mem = names.size() == 1 ? mi : std::min(mem, mi);
    gpus = names.size() == 1 ? gi : std::min(gpus, gi);
  }
  if (names.empty())
    return Status::NotFound("Slurm has no partition '" + options_.partition +
                            "' (or it has no nodes); check lote:slurm-partition");
  Capacity cap;
  cap.nodes = static_cast<int32_t>(names.size());
  cap.milli_vcpu_per_node = cpus * 1000;
  cap.memory_mib_per_node = mem;
  cap.gpus_per_node = gpus;
  std::string list;
  for (const std::string& n : names) list += (list.empty() ? "" : ",") + n;
  cap.description = "a node of Slurm partition " + options_.partition + " (" +
                    std::to_string(cap.nodes) + " nodes: " + list + ")";
  return cap;
}

std::optional<Capacity> SlurmBackend::GetCapacity() {
  std::lock_guard<std::mutex> lock(mu_);
  return capacity_;
}

std::string SlurmBackend::InjectedFault(const AttemptKey& attempt, int32_t num_nodes) {
  for (int32_t k = 0; k < num_nodes; ++k) {
    Result<Json> fault = ReadJsonFile(NodeFolder(AttemptDir(attempt), k).fault());
    if (fault.ok() && fault->value("injected", Json()).is_string())
      return (*fault)["injected"].get<std::string>();
  }
  return "";
}

std::optional<std::vector<std::string>> SlurmBackend::NodeHosts(const AttemptKey& attempt,
                                                                int32_t num_nodes) const {
  // Written by the batch script (hosts: one Slurm node name per line, in node
  // index order); none when the job never started.
  std::vector<std::string> out(static_cast<size_t>(std::max(num_nodes, 0)));
  Result<std::string> text = ReadFile(AttemptDir(attempt) + "/hosts");
  if (!text.ok()) return out;
  std::istringstream in(*text);
  std::string line;
  for (size_t k = 0; k < out.size() && std::getline(in, line); ++k) out[k] = Trim(line);
  return out;
}

std::vector<std::string> SlurmBackend::ExcludedHosts(const std::vector<std::string>& avoid,
                                                     int32_t needed) const {
  if (avoid.empty()) return {};
  // Asked only for a retry after a node failure: the partition as it is now.
  Result<CommandResult> r = RunCommand(
      {"sinfo", "-h", "-N", "-p", options_.partition, "-o", "%N %t"}, SlurmEnv(), 30'000);
  if (!r.ok() || r->exit_code != 0) {
    spdlog::warn("slurm: sinfo: {}", r.ok() ? Trim(r->err) : r.status().ToString());
    return {};
  }
  return HostsToExclude(avoid, ParseSinfoNodeStates(r->out), needed);
}

Status SlurmBackend::DrainHost(const std::string& host, const std::string& reason) {
  if (host.empty() || host.find_first_of(" ,=\n") != std::string::npos)
    return Status::InvalidArgument("'" + host + "' is not a Slurm node name");
  ASSIGN_OR_RETURN(CommandResult r,
                   RunCommand({"scontrol", "update", "nodename=" + host, "state=drain",
                               "reason=" + std::string(kSlurmQuarantineReasonPrefix) + reason},
                              SlurmEnv(), 30'000));
  if (r.exit_code != 0)
    return Status::Unavailable("scontrol update nodename=" + host +
                               " state=drain: " + Trim(r.err.empty() ? r.out : r.err));
  return Status();
}

Status SlurmBackend::ResumeHost(const std::string& host) {
  if (host.empty() || host.find_first_of(" ,=\n") != std::string::npos)
    return Status::InvalidArgument("'" + host + "' is not a Slurm node name");
  // Only lote's own drain is undone: an administrator's stays.
  ASSIGN_OR_RETURN(CommandResult reason,
                   RunCommand({"sinfo", "-h", "-N", "-n", host, "-o", "%E"}, SlurmEnv(), 30'000));
  if (reason.exit_code != 0)
    return Status::Unavailable("sinfo -n " + host + ": " + Trim(reason.err));
  if (!IsLoteDrainReason(Trim(reason.out))) return Status();
  ASSIGN_OR_RETURN(
      CommandResult r,
      RunCommand({"scontrol", "update", "nodename=" + host, "state=resume"}, SlurmEnv(), 30'000));
  if (r.exit_code != 0)
    return Status::Unavailable("scontrol update nodename=" + host +
                               " state=resume: " + Trim(r.err.empty() ? r.out : r.err));
  return Status();
}

std::string SlurmBackend::AttemptDir(const AttemptKey& attempt) const {
  return options_.state_dir + "/" + attempt.job_id + "/" + std::to_string(attempt.attempt);
}

Result<GangLaunch> SlurmBackend::LaunchGang(const GangSpec& gang) {
  const std::string who =
      "job " + gang.attempt.job_id + " attempt " + std::to_string(gang.attempt.attempt);
  if (gang.nodes.empty()) return Status::InvalidArgument(who + ": a gang needs a node");
  const std::string& id = gang.attempt.job_id;
  if (id.empty() || id == "." || id == ".." ||
      id.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_:.") !=
          std::string::npos)
    return Status::InvalidArgument(who + ": the job id is not a safe folder name");
  GangLaunch out;
  int64_t cpus = 0, mem = 0;
  int32_t gpus = 0;
  const std::string dir = AttemptDir(gang.attempt);
  // Every node is run by the node runner (`lote exec-shim --attempt-dir`),
  // resolved here exactly as the local backend does; only the rlimits wait for
  // the node the task lands on.
  std::vector<ShimSpec> specs;
  for (size_t i = 0; i < gang.nodes.size(); ++i) {
    const NodeSpec& n = gang.nodes[i];
    const int32_t k = static_cast<int32_t>(i);
    if (n.node.attempt != gang.attempt || n.node.node_index != k)
      return Status::InvalidArgument("node " + n.node.ToString() +
                                     ": gang nodes must be in index order 0..n-1");
    const std::string base = dir + "/node-" + std::to_string(k);
    ASSIGN_OR_RETURN(ResolvedNode r,
                     ResolveNode(n, host_, "the Slurm backend", dir + "/work-" + std::to_string(k),
                                 base + ".out"));
    r.spec.placement = "slurm";
    if (r.spec.container) {
      UseLotePodman(&*r.spec.container, podman_conf_, options_.registry);
      r.spec.container->name = ContainerName(id, gang.attempt.attempt, k);
    }
    r.spec.multi_node = gang.multi_node;
    r.spec.main_node_index = gang.main_node_index;
    r.spec.default_grace_ms = options_.default_grace_ms;
    if (r.spec.fault.at_step > 0)  // the main node's output, on the shared state folder
      r.spec.fault.progress_path = dir + "/node-" + std::to_string(gang.main_node_index) + ".out";
    for (std::string& w : r.warnings) out.warnings[k].push_back(std::move(w));
    cpus = std::max(cpus, (n.vcpu_milli + 999) / 1000);
    mem = std::max(mem, n.memory_mib);
    gpus = std::max(gpus, n.accelerators);
    specs.push_back(std::move(r.spec));
  }

  RETURN_IF_ERROR(MakeDirs(options_.state_dir + "/" + id, 0755));
  if (::mkdir(dir.c_str(), 0755) != 0) {
    if (errno == EEXIST)
      return Status::AlreadyExists(who + " was already handed to Slurm (" + dir + " exists)");
    return Status::Internal("cannot create " + dir + ": " + std::strerror(errno));
  }
  for (size_t k = 0; k < specs.size(); ++k) {
    const NodePaths node = NodeFolder(dir, static_cast<int32_t>(k));
    if (::mkdir(node.dir.c_str(), 0755) != 0)
      return Status::Internal("cannot create " + node.dir + ": " + std::strerror(errno));
    RETURN_IF_ERROR(WriteJsonRecord(node.spec(), ToJson(specs[k]), 0600));
    // The log stream follows it from the start.
    RETURN_IF_ERROR(WriteNew(specs[k].output_path, "", 0600));
  }
  std::string runner;
  for (const std::string& a : options_.shim_command) runner += ShellQuote(a) + " ";
  const int32_t n = static_cast<int32_t>(gang.nodes.size());
  const bool direct = n == 1 && !gang.multi_node;
  std::string script =
      "#!/bin/bash\n# lote: job " + id + " attempt " + std::to_string(gang.attempt.attempt) + "\n" +
      "export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n" +
      "dir=" + ShellQuote(dir) + "\nmain=" + std::to_string(gang.main_node_index) + "\n";
  if (direct) {
    // One node: the batch step is the runner itself (no srun step, no
    // address lookups: nothing to meet).
    script +=
        "echo \"$SLURMD_NODENAME\" > \"$dir/hosts\"\n"
        "export SLURM_NODEID=0 LOTE_NODE_ADDRS=\nexec " +
        runner + "--attempt-dir \"$dir\"\n";
  } else {
    script +=
        // Every node's address in node index order (SLURM_NODEID follows the
        // node list), known only inside the allocation.
        "addrs=()\n"
        "hosts=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\")\n"
        "printf '%s\\n' $hosts > \"$dir/hosts\"\n"
        "for h in $hosts; do\n"
        "  a=$(scontrol show node \"$h\" -o 2>/dev/null | tr ' ' '\\n' | sed -n "
        "'s/^NodeAddr=//p')\n"
        "  [ -n \"$a\" ] || a=$(getent ahostsv4 \"$h\" | awk 'NR==1{print $1}')\n"
        "  addrs+=(\"$a\")\n"
        "done\n"
        "export LOTE_NODE_ADDRS=\"${addrs[*]}\" LOTE_MAIN_ADDR=\"${addrs[$main]}\"\n"
        "srun --export=ALL --kill-on-bad-exit=1 --nodes=" +
        std::to_string(n) + " --ntasks=" + std::to_string(n) + " --ntasks-per-node=1 " + runner +
        "--attempt-dir \"$dir\"\nexit $?\n";
  }
  RETURN_IF_ERROR(WriteNew(dir + "/batch.sh", script, 0755));
  std::vector<std::string> argv = {
      "sbatch",
      "--parsable",
      "--export=ALL",
      "--partition=" + options_.partition,
      "--job-name=lote-" + id + "-" + std::to_string(gang.attempt.attempt),
      "--nodes=" + std::to_string(n),
      "--ntasks-per-node=1",
      "--output=" + dir + "/batch.out",
      "--chdir=" + dir};
  if (cpus > 0) argv.push_back("--cpus-per-task=" + std::to_string(cpus));
  if (mem > 0) argv.push_back("--mem=" + std::to_string(mem));
  // Slurm picks the GPUs and binds them (CUDA_VISIBLE_DEVICES); every node of
  // the allocation gets the largest count a node range asks for.
  if (gpus > 0) argv.push_back("--gres=gpu:" + std::to_string(gpus));
  if (gang.timeout_seconds)
    argv.push_back("--time=" + std::to_string(SlurmTimeMinutes(*gang.timeout_seconds)));
  const std::vector<std::string> exclude = ExcludedHosts(gang.avoid_hosts, n);
  if (!exclude.empty()) {
    std::string list;
    for (const std::string& h : exclude) list += (list.empty() ? "" : ",") + h;
    argv.push_back("--exclude=" + list);
    spdlog::info("slurm: {} keeps off {}, where its previous attempt's failed node ran", who, list);
  }
  argv.push_back(dir + "/batch.sh");
  // --export=ALL of a minimal environment: the batch script sees only these
  // (and Slurm's own), never the server's; the command's is in its spec.
  // (--export=NONE or NIL would make slurmd build a login environment for
  // every job: ~100 ms each.)
  std::map<std::string, std::string> env = SlurmEnv();
  env["PATH"] = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
  env["LANG"] = "C";
  ASSIGN_OR_RETURN(CommandResult r, RunCommand(argv, env, 60'000, /*inherit_env=*/false));
  const std::string slurm_id = Trim(r.out.substr(0, r.out.find(';')));
  if (r.exit_code != 0 || slurm_id.empty() ||
      slurm_id.find_first_not_of("0123456789") != std::string::npos) {
    const std::string why = Trim(r.err.empty() ? r.out : r.err);
    return Status::FailedPrecondition(who + ": Slurm refused the job (partition " +
                                      options_.partition + "): " + why);
  }
  (void)WriteNew(dir + "/slurm_job_id", slurm_id + "\n", 0644);
  // What a restarted server reads back (Adopt): the job asked for GPUs.
  if (gpus > 0) (void)WriteNew(dir + "/gres_gpus", std::to_string(gpus) + "\n", 0644);
  out.backend_ref = slurm_id;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Tracked t;
    t.attempt = gang.attempt;
    t.slurm_id = slurm_id;
    t.nodes = n;
    t.direct = direct;
    t.gpus = gpus > 0;
    tracked_[gang.attempt] = t;
    poll_now_ = true;
  }
  poll_cv_.notify_all();
  return out;
}

Status SlurmBackend::CheckRunning(const AttemptKey& attempt) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = tracked_.find(attempt);
  if (it == tracked_.end() || !it->second.running_reported || it->second.terminating)
    return Status::NotFound("job " + attempt.job_id + " attempt " +
                            std::to_string(attempt.attempt) + " is not running under Slurm");
  return Status::Ok();
}

Result<std::map<int32_t, std::string>> SlurmBackend::CollectStackDumps(const AttemptKey& attempt,
                                                                       int64_t timeout_ms) {
  const std::string dir = AttemptDir(attempt);
  const int32_t nodes = CountNodes(dir);
  if (nodes <= 0)
    return Status::NotFound("no node of job " + attempt.job_id + " attempt " +
                            std::to_string(attempt.attempt) + " under Slurm");
  RETURN_IF_ERROR(CheckRunning(attempt));
  for (int32_t k = 0; k < nodes; ++k) {
    const NodePaths p = NodeFolder(dir, k);
    (void)::unlink(p.dump_result().c_str());
    RETURN_IF_ERROR(WriteJsonRecord(p.dump_request(), Json{{"timeout_ms", timeout_ms}}));
  }
  // Each runner dumps its own node's processes on its host (in parallel);
  // the shared state folder brings the answers back.
  std::map<int32_t, std::string> out;
  const int64_t deadline = SteadyMs() + timeout_ms + 15'000;
  while (static_cast<int32_t>(out.size()) < nodes && SteadyMs() < deadline) {
    for (int32_t k = 0; k < nodes; ++k) {
      if (out.count(k)) continue;
      Result<std::string> dump = ReadFile(NodeFolder(dir, k).dump_result());
      if (dump.ok()) out[k] = std::move(dump).value();
    }
    if (static_cast<int32_t>(out.size()) < nodes)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  for (int32_t k = 0; k < nodes; ++k)
    if (!out.count(k))
      out[k] = "(no stack: the runner of node " + std::to_string(k) + " did not answer within " +
               std::to_string((timeout_ms + 15'000) / 1000) + " s; it may have ended)\n";
  return out;
}

Status SlurmBackend::InjectFault(const NodeKey& node, const NodeFault& fault,
                                 int32_t main_node_index) {
  const std::string dir = AttemptDir(node.attempt);
  if (node.node_index < 0 || node.node_index >= CountNodes(dir))
    return Status::NotFound("node " + node.ToString() + " does not run under Slurm");
  RETURN_IF_ERROR(CheckRunning(node.attempt));
  NodeFault f = fault;
  if (f.at_step > 0)  // the main node's output, on the shared state folder
    f.progress_path = dir + "/node-" + std::to_string(main_node_index) + ".out";
  return WriteJsonRecord(NodeFolder(dir, node.node_index).inject(), ToJson(f));
}

Status SlurmBackend::Terminate(const AttemptKey& attempt, std::optional<int64_t> grace_ms) {
  const int64_t grace = std::max<int64_t>(0, grace_ms.value_or(options_.default_grace_ms));
  std::string id;
  bool running = false;
  bool direct = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = tracked_.find(attempt);
    if (it == tracked_.end())
      return Status::NotFound("no Slurm job of job " + attempt.job_id + " attempt " +
                              std::to_string(attempt.attempt) + " is running");
    id = it->second.slurm_id;
    running = it->second.running_reported;
    direct = it->second.direct;
    it->second.terminating = true;
    const int64_t kill_at = SteadyMs() + grace;
    if (it->second.kill_at_ms == 0 || kill_at < it->second.kill_at_ms)
      it->second.kill_at_ms = running && grace > 0 ? kill_at : SteadyMs();
    poll_now_ = true;
  }
  if (running && grace > 0) {
    // The runners' grace period, then SIGTERM to the steps' tasks (the wrappers pass it on); the
    // batch shell waits for them. A single-node job's wrapper is the batch step (--batch); a gang's
    // are the srun step's tasks (the batch shell waits for srun).
    const std::string dir = AttemptDir(attempt);
    const TerminateRequest req{grace, options_.clock->NowMillis()};
    for (int32_t k = 0; k < CountNodes(dir); ++k)
      (void)WriteJsonRecord(NodeFolder(dir, k).terminate(), ToJson(req));
    std::vector<std::string> argv = {"scancel", "--signal=TERM"};
    if (direct) argv.push_back("--batch");
    argv.push_back(id);
    Result<CommandResult> r = RunCommand(argv, SlurmEnv(), 30'000);
    if (!r.ok() || r->exit_code != 0)
      spdlog::warn("slurm: scancel --signal=TERM {}: {}", id,
                   r.ok() ? Trim(r->err) : r.status().ToString());
  }
  poll_cv_.notify_all();
  return Status();
}

Result<std::vector<NodeEvent>> SlurmBackend::Wait(int64_t timeout_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  if (waiting_) return Status::FailedPrecondition("SlurmBackend::Wait: another thread waits");
  waiting_ = true;
  events_cv_.wait_for(lock, std::chrono::milliseconds(std::max<int64_t>(0, timeout_ms)),
                      [&] { return !pending_.empty() || wake_ || stopping_; });
  wake_ = false;
  waiting_ = false;
  std::vector<NodeEvent> out(std::make_move_iterator(pending_.begin()),
                             std::make_move_iterator(pending_.end()));
  pending_.clear();
  return out;
}

void SlurmBackend::Wake() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    wake_ = true;
  }
  events_cv_.notify_all();
}

Result<RecoverReport> SlurmBackend::Recover(const std::vector<RecoverItem>& expected) {
  RecoverReport report;
  std::map<AttemptKey, std::string> refs;
  std::vector<NodeEvent> lost;
  // The Slurm job of an attempt whose reference was never stored (the server
  // stopped between sbatch and its commit): found by its unique job name.
  auto by_name = [&](const AttemptKey& a) -> std::string {
    Result<std::string> saved = ReadFile(AttemptDir(a) + "/slurm_job_id");
    if (saved.ok() && !Trim(*saved).empty()) return Trim(*saved);
    if (!FileExists(AttemptDir(a))) return "";
    Result<CommandResult> r = RunCommand({"squeue", "-h", "--states=all", "-o", "%i", "-n",
                                          "lote-" + a.job_id + "-" + std::to_string(a.attempt)},
                                         SlurmEnv(), 30'000);
    return r.ok() && r->exit_code == 0 ? Trim(r->out.substr(0, r->out.find('\n'))) : "";
  };
  std::map<AttemptKey, std::string> found;
  for (const RecoverItem& item : expected) {
    if (item.backend_ref.empty() && !found.count(item.node.attempt))
      found[item.node.attempt] = by_name(item.node.attempt);
  }
  for (const RecoverItem& item : expected) {
    if (item.backend_ref.empty() && found[item.node.attempt].empty()) {
      // Placed, never handed to Slurm: it never ran.
      NodeEvent e;
      e.node = item.node;
      e.outcome = NodeOutcome::kLost;
      e.never_started = true;
      e.reason = "the attempt was never handed to Slurm (the server stopped first)";
      e.at_ms = e.stopped_at_ms = options_.clock->NowMillis();
      lost.push_back(e);
      report.lost.push_back(item.node);
      report.never_started.push_back(item.node);
      continue;
    }
    const std::string ref = item.backend_ref.empty() ? found[item.node.attempt] : item.backend_ref;
    refs[item.node.attempt] = ref;
    report.adopted.push_back(item.node);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [attempt, ref] : refs) {
      Tracked t;
      t.attempt = attempt;
      t.slurm_id = ref;
      t.nodes = std::max<int32_t>(1, CountNodes(AttemptDir(attempt)));
      Result<std::string> script = ReadFile(AttemptDir(attempt) + "/batch.sh");
      t.direct = script.ok() && script->find("\nsrun ") == std::string::npos;
      t.gpus = FileExists(AttemptDir(attempt) + "/gres_gpus");
      tracked_[attempt] = t;
    }
    poll_now_ = true;
  }
  Push(std::move(lost));
  poll_cv_.notify_all();
  return report;
}

Result<std::string> SlurmBackend::OutputPath(const NodeKey& node) const {
  const std::string dir = AttemptDir(node.attempt);
  if (!FileExists(dir)) return Status::NotFound("node " + node.ToString() + " never ran here");
  return dir + "/node-" + std::to_string(node.node_index) + ".out";
}

Status SlurmBackend::RemoveJobFiles(const std::string& job_id) {
  if (!IsSafeJobId(job_id))
    return Status::InvalidArgument("Slurm executor: not a job id: " + job_id);
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = tracked_.lower_bound(AttemptKey{job_id, 0});
    if (it != tracked_.end() && it->first.job_id == job_id) {
      return Status::FailedPrecondition("Slurm executor: attempt " +
                                        std::to_string(it->first.attempt) + " of job " + job_id +
                                        " runs; its files are kept");
    }
  }
  const std::string dir = options_.state_dir + "/" + job_id;
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  if (ec) return Status::Internal("Slurm executor: cannot remove " + dir + ": " + ec.message());
  return Status();
}

std::vector<NodeKey> SlurmBackend::Running() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<NodeKey> out;
  for (const auto& [key, t] : tracked_)
    for (int32_t k = 0; k < t.nodes; ++k) out.push_back(NodeKey{key, k});
  return out;
}

void SlurmBackend::Push(std::vector<NodeEvent> events) {
  if (events.empty()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (NodeEvent& e : events) pending_.push_back(std::move(e));
  }
  events_cv_.notify_all();
}

void SlurmBackend::Poll() {
  int64_t interval = options_.poll_min_ms;
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      poll_cv_.wait_for(lock, std::chrono::milliseconds(interval),
                        [&] { return stopping_ || poll_now_; });
      if (stopping_) return;
      // Backoff: at once after a launch or terminate, then slower while
      // nothing changes.
      interval = poll_now_ ? options_.poll_min_ms
                           : std::min(options_.poll_max_ms, std::max<int64_t>(1, interval) * 2);
      poll_now_ = false;
    }
    bool refresh = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      refresh = SteadyMs() - capacity_at_ms_ >= options_.capacity_refresh_ms;
    }
    if (refresh) {
      Result<Capacity> c = ReadCapacity();
      std::lock_guard<std::mutex> lock(mu_);
      capacity_at_ms_ = SteadyMs();
      if (c.ok()) {
        capacity_ = *c;
      } else {
        spdlog::warn("slurm: partition {}: {}", options_.partition, c.status().ToString());
      }
    }
    const size_t before = [&] {
      std::lock_guard<std::mutex> lock(mu_);
      return pending_.size();
    }();
    PollOnce();
    std::lock_guard<std::mutex> lock(mu_);
    if (pending_.size() != before) interval = options_.poll_min_ms;
  }
}

void SlurmBackend::PollOnce() {
  std::vector<Tracked> jobs;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [key, t] : tracked_) jobs.push_back(t);
  }
  if (jobs.empty()) return;
  // Kills due after a grace period.
  for (const Tracked& t : jobs) {
    if (t.kill_at_ms == 0 || SteadyMs() < t.kill_at_ms) continue;
    Result<CommandResult> r = RunCommand({"scancel", t.slurm_id}, SlurmEnv(), 30'000);
    if (!r.ok() || r->exit_code != 0)
      spdlog::warn("slurm: scancel {}: {}", t.slurm_id,
                   r.ok() ? Trim(r->err) : r.status().ToString());
    std::lock_guard<std::mutex> lock(mu_);
    auto it = tracked_.find(t.attempt);
    if (it != tracked_.end()) it->second.kill_at_ms = 0;
  }
  // What the nodes recorded themselves (a few stats per job) settles most
  // jobs without asking Slurm: started, and every node's outcome.
  std::vector<NodeEvent> events;
  std::vector<AttemptKey> done;
  std::set<AttemptKey> settled;
  bool squeue_due = SteadyMs() - last_squeue_ms_ >= kSqueueEveryMs;
  const int64_t now = options_.clock->NowMillis();
  for (Tracked& t : jobs) {
    const std::string dir = AttemptDir(t.attempt);
    int64_t started = 0;
    bool all_ended = t.nodes > 0;
    std::vector<std::vector<int32_t>> devices(static_cast<size_t>(std::max(t.nodes, 0)));
    bool all_recorded = true;
    for (int32_t k = 0; k < t.nodes; ++k) {
      const NodePaths node = NodeFolder(dir, k);
      Result<ProcessRecord> cmd = ReadProcessRecord(node.command());
      const int64_t ms = cmd.ok() ? cmd->started_at_ms : 0;
      if (ms > 0) started = started == 0 ? ms : std::min(started, ms);
      all_recorded = all_recorded && cmd.ok();
      if (cmd.ok()) devices[static_cast<size_t>(k)] = cmd->devices;  // Slurm's GRES choice
      // status.json is replaced atomically: present means whole.
      all_ended = all_ended && FileExists(node.status());
    }
    // With GPUs, RUNNING waits until every node has recorded its devices
    // (unless the nodes have all ended: the end reports them as it can).
    if (!t.running_reported && started > 0 && (!t.gpus || all_recorded || all_ended)) {
      t.running_reported = true;
      std::lock_guard<std::mutex> lock(mu_);
      auto live = tracked_.find(t.attempt);
      if (live != tracked_.end()) live->second.running_reported = true;
      for (int32_t k = 0; k < t.nodes; ++k) {
        NodeEvent e;
        e.node = NodeKey{t.attempt, k};
        e.kind = NodeEventKind::kRunning;
        e.at_ms = e.started_at_ms = std::min(started, now);
        e.devices = devices[static_cast<size_t>(k)];
        events.push_back(e);
      }
    }
    if (all_ended) {
      for (NodeEvent& e : EndedEvents(t, JobState{"RECORDED", "", started, 0}))
        events.push_back(std::move(e));
      settled.insert(t.attempt);
      done.push_back(t.attempt);
    } else if (t.terminating) {
      squeue_due = true;  // its end comes from Slurm (nodes may record nothing)
    }
  }
  std::string ids;
  for (const Tracked& t : jobs)
    if (!t.slurm_id.empty() && !settled.count(t.attempt))
      ids += (ids.empty() ? "" : ",") + t.slurm_id;
  if (!squeue_due) ids.clear();
  std::map<std::string, JobState> states;
  bool known = false;  // squeue answered
  if (!ids.empty()) {
    last_squeue_ms_ = SteadyMs();
    Result<CommandResult> r = RunCommand(
        {"squeue", "-h", "--states=all", "-o", "%i|%T|%r|%S|%e", "-j", ids}, SlurmEnv(), 30'000);
    if (r.ok() && r->exit_code == 0) {
      known = true;
      std::istringstream in(r->out);
      for (std::string line; std::getline(in, line);) {
        std::vector<std::string> f;
        std::string part;
        std::istringstream ls(line);
        while (std::getline(ls, part, '|')) f.push_back(part);
        if (f.size() < 5) continue;
        states[Trim(f[0])] = JobState{f[1], f[2], ParseSlurmTime(f[3]), ParseSlurmTime(f[4])};
      }
    } else if (r.ok() && r->err.find("Invalid job id") != std::string::npos) {
      known = true;  // none of them is known any more
    } else {
      spdlog::warn("slurm: squeue: {}", r.ok() ? Trim(r->err) : r.status().ToString());
    }
  }
  if (ids.empty() || !known) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (const AttemptKey& k : done) tracked_.erase(k);
    }
    Push(std::move(events));
    return;
  }
  for (const Tracked& t : jobs) {
    if (settled.count(t.attempt)) continue;
    auto it = states.find(t.slurm_id);
    JobState s;
    if (it == states.end()) {
      // Forgotten by Slurm (MinJobAge passed while no server watched, or
      // purged): what the nodes recorded is all there is.
      s.state = "VANISHED";
    } else {
      s = it->second;
    }
    std::lock_guard<std::mutex> lock(mu_);
    auto tr = tracked_.find(t.attempt);
    if (tr == tracked_.end()) continue;
    Tracked& live = tr->second;
    if (s.state == "PENDING" || s.state == "CONFIGURING" || s.state == "REQUEUED" ||
        s.state == "SUSPENDED") {
      // "None": Slurm's scheduler has not looked at the job yet.
      const std::string reason =
          "PENDING in Slurm (job " + t.slurm_id + ", partition " + options_.partition +
          "): " + (s.reason == "None" || s.reason.empty() ? "not yet scheduled" : s.reason);
      if (!live.running_reported && reason != live.pending_reason) {
        live.pending_reason = reason;
        for (int32_t k = 0; k < t.nodes; ++k) {
          NodeEvent e;
          e.node = NodeKey{t.attempt, k};
          e.kind = NodeEventKind::kPending;
          e.reason = reason;
          e.at_ms = now;
          events.push_back(e);
        }
      }
      continue;
    }
    const bool ended = TerminalStates().count(s.state) > 0 || s.state == "VANISHED";
    // With GPUs, a job Slurm runs whose nodes have not recorded their devices
    // yet waits for the records (the next polls report it, with its devices).
    bool recorded = true;
    std::vector<std::vector<int32_t>> devices(static_cast<size_t>(std::max(t.nodes, 0)));
    if (live.gpus && !live.running_reported) {
      for (int32_t k = 0; k < t.nodes; ++k) {
        Result<ProcessRecord> cmd =
            ReadProcessRecord(NodeFolder(AttemptDir(t.attempt), k).command());
        recorded = recorded && cmd.ok();
        if (cmd.ok()) devices[static_cast<size_t>(k)] = cmd->devices;
      }
    }
    if ((s.state == "RUNNING" || s.state == "COMPLETING" || ended) && !live.running_reported &&
        (s.start_ms > 0 || !ended) && (recorded || ended)) {
      live.running_reported = true;
      for (int32_t k = 0; k < t.nodes; ++k) {
        NodeEvent e;
        e.node = NodeKey{t.attempt, k};
        e.kind = NodeEventKind::kRunning;
        e.at_ms = s.start_ms > 0 ? std::min(s.start_ms, now) : now;
        e.started_at_ms = e.at_ms;
        e.devices = devices[static_cast<size_t>(k)];
        events.push_back(e);
      }
    }
    if (!ended) continue;
    Tracked copy = live;
    for (NodeEvent& e : EndedEvents(copy, s)) events.push_back(std::move(e));
    done.push_back(t.attempt);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const AttemptKey& k : done) tracked_.erase(k);
  }
  Push(std::move(events));
}

std::vector<NodeEvent> SlurmBackend::EndedEvents(const Tracked& t, const JobState& s) {
  std::vector<NodeEvent> out;
  std::vector<bool> recorded;  // per node: it wrote its status
  const std::string dir = AttemptDir(t.attempt);
  const int64_t now = options_.clock->NowMillis();
  const int64_t end = s.end_ms > 0 ? std::min(s.end_ms, now) : now;
  for (int32_t k = 0; k < t.nodes; ++k) {
    NodeEvent e;
    e.node = NodeKey{t.attempt, k};
    e.kind = NodeEventKind::kEnded;
    e.terminated = t.terminating;
    e.at_ms = e.stopped_at_ms = end;
    e.started_at_ms = s.start_ms;
    Result<StatusRecord> status = ReadStatusRecord(NodeFolder(dir, k).status());
    recorded.push_back(status.ok());
    if (status.ok()) {
      const int64_t started = e.started_at_ms;
      e = EventFromStatus(e.node, *status);
      e.kind = NodeEventKind::kEnded;
      // The runner takes any SIGTERM for a request; only ours is one (srun
      // also stops the rest of a gang whose node failed).
      e.terminated = t.terminating;
      const std::string suffix = " after a terminate request";
      if (!t.terminating && e.reason.size() > suffix.size() &&
          e.reason.compare(e.reason.size() - suffix.size(), suffix.size(), suffix) == 0)
        e.reason.replace(e.reason.size() - suffix.size(), suffix.size(),
                         " (Slurm job " + t.slurm_id + " stopped its tasks)");
      e.at_ms = e.stopped_at_ms = std::min(e.stopped_at_ms > 0 ? e.stopped_at_ms : end, now);
      if (e.started_at_ms == 0) e.started_at_ms = started;
    } else if (s.state == "NODE_FAIL" || s.state == "BOOT_FAIL") {
      e.outcome = NodeOutcome::kLost;
      e.reason = "Slurm job " + t.slurm_id + " ended " + s.state +
                 ": a node of the allocation failed before node " + std::to_string(k) +
                 " recorded an outcome";
    } else if (s.state == "VANISHED") {
      e.outcome = NodeOutcome::kLost;
      e.reason = "Slurm job " + t.slurm_id + " vanished: Slurm no longer knows it and node " +
                 std::to_string(k) + " recorded no outcome";
    } else if (s.state == "CANCELLED" || s.state == "TIMEOUT" || s.state == "PREEMPTED" ||
               s.state == "DEADLINE" || s.state == "OUT_OF_MEMORY") {
      e.outcome = NodeOutcome::kSignaled;
      e.signal = 9;
      e.reason = "Slurm job " + t.slurm_id + " ended " + s.state + " before node " +
                 std::to_string(k) + " recorded an outcome";
    } else {
      e.outcome = NodeOutcome::kLost;
      e.reason = "Slurm job " + t.slurm_id + " ended " + s.state + " but node " +
                 std::to_string(k) + " recorded no outcome (see " + dir + "/batch.out)";
    }
    out.push_back(std::move(e));
  }
  // Nodes that recorded nothing were stopped with the job: after every node
  // that did (Slurm's end time has whole seconds only).
  int64_t last_recorded = 0;
  for (size_t k = 0; k < out.size(); ++k)
    if (recorded[k]) last_recorded = std::max(last_recorded, out[k].at_ms);
  for (size_t k = 0; k < out.size(); ++k)
    if (!recorded[k] && out[k].at_ms < last_recorded)
      out[k].at_ms = out[k].stopped_at_ms = last_recorded;
  // In the order the nodes ended: the node whose failure ended the gang comes
  // first (srun then stopped the others), so it is the one the attempt names.
  std::stable_sort(out.begin(), out.end(),
                   [](const NodeEvent& a, const NodeEvent& b) { return a.at_ms < b.at_ms; });
  return out;
}

}  // namespace lote::exec
