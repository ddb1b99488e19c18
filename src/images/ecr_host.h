// ECR's registry host name on this host (`lote server --ecr-host-names on`,
// docs/containers.md): `<account>.dkr.ecr.<region>.amazonaws.com` resolves to
// 127.0.0.1 through one /etc/hosts line, and a forwarder on 127.0.0.1:80
// copies each connection's bytes to the local registry, so `docker login`,
// `docker push` and `docker pull` with that host name reach it over plain HTTP
// (lote's registries.conf marks the host insecure).
//
// The /etc/hosts line ends with a marker naming the server's home,
// "# lote ecr-host-names <home>": it is removed when the server stops, and a
// line left by a server that died is removed by the home's next start.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"

namespace lote::images {

// "<account_id>.dkr.ecr.<region>.amazonaws.com".
std::string EcrHostName(const std::string& account_id, const std::string& region);

// `hosts` (the text of an /etc/hosts) without the lines marked for `home`,
// then, when `host` is not empty, with "127.0.0.1 <host>  # lote
// ecr-host-names <home>" appended once. Every other line is kept as it is.
std::string EditHostsText(std::string_view hosts, const std::string& home, const std::string& host);

// Applies EditHostsText to the file at `path` and writes it back only when the
// text changes: to a temporary file beside it, renamed over it (keeping its
// mode); when the rename fails because `path` is a mount point (a container's
// /etc/hosts), the file is rewritten in place. A missing file reads as empty.
Status EditHostsFile(const std::string& path, const std::string& home, const std::string& host);

// Copies bytes both ways between each connection accepted on `listen_host`:
// `listen_port` and a new connection to `target` ("HOST:PORT"); when one side
// ends its sending, the other's is shut down, and the pair closes once both
// have. Thread safety: one I/O thread of its own; Start and the destructor from
// any one thread.
class TcpForwarder {
 public:
  // Unavailable when the port cannot be bound (the message names it).
  static Result<std::unique_ptr<TcpForwarder>> Start(const std::string& listen_host,
                                                     int listen_port, const std::string& target);
  ~TcpForwarder();  // closes the listener and every connection
  TcpForwarder(const TcpForwarder&) = delete;
  TcpForwarder& operator=(const TcpForwarder&) = delete;

  int port() const;  // the bound port (listen_port, or the one chosen for 0)

 private:
  class Impl;
  explicit TcpForwarder(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

struct EcrHostNamesOptions {
  std::string hosts_file = "/etc/hosts";
  std::string home;              // the server's home (the marker)
  std::string host;              // EcrHostName(...)
  std::string registry_address;  // "127.0.0.1:PORT"
  std::string listen_host = "127.0.0.1";
  int listen_port = 80;
};

// The forwarder and the hosts line together, for as long as the server runs.
class EcrHostNames {
 public:
  // Starts the forwarder, then adds the hosts line (removing any left for the
  // home). Unavailable when the port cannot be bound; then nothing is changed.
  static Result<std::unique_ptr<EcrHostNames>> Start(EcrHostNamesOptions options);
  ~EcrHostNames();  // removes the hosts line, then stops the forwarder

  EcrHostNames(const EcrHostNames&) = delete;
  EcrHostNames& operator=(const EcrHostNames&) = delete;

 private:
  EcrHostNames() = default;
  EcrHostNamesOptions options_;
  std::unique_ptr<TcpForwarder> forwarder_;
  bool added_ = false;  // the hosts line is ours to remove
};

}  // namespace lote::images
