// Wires lote's S3 endpoint (api/s3_api.h) into `lote server`: the buckets
// live under $home/s3 (objstore/buckets.h), the requests come through the
// router (same port, same keys and IAM policies as every other service).
#include "api/router.h"
#include "api/s3_api.h"
#include "objstore/buckets.h"
#include "server/server.h"

namespace lote::server {
namespace {

struct S3Wiring {
  std::unique_ptr<objstore::Buckets> buckets;
  std::unique_ptr<api::S3Api> api;
  api::ApiRouter* router = nullptr;
  ~S3Wiring() {
    if (router != nullptr) router->SetS3(nullptr);
  }
};

Result<std::shared_ptr<void>> WireS3(ServerContext& context) {
  auto wiring = std::make_shared<S3Wiring>();
  ASSIGN_OR_RETURN(wiring->buckets, objstore::Buckets::Open(context.home + "/s3"));
  api::S3Options options;
  options.buckets = wiring->buckets.get();
  options.auth = context.router->authenticator();
  options.access = context.router->access_control();
  options.clock = context.clock;
  options.region = context.control->config().region;
  options.account_id = context.control->config().account_id;
  wiring->api = std::make_unique<api::S3Api>(options);
  wiring->router = context.router;
  context.router->SetS3(wiring->api.get());
  return std::shared_ptr<void>(wiring);
}

const ServerExtensionRegistrar kS3Registrar(WireS3);

}  // namespace
}  // namespace lote::server
