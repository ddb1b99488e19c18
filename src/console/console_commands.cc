// `lote console`: prints a one-time sign-in URL for the server's web console.
#include <cstdio>
#include <memory>
#include <string>

#include "api/credentials_file.h"
#include "common/clock.h"
#include "common/crypto.h"
#include "common/files.h"
#include "common/json.h"
#include "console/sessions.h"
#include "lote/registry.h"

namespace lote::console {
namespace {

std::string HomeOf(const std::string& given) {
  if (!given.empty()) return given;
  const char* env = std::getenv("LOTE_HOME");
  if (env && *env) return env;
  return HomeDir() + "/.lote";
}

int PrintSignInUrl(const std::string& home_flag, const std::string& url_flag, int minutes) {
  const std::string home = HomeOf(home_flag);
  std::string url = url_flag;
  if (url.empty()) {
    Result<Json> info = ReadJsonFile(home + "/console.json");
    if (!info.ok()) {
      std::fprintf(stderr,
                   "lote console: %s/console.json is missing: start `lote server --home %s` "
                   "first, or give --url\n",
                   home.c_str(), home.c_str());
      return 1;
    }
    url = info->value("url", "");
  }
  Result<sigv4::Credentials> creds =
      api::ReadCredentialsProfile(home + "/credentials", api::kLoteProfile);
  if (!creds.ok()) {
    std::fprintf(stderr, "lote console: %s\n", creds.status().ToString().c_str());
    return 1;
  }
  if (minutes < 1 || minutes > SessionManager::kMaxTokenLifetimeMs / 60'000) {
    std::fprintf(stderr, "lote console: --minutes must be 1 to %lld\n",
                 static_cast<long long>(SessionManager::kMaxTokenLifetimeMs / 60'000));
    return 2;
  }
  if (!url.empty() && url.back() != '/') url += '/';
  const int64_t expires = SystemClock::Default()->NowMillis() + minutes * 60'000LL;
  const std::string token = SessionManager::MakeSignInToken(
      creds->access_key_id, creds->secret_access_key, expires, HexEncode(RandomBytes(16)));
  std::printf("%ssignin?token=%s\n", url.c_str(), token.c_str());
  return 0;
}

lote::CommandRegistrar console_command([](CLI::App& app) {
  struct Args {
    std::string home, url;
    int minutes = 10;
  };
  auto args = std::make_shared<Args>();
  auto* sub = app.add_subcommand(
      "console", "Print a one-time sign-in URL for the web console of a local lote server");
  sub->add_option("--home", args->home,
                  "State folder of the server; default $LOTE_HOME or ~/.lote");
  sub->add_option("--url", args->url, "The console's URL (default: from HOME/console.json)");
  sub->add_option("--minutes", args->minutes, "How long the link may be used (once)")
      ->capture_default_str();
  sub->callback(
      [args] { lote::SetExitCode(PrintSignInUrl(args->home, args->url, args->minutes)); });
});

}  // namespace
}  // namespace lote::console
