// Wires lote's image registry into `lote server` (ServerOptions::registry):
// starts and supervises docker-registry under $home/registry and registers
// the ECR API (json protocol, target prefix AmazonEC2ContainerRegistry_V20150921,
// SigV4 service "ecr") over it. With the registry off it removes the
// registry's config.yml, so `lote env` no longer names it.
#include <unistd.h>

#include "api/router.h"
#include "images/ecr_service.h"
#include "images/registry_process.h"
#include "server/server.h"

namespace lote::server {
namespace {

struct RegistryWiring {
  std::unique_ptr<images::RegistryProcess> process;
  std::unique_ptr<images::EcrService> ecr;
};

Result<std::shared_ptr<void>> WireRegistry(ServerContext& context) {
  const std::string dir = context.home + "/registry";
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
