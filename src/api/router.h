// The API front door: routes a request to an operation handler, checks its
// SigV4 signature, and shapes the answer (or error) as the AWS protocol of
// that operation expects. Two protocols share one port:
//
//  - rest-json (AWS Batch): operations registered with RegisterRestOperation,
//    matched by method and path ("/v1/createjobqueue",
//    "/v1/tags/{resourceArn}"); signed for service "batch"; errors as
//    BatchErrorFromStatus.
//  - json 1.1 (e.g. CloudWatch Logs): `POST /` with header
//    `X-Amz-Target: <prefix>.<Operation>`; a whole service is registered with
//    RegisterJsonService (its target prefix, SigV4 service name, handler table
//    and error mapper). Unknown operations answer UnknownOperationException.
//
// Every handler has the same shape: JsonHandler, AWS request JSON in, AWS
// response JSON (or a Status) out. Path parameters and query parameters are
// merged into the request JSON under their model member names.
//
// Thread safety: register everything before serving; Handle() is then safe
// to call concurrently. Handlers must be thread safe.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "api/auth.h"
#include "api/errors.h"
#include "api/http_types.h"
#include "common/json.h"
#include "common/status.h"

namespace lote::api {

using JsonHandler = std::function<Result<Json>(const Json& request)>;

struct RestOperation {
  std::string name;    // "TagResource"
  std::string method;  // "POST", "GET", "DELETE"
  // Exact path, or a prefix ending in one "{member}" that takes the rest of
  // the path (percent-decoded) as that request member.
  std::string path;
  // Query parameters that are lists in the model (e.g. "tagKeys"); other query
  // parameters become string members.
  std::vector<std::string> list_query_params;
  JsonHandler handler;
};

struct JsonService {
  std::string target_prefix;                      // "Logs_20140328"
  std::string signing_service;                    // "logs"
  std::map<std::string, JsonHandler> operations;  // "CreateLogGroup" → handler
  ErrorMapper map_error = LogsErrorFromStatus;
};

class ApiRouter {
 public:
  // auth may be null: no authentication (--insecure-no-auth).
  explicit ApiRouter(const Authenticator* auth);

  // AWS Batch rest-json operation (signing service "batch"). Replaces an
  // operation registered before with the same method and path.
  void RegisterRestOperation(RestOperation op);
  // A json-protocol service (X-Amz-Target dispatch); replaces one with the
  // same prefix.
  void RegisterJsonService(JsonService service);

  HttpResponse Handle(const HttpRequest& request) const;

  // Names of registered operations ("Batch.CreateJobQueue", "Logs_20140328.PutLogEvents").
  std::vector<std::string> OperationNames() const;

 private:
  HttpResponse HandleRest(const HttpRequest& request) const;
  HttpResponse HandleJsonTarget(const HttpRequest& request, const std::string& target) const;

  const Authenticator* auth_;
  std::vector<RestOperation> rest_ops_;
  std::map<std::string, JsonService> json_services_;  // by target prefix
};

// Builds the response for an error in the given protocol ("rest-json" or "json").
HttpResponse ErrorResponse(const ApiError& error, bool json_protocol);

}  // namespace lote::api
