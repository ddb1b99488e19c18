// Wires the web console into `lote server`: its own HTTP listener
// (ServerContext::console_listen) serving console::ConsoleService, which
// reaches jobs and logs only through the server's router. Sign-in uses the
// server's key pair ($home/credentials); the console's address is logged and
// written to $home/console.json (read by `lote console`).
#include <spdlog/spdlog.h>

#include "api/credentials_file.h"
#include "api/http_server.h"
#include "common/files.h"
#include "common/json.h"
#include "console/console_service.h"
#include "console/sessions.h"
#include "logs/progress_history.h"
#include "server/server.h"

namespace lote::server {
namespace {

// Owns the console; destroyed in Stop() (the listener first).
struct ConsoleWiring {
  std::unique_ptr<console::SessionManager> sessions;
  std::unique_ptr<logs::ProgressHistory> history;
  std::unique_ptr<console::ConsoleService> service;
  std::unique_ptr<api::HttpServer> http;
  ~ConsoleWiring() {
    if (http) http->Stop();
  }
};

Result<std::shared_ptr<void>> WireConsole(ServerContext& context) {
  if (context.console_listen.empty()) return std::shared_ptr<void>();
  const size_t colon = context.console_listen.rfind(':');
  int port = -1;
  if (colon != std::string::npos && colon > 0) {
    try {
      port = std::stoi(context.console_listen.substr(colon + 1));
    } catch (const std::exception&) {
      port = -1;
    }
  }
  if (port < 0 || port > 65535)
    return Status::InvalidArgument("--console-listen '" + context.console_listen +
                                   "' must be HOST:PORT, auto or off");
  const std::string host = context.console_listen.substr(0, colon);
  ASSIGN_OR_RETURN(sigv4::Credentials creds,
                   api::ReadCredentialsProfile(context.home + "/credentials", api::kLoteProfile));
  auto wiring = std::make_shared<ConsoleWiring>();
  wiring->sessions = std::make_unique<console::SessionManager>(context.clock);
  if (const iam::Directory* directory = context.directory) {
    // Every user signs in with its own key pair, and acts as that user.
    wiring->sessions->SetKeySource(
        [directory](const std::string& id) -> std::optional<std::string> {
          std::optional<iam::KeyOwner> owner = directory->FindKey(id);
          if (!owner) return std::nullopt;
          return owner->secret;
        });
  } else {
    wiring->sessions->AddKey(creds.access_key_id, creds.secret_access_key);
  }
  wiring->history = std::make_unique<logs::ProgressHistory>(context.log_store);
  wiring->service = std::make_unique<console::ConsoleService>(
      context.router, wiring->sessions.get(), wiring->history.get(), context.clock);
  wiring->http = std::make_unique<api::HttpServer>(wiring->service.get());
  api::HttpServerOptions http;
  http.host = host;
  http.port = port;
  http.threads = 32;  // long polls hold a thread each
  http.io_threads = 1;
  http.max_connections = 1000;
  http.clock = context.clock;
  // Serve once the router is complete (every extension registered).
  if (context.on_serving == nullptr)
    return Status::Internal("the console needs ServerContext::on_serving");
  context.on_serving->push_back([w = wiring.get(), http, host, home = context.home,
                                 flexible = context.console_listen_derived]() -> Status {
    Status started = w->http->Start(http);
    if (!started.ok() && flexible && http.port != 0) {
      spdlog::warn("console: {}; using any free port instead", started.message());
      api::HttpServerOptions any = http;
      any.port = 0;
      started = w->http->Start(any);
    }
    RETURN_IF_ERROR(started.WithContext("starting the web console"));
    const std::string shown = host == "0.0.0.0" || host == "::" ? "127.0.0.1" : host;
    const std::string url = "http://" + shown + ":" + std::to_string(w->http->port()) + "/console/";
    spdlog::info(
        "lote console at {} (sign in with a user's key pair, the administrator's is in "
        "{}/credentials, or `lote console`)",
        url, home);
    return WriteFileAtomic(home + "/console.json", Json{{"url", url}}.dump(2) + "\n", 0600);
  });
  return std::shared_ptr<void>(wiring);
}

const ServerExtensionRegistrar kConsoleRegistrar(WireConsole);

}  // namespace
}  // namespace lote::server
