// Wires lote's image registry into `lote server` (ServerOptions::registry):
// starts and supervises docker-registry under $home/registry and registers
// the ECR API (json protocol, target prefix AmazonEC2ContainerRegistry_V20150921,
// SigV4 service "ecr") over it. With the registry off it removes the
// registry's config.yml, so `lote env` no longer names it. With
// ServerOptions::ecr_host_names it also makes ECR's host name reach the
// registry (images/ecr_host.h); every start first removes an /etc/hosts line
// a server of this home left behind.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include "api/router.h"
#include "images/ecr_host.h"
#include "images/ecr_service.h"
#include "images/registry_process.h"
#include "server/server.h"

namespace lote::server {
namespace {

struct RegistryWiring {
  std::unique_ptr<images::RegistryProcess> process;
  std::unique_ptr<images::EcrService> ecr;
  std::unique_ptr<images::EcrHostNames> host_names;  // first to go: it forwards to process
};

constexpr const char* kHostsFile = "/etc/hosts";
constexpr int kEcrHostPort = 80;

Result<std::shared_ptr<void>> WireRegistry(ServerContext& context) {
  const std::string dir = context.home + "/registry";
  // A line left by a server of this home that did not stop (kill -9).
  if (Status cleaned = images::EditHostsFile(kHostsFile, context.home, ""); !cleaned.ok()) {
    if (context.ecr_host_names) return cleaned.WithContext("--ecr-host-names on");
    spdlog::warn("cannot remove a leftover ECR host name line from {}: {}", kHostsFile,
                 cleaned.ToString());
  }
  if (context.ecr_host_names && !context.registry)
    return Status::InvalidArgument("--ecr-host-names on needs the registry (--registry on)");
  if (!context.registry) {
    ::unlink((dir + "/config.yml").c_str());
    return std::shared_ptr<void>();
  }
  auto wiring = std::make_shared<RegistryWiring>();
  images::RegistryOptions options;
  options.dir = dir;
  ASSIGN_OR_RETURN(wiring->process, images::RegistryProcess::Start(options));
  images::EcrOptions ecr;
  ecr.dir = dir;
  ecr.address = wiring->process->address();
  ecr.password = wiring->process->password();
  ecr.region = context.control->config().region;
  ecr.account_id = context.control->config().account_id;
  ecr.clock = context.clock;
  wiring->ecr = std::make_unique<images::EcrService>(ecr);
  if (context.ecr_host_names) {
    images::EcrHostNamesOptions names;
    names.hosts_file = kHostsFile;
    names.home = context.home;
    names.host = images::EcrHostName(ecr.account_id, ecr.region);
    names.registry_address = wiring->process->address();
    names.listen_port = kEcrHostPort;
    Result<std::unique_ptr<images::EcrHostNames>> started = images::EcrHostNames::Start(names);
    if (!started.ok())
      return started.status().WithContext("--ecr-host-names on needs 127.0.0.1:" +
                                          std::to_string(kEcrHostPort));
    wiring->host_names = std::move(*started);
  }

  api::JsonService service;
  service.target_prefix = "AmazonEC2ContainerRegistry_V20150921";
  service.signing_service = "ecr";
  service.map_error = images::EcrErrorFromStatus;
  for (const std::string& op : images::EcrService::Operations())
    service.operations[op] = [svc = wiring->ecr.get(), op](const Json& request) {
      return svc->Call(op, request);
    };
  context.router->RegisterJsonService(std::move(service));
  return std::shared_ptr<void>(wiring);
}

const ServerExtensionRegistrar kRegistryRegistrar(WireRegistry);

}  // namespace
}  // namespace lote::server
