// Connection-scale load client for bench/control (one thread, event driven,
// so 1,000+ connections cost the client no threads):
//   --mode keepalive: `--connections` keep-alive connections, each sending
//     one signed DescribeJobQueues every `--interval-ms` (random phase), open
//     loop, for `--seconds`; optionally `--slowloris N` more connections that
//     each send one header byte per second and never finish a request
//     (reconnecting when the server closes them).
//   --mode burst: `--bursts` times, `--burst` new connections opened at once,
//     each sending one request; latency from connect start to the answer.
// Prints one JSON line: requests, errors, p50/p99/max ms, reconnects.
// The same binary measures lote and moto_server.
#include <CLI/CLI.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench_client.h"
#include "common/clock.h"
#include "common/crypto.h"
#include "common/sigv4.h"

namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = boost::asio::ip::tcp;
using Clock = std::chrono::steady_clock;

struct Shared {
  net::io_context io;
  tcp::endpoint endpoint;
  std::string host_header;
  lote::bench::Target target;
  std::vector<double> latencies_ms;
  int64_t errors = 0;
  int64_t reconnects = 0;
  int64_t slow_reconnects = 0;
  std::string first_error;
  bool stopping = false;

  void Error(const std::string& e) {
    errors++;
    if (first_error.empty()) first_error = e;
  }

  // A signed DescribeJobQueues request.
  std::string Request() const {
    lote::sigv4::Request r;
    r.method = "POST";
    r.raw_path = "/v1/describejobqueues";
    r.headers = {{"Host", host_header}, {"Content-Type", "application/json"}};
    const std::string body = "{}";
    r.payload_sha256_hex = lote::Sha256Hex(body);
    lote::sigv4::SignRequest(&r, {target.key, target.secret, ""}, target.region, "batch",
                             lote::sigv4::FormatAmzDate(lote::SystemClock::Default()->NowMillis()));
    std::string out = "POST /v1/describejobqueues HTTP/1.1\r\n";
    for (const auto& [k, v] : r.headers) out += k + ": " + v + "\r\n";
    out += "Content-Length: 2\r\n\r\n" + body;
    return out;
  }
};

class KeepAliveConn : public std::enable_shared_from_this<KeepAliveConn> {
 public:
  KeepAliveConn(Shared* s, std::chrono::milliseconds interval, std::chrono::milliseconds phase)
      : s_(s), socket_(s->io), timer_(s->io), interval_(interval), next_(Clock::now() + phase) {}

  void Start() { Connect(); }

 private:
  void Connect() {
    socket_ = tcp::socket(s_->io);
    socket_.async_connect(s_->endpoint, [self = shared_from_this()](beast::error_code ec) {
      if (ec) return self->Retry("connect: " + ec.message());
      self->socket_.set_option(tcp::no_delay(true));
      self->Wait();
    });
  }
  void Retry(const std::string& why) {
    if (s_->stopping) return;
    s_->Error(why);
    s_->reconnects++;
    timer_.expires_after(std::chrono::milliseconds(100));
    timer_.async_wait([self = shared_from_this()](beast::error_code) { self->Connect(); });
  }
  void Wait() {
    if (s_->stopping) return;
    timer_.expires_at(next_);
    timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
      if (ec || self->s_->stopping) return;
      self->Send();
    });
  }
  void Send() {
    next_ += interval_;
    if (next_ < Clock::now()) next_ = Clock::now();
    request_ = s_->Request();
    start_ = Clock::now();
    net::async_write(socket_, net::buffer(request_),
                     [self = shared_from_this()](beast::error_code ec, size_t) {
                       if (ec) return self->Retry("write: " + ec.message());
                       self->Read();
                     });
  }
  void Read() {
    res_ = {};
    http::async_read(
        socket_, buffer_, res_, [self = shared_from_this()](beast::error_code ec, size_t) {
          if (ec) return self->Retry("read: " + ec.message());
          double ms =
              std::chrono::duration<double, std::milli>(Clock::now() - self->start_).count();
          if (self->res_.result_int() != 200) {
            self->s_->Error("HTTP " + std::to_string(self->res_.result_int()) + ": " +
                            self->res_.body().substr(0, 200));
          } else {
            self->s_->latencies_ms.push_back(ms);
          }
          if (!self->res_.keep_alive()) {
            self->s_->reconnects++;
            return self->Connect();
          }
          self->Wait();
        });
  }

  Shared* s_;
  tcp::socket socket_;
  net::steady_timer timer_;
  std::chrono::milliseconds interval_;
  Clock::time_point next_;
  Clock::time_point start_;
  std::string request_;
  beast::flat_buffer buffer_;
  http::response<http::string_body> res_;
};

// Sends one header byte per second, forever; reconnects when closed.
class SlowConn : public std::enable_shared_from_this<SlowConn> {
 public:
  explicit SlowConn(Shared* s) : s_(s), socket_(s->io), timer_(s->io) {}
  void Start() { Connect(); }

 private:
  void Connect() {
    if (s_->stopping) return;
    socket_ = tcp::socket(s_->io);
    pos_ = 0;
    socket_.async_connect(s_->endpoint, [self = shared_from_this()](beast::error_code ec) {
      if (ec) return self->Later();
      self->Drip();
      self->Drain();
    });
  }
  void Later() {
    if (s_->stopping) return;
    timer_.expires_after(std::chrono::seconds(1));
    timer_.async_wait([self = shared_from_this()](beast::error_code) { self->Connect(); });
  }
  void Drip() {
    if (s_->stopping) return;
    static const std::string kPrefix = "POST /v1/describejobqueues HTTP/1.1\r\nX-Slow: ";
    byte_ = pos_ < kPrefix.size() ? kPrefix[pos_] : 'a';
    pos_++;
    net::async_write(socket_, net::buffer(&byte_, 1),
                     [self = shared_from_this()](beast::error_code ec, size_t) {
                       if (ec) return;  // Drain sees the close and reconnects
                       self->timer_.expires_after(std::chrono::seconds(1));
                       self->timer_.async_wait([self](beast::error_code tec) {
                         if (!tec) self->Drip();
                       });
                     });
  }
  // Reads (and discards) whatever the server answers; on close, reconnects.
  void Drain() {
    socket_.async_read_some(net::buffer(sink_),
                            [self = shared_from_this()](beast::error_code ec, size_t) {
                              if (!ec) return self->Drain();
                              if (self->s_->stopping) return;
                              self->s_->slow_reconnects++;
                              self->timer_.cancel();
                              beast::error_code ignored;
                              self->socket_.close(ignored);
                              self->Connect();
                            });
  }

  Shared* s_;
  tcp::socket socket_;
  net::steady_timer timer_;
  size_t pos_ = 0;
  char byte_ = 0;
  char sink_[4096];
};

class BurstConn : public std::enable_shared_from_this<BurstConn> {
 public:
  BurstConn(Shared* s, int* pending) : s_(s), socket_(s->io), pending_(pending) {}
  void Start() {
    start_ = Clock::now();
    request_ = s_->Request();
    socket_.async_connect(s_->endpoint, [self = shared_from_this()](beast::error_code ec) {
      if (ec) return self->Done("connect: " + ec.message());
      net::async_write(self->socket_, net::buffer(self->request_),
                       [self](beast::error_code wec, size_t) {
                         if (wec) return self->Done("write: " + wec.message());
                         http::async_read(self->socket_, self->buffer_, self->res_,
                                          [self](beast::error_code rec, size_t) {
                                            if (rec) return self->Done("read: " + rec.message());
                                            self->Done("");
                                          });
                       });
    });
  }

 private:
  void Done(const std::string& error) {
    if (!error.empty()) {
      s_->Error(error);
    } else if (res_.result_int() != 200) {
      s_->Error("HTTP " + std::to_string(res_.result_int()));
    } else {
      s_->latencies_ms.push_back(
          std::chrono::duration<double, std::milli>(Clock::now() - start_).count());
    }
    beast::error_code ignored;
    socket_.close(ignored);
    --*pending_;
  }
  Shared* s_;
  tcp::socket socket_;
  int* pending_;
  Clock::time_point start_;
  std::string request_;
  beast::flat_buffer buffer_;
  http::response<http::string_body> res_;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"lote connection-scale load client"};
  Shared s;
  std::string mode = "keepalive";
  int connections = 1000;
  int slowloris = 0;
  int interval_ms = 1000;
  double seconds = 10;
  int burst = 50;
  int bursts = 20;
  lote::bench::AddTargetOptions(app, &s.target);
  app.add_option("--mode", mode, "keepalive | burst");
  app.add_option("--connections", connections);
  app.add_option("--slowloris", slowloris, "extra connections sending 1 header byte/s");
  app.add_option("--interval-ms", interval_ms, "per keep-alive connection, between requests");
  app.add_option("--seconds", seconds);
  app.add_option("--burst", burst);
  app.add_option("--bursts", bursts);
  CLI11_PARSE(app, argc, argv);

  std::string hp = s.target.endpoint.substr(s.target.endpoint.find("//") + 2);
  while (!hp.empty() && hp.back() == '/') hp.pop_back();
  s.host_header = hp;
  size_t colon = hp.rfind(':');
  s.endpoint = tcp::endpoint(net::ip::make_address(hp.substr(0, colon)),
                             static_cast<unsigned short>(std::stoi(hp.substr(colon + 1))));

  std::mt19937 rng(7);
  if (mode == "keepalive") {
    for (int i = 0; i < slowloris; ++i) std::make_shared<SlowConn>(&s)->Start();
    std::uniform_int_distribution<int> phase(0, interval_ms);
    for (int i = 0; i < connections; ++i) {
      std::make_shared<KeepAliveConn>(&s, std::chrono::milliseconds(interval_ms),
                                      std::chrono::milliseconds(phase(rng)))
          ->Start();
    }
    net::steady_timer end(s.io);
    // The first interval opens the connections and warms up: not measured.
    net::steady_timer warm(s.io);
    warm.expires_after(std::chrono::milliseconds(interval_ms + 500));
    warm.async_wait([&](beast::error_code) {
      s.latencies_ms.clear();
      s.errors = 0;
      s.first_error.clear();
    });
    end.expires_after(std::chrono::milliseconds(interval_ms + 500) +
                      std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000)));
    end.async_wait([&](beast::error_code) {
      s.stopping = true;
      s.io.stop();
    });
    s.io.run();
  } else {
    int pending = 0;
    for (int b = 0; b < bursts; ++b) {
      pending = burst;
      for (int i = 0; i < burst; ++i) std::make_shared<BurstConn>(&s, &pending)->Start();
      while (pending > 0) s.io.run_one();
      s.io.restart();
      // Let the server settle between bursts (closed connections, TIME_WAIT).
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }
  lote::bench::LatencySummary sum = lote::bench::Summarize(s.latencies_ms);
  lote::Json out = {{"requests", sum.count},
                    {"errors", s.errors},
                    {"p50_ms", sum.p50_ms},
                    {"p99_ms", sum.p99_ms},
                    {"max_ms", sum.max_ms},
                    {"reconnects", s.reconnects},
                    {"slow_reconnects", s.slow_reconnects},
                    {"first_error", s.first_error.substr(0, 200)}};
  std::printf("%s\n", out.dump(-1, ' ', false, lote::Json::error_handler_t::replace).c_str());
  return sum.count == 0 ? 1 : 0;
}
