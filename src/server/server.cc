#include "server/server.h"

#include <pwd.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "api/batch_api.h"
#include "api/credentials_file.h"
#include "api/ec2_api.h"
#include "api/iam_api.h"
#include "api/ssm_api.h"
#include "api/sts_api.h"
#include "common/files.h"
#include "common/json.h"
#include "common/thread_name.h"
#include "exec/proc_util.h"
#include "exec/ulimits.h"
#include "images/registry_process.h"

namespace lote::server {

std::vector<ServerExtension>& GlobalServerExtensions() {
  static std::vector<ServerExtension> extensions;
  return extensions;
}

std::string DefaultHome() {
  const char* env = std::getenv("LOTE_HOME");
  if (env && *env) return env;
  return HomeDir() + "/.lote";
}

Result<std::unique_ptr<LoteServer>> LoteServer::Start(const ServerOptions& options,
                                                      const Clock* clock) {
  std::unique_ptr<LoteServer> s(new LoteServer());
  s->options_ = options;
  s->clock_ = clock;
  RETURN_IF_ERROR(MakeDirs(options.home, 0700));
  // Every running node holds descriptors here (its supervisor's pidfd, its
  // output file while it is stored): allow as many as the hard limit lets.
  if (struct rlimit rl; ::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = std::min<rlim_t>(rl.rlim_max, 1 << 20);
    (void)::setrlimit(RLIMIT_NOFILE, &rl);
  }
  s->credentials_path_ = options.home + "/credentials";
  ASSIGN_OR_RETURN(sigv4::Credentials creds,
                   api::EnsureCredentialsFile(s->credentials_path_, api::kLoteProfile));

  store::StoreOptions store_options;
  store_options.metrics = &s->metrics_;
  ASSIGN_OR_RETURN(s->store_, store::Store::Open(options.home + "/lote.db", store_options));
  // This host's accelerators: before the control plane, whose `local`
  // instance type has them.
  s->host_devices_ =
      std::make_unique<control::HostDevices>(exec::HostName(), options.accelerators, options.home);
  RETURN_IF_ERROR(s->host_devices_->Load());
  control::ControlConfig config;
  {
    std::shared_ptr<const control::HostDevicesView> devices = s->host_devices_->Current();
    config.host.accelerators = static_cast<int32_t>(devices->devices.size());
    if (!devices->devices.empty()) {
      config.host.accelerator_kind = devices->kind == exec::AcceleratorKind::kNeuron
                                         ? "Neuron " + devices->devices.front()->name
                                         : devices->devices.front()->name;
      spdlog::info("accelerators: {} from {}",
                   exec::CountPhrase(*devices->kind, config.host.accelerators),
                   devices->inventory.source);
    }
    for (const std::string& note : devices->inventory.notes) spdlog::info("accelerators: {}", note);
  }
  config.region = options.region;
  config.account_id = options.account_id;
  ASSIGN_OR_RETURN(config.secret_key, api::EnsureSecretKeyFile(options.home + "/secrets.key"));
  ASSIGN_OR_RETURN(s->control_, control::ControlPlane::Open(s->store_.get(), clock, config));
  logs::LogStoreOptions log_options;
  log_options.root = options.home + "/logs";
  log_options.clock = clock;
  ASSIGN_OR_RETURN(s->log_store_, logs::LogStore::Open(log_options));

  s->auth_ = std::make_unique<api::Authenticator>(clock, options.region);
  if (options.insecure_no_auth) {
    spdlog::warn("**************************************************************");
    spdlog::warn("* --insecure-no-auth: requests are NOT authenticated.         *");
    spdlog::warn("* Anyone who can reach this port can change every resource.   *");
    spdlog::warn("**************************************************************");
  }
  s->router_ =
      std::make_unique<api::ApiRouter>(options.insecure_no_auth ? nullptr : s->auth_.get());
  api::RegisterBatchControlPlane(s->router_.get(), s->control_.get());
  // The other AWS services Batch users' scripts call, on the same port.
  api::RegisterEc2(s->router_.get(), s->control_.get());
  api::RegisterSsm(s->router_.get(), s->control_.get());
  RETURN_IF_ERROR(s->StartIam(creds, config.secret_key));
  s->router_->RegisterTextGet(
      "/metrics", "text/plain; version=0.0.4; charset=utf-8",
      MetricsPage(&s->metrics_, s->directory_.get(), options.insecure_no_auth));
  {
    std::vector<ServerExtension> extensions = GlobalServerExtensions();
    extensions.insert(extensions.end(), options.extensions.begin(), options.extensions.end());
    std::string console_listen = options.console_listen;
    if (console_listen == "auto") {
      console_listen =
          options.host + ":" + std::to_string(options.port == 0 ? 0 : options.port + 1);
    } else if (console_listen == "off") {
      console_listen.clear();
    }
    ServerContext context{options.home,     clock,
                          s->store_.get(),  s->control_.get(),
                          s->router_.get(), s->log_store_.get(),
                          console_listen,   options.console_listen == "auto",
                          &s->on_serving_,  options.runtime,
                          options.registry};
    context.ecr_host_names = options.ecr_host_names;
    context.metrics = &s->metrics_;
    context.node_agent = options.node_agent;
    context.quarantine_failures = options.quarantine_failures;
    context.quarantine_window_seconds = options.quarantine_window_seconds;
    context.quarantine_cooldown_seconds = options.quarantine_cooldown_seconds;
    context.job_retention_ms = static_cast<int64_t>(options.job_retention_days * 86'400'000.0);
    context.directory = s->directory_.get();
    context.access = s->access_.get();
    context.host_devices = s->host_devices_.get();
    context.authenticator = options.insecure_no_auth ? nullptr : s->auth_.get();
    context.secret_key = config.secret_key;
    for (ServerExtension& ext : extensions) {
      Result<std::shared_ptr<void>> handle = ext(context);
      if (!handle.ok()) {
        s->Stop();
        return handle.status().WithContext("starting a server extension");
      }
      s->extension_handles_.push_back(std::move(*handle));
    }
  }

  // A PutLogEvents batch is at most 1 MiB of events (checked by the service);
  // its JSON, with escapes and per-event keys, takes more.
  s->router_->SetBodyLimit("Logs_20140328.PutLogEvents", 8 << 20);

  s->http_ = std::make_unique<api::HttpServer>(s->router_.get());
  api::HttpServerOptions http;
  http.host = options.host;
  http.port = options.port;
  http.threads = options.http_threads;
  http.io_threads = options.http_io_threads;
  http.max_connections = options.http_max_connections;
  http.idle_timeout_ms = options.http_idle_timeout_ms;
  http.header_timeout_ms = options.http_header_timeout_ms;
  http.body_timeout_ms = options.http_body_timeout_ms;
  http.clock = clock;
  RETURN_IF_ERROR(s->http_->Start(http));
  s->port_ = s->http_->port();

  // Clients cannot use a wildcard address; advertise loopback for it.
  std::string advertised = s->endpoint();
  if (options.host == "0.0.0.0" || options.host == "::" || options.host == "[::]") {
    advertised = "http://127.0.0.1:" + std::to_string(s->port_);
  }
  Json info = {{"endpoint", advertised},
               {"region", options.region},
               {"account_id", options.account_id},
               {"pid", static_cast<int64_t>(getpid())}};
  RETURN_IF_ERROR(WriteFileAtomic(options.home + "/server.json", info.dump(2) + "\n", 0600));
  for (const std::function<Status()>& step : s->on_serving_) {
    if (Status st = step(); !st.ok()) {
      s->Stop();
      return st;
    }
  }
  s->reconciler_ = NamedThread("lote-reconcile", [srv = s.get()] { srv->ReconcileLoop(); });
  return s;
}

Status LoteServer::StartIam(const sigv4::Credentials& admin_key, const std::string& secret_key) {
  iam::DirectoryOptions directory;
  directory.account_id = options_.account_id;
  directory.secret_key = secret_key;
  ASSIGN_OR_RETURN(directory_, iam::Directory::Open(store_.get(), clock_, directory));
  RETURN_IF_ERROR(
      directory_->Bootstrap("admin", admin_key.access_key_id, admin_key.secret_access_key));
  audit_ = std::make_unique<iam::AuditLog>(store_.get(), clock_);
  const iam::Directory* keys = directory_.get();
  auth_->SetKeySource([keys](const std::string& id) -> std::optional<std::string> {
    std::optional<iam::KeyOwner> owner = keys->FindKey(id);
    if (!owner) return std::nullopt;
    return owner->secret;
  });
  api::IamAccessOptions access;
  access.directory = directory_.get();
  access.audit = audit_.get();
  access.scope = iam::ArnScope{options_.region, options_.account_id};
  control::ControlPlane* control = control_.get();
  // aws:ResourceTag of the Batch resources the control plane holds (not jobs).
  access.resource_tags = [control](const std::string& arn) {
    std::map<std::string, std::string> tags;
    if (arn.rfind("arn:aws:batch:", 0) != 0 || arn.find(":job/") != std::string::npos) return tags;
    Result<Json> listed = control->ListTagsForResource(Json{{"resourceArn", arn}});
    if (!listed.ok() || !listed->contains("tags")) return tags;
    for (const auto& [k, v] : (*listed)["tags"].items())
      if (v.is_string()) tags[k] = v.get<std::string>();
    return tags;
  };
  access.job_definition = [control](const std::string& reference) {
    return control->FindJobDefinition(reference);
  };
  if (const struct passwd* pw = ::getpwuid(::geteuid())) access.server_user = pw->pw_name;
  access.host.host_paths = options_.allowed_host_paths;
  access.host.host_paths.push_back(options_.home + "/jobs");
  access.host.max_shared_memory_mib = options_.max_shared_memory_mib;
  access.host.hard_limits = exec::HostHardLimits();
  access.host.canonical = CanonicalPath;
  access_ = std::make_unique<api::IamAccessControl>(std::move(access));
  if (!options_.insecure_no_auth) router_->SetAccessControl(access_.get());
  api::RegisterIam(router_.get(), directory_.get(), audit_.get());
  api::RegisterSts(router_.get(), options_.account_id,
                   options_.insecure_no_auth ? nullptr : directory_.get());
  return Status::Ok();
}

std::function<Result<std::string>()> MetricsPage(const metrics::Registry* metrics,
                                                 const iam::Directory* directory,
                                                 bool insecure_no_auth) {
  return [=]() -> Result<std::string> {
    // Unsigned, so only while the server is not shared: its series name
    // every queue and job count.
    if (!insecure_no_auth && directory->Users().size() > 1)
      return Status::PermissionDenied(
          "GET /metrics is served unsigned only while the server has no IAM user besides "
          "admin; this server has more (docs/api.md, \"Metrics\")");
    return metrics->Render();
  };
}

LoteServer::~LoteServer() { Stop(); }

std::string LoteServer::endpoint() const {
  return "http://" + options_.host + ":" + std::to_string(port_);
}

void LoteServer::ReconcileLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    cv_.wait_for(lock, std::chrono::milliseconds(options_.reconcile_interval_ms));
    if (stopping_) break;
    lock.unlock();
    Result<int32_t> changed = control_->Reconcile();
    if (!changed.ok()) spdlog::error("reconcile: {}", changed.status().ToString());
    lock.lock();
  }
}

void LoteServer::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  cv_.notify_all();
  if (http_) http_->Stop();
  if (reconciler_.joinable()) reconciler_.join();
  while (!extension_handles_.empty()) extension_handles_.pop_back();
  access_.reset();
  audit_.reset();
  directory_.reset();
  control_.reset();
  log_store_.reset();
  store_.reset();  // commits anything queued
}

std::string EnvScript(const std::string& home) {
  std::string endpoint = "http://127.0.0.1:7480";
  std::string region = "us-east-1";
  Result<Json> info = ReadJsonFile(home + "/server.json");
  if (info.ok()) {
    endpoint = info->value("endpoint", endpoint);
    region = info->value("region", region);
  }
  std::string s;
  s += "unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_SESSION_TOKEN\n";
  // One endpoint for every service lote serves (routed on one port by SigV4
  // service, X-Amz-Target and Action), and each service's own variable for
  // clients that predate AWS_ENDPOINT_URL.
  s += "export AWS_ENDPOINT_URL=" + ShellQuote(endpoint) + "\n";
  for (const char* service : {"BATCH", "LOGS", "EC2", "SSM", "STS", "S3"})
    s += std::string("export AWS_ENDPOINT_URL_") + service + "=" + ShellQuote(endpoint) + "\n";
  // SDKs name the variable after the service id ("CloudWatch Logs").
  s += "export AWS_ENDPOINT_URL_CLOUDWATCH_LOGS=" + ShellQuote(endpoint) + "\n";
  s += "export AWS_SHARED_CREDENTIALS_FILE=" + ShellQuote(home + "/credentials") + "\n";
  s += "export AWS_PROFILE=lote\n";
  s += "export AWS_DEFAULT_REGION=" + ShellQuote(region) + "\n";
  s += "export AWS_REGION=" + ShellQuote(region) + "\n";
  s += "export LOTE_ENDPOINT=" + ShellQuote(endpoint) + "\n";
  s += images::RegistryEnv(home + "/registry", endpoint, home + "/containers/registries.conf");
  return s;
}

}  // namespace lote::server
