// `lote server`: wires the store, the control plane, the API router and the
// HTTP listener together, and runs the background loops. No logic of its own.
//
// Contract: Start() opens (or creates) $home/lote.db, loads the state,
// creates $home/credentials (profile lote, mode 0600) on first start, writes
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

#include "api/auth.h"
#include "api/http_server.h"
#include "api/router.h"
#include "common/clock.h"
#include "common/status.h"
#include "control/control_plane.h"
#include "store/store.h"

namespace lote::server {

struct ServerOptions {
  std::string home;  // folder for lote.db, credentials, server.json
  std::string host = "127.0.0.1";
  int port = 7480;  // 0: any free port
  std::string region = "us-east-1";
  std::string account_id = "000000000000";
  bool insecure_no_auth = false;  // accept unsigned requests (logged loudly)
  int http_threads = 64;
  int64_t reconcile_interval_ms = 200;
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

  ServerOptions options_;
  const Clock* clock_ = nullptr;
  std::string credentials_path_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<control::ControlPlane> control_;
  std::unique_ptr<api::Authenticator> auth_;
  std::unique_ptr<api::ApiRouter> router_;
  std::unique_ptr<api::HttpServer> http_;
  int port_ = 0;

  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;  // protected by mu_
  std::thread reconciler_;
};

// The `export` lines of `lote env` for a home folder (reads its server.json
// when present, else the defaults).
std::string EnvScript(const std::string& home);

}  // namespace lote::server
