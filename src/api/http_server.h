// The HTTP/1.1 listener (Boost.Beast over Asio): turns connections into
// HttpRequest values for an ApiRouter and writes back its HttpResponse.
//
// Contract:
//  - Event driven: a few I/O threads (`io_threads`) multiplex every
//    connection; an idle or slow connection costs a socket and a buffer, no
//    thread. Handlers (ApiRouter::Handle, which may block on a commit) run on
//    a bounded pool of `threads` workers; each connection has at most one
//    request in a handler at a time, so pipelined requests are answered in
//    order.
//  - Deadlines per connection: `idle_timeout_ms` for the first byte of the
//    next request on a keep-alive connection (then closed silently),
//    `header_timeout_ms` from that first byte to the end of the headers and
//    `body_timeout_ms` for the body (slow-loris: answered 408 and closed),
//    `write_timeout_ms` for writing a response.
//  - Limits: request line + headers `max_header_bytes` (431), request target
//    `max_target_bytes` (414), body `max_body_bytes` (413, also refused
//    before an `Expect: 100-continue` body is sent). More than
//    `max_connections` open connections: the extra one is answered 503 and
//    closed. Every such answer is AWS-shaped for the service addressed
//    (ApiRouter::TransportError) and carries Date and x-amzn-RequestId, like
//    every response.
//  - The listen backlog is the system maximum (SOMAXCONN).
//  - Start() binds (port 0 picks a free port). Stop() stops accepting, lets
//    handlers that are running finish, and closes every connection.
// Thread safety: Start/Stop from one thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "api/router.h"
#include "common/clock.h"
#include "common/status.h"

namespace lote::api {

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 7480;     // 0: any free port
  int threads = 64;    // handler pool
  int io_threads = 0;  // 0: min(4, hardware threads)
  size_t max_body_bytes = 16 << 20;
  size_t max_header_bytes = 64 << 10;
  size_t max_target_bytes = 16 << 10;
  int max_connections = 10'000;
  int64_t idle_timeout_ms = 60'000;
  int64_t header_timeout_ms = 10'000;
  int64_t body_timeout_ms = 60'000;
  int64_t write_timeout_ms = 60'000;
  const Clock* clock = nullptr;  // for the Date header; null: the system clock
};

class HttpServer {
 public:
  // `handler` (an ApiRouter, or the web console) must outlive the server.
  explicit HttpServer(const HttpHandler* handler);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Unavailable (naming host:port and the reason) if it cannot bind.
  Status Start(const HttpServerOptions& options);
  // The bound port (after Start).
  int port() const { return port_; }
  // Connections open now (accepted and not yet closed).
  int open_connections() const;
  void Stop();

  class Impl;

 private:
  const HttpHandler* router_;
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
};

// An HTTP date (RFC 9110 IMF-fixdate) for a time in Unix milliseconds:
// "Sun, 06 Nov 1994 08:49:37 GMT".
std::string HttpDate(int64_t unix_millis);

}  // namespace lote::api
