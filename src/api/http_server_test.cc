#include "api/http_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace lote::api {
namespace {

// A raw client connection: writes bytes, reads HTTP/1.1 responses one by one.
class Conn {
 public:
  explicit Conn(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    timeval tv{30, 0};  // a guard against a hung test, not a measured threshold
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  }
  ~Conn() { Close(); }
  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  bool connected() const { return connected_; }

  bool Send(const std::string& data) {
    size_t off = 0;
    while (off < data.size()) {
      ssize_t n = ::send(fd_, data.data() + off, data.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return false;
      off += static_cast<size_t>(n);
    }
    return true;
  }

  struct Response {
    int status = 0;
    std::map<std::string, std::string> headers;  // lower-case names
    std::string body;
    std::string Header(const std::string& name) const {
      auto it = headers.find(name);
      return it == headers.end() ? "" : it->second;
    }
  };

  // The next response; status 0 if the connection closed first.
  // `head`: the response to a HEAD request (no body despite Content-Length).
  Response Read(bool head = false) {
    Response r;
    size_t end;
    while ((end = buf_.find("\r\n\r\n")) == std::string::npos) {
      if (!Fill()) return r;
    }
    std::string head_text = buf_.substr(0, end);
    buf_.erase(0, end + 4);
    size_t line_end = head_text.find("\r\n");
    std::string status_line = head_text.substr(0, line_end);
    r.status = std::stoi(status_line.substr(9, 3));
    size_t pos = line_end == std::string::npos ? head_text.size() : line_end + 2;
    while (pos < head_text.size()) {
      size_t next = head_text.find("\r\n", pos);
      if (next == std::string::npos) next = head_text.size();
      std::string line = head_text.substr(pos, next - pos);
      size_t colon = line.find(':');
      std::string name = line.substr(0, colon);
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      std::string value = line.substr(colon + 1);
      while (!value.empty() && value.front() == ' ') value.erase(0, 1);
      r.headers[name] = value;
      pos = next + 2;
    }
    if (r.status == 100) return r;
    size_t length = r.headers.count("content-length") ? std::stoul(r.headers["content-length"]) : 0;
    if (head) length = 0;
    while (buf_.size() < length) {
      if (!Fill()) break;
    }
    r.body = buf_.substr(0, length);
    buf_.erase(0, std::min(length, buf_.size()));
    return r;
  }

  // True once the server has closed the connection (reads return EOF).
  bool ClosedByServer() {
    while (Fill()) {
    }
    return last_read_ == 0;
  }

 private:
  bool Fill() {
    char tmp[65536];
    ssize_t n = ::recv(fd_, tmp, sizeof(tmp), 0);
    last_read_ = n;
    if (n <= 0) return false;
    buf_.append(tmp, static_cast<size_t>(n));
    return true;
  }

  int fd_ = -1;
  bool connected_ = false;
  std::string buf_;
  ssize_t last_read_ = 1;
};

std::string Post(const std::string& path, const std::string& body,
                 const std::string& extra_headers = "") {
  return "POST " + path + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" +
         extra_headers + "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

class HttpServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    router_.RegisterRestOperation(
        {"Echo", "POST", "/v1/echo", {}, [](const Json& r) { return Result<Json>(r); }});
    router_.RegisterRestOperation({"EchoInline",
                                   "POST",
                                   "/v1/echoinline",
                                   {},
                                   [](const Json& r) { return Result<Json>(r); },
                                   /*nonblocking=*/true});
    router_.RegisterRestOperation(
        {"Big", "POST", "/v1/big", {}, [](const Json& r) -> Result<Json> {
           return Json{{"n", r.value("n", 0)}, {"s", std::string(8 << 20, 'b')}};
         }});
    router_.RegisterRestOperation(
        {"Throw", "POST", "/v1/throw", {}, [](const Json&) -> Result<Json> {
           throw std::runtime_error("a bug");
         }});
    JsonService logs;
    logs.target_prefix = "Logs_20140328";
    logs.signing_service = "logs";
    logs.operations["PutLogEvents"] = [](const Json&) -> Result<Json> { return Json::object(); };
    router_.RegisterJsonService(std::move(logs));
    options_.port = 0;
    options_.threads = 4;
    options_.io_threads = 1;
  }

  void StartServer() { ASSERT_TRUE(server_.Start(options_).ok()); }

  static Json Body(const Conn::Response& r) { return Json::parse(r.body); }
  static void ExpectAwsShaped(const Conn::Response& r, const std::string& code) {
    EXPECT_FALSE(r.Header("date").empty());
    EXPECT_EQ(r.Header("x-amzn-requestid").size(), 36u);
    EXPECT_EQ(r.Header("x-amzn-errortype"), code);
    ASSERT_FALSE(r.body.empty());
    EXPECT_EQ(Body(r)["__type"], code);
    EXPECT_FALSE(Body(r)["message"].get<std::string>().empty());
  }

  ApiRouter router_{nullptr};
  HttpServerOptions options_;
  HttpServer server_{&router_};
};

TEST_F(HttpServerTest, KeepAliveAndPipeliningAnswerInOrder) {
  StartServer();
  Conn c(server_.port());
  ASSERT_TRUE(c.connected());
  ASSERT_TRUE(c.Send(Post("/v1/echo", R"({"n": 1})") + Post("/v1/echo", R"({"n": 2})") +
                     Post("/v1/nosuch", "{}") + Post("/v1/echo", R"({"n": 4})")));
  for (int n : {1, 2, 0, 4}) {
    Conn::Response r = c.Read();
    if (n == 0) {
      EXPECT_EQ(r.status, 404);
      ExpectAwsShaped(r, "UnknownOperationException");
      continue;
    }
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(Body(r)["n"], n);
    EXPECT_FALSE(r.Header("date").empty());
    EXPECT_EQ(r.Header("date").substr(r.Header("date").size() - 4), " GMT");
    EXPECT_EQ(r.Header("x-amzn-requestid").size(), 36u);
  }
  // Still open afterwards.
  ASSERT_TRUE(c.Send(Post("/v1/echo", R"({"n": 5})")));
  EXPECT_EQ(Body(c.Read())["n"], 5);
}

TEST_F(HttpServerTest, InlineAndPooledHandlersInterleaveInOrder) {
  StartServer();
  Conn c(server_.port());
  std::string batch;
  for (int n = 0; n < 20; ++n) {
    batch += Post(n % 3 == 0 ? "/v1/big"
                  : n % 2    ? "/v1/echoinline"
                             : "/v1/echo",
                  R"({"n": )" + std::to_string(n) + "}");
  }
  ASSERT_TRUE(c.Send(batch));
  for (int n = 0; n < 20; ++n) {
    Conn::Response r = c.Read();
    ASSERT_EQ(r.status, 200);
    Json body = Body(r);
    EXPECT_EQ(body["n"], n);
    if (n % 3 == 0) {
      EXPECT_EQ(body["s"].get<std::string>().size(), size_t{8 << 20});
    }
  }
}

TEST_F(HttpServerTest, Http10AndConnectionCloseCloseAfterTheAnswer) {
  StartServer();
  Conn a(server_.port());
  ASSERT_TRUE(a.Send("POST /v1/echo HTTP/1.0\r\nContent-Length: 2\r\n\r\n{}"));
  EXPECT_EQ(a.Read().status, 200);
  EXPECT_TRUE(a.ClosedByServer());
  Conn k(server_.port());  // HTTP/1.0 asking for keep-alive gets it, said explicitly
  ASSERT_TRUE(
      k.Send("POST /v1/echo HTTP/1.0\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\n{}"));
  Conn::Response kr = k.Read();
  EXPECT_EQ(kr.status, 200);
  EXPECT_EQ(kr.Header("connection"), "keep-alive");
  ASSERT_TRUE(k.Send("POST /v1/echo HTTP/1.0\r\nContent-Length: 2\r\n\r\n{}"));
  EXPECT_EQ(k.Read().status, 200);
  EXPECT_TRUE(k.ClosedByServer());
  Conn b(server_.port());
  ASSERT_TRUE(b.Send(Post("/v1/echo", "{}", "Connection: close\r\n")));
  Conn::Response r = b.Read();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.Header("connection"), "close");
  EXPECT_TRUE(b.ClosedByServer());
}

TEST_F(HttpServerTest, MalformedHttpIsAnAwsShapedClientError) {
  StartServer();
  for (const std::string& junk :
       {std::string("GARBAGE\r\n\r\n"), std::string("POST /v1/echo HTTP/9.9\r\n\r\n"),
        std::string("POST /v1/echo HTTP/1.1\r\nContent-Length: nope\r\n\r\n"),
        std::string("POST /v1/echo HTTP/1.1\r\nBad Header\r\n\r\n"),
        std::string("\x01\x02\x03\xff\r\n\r\n")}) {
    Conn c(server_.port());
    ASSERT_TRUE(c.Send(junk));
    Conn::Response r = c.Read();
    EXPECT_EQ(r.status, 400) << junk;
    ExpectAwsShaped(r, "ClientException");
    EXPECT_TRUE(c.ClosedByServer());
  }
}

TEST_F(HttpServerTest, SizeLimitsAreShapedForTheAddressedService) {
  options_.max_body_bytes = 1000;
  options_.max_header_bytes = 4096;
  options_.max_target_bytes = 512;
  StartServer();
  {
    Conn c(server_.port());
    ASSERT_TRUE(
        c.Send(Post("/", std::string(5000, ' '), "X-Amz-Target: Logs_20140328.PutLogEvents\r\n")));
    Conn::Response r = c.Read();
    EXPECT_EQ(r.status, 413);
    ExpectAwsShaped(r, "InvalidParameterException");
    EXPECT_EQ(r.Header("content-type"), "application/x-amz-json-1.1");
  }
  {
    Conn c(server_.port());
    ASSERT_TRUE(c.Send(Post("/v1/echo", std::string(5000, ' '))));
    Conn::Response r = c.Read();
    EXPECT_EQ(r.status, 413);
    ExpectAwsShaped(r, "ClientException");
  }
  {  // chunked: the size is only known while reading
    Conn c(server_.port());
    ASSERT_TRUE(c.Send("POST /v1/echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" +
                       std::string("800\r\n") + std::string(0x800, ' ') + "\r\n0\r\n\r\n"));
    Conn::Response r = c.Read();
    EXPECT_EQ(r.status, 413);
    ExpectAwsShaped(r, "ClientException");
  }
  {
    Conn c(server_.port());
    ASSERT_TRUE(c.Send(Post("/v1/echo", "{}", "X-Big: " + std::string(8000, 'a') + "\r\n")));
    Conn::Response r = c.Read();
    EXPECT_EQ(r.status, 431);
    ExpectAwsShaped(r, "ClientException");
  }
  {
    Conn c(server_.port());
    ASSERT_TRUE(c.Send(Post("/v1/echo?" + std::string(1000, 'q'), "{}")));
    Conn::Response r = c.Read();
    EXPECT_EQ(r.status, 414);
    ExpectAwsShaped(r, "ClientException");
  }
}

TEST_F(HttpServerTest, ExpectContinue) {
  options_.max_body_bytes = 1000;
  StartServer();
  Conn c(server_.port());
  ASSERT_TRUE(c.Send(
      "POST /v1/echo HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 8\r\n\r\n"));
  EXPECT_EQ(c.Read().status, 100);
  ASSERT_TRUE(c.Send(R"({"n":7})" + std::string(" ")));
  Conn::Response r = c.Read();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(Body(r)["n"], 7);
  // Too large: refused before the body is sent.
  ASSERT_TRUE(c.Send(
      "POST /v1/echo HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5000\r\n\r\n"));
  EXPECT_EQ(c.Read().status, 413);
}

TEST_F(HttpServerTest, HeadAnswersWithoutABody) {
  StartServer();
  Conn c(server_.port());
  ASSERT_TRUE(c.Send("HEAD /v1/echo HTTP/1.1\r\nHost: x\r\n\r\n" + Post("/v1/echo", R"({"n":3})")));
  Conn::Response head = c.Read(/*head=*/true);
  EXPECT_EQ(head.status, 405);
  EXPECT_NE(head.Header("content-length"), "0");
  Conn::Response next = c.Read();
  EXPECT_EQ(next.status, 200);
  EXPECT_EQ(Body(next)["n"], 3);
}

TEST_F(HttpServerTest, HandlerExceptionIsAShaped500) {
  StartServer();
  Conn c(server_.port());
  ASSERT_TRUE(c.Send(Post("/v1/throw", "{}")));
  Conn::Response r = c.Read();
  EXPECT_EQ(r.status, 500);
  ExpectAwsShaped(r, "ServerException");
}

TEST_F(HttpServerTest, SlowHeadersAreAnswered408AndClosed) {
  options_.header_timeout_ms = 200;
  StartServer();
  Conn c(server_.port());
  ASSERT_TRUE(c.Send("POST /v1/echo HTTP/1.1\r\nHost: x\r\n"));  // never finished
  Conn::Response r = c.Read();
  EXPECT_EQ(r.status, 408);
  ExpectAwsShaped(r, "ClientException");
  EXPECT_TRUE(c.ClosedByServer());
}

TEST_F(HttpServerTest, SlowBodiesAreAnswered408AndClosed) {
  options_.body_timeout_ms = 200;
  StartServer();
  Conn c(server_.port());
  ASSERT_TRUE(
      c.Send("POST / HTTP/1.1\r\nHost: x\r\nX-Amz-Target: Logs_20140328.PutLogEvents\r\n"
             "Content-Length: 100\r\n\r\n{"));
  Conn::Response r = c.Read();
  EXPECT_EQ(r.status, 408);
  ExpectAwsShaped(r, "InvalidParameterException");
  EXPECT_TRUE(c.ClosedByServer());
}

TEST_F(HttpServerTest, IdleKeepAliveConnectionsAreClosed) {
  options_.idle_timeout_ms = 100;
  StartServer();
  Conn c(server_.port());
  ASSERT_TRUE(c.Send(Post("/v1/echo", "{}")));
  EXPECT_EQ(c.Read().status, 200);
  EXPECT_TRUE(c.ClosedByServer());
}

TEST_F(HttpServerTest, ConnectionsOverTheLimitAreRefusedCleanly) {
  options_.max_connections = 3;
  StartServer();
  std::vector<std::unique_ptr<Conn>> open;
  for (int i = 0; i < 3; ++i) {
    open.push_back(std::make_unique<Conn>(server_.port()));
    ASSERT_TRUE(open.back()->Send(Post("/v1/echo", "{}")));
    ASSERT_EQ(open.back()->Read().status, 200);  // accepted and counted
  }
  EXPECT_EQ(server_.open_connections(), 3);
  Conn extra(server_.port());
  ASSERT_TRUE(extra.Send(Post("/", "{}", "X-Amz-Target: Logs_20140328.PutLogEvents\r\n")));
  Conn::Response r = extra.Read();
  EXPECT_EQ(r.status, 503);
  ExpectAwsShaped(r, "ServiceUnavailableException");
  EXPECT_TRUE(extra.ClosedByServer());
  // The admitted connections still work.
  for (auto& c : open) {
    ASSERT_TRUE(c->Send(Post("/v1/echo", R"({"n": 9})")));
    EXPECT_EQ(Body(c->Read())["n"], 9);
  }
}

TEST_F(HttpServerTest, SlowClientsDoNotHoldThreads) {
  // One I/O thread and two handler threads; 300 connections each stuck in
  // the middle of their headers must not keep a normal client from an answer.
  options_.threads = 2;
  options_.io_threads = 1;
  StartServer();
  std::vector<std::unique_ptr<Conn>> slow;
  for (int i = 0; i < 300; ++i) {
    slow.push_back(std::make_unique<Conn>(server_.port()));
    ASSERT_TRUE(slow.back()->Send("POST /v1/echo HTTP/1.1\r\nHost: x\r\nX-Slow: "));
  }
  Conn c(server_.port());
  ASSERT_TRUE(c.Send(Post("/v1/echo", R"({"n": 1})")));
  Conn::Response r = c.Read();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(Body(r)["n"], 1);
}

TEST_F(HttpServerTest, StopClosesOpenConnections) {
  StartServer();
  Conn idle(server_.port());
  Conn half(server_.port());
  ASSERT_TRUE(half.Send("POST /v1/echo HTTP/1.1\r\n"));
  ASSERT_TRUE(idle.Send(Post("/v1/echo", "{}")));
  EXPECT_EQ(idle.Read().status, 200);
  server_.Stop();
  EXPECT_TRUE(idle.ClosedByServer());
  EXPECT_TRUE(half.ClosedByServer());
}

TEST(HttpDateTest, Format) {
  EXPECT_EQ(HttpDate(784111777000), "Sun, 06 Nov 1994 08:49:37 GMT");
  EXPECT_EQ(HttpDate(1'700'000'000'000), "Tue, 14 Nov 2023 22:13:20 GMT");
}

}  // namespace
}  // namespace lote::api
