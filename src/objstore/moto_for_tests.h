// Test support (header-only; tests only): a moto_server, the S3 emulator, started on a
// free loopback port in its own process group and stopped with the object, plus an
// S3Config for it. Used by every test that runs the s3:// code against a real server.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "objstore/s3_store.h"

namespace lote::objstore::testing {

inline int FreeLoopbackPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  const int port = ntohs(addr.sin_port);
  ::close(fd);
  return port;
}

// moto's fixed test credentials, path-style endpoint, short backoff.
inline S3Config MotoConfig(const std::string& endpoint) {
  S3Config cfg;
  cfg.endpoint = endpoint;
  cfg.region = "us-east-1";
  cfg.credentials = {"testing", "testing", ""};
  cfg.initial_backoff_ms = 10;
  return cfg;
}

class MotoServer {
 public:
  // Starts the server and waits (up to 30 s) until it accepts connections.
  MotoServer() : port_(FreeLoopbackPort()) {
    pid_ = ::fork();
    if (pid_ == 0) {
      ::setpgid(0, 0);
      std::freopen("/dev/null", "w", stdout);
      std::freopen("/dev/null", "w", stderr);
      const std::string port = std::to_string(port_);
      ::execlp("moto_server", "moto_server", "-H", "127.0.0.1", "-p", port.c_str(), nullptr);
      ::_exit(127);
    }
    ::setpgid(pid_, pid_);
    for (int i = 0; i < 300 && !ready_; ++i) {
      const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      addr.sin_port = htons(static_cast<uint16_t>(port_));
      ready_ = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
      ::close(fd);
      if (!ready_) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  ~MotoServer() {
    if (pid_ > 0) {
      ::kill(-pid_, SIGTERM);
      int status = 0;
      ::waitpid(pid_, &status, 0);
    }
  }
  MotoServer(const MotoServer&) = delete;
  MotoServer& operator=(const MotoServer&) = delete;

  bool ready() const { return ready_; }
  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }
  S3Config config() const { return MotoConfig(endpoint()); }
  // Creates `bucket` (retrying while the server warms up); true on success.
  bool CreateBucket(const std::string& bucket) const {
    S3Config cfg = config();
    cfg.max_attempts = 1;
    for (int i = 0; i < 100; ++i) {
      auto s = S3Store::Open(bucket, "", cfg);
      if (s.ok() && (*s)->CreateBucket().ok()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }

 private:
  int port_;
  pid_t pid_ = -1;
  bool ready_ = false;
};

}  // namespace lote::objstore::testing
