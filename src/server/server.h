// `lote server`: wires the store, the control plane, the API router and the
// HTTP listener together, and runs the background loops. No logic of its own.
//
// Contract: Start() opens (or creates) $home/lote.db and the log store at
// $home/logs, loads the state,
// creates $home/credentials (profile lote, mode 0600) on first start and,
// when the database has no users yet, the administrator "admin" (policy
// AdministratorAccess) holding that key pair; writes
// $home/server.json (endpoint and region, read by `lote env`) and serves until
// Stop(). Every component that adds API operations registers them on
// router() before the server starts serving (see Start's options hook).
// Thread safety: Start/Stop from one thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "api/auth.h"
#include "api/http_server.h"
#include "api/iam_access.h"
#include "api/router.h"
#include "common/clock.h"
#include "common/metrics.h"
#include "common/sigv4.h"
#include "common/status.h"
#include "control/accelerators.h"
#include "control/control_plane.h"
#include "iam/audit_log.h"
#include "iam/directory.h"
#include "logs/log_store.h"
#include "store/store.h"

namespace lote::server {

// What a server extension (a component wired into the server: the job layer,
// CloudWatch Logs, ...) gets at start-up. Pointers stay valid until the
// extension's handle is destroyed.
struct ServerContext {
  const std::string& home;
  const Clock* clock;
  store::Store* store;
  control::ControlPlane* control;
  api::ApiRouter* router;     // register operations here (before serving starts)
  logs::LogStore* log_store;  // $home/logs: CloudWatch Logs groups, job output
  // Where the web console listens ("HOST:PORT"; empty: no console), from
  // ServerOptions::console_listen.
  std::string console_listen{};
  // console_listen was derived ("auto"): if its port is taken, any free port will do.
  bool console_listen_derived = false;
  // Steps to run once every extension has registered and the API listener
  // serves (e.g. opening another listener whose handlers use the router);
  // Start fails with the first error.
  std::vector<std::function<Status()>>* on_serving = nullptr;
  // ServerOptions::runtime.
  std::string default_runtime = "process";
  // ServerOptions::registry.
  bool registry = false;
  // ServerOptions::ecr_host_names.
  bool ecr_host_names = false;
  // ServerOptions::node_agent.
  bool node_agent = true;
  // ServerOptions::quarantine_*.
  int32_t quarantine_failures = 3;
  int64_t quarantine_window_seconds = 3600;
  int64_t quarantine_cooldown_seconds = 3600;
  // ServerOptions::job_retention_days in milliseconds (0: kept for ever).
  int64_t job_retention_ms = 7LL * 24 * 3600 * 1000;
  // The server's metrics (GET /metrics): components add their series here.
  metrics::Registry* metrics = nullptr;
  // The principals (IAM users, their keys and Unix users).
  const iam::Directory* directory = nullptr;
  // The IAM hook (built even with --insecure-no-auth, when the router does
  // not ask it): the jobs layer gives it the jobs' owners.
  api::IamAccessControl* access = nullptr;
  // This host's accelerators (control/accelerators.h).
  control::HostDevices* host_devices = nullptr;
  // The SigV4 verifier (null with --insecure-no-auth): the jobs layer adds its
  // job keys to it (iam/job_keys.h).
  api::Authenticator* authenticator = nullptr;
  // The server's 32-byte key ($home/secrets.key): job keys' secrets derive from it.
  std::string secret_key{};
};

// Runs once in LoteServer::Start after the Batch resource operations are
// registered and before the listener starts. It may register API operations
// (router->RegisterJsonService / RegisterRestOperation) and start background
// work; the returned handle (may be null) is destroyed in Stop(), in reverse
// order, before the store closes, so its destructor must stop that work.
using ServerExtension = std::function<Result<std::shared_ptr<void>>(ServerContext& context)>;

// Extensions registered by static registrars in the binary, e.g. in a wiring
// file src/server/logs_wiring.cc compiled into the OBJECT library
// lote_server_commands (a static library would drop the unreferenced object):
//   static lote::server::ServerExtensionRegistrar reg([](ServerContext& c) { ... });
std::vector<ServerExtension>& GlobalServerExtensions();
struct ServerExtensionRegistrar {
  explicit ServerExtensionRegistrar(ServerExtension ext) {
    GlobalServerExtensions().push_back(std::move(ext));
  }
};

struct ServerOptions {
  std::string home;  // folder for lote.db, credentials, server.json
  std::string host = "127.0.0.1";
  int port = 7480;  // 0: any free port
  std::string region = "us-east-1";
  std::string account_id = "000000000000";
  bool insecure_no_auth = false;  // accept unsigned requests (logged loudly)
  // HTTP listener (api::HttpServerOptions): handler threads, I/O threads
  // (0: min(4, cores)), open connections, per-connection deadlines.
  int http_threads = 64;
  int http_io_threads = 0;
  int http_max_connections = 10'000;
  int64_t http_idle_timeout_ms = 60'000;
  int64_t http_header_timeout_ms = 10'000;
  int64_t http_body_timeout_ms = 60'000;
  int64_t reconcile_interval_ms = 200;
  // The web console's "HOST:PORT"; "auto": the API's host and port + 1 (any
  // free port when the API's is 0); "off": no console.
  std::string console_listen = "auto";
  // How nodes run in compute environments without the tag lote:runtime:
  // "process" or "container" (docs/containers.md).
  std::string runtime = "process";
  // Run the local image registry and answer the ECR API (docs/containers.md).
  bool registry = false;
  // Make ECR's host name (<account>.dkr.ecr.<region>.amazonaws.com) reach the
  // registry: an /etc/hosts line, a forwarder on 127.0.0.1:80 and a
  // registries.conf entry, undone at stop (images/ecr_host.h). Needs registry.
  bool ecr_host_names = false;
  // The local executor runs nodes through the home's node agent (one process
  // per host that runs every node's command; docs/executor.md), else one
  // supervisor program per node. $LOTE_NODE_AGENT=0 or 1 overrides it.
  bool node_agent = true;
  // Bad-node quarantine (docs/quarantine.md): attempts of this many different
  // jobs ending NODE_LOST or HANG on one node within the window quarantine it
  // for the cool-down (0 failures: never).
  int32_t quarantine_failures = 3;
  int64_t quarantine_window_seconds = 3600;
  int64_t quarantine_cooldown_seconds = 3600;
  // Finished jobs are deleted this many days after they ended (docs/jobs.md,
  // "Retention"); fractions allowed; 0: kept for ever.
  double job_retention_days = 7;
  // Root-equivalent settings (iam/job_privileges.h, docs/api.md): host
  // folders any principal's jobs may bind-mount (the home's jobs/ always may),
  // and the largest linuxParameters.sharedMemorySize (MiB) they may ask for.
  std::vector<std::string> allowed_host_paths;
  int64_t max_shared_memory_mib = 8192;
  // This host's accelerators: an inventory file (exec/accelerators.h, one
  // device per line) in place of discovery (NVML, /proc/driver/nvidia, sysfs).
  std::string accelerators;
  // Run after GlobalServerExtensions(), in order.
  std::vector<ServerExtension> extensions;
};

// $LOTE_HOME, else ~/.lote.
std::string DefaultHome();

class LoteServer {
 public:
  static Result<std::unique_ptr<LoteServer>> Start(const ServerOptions& options,
                                                   const Clock* clock);
  ~LoteServer();

  // "http://HOST:PORT" with the bound port.
  std::string endpoint() const;
  const std::string& credentials_path() const { return credentials_path_; }
  void Stop();

 private:
  LoteServer() = default;
  void ReconcileLoop();
  // The principals, the audit and the router's access control.
  Status StartIam(const sigv4::Credentials& admin_key, const std::string& secret_key);

  metrics::Registry metrics_;  // first: every component's series outlive it
  ServerOptions options_;
  const Clock* clock_ = nullptr;
  std::string credentials_path_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<control::HostDevices> host_devices_;
  std::unique_ptr<control::ControlPlane> control_;
  std::unique_ptr<logs::LogStore> log_store_;
  std::unique_ptr<api::Authenticator> auth_;
  std::unique_ptr<iam::Directory> directory_;
  std::unique_ptr<iam::AuditLog> audit_;
  std::unique_ptr<api::IamAccessControl> access_;
  std::unique_ptr<api::ApiRouter> router_;
  std::unique_ptr<api::HttpServer> http_;
  std::vector<std::shared_ptr<void>> extension_handles_;  // destroyed in reverse in Stop()
  std::vector<std::function<Status()>> on_serving_;       // ServerContext::on_serving
  int port_ = 0;

  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;  // protected by mu_
  std::thread reconciler_;
};

// GET /metrics: the registry's series, unsigned; refused (403) once the
// directory holds any user besides admin, unless the server runs with
// --insecure-no-auth (where nothing is signed anyway).
std::function<Result<std::string>()> MetricsPage(const metrics::Registry* metrics,
                                                 const iam::Directory* directory,
                                                 bool insecure_no_auth);

// The `export` lines of `lote env` for a home folder (reads its server.json
// when present, else the defaults; and the image registry's address when it
// has one).
std::string EnvScript(const std::string& home);

}  // namespace lote::server
