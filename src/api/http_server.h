// The HTTP listener (cpp-httplib): turns connections into HttpRequest values
// for an ApiRouter and writes back its HttpResponse.
//
// Contract: Start() binds (port 0 picks a free port) and serves on a
// background thread pool of `threads` workers; a keep-alive connection holds
// one worker while open, so `threads` bounds concurrent connections served at
// once. Stop() stops accepting, finishes in-flight requests and joins.
// Thread safety: Start/Stop from one thread.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "api/router.h"
#include "common/status.h"

namespace httplib {
class Server;
}

namespace lote::api {

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 7480;  // 0: any free port
  int threads = 64;
  size_t max_body_bytes = 16 << 20;
};

class HttpServer {
 public:
  explicit HttpServer(const ApiRouter* router);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Unavailable (naming host:port and the reason) if it cannot bind.
  Status Start(const HttpServerOptions& options);
  // The bound port (after Start).
  int port() const { return port_; }
  void Stop();

 private:
  const ApiRouter* router_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  std::atomic<bool> listener_done_{false};  // set by thread_ when the listener returns
  int port_ = 0;
};

}  // namespace lote::api
