#include "api/nodes_api.h"

namespace lote::api {

void RegisterNodes(ApiRouter* router, control::JobLoop* jobs) {
  router->RegisterRestOperation(
      {"ReleaseNode", "POST", "/v1/releasenode", {}, [jobs](const Json& request) {
         return jobs->ReleaseNode(request);
       }});
  router->RegisterRestOperation(
      {"DescribeAccelerators", "POST", "/v1/describeaccelerators", {}, [jobs](const Json& request) {
         return jobs->DescribeAccelerators(request);
       }});
  router->RegisterRestOperation(
      {"RescanAccelerators", "POST", "/v1/rescanaccelerators", {}, [jobs](const Json& request) {
         return jobs->RescanAccelerators(request);
       }});
  router->RegisterRestOperation(
      {"DrainAccelerator", "POST", "/v1/drainaccelerator", {}, [jobs](const Json& request) {
         return jobs->DrainAccelerator(request);
       }});
  router->RegisterRestOperation(
      {"ReleaseAccelerator", "POST", "/v1/releaseaccelerator", {}, [jobs](const Json& request) {
         return jobs->ReleaseAccelerator(request);
       }});
}

}  // namespace lote::api
