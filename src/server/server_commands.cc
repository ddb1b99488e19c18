// `lote server` and `lote env`.
#include <signal.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>

#include "common/clock.h"
#include "common/files.h"
#include "lote/registry.h"
#include "server/server.h"
#include "server/server_config.h"

namespace lote::server {
namespace {

// "HOST:PORT" → host, port.
Status ParseListen(const std::string& listen, std::string* host, int* port) {
  size_t colon = listen.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return Status::InvalidArgument("--listen '" + listen +
                                   "' must be HOST:PORT, e.g. 127.0.0.1:7480");
  }
  *host = listen.substr(0, colon);
  std::string p = listen.substr(colon + 1);
  char* end = nullptr;
  long v = std::strtol(p.c_str(), &end, 10);
  if (p.empty() || *end != '\0' || v < 0 || v > 65535) {
    return Status::InvalidArgument("--listen '" + listen + "' has port '" + p +
                                   "'; use a number from 0 (any free port) to 65535");
  }
  *port = static_cast<int>(v);
  return Status::Ok();
}

// The keys a config file may set: `sub`'s long option names but help and config.
std::string ConfigKeys(const CLI::App* sub) {
  std::string keys;
  for (const CLI::Option* opt : sub->get_options()) {
    if (opt->get_lnames().empty()) continue;
    const std::string& name = opt->get_lnames()[0];
    if (name == "help" || name == "config") continue;
    keys += (keys.empty() ? "" : ", ") + name;
  }
  return keys;
}

// Sets each option of `sub` that the file at `path` names, unless the
// command line gave it (the command line wins); checked as on the command line.
Status ApplyConfigFile(CLI::App* sub, const std::string& path) {
  Result<std::string> text = ReadFile(path);
  if (!text.ok()) return text.status().WithContext("reading the config file");
  ASSIGN_OR_RETURN(std::vector<ConfigEntry> entries, ParseServerConfig(*text, path));
  for (const ConfigEntry& entry : entries) {
    const std::string where = path + ":" + std::to_string(entry.line) + ": ";
    CLI::Option* opt = entry.key == "config" || entry.key == "help"
                           ? nullptr
                           : sub->get_option_no_throw("--" + entry.key);
    if (opt == nullptr)
      return Status::InvalidArgument(where + "unknown key '" + entry.key +
                                     "'; the keys are the options of `lote server` without "
                                     "their --: " +
                                     ConfigKeys(sub));
    if (opt->count() > 0) continue;
    try {
      opt->add_result(entry.value);
      opt->run_callback();
    } catch (const CLI::Error& e) {
      return Status::InvalidArgument(where + entry.key + " = " + entry.value + ": " + e.what());
    }
  }
  return Status::Ok();
}

int RunServer(ServerOptions options, const std::string& listen) {
  // stdout carries exactly one line (the listening line); logs go to stderr.
  spdlog::set_default_logger(spdlog::stderr_color_mt("lote-server"));
  Status st = ParseListen(listen, &options.host, &options.port);
  if (!st.ok()) {
    std::fprintf(stderr, "lote server: %s\n", st.message().c_str());
    return 2;
  }
  // Block the stop signals in every thread; this thread waits for them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  Result<std::unique_ptr<LoteServer>> server = LoteServer::Start(options, SystemClock::Default());
  if (!server.ok()) {
    std::fprintf(stderr, "lote server: %s\n", server.status().ToString().c_str());
    return 1;
  }
  spdlog::info("home {}, credentials {}, region {}, account {}", options.home,
               (*server)->credentials_path(), options.region, options.account_id);
  std::printf("lote server listening on %s\n", (*server)->endpoint().c_str());
  std::fflush(stdout);
  int sig = 0;
  sigwait(&signals, &sig);
  spdlog::info("received {}, shutting down", sig == SIGTERM ? "SIGTERM" : "SIGINT");
  (*server)->Stop();
  return 0;
}

lote::CommandRegistrar server_command([](CLI::App& app) {
  struct Args {
    ServerOptions options;
    std::string listen = "127.0.0.1:7480";
    std::string registry = "auto";
    std::string ecr_host_names = "off";
    std::string node_agent = "on";
    std::string config;
  };
  auto args = std::make_shared<Args>();
  auto* sub = app.add_subcommand("server", "Run the lote server (AWS Batch + CloudWatch Logs API)");
  sub->add_option("--config", args->config,
                  "Read options from this file (`key = value` lines, keys as these options "
                  "without --; the command line wins), e.g. /etc/lote/server.conf");
  sub->add_option("--home", args->options.home,
                  "State folder (lote.db, credentials); default $LOTE_HOME or ~/.lote");
  sub->add_option("--listen", args->listen, "HOST:PORT to listen on (port 0: any free port)")
      ->capture_default_str();
  sub->add_option("--region", args->options.region, "AWS region the API claims to be")
      ->capture_default_str();
  sub->add_option("--account-id", args->options.account_id, "AWS account id used in ARNs")
      ->capture_default_str();
  sub->add_option("--console-listen", args->options.console_listen,
                  "HOST:PORT of the web console (auto: the API's port + 1; off: none)")
      ->capture_default_str();
  sub->add_flag("--insecure-no-auth", args->options.insecure_no_auth,
                "Accept requests without a valid SigV4 signature (dangerous)");
  sub->add_option("--http-threads", args->options.http_threads,
                  "Threads that run API handlers (connections cost no thread)")
      ->capture_default_str();
  sub->add_option("--http-io-threads", args->options.http_io_threads,
                  "Threads that multiplex connections (0: min(4, cores))")
      ->capture_default_str();
  sub->add_option("--http-max-connections", args->options.http_max_connections,
                  "Open connections beyond which new ones are answered 503 and closed")
      ->capture_default_str();
  sub->add_option("--http-idle-timeout-ms", args->options.http_idle_timeout_ms,
                  "Close a keep-alive connection idle this long")
      ->capture_default_str();
  sub->add_option("--http-header-timeout-ms", args->options.http_header_timeout_ms,
                  "A request's headers must arrive within this time of its first byte (else 408)")
      ->capture_default_str();
  sub->add_option("--http-body-timeout-ms", args->options.http_body_timeout_ms,
                  "A request's body must arrive within this time of its headers (else 408)")
      ->capture_default_str();
  sub->add_option("--runtime", args->options.runtime,
                  "How nodes run where a compute environment has no lote:runtime tag: process "
                  "or container (their image under podman)")
      ->check(CLI::IsMember({"process", "container"}))
      ->capture_default_str();
  sub->add_option("--quarantine-failures", args->options.quarantine_failures,
                  "Attempts of this many different jobs ending NODE_LOST or HANG on one node "
                  "within the window quarantine it (0: never)")
      ->check(CLI::Range(0, 1000))
      ->capture_default_str();
  sub->add_option("--quarantine-window-seconds", args->options.quarantine_window_seconds,
                  "The window in which those failures count")
      ->check(CLI::Range(int64_t{1}, int64_t{30} * 86400))
      ->capture_default_str();
  sub->add_option("--quarantine-cooldown-seconds", args->options.quarantine_cooldown_seconds,
                  "How long a quarantined node takes no new work (unless released sooner: lote "
                  "nodes release NODE)")
      ->check(CLI::Range(int64_t{1}, int64_t{30} * 86400))
      ->capture_default_str();
  sub->add_option("--job-retention-days", args->options.job_retention_days,
                  "Finished jobs (SUCCEEDED, FAILED) are deleted this many days after they "
                  "ended; fractions allowed (0.5 = 12 hours); 0: kept for ever")
      ->check(CLI::Range(0.0, 36500.0))
      ->capture_default_str();
  sub->add_option("--allowed-host-paths", args->options.allowed_host_paths,
                  "Host folders (comma-separated, absolute) that a principal which may not run "
                  "jobs as root may bind-mount into its containers (volumes host.sourcePath); "
                  "the home's jobs/ folder always may (docs/api.md)")
      ->delimiter(',')
      ->check(CLI::Validator(
          [](std::string& p) {
            return !p.empty() && p[0] == '/' ? std::string() : "'" + p + "' is not absolute";
          },
          "ABSOLUTE PATHS"));
  sub->add_option("--max-shared-memory-mib", args->options.max_shared_memory_mib,
                  "The largest linuxParameters.sharedMemorySize (MiB) that a principal which "
                  "may not run jobs as root may ask for (docs/api.md)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40))
      ->capture_default_str();
  sub->add_option("--accelerators", args->options.accelerators,
                  "An inventory file of this host's GPUs and Neuron devices, one per line "
                  "(docs/jobs.md, \"Accelerators\"), in place of discovery (NVML, "
                  "/proc/driver/nvidia, Neuron sysfs)");
  sub->add_option("--node-agent", args->node_agent,
                  "Run every local node's command from one long-lived node agent per host (on), "
                  "or start one supervisor program per node (off); $LOTE_NODE_AGENT=1/0 "
                  "overrides it")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  sub->add_option("--registry", args->registry,
                  "The local image registry and the ECR API: on, off, or auto (on when "
                  "/usr/bin/docker-registry is installed)")
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->capture_default_str();
  sub->add_option("--ecr-host-names", args->ecr_host_names,
                  "Make ECR's host name (<account>.dkr.ecr.<region>.amazonaws.com) reach the "
                  "registry while the server runs: a line in /etc/hosts, a forwarder on "
                  "127.0.0.1:80 and a registries.conf entry (on, off)")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  sub->callback([args, sub] {
    if (!args->config.empty()) {
      if (Status st = ApplyConfigFile(sub, args->config); !st.ok()) {
        std::fprintf(stderr, "lote server: %s\n", st.message().c_str());
        lote::SetExitCode(2);
        return;
      }
    }
    ServerOptions options = args->options;
    options.node_agent = args->node_agent == "on";
    options.registry = args->registry == "on" || (args->registry == "auto" &&
                                                  ::access("/usr/bin/docker-registry", X_OK) == 0);
    options.ecr_host_names = args->ecr_host_names == "on";
    if (options.home.empty()) options.home = DefaultHome();
    lote::SetExitCode(RunServer(options, args->listen));
  });
});

lote::CommandRegistrar env_command([](CLI::App& app) {
  auto home = std::make_shared<std::string>();
  auto* sub = app.add_subcommand(
      "env", "Print export lines that point the aws CLI and SDKs at lote: eval \"$(lote env)\"");
  sub->add_option("--home", *home, "State folder of the server; default $LOTE_HOME or ~/.lote");
  sub->callback([home] {
    std::string h = home->empty() ? DefaultHome() : *home;
    std::cout << EnvScript(h);
    if (!std::ifstream(h + "/credentials")) {
      std::cerr << "lote env: " << h
                << "/credentials does not exist yet; start `lote server` once to create it\n";
    }
  });
});

}  // namespace
}  // namespace lote::server
