#include "api/http_server.h"

#include <httplib.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

namespace lote::api {

namespace {

HttpRequest Convert(const httplib::Request& req) {
  HttpRequest out;
  out.method = req.method;
  // req.target is the request-target exactly as sent (still percent-encoded);
  // SigV4's canonical URI needs that, not the decoded req.path.
  const std::string& target = req.target.empty() ? req.path : req.target;
  size_t q = target.find('?');
  out.raw_path = target.substr(0, q);
  out.raw_query = q == std::string::npos ? "" : target.substr(q + 1);
  out.headers.reserve(req.headers.size());
  for (const auto& [k, v] : req.headers) {
    // httplib adds these for its own bookkeeping; they were not sent.
    if (k == "REMOTE_ADDR" || k == "REMOTE_PORT" || k == "LOCAL_ADDR" || k == "LOCAL_PORT")
      continue;
    out.headers.emplace_back(k, v);
  }
  out.body = req.body;
  return out;
}

}  // namespace

HttpServer::HttpServer(const ApiRouter* router) : router_(router) {}

HttpServer::~HttpServer() { Stop(); }

Status HttpServer::Start(const HttpServerOptions& options) {
  server_ = std::make_unique<httplib::Server>();
  const int threads = options.threads;
  server_->new_task_queue = [threads] {
    return new httplib::ThreadPool(static_cast<size_t>(threads));
  };
  server_->set_tcp_nodelay(true);
  server_->set_keep_alive_max_count(1'000'000);
  // Short idle timeout: Stop() waits for idle keep-alive connections to expire.
  server_->set_keep_alive_timeout(2);
  server_->set_payload_max_length(options.max_body_bytes);
  auto handler = [this](const httplib::Request& req, httplib::Response& res) {
    HttpResponse r = router_->Handle(Convert(req));
    res.status = r.status;
    std::string content_type = "application/json";
    for (auto& [k, v] : r.headers) {
      if (k == "Content-Type") {
        content_type = v;
      } else {
        res.set_header(k, v);
      }
    }
    res.set_content(std::move(r.body), content_type);
  };
  server_->Get(".*", handler);
  server_->Post(".*", handler);
  server_->Put(".*", handler);
  server_->Delete(".*", handler);
  server_->Patch(".*", handler);
  if (options.port == 0) {
    port_ = server_->bind_to_any_port(options.host);
    if (port_ <= 0) {
      return Status::Unavailable("cannot bind " + options.host + ":0: " + std::strerror(errno));
    }
  } else {
    if (!server_->bind_to_port(options.host, options.port)) {
      return Status::Unavailable("cannot listen on " + options.host + ":" +
                                 std::to_string(options.port) + " (" + std::strerror(errno) +
                                 "); is another server running there? choose another --listen");
    }
    port_ = options.port;
  }
  thread_ = std::thread([this] {
    server_->listen_after_bind();
    listener_done_ = true;
  });
  // httplib's stop() is a no-op until the listener runs: wait for it, so a
  // Stop() right after Start() cannot leave the listener blocked in accept().
  while (!server_->is_running() && !listener_done_) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return Status::Ok();
}

void HttpServer::Stop() {
  if (server_) {
    // Repeat until the listener thread has left listen_after_bind().
    while (thread_.joinable() && !listener_done_) {
      server_->stop();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  if (thread_.joinable()) thread_.join();
}

}  // namespace lote::api
