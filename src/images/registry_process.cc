#include "images/registry_process.h"

#include <arpa/inet.h>
#include <crypt.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>

#include "common/crypto.h"
#include "common/files.h"
#include "common/ids.h"
#include "common/json.h"
#include "common/thread_name.h"

namespace lote::images {
namespace {

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// `port` (0: any) when no one listens on it now (bound on 127.0.0.1 and released).
Result<int> FreeLoopbackPort(int want) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::Unavailable("socket: " + std::string(strerror(errno)));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(want));
  socklen_t len = sizeof(a);
  // As the registry binds (Go sets SO_REUSEADDR): only a listener makes it busy.
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  ::close(fd);
  if (port == 0)
    return Status::Unavailable("no free loopback port " + std::to_string(want) +
                               " for the registry");
  return port;
}

bool Answers(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  ::close(fd);
  return ok;
}

// A value kept in dir/name, made by `make` the first time.
template <typename Make>
Result<std::string> Kept(const std::string& dir, const std::string& name, Make make) {
  const std::string path = dir + "/" + name;
  if (FileExists(path)) {
    ASSIGN_OR_RETURN(std::string v, ReadFile(path));
    if (!Trim(v).empty()) return Trim(v);
  }
  RETURN_IF_ERROR(MakeDirs(dir, 0700));
  ASSIGN_OR_RETURN(std::string v, make());
  RETURN_IF_ERROR(WriteFileAtomic(path, v + "\n", 0600));
  return v;
}

std::string LogTail(const std::string& path) {
  Result<std::string> log = ReadFile(path);
  if (!log.ok()) return "";
  std::string s = Trim(*log);
  return s.size() > 600 ? s.substr(s.size() - 600) : s;
}

}  // namespace

Result<std::string> RegistryAddress(const std::string& dir) {
  auto make = []() -> Result<std::string> {
    ASSIGN_OR_RETURN(int port, FreeLoopbackPort(0));
    return "127.0.0.1:" + std::to_string(port);
  };
  ASSIGN_OR_RETURN(std::string address, Kept(dir, "address", make));
  const int port = std::atoi(address.substr(address.rfind(':') + 1).c_str());
  if (port > 0 && FreeLoopbackPort(port).ok()) return address;
  // Someone else took the port since: choose another (before anyone uses it).
  ASSIGN_OR_RETURN(address, make());
  RETURN_IF_ERROR(WriteFileAtomic(dir + "/address", address + "\n", 0600));
  return address;
}

Result<std::string> RegistryPassword(const std::string& dir) {
  return Kept(dir, "password", []() -> Result<std::string> { return RandomUpperAlnum(40); });
}

Result<std::string> HtpasswdLine(const std::string& user, const std::string& password) {
  // Cost 6: the registry checks the hash on every request of a push or pull.
  char salt[CRYPT_GENSALT_OUTPUT_SIZE];
  if (crypt_gensalt_rn("$2b$", 6, nullptr, 0, salt, sizeof(salt)) == nullptr)
    return Status::Unavailable("crypt_gensalt: bcrypt is not supported by this libcrypt");
  crypt_data data{};
  const char* hash = crypt_r(password.c_str(), salt, &data);
  if (hash == nullptr || hash[0] != '$')
    return Status::Unavailable("crypt_r: bcrypt is not supported by this libcrypt");
  return user + ":" + hash;
}

std::string RegistryEnv(const std::string& dir, const std::string& endpoint,
                        const std::string& registries_conf) {
  if (!FileExists(dir + "/config.yml")) return "";
  Result<std::string> address = ReadFile(dir + "/address");
  if (!address.ok()) return "";
  return "export LOTE_REGISTRY=" + ShellQuote(Trim(*address)) + "\n" +
         "export AWS_ENDPOINT_URL_ECR=" + ShellQuote(endpoint) + "\n" +
         "export CONTAINERS_REGISTRIES_CONF=" + ShellQuote(registries_conf) + "\n";
}

Result<std::unique_ptr<RegistryProcess>> RegistryProcess::Start(RegistryOptions options) {
  if (::access(options.binary.c_str(), X_OK) != 0)
    return Status::Unavailable(options.binary +
                               " is missing (Debian package docker-registry); start the server "
                               "with --registry off to run without the image registry");
  std::unique_ptr<RegistryProcess> r(new RegistryProcess());
  r->options_ = options;
  const std::string& dir = options.dir;
  ASSIGN_OR_RETURN(r->address_, RegistryAddress(dir));
  ASSIGN_OR_RETURN(r->password_, RegistryPassword(dir));
  ASSIGN_OR_RETURN(std::string line, HtpasswdLine("AWS", r->password_));
  RETURN_IF_ERROR(WriteFileAtomic(dir + "/htpasswd", line + "\n", 0600));
  const Json auth = {{"auths", {{r->address_, {{"auth", Base64Encode("AWS:" + r->password_)}}}}}};
  RETURN_IF_ERROR(WriteFileAtomic(dir + "/auth.json", auth.dump(2) + "\n", 0600));
  RETURN_IF_ERROR(MakeDirs(dir + "/data", 0700));
  const std::string config =
      "version: 0.1\n"
      "log: {level: warn}\n"
      "storage: {filesystem: {rootdirectory: \"" +
      dir +
      "/data\"}, delete: {enabled: true}}\n"
      "http: {addr: \"" +
      r->address_ + "\", secret: \"" + RandomUpperAlnum(32) +
      "\"}\n"
      "auth: {htpasswd: {realm: lote, path: \"" +
      dir + "/htpasswd\"}}\n";
  RETURN_IF_ERROR(WriteFileAtomic(dir + "/config.yml", config, 0600));
  const int port = std::stoi(r->address_.substr(r->address_.rfind(':') + 1));
  {
    std::lock_guard<std::mutex> lock(r->mu_);
    RETURN_IF_ERROR(r->Spawn());
  }
  r->supervisor_ = NamedThread("lote-registry", [p = r.get()] { p->Supervise(); });
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!Answers(port)) {
    if (std::chrono::steady_clock::now() > deadline || r->pid() == 0)
      return Status::Unavailable("the registry did not start on " + r->address_ + ": " +
                                 LogTail(dir + "/registry.log"));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return r;
}

Status RegistryProcess::Spawn() {
  const std::string log = options_.dir + "/registry.log";
  const std::string config = options_.dir + "/config.yml";
  pid_t pid = ::fork();
  if (pid < 0) return Status::Unavailable("fork: " + std::string(strerror(errno)));
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);  // dies with the server, also on kill -9
    ::setpgid(0, 0);
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    int in = ::open("/dev/null", O_RDONLY);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
    }
    if (in >= 0) ::dup2(in, 0);
    ::execl(options_.binary.c_str(), options_.binary.c_str(), "serve", config.c_str(), nullptr);
    ::_exit(127);
  }
  pid_ = pid;
  return Status::Ok();
}

void RegistryProcess::Supervise() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    pid_t p = pid_;
    if (p > 0) {
      lock.unlock();
      int st = 0;
      while (::waitpid(p, &st, 0) < 0 && errno == EINTR) {
      }
      lock.lock();
      pid_ = 0;
      cv_.notify_all();
      if (stopping_) break;
      spdlog::warn("the image registry (pid {}) exited ({}); restarting it", p,
                   WIFSIGNALED(st) ? "signal " + std::to_string(WTERMSIG(st))
                                   : "status " + std::to_string(WEXITSTATUS(st)));
    }
    if (cv_.wait_for(lock, std::chrono::seconds(1), [this] { return stopping_; })) break;
    if (Status st = Spawn(); !st.ok())
      spdlog::error("restarting the image registry: {}", st.ToString());
  }
}

pid_t RegistryProcess::pid() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pid_;
}

RegistryProcess::~RegistryProcess() {
  std::unique_lock<std::mutex> lock(mu_);
  stopping_ = true;
  if (pid_ > 0) ::kill(pid_, SIGTERM);
  cv_.notify_all();
  if (!cv_.wait_for(lock, std::chrono::seconds(5), [this] { return pid_ == 0; }) && pid_ > 0)
    ::kill(pid_, SIGKILL);
  lock.unlock();
  if (supervisor_.joinable()) supervisor_.join();
}

}  // namespace lote::images
