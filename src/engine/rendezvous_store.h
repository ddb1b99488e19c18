// The rendezvous store of a distributed `lote train`: a small TCP key-value store that
// the main node's launcher serves and every launcher and rank of the job talks to.
// Ranks exchange their Gloo addresses through it; launchers register with it, so the
// store notices a node that disappears (its connection closes, or it stops sending
// heartbeats) and publishes why under kAbortKey, which every launcher polls.
//
// Wire format (both directions, little-endian): a request is op (1 byte), key
// (u32 length + bytes), value (u32 length + bytes), timeout in ms (u32); a reply is
// found (1 byte: 1 = yes), value (u32 length + bytes). Ops: Set, Get (waits up to the
// timeout for the key), Check (no wait), Add (atomic int64 counter), Hello (registers
// the connection as node `value`'s launcher), Done (that node finished cleanly).
//
// StoreServer is thread-safe (a thread per connection; a handful of connections per
// node). StoreClient is thread-safe (one request at a time under a mutex).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"

namespace lote::engine {

inline constexpr const char* kAbortKey = "lote/abort";

class StoreServer {
 public:
  struct Options {
    std::string host = "127.0.0.1";  // address to bind ("0.0.0.0" = all)
    int port = 29500;                // 0 = any free port
    std::string job_id;              // launchers of another job are refused
    int num_nodes = 1;
    // A registered launcher silent for this long is declared lost (it polls every
    // fraction of a second while healthy).
    std::chrono::milliseconds heartbeat_timeout = std::chrono::seconds(30);
  };
  static Result<std::unique_ptr<StoreServer>> Start(Options options);
  ~StoreServer();  // stops: closes every connection, joins its threads

  int port() const { return port_; }
  // Nodes whose launchers said Done.
  int nodes_done() const;
  // The value of kAbortKey, if any.
  std::optional<std::string> abort_reason() const;
  void SetAbort(const std::string& reason);

 private:
  explicit StoreServer(Options options) : opt_(std::move(options)) {}
  void AcceptLoop();
  void Serve(int fd);
  void SetLocked(const std::string& key, std::string value);

  Options opt_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread acceptor_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::string> kv_;        // protected by mu_
  std::set<int> open_fds_;                       // protected by mu_
  std::vector<std::thread> workers_;             // protected by mu_
  std::set<int> nodes_registered_, nodes_done_;  // protected by mu_
};

class StoreClient {
 public:
  // Connects to host:port, retrying until `timeout`; `waiting` is called about every
  // 10 s (and once at the first failure) with a line saying what it waits for.
  static Result<std::unique_ptr<StoreClient>> Connect(
      const std::string& host, int port, std::chrono::milliseconds timeout,
      const std::function<void(const std::string&)>& waiting);
  ~StoreClient();

  Status Set(const std::string& key, const std::string& value);
  // Waits up to `timeout` for the key; NotFound when it did not appear in time.
  Result<std::string> Get(const std::string& key, std::chrono::milliseconds timeout);
  // nullopt when the key is absent.
  Result<std::optional<std::string>> Check(const std::string& key);
  Result<int64_t> Add(const std::string& key, int64_t delta);
  // Registers this connection as node `node`'s launcher for job `job_id`.
  Status Hello(int node, const std::string& job_id);
  Status Done();

  const std::string& address() const { return address_; }

 private:
  StoreClient(int fd, std::string address) : fd_(fd), address_(std::move(address)) {}
  Result<std::pair<bool, std::string>> Call(char op, const std::string& key,
                                            const std::string& value, uint32_t timeout_ms);
  std::mutex mu_;
  int fd_;
  std::string address_;
};

}  // namespace lote::engine
