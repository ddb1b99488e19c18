#include "api/nodes_api.h"

namespace lote::api {

void RegisterNodes(ApiRouter* router, control::JobLoop* jobs) {
  router->RegisterRestOperation(
      {"ReleaseNode", "POST", "/v1/releasenode", {}, [jobs](const Json& request) {
         return jobs->ReleaseNode(request);
       }});
}

}  // namespace lote::api
