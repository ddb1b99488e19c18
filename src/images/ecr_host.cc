#include "images/ecr_host.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <cerrno>
#include <cstring>
#include <thread>
#include <vector>

#include "common/files.h"
#include "common/thread_name.h"

namespace lote::images {

namespace net = boost::asio;
using tcp = boost::asio::ip::tcp;

namespace {

constexpr size_t kForwardChunk = 64 * 1024;

std::string Marker(const std::string& home) { return "# lote ecr-host-names " + home; }

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::string ErrnoText(const std::string& what, const std::string& path) {
  return what + " " + path + ": " + std::strerror(errno);
}

Status WriteAllTo(int fd, std::string_view data, const std::string& path) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Status::Internal(ErrnoText("cannot write", path));
    data.remove_prefix(static_cast<size_t>(n));
  }
  return Status::Ok();
}

// Truncates and rewrites `path` itself (its inode, mode and owner stay).
Status RewriteInPlace(const std::string& path, std::string_view text) {
  int fd = ::open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
  if (fd < 0) return Status::Internal(ErrnoText("cannot open", path));
  Status wrote = WriteAllTo(fd, text, path);
  if (wrote.ok() && ::fsync(fd) != 0) wrote = Status::Internal(ErrnoText("cannot sync", path));
  ::close(fd);
  return wrote;
}

// A temporary file beside `path` (with `mode`), renamed over it; in place
// when `path` is a mount point (rename: EBUSY, or EXDEV across mounts).
Status ReplaceFile(const std::string& path, std::string_view text, mode_t mode) {
  const std::string tmp = path + ".lote-tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return Status::Internal(ErrnoText("cannot create", tmp));
  Status wrote = WriteAllTo(fd, text, tmp);
  if (wrote.ok() && (::fchmod(fd, mode) != 0 || ::fsync(fd) != 0))
    wrote = Status::Internal(ErrnoText("cannot sync", tmp));
  ::close(fd);
  if (!wrote.ok()) {
    ::unlink(tmp.c_str());
    return wrote;
  }
  if (::rename(tmp.c_str(), path.c_str()) == 0) return Status::Ok();
  const int rename_errno = errno;
  ::unlink(tmp.c_str());
  if (rename_errno == EBUSY || rename_errno == EXDEV) return RewriteInPlace(path, text);
  errno = rename_errno;
  return Status::Internal(ErrnoText("cannot rename " + tmp + " to", path));
}

// "127.0.0.1:PORT" as an endpoint.
Result<tcp::endpoint> ParseEndpoint(const std::string& address) {
  const size_t colon = address.rfind(':');
  boost::system::error_code ec;
  if (colon == std::string::npos) return Status::InvalidArgument("not HOST:PORT: " + address);
  net::ip::address ip = net::ip::make_address(address.substr(0, colon), ec);
  if (ec) return Status::InvalidArgument("not HOST:PORT: " + address);
  int port = 0;
  try {
    port = std::stoi(address.substr(colon + 1));
  } catch (const std::exception&) {
    return Status::InvalidArgument("not HOST:PORT: " + address);
  }
  return tcp::endpoint(ip, static_cast<uint16_t>(port));
}

// One accepted connection and its connection to the target. Lives as long
// as a handler holds it (the I/O thread only).
class ForwardedConnection : public std::enable_shared_from_this<ForwardedConnection> {
 public:
  ForwardedConnection(tcp::socket client, net::io_context& io)
      : client_(std::move(client)),
        target_(io),
        to_target_(kForwardChunk),
        to_client_(kForwardChunk) {}

  void Connect(const tcp::endpoint& target) {
    target_.async_connect(target, [self = shared_from_this()](boost::system::error_code ec) {
      if (ec) return;  // the client's socket closes with the last reference
      self->Pump(self->client_, self->target_, self->to_target_);
      self->Pump(self->target_, self->client_, self->to_client_);
    });
  }

 private:
  void Pump(tcp::socket& from, tcp::socket& to, std::vector<char>& buf) {
    from.async_read_some(net::buffer(buf), [self = shared_from_this(), &from, &to, &buf](
                                               boost::system::error_code ec, size_t n) {
      if (ec == net::error::eof) return self->EndedSending(to);
      if (ec) return self->Close();
      net::async_write(to, net::buffer(buf.data(), n),
                       [self, &from, &to, &buf](boost::system::error_code ec, size_t) {
                         if (ec) return self->Close();
                         self->Pump(from, to, buf);
                       });
    });
  }

  void EndedSending(tcp::socket& to) {
    boost::system::error_code ignored;
    to.shutdown(tcp::socket::shutdown_send, ignored);
    if (++ended_ == 2) Close();
  }

  void Close() {
    boost::system::error_code ignored;
    client_.close(ignored);
    target_.close(ignored);
  }

  tcp::socket client_;
  tcp::socket target_;
  std::vector<char> to_target_;
  std::vector<char> to_client_;
  int ended_ = 0;  // directions whose sender has finished
};

}  // namespace

std::string EcrHostName(const std::string& account_id, const std::string& region) {
  return account_id + ".dkr.ecr." + region + ".amazonaws.com";
}

std::string EditHostsText(std::string_view hosts, const std::string& home,
                          const std::string& host) {
  const std::string marker = Marker(home);
  std::string out;
  out.reserve(hosts.size() + 128);
  while (!hosts.empty()) {
    const size_t nl = hosts.find('\n');
    const size_t len = nl == std::string_view::npos ? hosts.size() : nl + 1;
    std::string_view line = hosts.substr(0, len);
    hosts.remove_prefix(len);
    std::string_view content = line;
    while (!content.empty() && (content.back() == '\n' || content.back() == '\r' ||
                                content.back() == ' ' || content.back() == '\t'))
      content.remove_suffix(1);
    if (!EndsWith(content, marker)) out.append(line);
  }
  if (!host.empty()) {
    if (!out.empty() && out.back() != '\n') out += '\n';
    out += "127.0.0.1 " + host + "  " + marker + "\n";
  }
  return out;
}

Status EditHostsFile(const std::string& path, const std::string& home, const std::string& host) {
  std::string text;
  if (Result<std::string> read = ReadFile(path); read.ok()) {
    text = std::move(*read);
  } else if (read.status().code() != StatusCode::kNotFound) {
    return read.status();
  }
  const std::string edited = EditHostsText(text, home, host);
  if (edited == text) return Status::Ok();
  struct stat st {};
  const mode_t mode = ::stat(path.c_str(), &st) == 0 ? (st.st_mode & 07777) : 0644;
  return ReplaceFile(path, edited, mode);
}

class TcpForwarder::Impl {
 public:
  Impl() : acceptor_(io_) {}
  ~Impl() {
    io_.stop();
    if (thread_.joinable()) thread_.join();
  }

  Status Listen(const std::string& host, int port, const std::string& target) {
    ASSIGN_OR_RETURN(target_, ParseEndpoint(target));
    ASSIGN_OR_RETURN(tcp::endpoint listen, ParseEndpoint(host + ":" + std::to_string(port)));
    boost::system::error_code ec;
    acceptor_.open(listen.protocol(), ec);
    if (!ec) acceptor_.set_option(net::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_.bind(listen, ec);
    if (!ec) acceptor_.listen(net::socket_base::max_listen_connections, ec);
    if (ec)
      return Status::Unavailable("cannot listen on " + host + ":" + std::to_string(port) + ": " +
                                 ec.message());
    port_ = acceptor_.local_endpoint().port();
    Accept();
    thread_ = NamedThread("ecr-forward", [this] { io_.run(); });
    return Status::Ok();
  }

  int port() const { return port_; }

 private:
  void Accept() {
    acceptor_.async_accept([this](boost::system::error_code ec, tcp::socket socket) {
      if (ec == net::error::operation_aborted) return;
      if (!ec) std::make_shared<ForwardedConnection>(std::move(socket), io_)->Connect(target_);
      Accept();
    });
  }

  net::io_context io_;
  tcp::acceptor acceptor_;
  tcp::endpoint target_;
  int port_ = 0;
  std::thread thread_;
};

TcpForwarder::TcpForwarder(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TcpForwarder::~TcpForwarder() = default;

Result<std::unique_ptr<TcpForwarder>> TcpForwarder::Start(const std::string& listen_host,
                                                          int listen_port,
                                                          const std::string& target) {
  auto impl = std::make_unique<Impl>();
  RETURN_IF_ERROR(impl->Listen(listen_host, listen_port, target));
  return std::unique_ptr<TcpForwarder>(new TcpForwarder(std::move(impl)));
}

int TcpForwarder::port() const { return impl_->port(); }

Result<std::unique_ptr<EcrHostNames>> EcrHostNames::Start(EcrHostNamesOptions options) {
  std::unique_ptr<EcrHostNames> names(new EcrHostNames());
  names->options_ = std::move(options);
  const EcrHostNamesOptions& o = names->options_;
  ASSIGN_OR_RETURN(names->forwarder_,
                   TcpForwarder::Start(o.listen_host, o.listen_port, o.registry_address));
  RETURN_IF_ERROR(EditHostsFile(o.hosts_file, o.home, o.host));
  names->added_ = true;
  spdlog::info("ECR host name {}: a line in {}, {}:{} forwarded to the registry at {}", o.host,
               o.hosts_file, o.listen_host, names->forwarder_->port(), o.registry_address);
  return names;
}

EcrHostNames::~EcrHostNames() {
  if (!added_) return;
  if (Status removed = EditHostsFile(options_.hosts_file, options_.home, ""); !removed.ok())
    spdlog::warn("cannot remove the ECR host name from {}: {}", options_.hosts_file,
                 removed.ToString());
}

}  // namespace lote::images
