#include "server/jobs_service.h"

#include <dirent.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <set>
#include <utility>

#include "api/batch_api.h"
#include "api/nodes_api.h"
#include "common/crypto.h"
#include "common/json.h"
#include "common/thread_name.h"
#include "exec/slurm_backend.h"
#include "iam/job_keys.h"
#include "images/ecr_host.h"
#include "images/registry_process.h"
#include "server/job_access.h"

namespace lote::server {
namespace {

// Job credentials (docs/api.md): the nodes of a job attempt get a key of its
// own (iam/job_keys.h) and lote's endpoint, unless the job brings its own AWS
// settings; the key is honoured while that attempt is STARTING or RUNNING, as
// the principal who submitted the job.
constexpr const char* kOwnAwsSettings[] = {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
                                           "AWS_PROFILE", "AWS_ENDPOINT_URL",
                                           "AWS_ENDPOINT_URL_S3"};

std::function<std::vector<control::EnvVar>(const control::Job&,
                                           const std::map<std::string, std::string>&)>
JobCredentials(std::string home, std::string key, std::string region) {
  return [home = std::move(home), key = std::move(key), region = std::move(region)](
             const control::Job& job, const std::map<std::string, std::string>& environment)
             -> std::vector<control::EnvVar> {
    for (const char* name : kOwnAwsSettings)
      if (environment.count(name) > 0) return {};
    const std::string id = iam::JobKeyId(job.id, static_cast<int32_t>(job.attempts.size()));
    Result<Json> info = ReadJsonFile(home + "/server.json");
    if (id.empty() || !info.ok()) return {};
    const std::string endpoint = info->value("endpoint", std::string());
    if (endpoint.empty()) return {};
    return {{"AWS_ACCESS_KEY_ID", id},      {"AWS_SECRET_ACCESS_KEY", iam::JobKeySecret(key, id)},
            {"AWS_ENDPOINT_URL", endpoint}, {"AWS_ENDPOINT_URL_S3", endpoint},
            {"AWS_REGION", region},         {"AWS_DEFAULT_REGION", region}};
  };
}

// The owner of a job key while its attempt runs.
std::optional<iam::KeyOwner> JobKeyOwner(control::JobLoop* loop, const iam::Directory* directory,
                                         const std::string& key, const std::string& key_id) {
  std::string job_id;
  int32_t attempt = 0;
  if (!iam::ParseJobKeyId(key_id, &job_id, &attempt)) return std::nullopt;
  Result<Json> described = loop->DescribeJobs(Json{{"jobs", Json::array({job_id})}});
  if (!described.ok() || (*described)["jobs"].empty()) return std::nullopt;
  const Json& job = (*described)["jobs"][0];
  const std::string status = job.value("status", std::string());
  // DescribeJobs lists the attempts that ended; the open one is the next.
  const size_t ended = job.contains("attempts") ? job["attempts"].size() : 0;
  if ((status != "STARTING" && status != "RUNNING") || static_cast<size_t>(attempt) != ended + 1) {
    return std::nullopt;
  }
  std::shared_ptr<const iam::User> user =
      directory == nullptr ? nullptr : directory->FindUser(job.value("loteOwner", std::string()));
  if (user == nullptr) return std::nullopt;
  return iam::KeyOwner{iam::JobKeySecret(key, key_id), std::move(user)};
}

}  // namespace

// The backend of each compute environment: the local executor for all of
// them (lote:backend=slurm environments get their own backend, see
// ForEnvironment). A backend made after the start is watched at once.
// The backend of each compute environment: the local executor, or for an
// UNMANAGED environment tagged lote:backend=slurm its own SlurmBackend (made
// on first use, its events watched at once).
class JobsService::Backends final : public control::BackendDirectory {
 public:
  Backends(JobsService* service, std::string home, std::unique_ptr<exec::LocalBackend> local,
           exec::LocalRegistry registry)
      : service_(service),
        home_(std::move(home)),
        local_(std::move(local)),
        registry_(std::move(registry)) {}

  Result<exec::Backend*> ForEnvironment(const control::ComputeEnvironmentSpec& ce) override {
    auto tag = [&](const char* key) {
      auto it = ce.lote_tags.find(key);
      return it == ce.lote_tags.end() ? std::string() : it->second;
    };
    const std::string kind = tag("lote:backend");
    if (kind.empty() || kind == "local") return static_cast<exec::Backend*>(local_.get());
    if (kind != "slurm")
      return Status::InvalidArgument("compute environment " + ce.name + ": lote:backend=" + kind +
                                     " is not a backend lote has (local, slurm)");
    if (ce.managed)
      return Status::InvalidArgument("compute environment " + ce.name +
                                     ": lote:backend=slurm needs type UNMANAGED");
    exec::Backend* made = nullptr;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = slurm_.find(ce.name);
      if (it != slurm_.end()) return static_cast<exec::Backend*>(it->second.get());
      exec::SlurmBackendOptions o;
      o.partition = tag("lote:slurm-partition");
      o.slurm_conf = tag("lote:slurm-conf");
      o.state_dir = home_ + "/slurm/" + ce.name;
      o.registry = registry_;
      ASSIGN_OR_RETURN(std::unique_ptr<exec::SlurmBackend> b, exec::SlurmBackend::Create(o));
      made = b.get();
      slurm_[ce.name] = std::move(b);
    }
    service_->WatchBackend(made);
    return made;
  }

  std::vector<exec::Backend*> All() override {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<exec::Backend*> all{local_.get()};
    for (const auto& [name, b] : slurm_) all.push_back(b.get());
    return all;
  }

 private:
  JobsService* service_;
  const std::string home_;
  std::unique_ptr<exec::LocalBackend> local_;
  const exec::LocalRegistry registry_;
  std::mutex mu_;
  std::map<std::string, std::unique_ptr<exec::SlurmBackend>> slurm_;  // by environment name
};

JobsService::JobsService(ServerContext& context, JobsServiceOptions options)
    : options_(std::move(options)), control_(context.control) {}

Result<std::unique_ptr<JobsService>> JobsService::Start(ServerContext& context,
                                                        JobsServiceOptions options) {
  std::unique_ptr<JobsService> service(new JobsService(context, options));
  exec::LocalBackendOptions local;
  local.home = context.home;
  local.shim_command = options.shim_command;
  local.use_node_agent = context.node_agent;
  if (const char* agent = std::getenv("LOTE_NODE_AGENT"); agent != nullptr && *agent != '\0')
    local.use_node_agent = agent[0] != '0';
  // One clock for the loop and the backend's timestamps.
  local.clock = context.clock;
  if (context.registry) {  // started by registry_wiring.cc
    ASSIGN_OR_RETURN(local.registry.address, images::RegistryAddress(context.home + "/registry"));
    local.registry.auth_file = context.home + "/registry/auth.json";
    if (context.ecr_host_names)  // see registry_wiring.cc
      local.registry.ecr_host = images::EcrHostName(context.control->config().account_id,
                                                    context.control->config().region);
  }
  ASSIGN_OR_RETURN(std::unique_ptr<exec::LocalBackend> backend, exec::LocalBackend::Create(local));
  service->backends_ =
      std::make_unique<Backends>(service.get(), context.home, std::move(backend), local.registry);
  if (context.log_store != nullptr) {
    service->job_logs_ = std::make_unique<JobLogs>(context.log_store);
    service->job_logs_->OnStored([svc = service.get()] { svc->loop_->Wake(); });
  }
  // Jobs may run as other users, who can pass through the home (the backend
  // makes it 0711 then): everything in it but jobs/ is the server's alone.
  RETURN_IF_ERROR(MakeHomePrivate(context.home));
  control::JobLoopOptions loop;
  loop.clock = context.clock;
  loop.store = context.store;
  loop.control = context.control;
  loop.backends = service->backends_.get();
  loop.output = service->job_logs_.get();
  loop.terminate_grace_ms = options.terminate_grace_ms;
  loop.default_runtime = context.default_runtime;
  loop.wake = [svc = service.get()] { svc->Notify(); };
  loop.metrics = context.metrics;
  loop.collect_evidence_in_background = true;
  loop.quarantine = {context.quarantine_failures, context.quarantine_window_seconds * 1000,
                     context.quarantine_cooldown_seconds * 1000};
  loop.job_retention_ms = context.job_retention_ms;
  loop.host_devices = context.host_devices;
  // Job keys are honoured only where requests are authenticated.
  const std::string job_key = context.authenticator == nullptr || context.secret_key.empty()
                                  ? std::string()
                                  : HmacSha256(context.secret_key, "lote job keys");
  if (!job_key.empty()) {
    loop.node_environment = JobCredentials(context.home, job_key, context.control->config().region);
  }
  ASSIGN_OR_RETURN(service->loop_, control::JobLoop::Create(std::move(loop)));
  if (context.metrics != nullptr && context.host_devices != nullptr) {
    // This host's devices by kind and state, counted when /metrics is read.
    control::JobLoop* job_loop = service->loop_.get();
    context.metrics->AddCollector(
        "lote_accelerators",
        "This host's accelerator devices by kind and state (FREE, HELD by a job, DRAINED)",
        [job_loop] {
          std::map<std::pair<std::string, std::string>, int64_t> counts;
          Result<Json> described = job_loop->DescribeAccelerators(Json::object());
          if (described.ok()) {
            for (const Json& host : (*described)["hosts"]) {
              for (const Json& d : host.value("devices", Json::array()))
                ++counts[{d.value("kind", std::string()), d.value("state", std::string())}];
            }
          }
          std::vector<std::pair<metrics::Labels, double>> out;
          for (const auto& [key, n] : counts)
            out.push_back({{{"kind", key.first}, {"state", key.second}}, static_cast<double>(n)});
          return out;
        });
  }
  if (context.metrics != nullptr) {
    // Consumable resources: total, in use and available units, when /metrics is read.
    control::JobLoop* job_loop = service->loop_.get();
    context.metrics->AddCollector(
        "lote_consumable_resource_units",
        "Units of each consumable resource: total, in_use (held by STARTING and RUNNING jobs) "
        "and available",
        [job_loop] {
          std::vector<std::pair<metrics::Labels, double>> out;
          Json page = Json::object();
          for (int pages = 0; pages < 500; ++pages) {  // at most 50,000 resources
            Result<Json> listed = job_loop->ListConsumableResources(page);
            if (!listed.ok()) break;
            for (const Json& r : (*listed)["consumableResources"]) {
              const std::string name = r.value("consumableResourceName", std::string());
              const double total = r.value("totalQuantity", 0.0);
              const double used = r.value("inUseQuantity", 0.0);
              out.push_back({{{"resource", name}, {"state", "total"}}, total});
              out.push_back({{{"resource", name}, {"state", "in_use"}}, used});
              out.push_back({{{"resource", name}, {"state", "available"}},
                             total > used ? total - used : 0.0});
            }
            if (!listed->contains("nextToken")) break;
            page["nextToken"] = (*listed)["nextToken"];
          }
          return out;
        });
  }
  if (!job_key.empty()) {
    control::JobLoop* job_loop = service->loop_.get();
    const iam::Directory* directory = context.directory;
    auto owner = [job_loop, directory, job_key](const std::string& key_id) {
      return JobKeyOwner(job_loop, directory, job_key, key_id);
    };
    context.authenticator->SetExtraKeySource(
        [owner](const std::string& key_id) -> std::optional<std::string> {
          std::optional<iam::KeyOwner> found = owner(key_id);
          if (!found) return std::nullopt;
          return found->secret;
        });
    if (context.access != nullptr) context.access->SetExtraKeyOwners(owner);
  }
  service->RegisterOperations(context.router, context.access);
  for (exec::Backend* b : service->backends_->All()) service->WatchBackend(b);
  service->loop_thread_ = NamedThread("lote-jobs", [s = service.get()] { s->Loop(); });
  return service;
}

JobsService::~JobsService() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  pass_done_.notify_all();
  if (loop_) loop_->Stop();
  if (backends_)
    for (exec::Backend* b : backends_->All()) b->Wake();
  std::vector<std::thread> waiters;
  {
    std::lock_guard<std::mutex> lock(mu_);
    waiters.swap(waiters_);
  }
  for (std::thread& t : waiters) t.join();
  if (loop_thread_.joinable()) loop_thread_.join();
  // Node events in hand are always recorded, also when stopping.
  std::vector<exec::NodeEvent> last;
  {
    std::lock_guard<std::mutex> lock(mu_);
    last.swap(inbox_);
  }
  if (loop_ && !last.empty()) loop_->Pass(std::move(last));
  if (loop_) loop_->JoinEvidenceCollector();  // it stores dumps in job_logs_ and calls Notify()
  job_logs_.reset();  // its pump calls Wake(): stop it while the loop exists
}

void JobsService::WatchBackend(exec::Backend* backend) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_ || !watched_.insert(backend).second) return;
  waiters_.push_back(NamedThread("lote-backend", [this, backend] {
    while (true) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (stopping_) return;
      }
      Result<std::vector<exec::NodeEvent>> events = backend->Wait(options_.max_sleep_ms);
      if (!events.ok()) {
        spdlog::error("jobs: {} backend: wait failed: {}", backend->Name(),
                      events.status().ToString());
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        continue;
      }
      if (events->empty()) continue;
      {
        std::lock_guard<std::mutex> lock(mu_);
        for (exec::NodeEvent& e : *events) inbox_.push_back(std::move(e));
        wake_ = true;
      }
      cv_.notify_all();
    }
  }));
}

void JobsService::Notify() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    wake_ = true;
  }
  cv_.notify_all();
}

void JobsService::Loop() {
  while (true) {
    std::vector<exec::NodeEvent> events;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_for(lock, std::chrono::milliseconds(options_.max_sleep_ms),
                   [&] { return stopping_ || wake_ || !inbox_.empty(); });
      if (stopping_) return;
      wake_ = false;
      events.swap(inbox_);
      ++passes_begun_;
    }
    (void)loop_->TakeDirty();
    loop_->Pass(std::move(events));
    // What the pass changed may unblock more work: run again at once.
    // (The loop's lock is never taken under mu_.)
    const bool again = loop_->TakeDirty();
    {
      std::lock_guard<std::mutex> lock(mu_);
      passes_done_ = std::max(passes_done_, passes_begun_);
      if (again) wake_ = true;
    }
    pass_done_.notify_all();
  }
}

bool JobsService::WaitForPass(int64_t timeout_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  const uint64_t target = passes_begun_ + 1;
  wake_ = true;
  cv_.notify_all();
  return pass_done_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] {
    return passes_done_ >= target || stopping_;
  }) && passes_done_ >= target;
}

void JobsService::RegisterOperations(api::ApiRouter* router, api::IamAccessControl* access) {
  control::JobLoop* loop = loop_.get();
  if (access != nullptr) access->SetJobOwnerLookup(JobOwnersOf(loop));
  router->RegisterRestOperation({"SubmitJob", "POST", "/v1/submitjob", {}, SubmitAsCaller(loop)});
  router->RegisterRestOperation(
      {"DescribeJobs", "POST", "/v1/describejobs", {}, DescribeReadableJobs(loop, access)});
  router->RegisterRestOperation(
      {"ListJobs", "POST", "/v1/listjobs", {}, ListReadableJobs(loop, control_, access)});
  router->RegisterRestOperation({"CancelJob", "POST", "/v1/canceljob", {}, [loop](const Json& r) {
                                   return loop->CancelJob(r);
                                 }});
  router->RegisterRestOperation(
      {"TerminateJob", "POST", "/v1/terminatejob", {}, [loop](const Json& r) {
         return loop->TerminateJob(r);
       }});
  router->RegisterRestOperation(
      {"GetJobQueueSnapshot", "POST", "/v1/getjobqueuesnapshot", {}, [loop](const Json& r) {
         return loop->GetJobQueueSnapshot(r);
       }});
  api::RegisterBatchSharedOperations(router, control_, loop);
  api::RegisterLoteJobOperations(router, loop);
  api::RegisterConsumableResources(router, loop);
  api::RegisterNodes(router, loop);
}

Status MakeHomePrivate(const std::string& home) {
  DIR* dir = ::opendir(home.c_str());
  if (dir == nullptr) return Status::Internal("cannot list " + home + ": " + std::strerror(errno));
  Status result;
  // Only the server's own entries: a home may be shared with other files.
  static const std::set<std::string> kOwn = {"lote.db",         "lote.db-wal", "lote.db-shm",
                                             "lote.db-journal", "logs",        "credentials",
                                             "secrets.key",     "server.json"};
  while (struct dirent* e = ::readdir(dir)) {
    const std::string name = e->d_name;
    if (!kOwn.count(name)) continue;
    const std::string path = home + "/" + name;
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0 || S_ISLNK(st.st_mode)) continue;
    const mode_t want = S_ISDIR(st.st_mode) ? 0700 : 0600;
    if ((st.st_mode & 07777) != want && ::chmod(path.c_str(), want) != 0 && result.ok()) {
      result = Status::Internal("cannot make " + path + " private: " + std::strerror(errno));
    }
  }
  ::closedir(dir);
  return result;
}

ServerExtension JobsExtension(JobsServiceOptions options) {
  return [options](ServerContext& context) mutable -> Result<std::shared_ptr<void>> {
    // $LOTE_EXEC_SHIM: a standalone supervisor binary (build/src/exec/lote-exec-shim)
    // starts faster than `lote exec-shim`, whose start loads every library of lote.
    if (const char* shim = std::getenv("LOTE_EXEC_SHIM");
        options.shim_command.empty() && shim != nullptr && *shim != '\0') {
      options.shim_command = {shim};
    }
    ASSIGN_OR_RETURN(std::unique_ptr<JobsService> service, JobsService::Start(context, options));
    return std::shared_ptr<void>(std::move(service));
  };
}

}  // namespace lote::server
