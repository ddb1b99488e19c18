#include "api/http_server.h"

#include <spdlog/spdlog.h>
#include <strings.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <exception>
#include <limits>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "common/thread_name.h"

namespace lote::api {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = boost::asio::ip::tcp;

std::string HttpDate(int64_t unix_millis) {
  static constexpr const char* kDays[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
  static constexpr const char* kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                            "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  std::time_t t = static_cast<std::time_t>(unix_millis / 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%s, %02d %s %04d %02d:%02d:%02d GMT", kDays[tm.tm_wday % 7],
                tm.tm_mday, kMonths[tm.tm_mon % 12], tm.tm_year + 1900, tm.tm_hour, tm.tm_min,
                tm.tm_sec);
  return buf;
}

namespace {

// Connections over the limit are answered 503 while fewer than this many are
// being refused; beyond that they are closed at once.
constexpr int kMaxRefusing = 1024;
// After a response that closes the connection, unread request bytes are
// drained this long so the client reads the answer instead of a reset.
constexpr int64_t kLingerMillis = 2'000;
// How long a connection over the limit may take to send its request line (to
// be answered 503) before it is closed without an answer.
constexpr int64_t kRefuseWaitMillis = 2'000;
// Streamed request bodies and file responses move in chunks of this size.
constexpr size_t kChunkBytes = 1 << 20;

}  // namespace

class HttpServer::Impl {
 public:
  Impl(const HttpHandler* router, const HttpServerOptions& options)
      : router_(router),
        options_(options),
        clock_(options.clock ? options.clock : SystemClock::Default()),
        acceptor_(net::make_strand(io_)),
        pool_(static_cast<size_t>(std::max(1, options.threads))) {}

  Status Listen(int* port);
  void Run();
  void Stop();
  int open() const { return open_.load(); }

  // Everything a Connection needs from the server. The counters outlive io_:
  // destroying io_ destroys the connections it still holds.
  const HttpHandler* router_;
  const HttpServerOptions options_;
  const Clock* clock_;
  std::atomic<int> open_{0};
  std::atomic<int> refusing_{0};
  std::atomic<bool> stopping_{false};
  net::io_context io_;
  tcp::acceptor acceptor_;
  net::steady_timer accept_retry_{acceptor_.get_executor()};
  net::thread_pool pool_;
  std::vector<std::thread> io_threads_;

 private:
  void Accept();
};

namespace {

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(HttpServer::Impl* server, tcp::socket socket, bool refuse)
      : server_(server),
        socket_(std::move(socket)),
        timer_(socket_.get_executor()),
        buffer_(server->options_.max_header_bytes + 64 * 1024),
        refuse_(refuse) {}

  ~Connection() {
    if (refuse_) {
      server_->refusing_--;
    } else {
      server_->open_--;
    }
  }

  void Start() {
    net::dispatch(socket_.get_executor(), [self = shared_from_this()] {
      beast::error_code ignored;
      self->socket_.non_blocking(true, ignored);  // for the handler thread's write attempt
      self->WaitForRequest();
    });
  }

 private:
  const HttpServerOptions& opts() const { return server_->options_; }

  // Arms the deadline of the operation about to start: when it passes, the
  // socket's operations are cancelled (not the socket closed, so a 408 can
  // still be written) and timed_out_ tells the handler why.
  void SetDeadline(int64_t ms) {
    timed_out_ = false;
    const uint64_t armed = ++deadline_;
    timer_.expires_after(std::chrono::milliseconds(ms));
    timer_.async_wait([self = shared_from_this(), armed](beast::error_code ec) {
      // Re-armed or cancelled since (a handler that fired just before the
      // cancel still runs: the generation tells it apart).
      if (ec || armed != self->deadline_) return;
      self->timed_out_ = true;
      beast::error_code ignored;
      self->socket_.cancel(ignored);
    });
  }
  void CancelDeadline() {
    ++deadline_;
    timer_.cancel();
  }

  // Waits (idle deadline) for the first byte of the next request.
  void WaitForRequest() {
    if (buffer_.size() > 0) return ReadHeader();
    // A refused connection gets a short wait: it holds a descriptor beyond the limit.
    SetDeadline(refuse_ ? std::min<int64_t>(kRefuseWaitMillis, opts().idle_timeout_ms)
                        : opts().idle_timeout_ms);
    socket_.async_read_some(
        buffer_.prepare(4096), [self = shared_from_this()](beast::error_code ec, size_t n) {
          if (ec) return self->Close();  // idle timeout, client closed, reset: nothing to answer
          self->buffer_.commit(n);
          self->ReadHeader();
        });
  }

  void ReadHeader() {
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(opts().max_header_bytes));
    // No body limit yet: Beast would refuse a Content-Length over it while it
    // reads the header, before the handler can take the body as a stream
    // (BodySinkFor). OnHeader and ReadBody apply it to buffered bodies. (Not
    // boost::none: Beast 1.74 compares a Content-Length with it as if it were 0.)
    parser_->body_limit(std::numeric_limits<std::uint64_t>::max());
    SetDeadline(opts().header_timeout_ms);
    http::async_read_header(
        socket_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->OnHeader(ec); });
  }

  void OnHeader(beast::error_code ec) {
    CancelDeadline();
    if (ec) return OnReadError(ec, /*have_header=*/false);
    const auto& req = parser_->get();
    if (refuse_) {
      return Fail(503, Status::Unavailable(
                           "the server has " + std::to_string(opts().max_connections) +
                           " connections open, its limit; retry later or reuse a keep-alive "
                           "connection"));
    }
    if (req.target().size() > opts().max_target_bytes) {
      return Fail(414, Status::InvalidArgument(
                           "the request target is " + std::to_string(req.target().size()) +
                           " bytes; the limit is " + std::to_string(opts().max_target_bytes)));
    }
    sink_ = server_->router_->BodySinkFor(PartialRequest());
    if (sink_) {
      if (Status refusal = sink_->Refusal(); !refusal.ok()) {
        sink_.reset();
        return Fail(SinkErrorStatus(refusal), refusal);
      }
    }
    if (auto length = parser_->content_length();
        !sink_ && length && *length > opts().max_body_bytes) {
      return Fail(413, TooLarge(*length));
    }
    if (parser_->is_done()) return Dispatch();
    if (beast::iequals(req[http::field::expect], "100-continue")) {
      auto cont = std::make_shared<http::response<http::empty_body>>(http::status::continue_, 11);
      SetDeadline(opts().write_timeout_ms);
      return http::async_write(socket_, *cont,
                               [self = shared_from_this(), cont](beast::error_code wec, size_t) {
                                 self->CancelDeadline();
                                 if (wec) return self->Close();
                                 self->ReadBody();
                               });
    }
    ReadBody();
  }

  void ReadBody() {
    if (sink_) {
      stream_parser_.emplace(std::move(*parser_));
      parser_.reset();
      stream_parser_->body_limit(boost::none);
      if (chunk_.empty()) chunk_.resize(kChunkBytes);
      return ReadBodyChunk();
    }
    parser_->body_limit(opts().max_body_bytes);
    SetDeadline(opts().body_timeout_ms);
    http::async_read(socket_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, size_t) {
                       self->CancelDeadline();
                       if (ec) return self->OnReadError(ec, /*have_header=*/true);
                       self->Dispatch();
                     });
  }

  // A streamed body: each chunk must arrive within the body deadline (a
  // large object may take longer than that in all) and goes to the sink.
  void ReadBodyChunk() {
    auto& body = stream_parser_->get().body();
    body.data = chunk_.data();
    body.size = chunk_.size();
    SetDeadline(opts().body_timeout_ms);
    http::async_read(socket_, buffer_, *stream_parser_,
                     [self = shared_from_this()](beast::error_code ec, size_t) {
                       self->CancelDeadline();
                       if (ec == http::error::need_buffer) ec = {};
                       if (ec) return self->OnReadError(ec, /*have_header=*/true);
                       const size_t got =
                           self->chunk_.size() - self->stream_parser_->get().body().size;
                       if (got > 0) {
                         Status st = self->sink_->Write(std::string_view(self->chunk_.data(), got));
                         if (!st.ok()) return self->Fail(SinkErrorStatus(st), st);
                       }
                       if (self->stream_parser_->is_done()) return self->Dispatch();
                       self->ReadBodyChunk();
                     });
  }

  static int SinkErrorStatus(const Status& st) {
    switch (st.code()) {
      case StatusCode::kPermissionDenied:
        return 403;
      case StatusCode::kNotFound:
        return 404;
      case StatusCode::kResourceExhausted:
        return 413;
      default:
        return 400;
    }
  }

  Status TooLarge(uint64_t length) const {
    return Status::InvalidArgument(
        "the request body is " + (length ? std::to_string(length) + " bytes" : "too large") +
        "; the limit is " + std::to_string(opts().max_body_bytes) + " bytes");
  }

  void OnReadError(beast::error_code ec, bool have_header) {
    if (timed_out_) {
      return Fail(
          408, Status::InvalidArgument(
                   std::string("the request was not received in time: its ") +
                   (have_header ? "body" : "headers") + " must arrive within " +
                   std::to_string(have_header ? opts().body_timeout_ms : opts().header_timeout_ms) +
                   " ms"));
    }
    if (ec == http::error::end_of_stream || ec == net::error::eof ||
        ec == net::error::connection_reset || ec == net::error::operation_aborted ||
        ec == http::error::partial_message || ec == net::error::broken_pipe) {
      return Close();
    }
    if (ec == http::error::body_limit) return Fail(413, TooLarge(0));
    if (ec == http::error::header_limit || ec == http::error::buffer_overflow) {
      return Fail(431, Status::InvalidArgument("the request line and headers exceed " +
                                               std::to_string(opts().max_header_bytes) + " bytes"));
    }
    return Fail(400, Status::InvalidArgument("malformed HTTP request: " + ec.message()));
  }

  // What is known of the request so far (for shaping an error).
  HttpRequest PartialRequest() const {
    if (parser_) return FromHeader(parser_->get());
    if (stream_parser_) return FromHeader(stream_parser_->get());
    return HttpRequest{};
  }

  static HttpRequest FromHeader(const http::request_header<>& req) {
    HttpRequest out;
    out.method = std::string(req.method_string());
    const std::string_view target(req.target().data(), req.target().size());
    size_t q = target.find('?');
    out.raw_path = std::string(target.substr(0, q));
    out.raw_query = q == std::string_view::npos ? "" : std::string(target.substr(q + 1));
    out.headers.reserve(16);
    for (const auto& f : req) out.headers.emplace_back(f.name_string(), f.value());
    return out;
  }

  // Answers an HTTP-level failure and closes the connection.
  void Fail(int http_status, const Status& status) {
    HttpRequest partial = PartialRequest();
    HttpResponse r = server_->router_->TransportError(partial, http_status, status);
    Write(std::move(r), /*keep_alive=*/false, /*head=*/partial.method == "HEAD");
  }

  void Dispatch() {
    HttpRequest out;
    bool keep_alive = false;
    bool head = false;
    if (stream_parser_) {
      const auto& req = stream_parser_->get();
      out = FromHeader(req);
      keep_alive = req.keep_alive();
      head = req.method() == http::verb::head;
      http10_ = req.version() == 10;
      stream_parser_.reset();
    } else {
      auto& req = parser_->get();
      out = FromHeader(req);
      out.body = std::move(req.body());
      keep_alive = req.keep_alive();
      head = req.method() == http::verb::head;
      http10_ = req.version() == 10;
      parser_.reset();
    }
    out.body_sink = std::move(sink_);
    if (server_->stopping_) {
      HttpResponse r = server_->router_->TransportError(
          out, 503, Status::Unavailable("the server is shutting down; retry"));
      return Write(std::move(r), false, head);
    }
    if (server_->router_->IsNonblocking(out)) {
      // Memory-only operations run here, on the I/O thread: no hand-off.
      return Write(RunHandler(out), keep_alive, head);
    }
    net::post(server_->pool_, [self = shared_from_this(), request = std::move(out), keep_alive,
                               head]() mutable {
      thread_local const bool named = (NameThisThread("lote-http"), true);
      (void)named;
      HttpResponse r = self->RunHandler(request);
      if (r.file && !head) {
        // A file body is written in chunks on the connection's strand.
        auto file = *r.file;
        auto bytes = std::make_shared<std::string>(self->Serialize(std::move(r), keep_alive, head));
        return net::post(self->socket_.get_executor(), [self, bytes, file, keep_alive] {
          self->file_out_ = file;
          self->Finish(bytes, 0, keep_alive);
        });
      }
      // Send the answer from this thread when the socket takes it at once (the
      // usual case: answers are small), sparing the client a wake-up of the
      // I/O thread; the rest, and the next read, continue on the connection's
      // strand. Nothing else touches the socket, buffer or timer while a
      // handler runs: no read is pending and the deadline is disarmed (a
      // cancelled timer handler still queued only reads deadline_).
      auto bytes = std::make_shared<std::string>(self->Serialize(std::move(r), keep_alive, head));
      beast::error_code ec;
      size_t sent = self->socket_.write_some(net::buffer(*bytes), ec);
      if (ec == net::error::would_block || ec == net::error::try_again) {
        ec = {};
        sent = 0;
      }
      if (!ec && sent == bytes->size() && keep_alive) {
        // Wait for the next request from here too: it only queues a read
        // (its completion runs on the strand), sparing the I/O thread a wake-up.
        return self->WaitForRequest();
      }
      net::post(self->socket_.get_executor(), [self, bytes, sent, ec, keep_alive] {
        if (ec) return self->Close();
        self->Finish(bytes, sent, keep_alive);
      });
    });
  }

  HttpResponse RunHandler(const HttpRequest& request) const {
    try {
      return server_->router_->Handle(request);
    } catch (const std::exception& e) {
      return server_->router_->InternalError(request, e.what());
    } catch (...) {
      return server_->router_->InternalError(request, "unknown exception");
    }
  }

  // The answer as bytes: status line, headers (Date, x-amzn-RequestId and
  // Content-Type added when missing), body.
  std::string Serialize(HttpResponse r, bool keep_alive, bool head) const {
    std::string out;
    out.reserve(256 + r.body.size());
    out += "HTTP/1.1 ";
    out += std::to_string(r.status);
    out += ' ';
    const auto reason = http::obsolete_reason(static_cast<http::status>(r.status));
    out.append(reason.data(), reason.size());
    out += "\r\n";
    bool has_id = false;
    bool has_type = false;
    for (const auto& [k, v] : r.headers) {
      if (strcasecmp(k.c_str(), "x-amzn-RequestId") == 0) has_id = true;
      if (strcasecmp(k.c_str(), "Content-Type") == 0) has_type = true;
      if (strcasecmp(k.c_str(), "Content-Length") == 0 || strcasecmp(k.c_str(), "Date") == 0 ||
          strcasecmp(k.c_str(), "Connection") == 0) {
        continue;  // ours to set
      }
      out += k + ": " + v + "\r\n";
    }
    if (!has_id) out += "x-amzn-RequestId: " + ApiRouter::NewRequestId() + "\r\n";
    if (!has_type) out += "Content-Type: application/json\r\n";
    out += "Date: " + HttpDate(server_->clock_->NowMillis()) + "\r\n";
    // A HEAD answer announces the length of the body it does not carry.
    out += "Content-Length: " + std::to_string(r.file ? r.file->length : r.body.size()) + "\r\n";
    if (!keep_alive) {
      out += "Connection: close\r\n";
    } else if (http10_) {
      out += "Connection: keep-alive\r\n";  // HTTP/1.0 closes unless told otherwise
    }
    out += "\r\n";
    if (!head) out += r.body;
    return out;
  }

  void Write(HttpResponse r, bool keep_alive, bool head) {
    if (r.file && !head) file_out_ = *r.file;
    Finish(std::make_shared<std::string>(Serialize(std::move(r), keep_alive, head)), 0, keep_alive);
  }

  // Writes the next chunk of a file body (read with pread: the page cache
  // makes it cheap), then the next, then goes on as after any answer.
  void WriteFileChunk(bool keep_alive) {
    FileBody& f = *file_out_;
    if (f.length == 0) {
      file_out_.reset();
      return AfterWrite(keep_alive);
    }
    if (chunk_.empty()) chunk_.resize(kChunkBytes);
    const size_t want = static_cast<size_t>(std::min<uint64_t>(f.length, chunk_.size()));
    ssize_t n;
    do {
      n = ::pread(*f.fd, chunk_.data(), want, static_cast<off_t>(f.offset));
    } while (n < 0 && errno == EINTR);
    if (n <= 0) {
      // The file shrank or failed under us: the client sees a short body.
      spdlog::warn("http: a file body ended early at offset {}: {}", f.offset,
                   n < 0 ? std::strerror(errno) : "end of file");
      file_out_.reset();
      return Close();
    }
    f.offset += static_cast<uint64_t>(n);
    f.length -= static_cast<uint64_t>(n);
    SetDeadline(opts().write_timeout_ms);
    net::async_write(socket_, net::buffer(chunk_.data(), static_cast<size_t>(n)),
                     [self = shared_from_this(), keep_alive](beast::error_code ec, size_t) {
                       self->CancelDeadline();
                       if (ec) {
                         self->file_out_.reset();
                         return self->Close();
                       }
                       self->WriteFileChunk(keep_alive);
                     });
  }

  // Writes what is left of `bytes` after `sent`, then reads the next request
  // (or closes).
  void Finish(std::shared_ptr<std::string> bytes, size_t sent, bool keep_alive) {
    if (sent >= bytes->size()) return AfterWrite(keep_alive);
    SetDeadline(opts().write_timeout_ms);
    net::async_write(socket_, net::buffer(bytes->data() + sent, bytes->size() - sent),
                     [self = shared_from_this(), bytes, keep_alive](beast::error_code ec, size_t) {
                       self->CancelDeadline();
                       if (ec) return self->Close();
                       self->AfterWrite(keep_alive);
                     });
  }

  void AfterWrite(bool keep_alive) {
    if (file_out_) return WriteFileChunk(keep_alive);
    if (!keep_alive) return Linger();
    WaitForRequest();
  }

  // Half-closes and drains what the client still sends (briefly), then closes.
  void Linger() {
    beast::error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_send, ignored);
    if (!lingering_) SetDeadline(kLingerMillis);  // once: the whole drain is bounded
    lingering_ = true;
    buffer_.clear();
    socket_.async_read_some(buffer_.prepare(4096),
                            [self = shared_from_this()](beast::error_code ec, size_t) {
                              if (ec) return self->Close();
                              self->Linger();
                            });
  }

  void Close() {
    beast::error_code ignored;
    CancelDeadline();
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
  }

  HttpServer::Impl* server_;
  tcp::socket socket_;
  net::steady_timer timer_;            // the deadline of the current operation
  std::atomic<uint64_t> deadline_{0};  // generation of the armed deadline
  bool timed_out_ = false;
  bool lingering_ = false;
  bool http10_ = false;  // the request being answered is HTTP/1.0
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  // A body streamed to a sink (BodySinkFor): the parser after the header.
  std::optional<http::request_parser<http::buffer_body>> stream_parser_;
  std::shared_ptr<BodySink> sink_;
  std::optional<FileBody> file_out_;  // a file body still to write
  std::vector<char> chunk_;           // streamed request or file response bytes
  const bool refuse_;
};

}  // namespace

Status HttpServer::Impl::Listen(int* port) {
  beast::error_code ec;
  net::ip::address address = net::ip::make_address(
      options_.host == "localhost" ? std::string("127.0.0.1") : options_.host, ec);
  if (ec) {
    return Status::InvalidArgument("cannot listen on '" + options_.host + "': not an IP address (" +
                                   ec.message() + ")");
  }
  tcp::endpoint endpoint(address, static_cast<unsigned short>(options_.port));
  acceptor_.open(endpoint.protocol(), ec);
  if (!ec) acceptor_.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acceptor_.bind(endpoint, ec);
  if (!ec) acceptor_.listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    return Status::Unavailable("cannot listen on " + options_.host + ":" +
                               std::to_string(options_.port) + " (" + ec.message() +
                               "); is another server running there? choose another --listen");
  }
  *port = acceptor_.local_endpoint().port();
  return Status::Ok();
}

void HttpServer::Impl::Accept() {
  acceptor_.async_accept(net::make_strand(io_), [this](beast::error_code ec, tcp::socket socket) {
    if (ec) {
      if (!acceptor_.is_open() || stopping_) return;
      // Out of descriptors and the like: the pending connection stays in the
      // backlog; try again shortly rather than spinning.
      spdlog::warn("http: accept failed: {}; retrying in 100 ms", ec.message());
      accept_retry_.expires_after(std::chrono::milliseconds(100));
      accept_retry_.async_wait([this](beast::error_code wec) {
        if (!wec && !stopping_) Accept();
      });
      return;
    }
    beast::error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);
    if (open_.load() >= options_.max_connections) {
      if (refusing_.fetch_add(1) >= kMaxRefusing) {
        refusing_--;
        socket.close(ignored);
      } else {
        std::make_shared<Connection>(this, std::move(socket), /*refuse=*/true)->Start();
      }
    } else {
      open_++;
      std::make_shared<Connection>(this, std::move(socket), /*refuse=*/false)->Start();
    }
    Accept();
  });
}

void HttpServer::Impl::Run() {
  Accept();
  int n = options_.io_threads;
  if (n <= 0) n = static_cast<int>(std::min(4u, std::max(1u, std::thread::hardware_concurrency())));
  for (int i = 0; i < n; ++i) {
    io_threads_.push_back(NamedThread("lote-http-io", [this] {
      for (;;) {
        try {
          io_.run();
          return;
        } catch (const std::exception& e) {
          spdlog::error("http: I/O thread caught: {}", e.what());
        }
      }
    }));
  }
}

void HttpServer::Impl::Stop() {
  stopping_ = true;
  net::post(acceptor_.get_executor(), [this] {
    beast::error_code ignored;
    acceptor_.close(ignored);
    accept_retry_.cancel();
  });
  pool_.join();  // handlers that are running finish (and post their writes)
  io_.stop();
  for (std::thread& t : io_threads_) t.join();
  io_threads_.clear();
}

HttpServer::HttpServer(const HttpHandler* handler) : router_(handler) {}

HttpServer::~HttpServer() { Stop(); }

Status HttpServer::Start(const HttpServerOptions& options) {
  HttpServerOptions effective = options;
  // Each connection is a descriptor: keep half of them for everything else
  // (store, logs, job supervisors) rather than fail accepts at the limit.
  if (struct rlimit rl; ::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
    const int fit = static_cast<int>(std::min<rlim_t>(rl.rlim_cur / 2, 1 << 30));
    if (effective.max_connections > fit) {
      spdlog::info("http: at most {} connections (half the descriptor limit {})", fit,
                   static_cast<uint64_t>(rl.rlim_cur));
      effective.max_connections = fit;
    }
  }
  impl_ = std::make_unique<Impl>(router_, effective);
  Status st = impl_->Listen(&port_);
  if (!st.ok()) {
    impl_.reset();
    return st;
  }
  impl_->Run();
  return Status::Ok();
}

int HttpServer::open_connections() const { return impl_ ? impl_->open() : 0; }

void HttpServer::Stop() {
  if (!impl_) return;
  impl_->Stop();
  impl_.reset();  // the io_context goes last, releasing every connection
}

}  // namespace lote::api
