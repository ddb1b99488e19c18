// The local image registry lote runs in place of ECR: Debian's
// `docker-registry` (distribution 2.8) on a loopback port, supervised by the
// server (restarted when it dies, stopped with the server). Its state lives
// in one folder (`<home>/registry`):
//
//   address        127.0.0.1:PORT, chosen once (a free port) and kept, so image
//                  names and podman logins stay valid across restarts
//   password       the password of user AWS (GetAuthorizationToken's token)
//   htpasswd       AWS:<bcrypt of the password>, checked by the registry
//   config.yml     the registry's configuration (written at every start,
//                  removed by a start with the registry off)
//   auth.json      podman's login to it (REGISTRY_AUTH_FILE of container nodes)
//   data/          the images; registry.log its output
//
// Thread safety: RegistryProcess's methods may be called from any thread.
#pragma once

#include <sys/types.h>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "common/status.h"

namespace lote::images {

// The registry's "127.0.0.1:PORT" for the folder, choosing and recording a
// free port on first use, and a new one when another process has taken the
// recorded port (the server asks before starting the registry).
Result<std::string> RegistryAddress(const std::string& dir);

// The password of user AWS, made (random) on first use.
Result<std::string> RegistryPassword(const std::string& dir);

// An htpasswd line "user:$2b$..." (bcrypt through libxcrypt's crypt_r).
Result<std::string> HtpasswdLine(const std::string& user, const std::string& password);

// The `export` lines of `lote env` for the registry in `dir` when the server
// runs one (its config.yml exists): LOTE_REGISTRY (its address),
// AWS_ENDPOINT_URL_ECR (`endpoint`, lote's API) and
// CONTAINERS_REGISTRIES_CONF (`registries_conf`, which marks the registry
// insecure, so podman login/push/pull use plain HTTP). Empty otherwise.
std::string RegistryEnv(const std::string& dir, const std::string& endpoint,
                        const std::string& registries_conf);

struct RegistryOptions {
  std::string dir;  // <home>/registry
  std::string binary = "/usr/bin/docker-registry";
};

class RegistryProcess {
 public:
  // Writes the configuration, starts the registry and waits (up to 20 s) until
  // it answers on its port. Unavailable when the binary is missing or it does
  // not come up (its log's tail in the message).
  static Result<std::unique_ptr<RegistryProcess>> Start(RegistryOptions options);
  ~RegistryProcess();  // stops it (SIGTERM, SIGKILL after 5 s)
  RegistryProcess(const RegistryProcess&) = delete;
  RegistryProcess& operator=(const RegistryProcess&) = delete;

  const std::string& address() const { return address_; }
  const std::string& password() const { return password_; }
  // The pid of the registry running now (0 between a death and its restart).
  pid_t pid() const;

 private:
  RegistryProcess() = default;
  Status Spawn();  // mu_ held
  void Supervise();

  RegistryOptions options_;
  std::string address_;
  std::string password_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  pid_t pid_ = 0;          // protected by mu_
  bool stopping_ = false;  // protected by mu_
  std::thread supervisor_;
};

}  // namespace lote::images
