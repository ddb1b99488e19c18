#include "engine/rendezvous_store.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace lote::engine {
namespace {

using std::chrono::milliseconds;
using SteadyClock = std::chrono::steady_clock;

enum Op : char {
  kSet = 'S',
  kGet = 'G',
  kCheck = 'C',
  kAdd = 'A',
  kHello = 'H',
  kDone = 'D',
};
enum Reply : char { kMissing = 0, kFound = 1, kError = 2 };

// Largest key or value accepted (addresses and reasons are small).
constexpr uint32_t kMaxField = 1 << 20;

bool WriteAll(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

// 1 = read, 0 = the peer closed, -1 = error (errno: EAGAIN on a receive timeout).
int ReadAll(int fd, void* data, size_t n) {
  char* p = static_cast<char*>(data);
  size_t got = 0;
  while (got < n) {
    const ssize_t r = ::recv(fd, p + got, n - got, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) return 0;
    if (r < 0) return -1;
    got += static_cast<size_t>(r);
  }
  return 1;
}

void PutString(std::string* out, const std::string& s) {
  const uint32_t n = static_cast<uint32_t>(s.size());
  out->append(reinterpret_cast<const char*>(&n), 4);
  out->append(s);
}

int ReadString(int fd, std::string* s) {
  uint32_t n = 0;
  int r = ReadAll(fd, &n, 4);
  if (r <= 0) return r;
  if (n > kMaxField) {
    errno = EMSGSIZE;
    return -1;
  }
  s->resize(n);
  return n == 0 ? 1 : ReadAll(fd, s->data(), n);
}

bool SendReply(int fd, Reply reply, const std::string& value) {
  std::string msg(1, static_cast<char>(reply));
  PutString(&msg, value);
  return WriteAll(fd, msg.data(), msg.size());
}

void SetReceiveTimeout(int fd, milliseconds timeout) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(timeout.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((timeout.count() % 1000) * 1000);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
}

}  // namespace

Result<std::unique_ptr<StoreServer>> StoreServer::Start(Options options) {
  std::unique_ptr<StoreServer> s(new StoreServer(std::move(options)));
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::Internal(fmt::format("socket: {}", std::strerror(errno)));
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(s->opt_.port));
  if (::inet_pton(AF_INET, s->opt_.host.c_str(), &addr.sin_addr) != 1) {
    ::close(fd);
    return Status::InvalidArgument(fmt::format(
        "the main node's address \"{}\" is not an IPv4 address (give --master-addr A.B.C.D)",
        s->opt_.host));
  }
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::listen(fd, SOMAXCONN) != 0) {
    const int err = errno;
    ::close(fd);
    return Status::Unavailable(fmt::format(
        "cannot serve the rendezvous store on {}:{}: {}{}", s->opt_.host, s->opt_.port,
        std::strerror(err),
        err == EADDRINUSE ? " (another job uses this port on this address; pick --master-port)"
                          : ""));
  }
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  s->port_ = ntohs(addr.sin_port);
  s->listen_fd_ = fd;
  s->acceptor_ = std::thread([p = s.get()] { p->AcceptLoop(); });
  return s;
}

StoreServer::~StoreServer() {
  stopping_ = true;
  ::shutdown(listen_fd_, SHUT_RDWR);
  if (acceptor_.joinable()) acceptor_.join();
  ::close(listen_fd_);
  std::vector<std::thread> workers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (int fd : open_fds_) ::shutdown(fd, SHUT_RDWR);
    workers.swap(workers_);
  }
  cv_.notify_all();
  for (auto& t : workers) t.join();
}

int StoreServer::nodes_done() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(nodes_done_.size());
}

std::optional<std::string> StoreServer::abort_reason() const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = kv_.find(kAbortKey);
  if (it == kv_.end()) return std::nullopt;
  return it->second;
}

void StoreServer::SetAbort(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mu_);
  if (kv_.count(kAbortKey) == 0) SetLocked(kAbortKey, reason);
}

void StoreServer::SetLocked(const std::string& key, std::string value) {
  kv_[key] = std::move(value);
  cv_.notify_all();
}

void StoreServer::AcceptLoop() {
  while (!stopping_) {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      return;  // shut down
    }
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) {
      ::close(fd);
      return;
    }
    open_fds_.insert(fd);
    workers_.emplace_back([this, fd] { Serve(fd); });
  }
}

void StoreServer::Serve(int fd) {
  int node = -1;  // set by Hello
  bool done = false;
  std::string why_lost;
  while (!stopping_) {
    char op = 0;
    std::string key, value;
    uint32_t timeout_ms = 0;
    int r = ReadAll(fd, &op, 1);
    if (r > 0) r = ReadString(fd, &key);
    if (r > 0) r = ReadString(fd, &value);
    if (r > 0) r = ReadAll(fd, &timeout_ms, 4);
    if (r <= 0) {
      if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        why_lost = fmt::format(
            "sent no heartbeat for {} s",
            std::chrono::duration_cast<std::chrono::seconds>(opt_.heartbeat_timeout).count());
      } else {
        why_lost = "closed its connection";
      }
      break;
    }
    bool ok = true;
    std::unique_lock<std::mutex> lock(mu_);
    switch (op) {
      case kSet:
        // The first reason to stop a job is the one every node reports.
        if (key != kAbortKey || kv_.count(key) == 0) SetLocked(key, std::move(value));
        lock.unlock();
        ok = SendReply(fd, kFound, "");
        break;
      case kGet: {
        const auto deadline = SteadyClock::now() + milliseconds(timeout_ms);
        cv_.wait_until(lock, deadline, [&] { return stopping_ || kv_.count(key) > 0; });
        auto it = kv_.find(key);
        const bool found = it != kv_.end();
        const std::string v = found ? it->second : "";
        lock.unlock();
        ok = SendReply(fd, found ? kFound : kMissing, v);
        break;
      }
      case kCheck: {
        auto it = kv_.find(key);
        const bool found = it != kv_.end();
        const std::string v = found ? it->second : "";
        lock.unlock();
        ok = SendReply(fd, found ? kFound : kMissing, v);
        break;
      }
      case kAdd: {
        int64_t current = 0;
        auto it = kv_.find(key);
        if (it != kv_.end()) current = std::stoll(it->second);
        current += std::stoll(value.empty() ? "0" : value);
        SetLocked(key, std::to_string(current));
        lock.unlock();
        ok = SendReply(fd, kFound, std::to_string(current));
        break;
      }
      case kHello: {
        // value: "<node> <job id>"
        const size_t sp = value.find(' ');
        const int n = std::atoi(value.substr(0, sp).c_str());
        const std::string job = sp == std::string::npos ? "" : value.substr(sp + 1);
        std::string error;
        if (!opt_.job_id.empty() && !job.empty() && job != opt_.job_id) {
          error = fmt::format("this rendezvous store serves job {}, not {}", opt_.job_id, job);
        } else if (n < 0 || n >= opt_.num_nodes) {
          error = fmt::format("node {} is outside 0..{}", n, opt_.num_nodes - 1);
        } else if (nodes_registered_.count(n) > 0) {
          error =
              fmt::format("node {} is already registered (two launchers with one node rank?)", n);
        }
        if (error.empty()) {
          nodes_registered_.insert(n);
          node = n;
        }
        lock.unlock();
        if (error.empty()) SetReceiveTimeout(fd, opt_.heartbeat_timeout);
        ok = SendReply(fd, error.empty() ? kFound : kError, error);
        break;
      }
      case kDone:
        if (node >= 0) nodes_done_.insert(node);
        done = true;
        lock.unlock();
        ok = SendReply(fd, kFound, "");
        break;
      default:
        lock.unlock();
        ok = SendReply(fd, kError, fmt::format("unknown op {}", static_cast<int>(op)));
        break;
    }
    if (!ok) {
      why_lost = "closed its connection";
      break;
    }
  }
  if (node >= 0 && !done && !stopping_) {
    SetAbort(fmt::format("node {}'s launcher {} (the node died or was stopped)", node, why_lost));
  }
  std::lock_guard<std::mutex> lock(mu_);
  open_fds_.erase(fd);
  ::close(fd);
}

Result<std::unique_ptr<StoreClient>> StoreClient::Connect(
    const std::string& host, int port, milliseconds timeout,
    const std::function<void(const std::string&)>& waiting) {
  const std::string address = fmt::format("{}:{}", host, port);
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (int e = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res); e != 0) {
    return Status::InvalidArgument(
        fmt::format("cannot resolve the main node's address {}: {}", host, ::gai_strerror(e)));
  }
  const auto start = SteadyClock::now();
  auto next_note = start;
  std::string last_error;
  while (true) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && ::connect(fd, res->ai_addr, res->ai_addrlen) == 0) {
      ::freeaddrinfo(res);
      const int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      return std::unique_ptr<StoreClient>(new StoreClient(fd, address));
    }
    last_error = std::strerror(errno);
    if (fd >= 0) ::close(fd);
    const auto now = SteadyClock::now();
    if (now - start >= timeout) break;
    if (now >= next_note && waiting) {
      waiting(fmt::format("waiting for the rendezvous store at {} ({}; {} s of {} s)", address,
                          last_error,
                          std::chrono::duration_cast<std::chrono::seconds>(now - start).count(),
                          std::chrono::duration_cast<std::chrono::seconds>(timeout).count()));
      next_note = now + std::chrono::seconds(10);
    }
    std::this_thread::sleep_for(milliseconds(200));
  }
  ::freeaddrinfo(res);
  return Status::DeadlineExceeded(fmt::format(
      "timed out after {} s waiting for the rendezvous store of the main node at {} ({}); is "
      "the main node running, and are --master-addr/--master-port right?",
      std::chrono::duration_cast<std::chrono::seconds>(timeout).count(), address, last_error));
}

StoreClient::~StoreClient() { ::close(fd_); }

Result<std::pair<bool, std::string>> StoreClient::Call(char op, const std::string& key,
                                                       const std::string& value,
                                                       uint32_t timeout_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  std::string msg(1, op);
  PutString(&msg, key);
  PutString(&msg, value);
  msg.append(reinterpret_cast<const char*>(&timeout_ms), 4);
  if (!WriteAll(fd_, msg.data(), msg.size())) {
    return Status::Unavailable(fmt::format("lost the connection to the rendezvous store at {}: {}",
                                           address_, std::strerror(errno)));
  }
  char reply = 0;
  std::string v;
  int r = ReadAll(fd_, &reply, 1);
  if (r > 0) r = ReadString(fd_, &v);
  if (r <= 0) {
    return Status::Unavailable(
        fmt::format("lost the connection to the rendezvous store at {} ({})", address_,
                    r == 0 ? "closed by the main node" : std::strerror(errno)));
  }
  if (reply == kError) return Status::FailedPrecondition(v);
  return std::make_pair(reply == kFound, std::move(v));
}

Status StoreClient::Set(const std::string& key, const std::string& value) {
  return Call(kSet, key, value, 0).status();
}

Result<std::string> StoreClient::Get(const std::string& key, milliseconds timeout) {
  ASSIGN_OR_RETURN(auto r, Call(kGet, key, "", static_cast<uint32_t>(timeout.count())));
  if (!r.first) return Status::NotFound(fmt::format("key {} not set in time", key));
  return std::move(r.second);
}

Result<std::optional<std::string>> StoreClient::Check(const std::string& key) {
  ASSIGN_OR_RETURN(auto r, Call(kCheck, key, "", 0));
  if (!r.first) return std::optional<std::string>();
  return std::optional<std::string>(std::move(r.second));
}

Result<int64_t> StoreClient::Add(const std::string& key, int64_t delta) {
  ASSIGN_OR_RETURN(auto r, Call(kAdd, key, std::to_string(delta), 0));
  return static_cast<int64_t>(std::stoll(r.second));
}

Status StoreClient::Hello(int node, const std::string& job_id) {
  return Call(kHello, "", fmt::format("{} {}", node, job_id), 0).status();
}

Status StoreClient::Done() { return Call(kDone, "", "", 0).status(); }

}  // namespace lote::engine
