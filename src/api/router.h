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
// Once a request is authentic and valid, the access control (when set) is
// asked whether its signer may make the call (access_control.h); a refusal is
// the protocol's access-denied error (403 AccessDeniedException for Batch and
// the json services, UnauthorizedOperation for EC2, AccessDenied for STS) and
// the handler does not run.
//
// Every handler has the same shape: JsonHandler, AWS request JSON in, AWS
// response JSON (or a Status) out. Path parameters and query parameters are
// merged into the request JSON under their model member names.
//
// Before a handler runs, the request is checked (see request_checks.h):
// body size (per operation), JSON nesting depth, numbers that are not finite
// or do not fit an int64, NUL characters, invalid UTF-8 in the path or query,
// non-ASCII in ASCII-only members (names, ARNs). Each failure is the
// service's client error naming the member. Every response carries
// x-amzn-RequestId; a 5xx is logged with it.
//
// Thread safety: register everything before serving; Handle() is then safe
// to call concurrently. Handlers must be thread safe.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "api/access_control.h"
#include "api/auth.h"
#include "api/errors.h"
#include "api/http_types.h"
#include "api/request_checks.h"
#include "common/json.h"
#include "common/status.h"

namespace lote::api {

class S3Api;

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
  // The handler never blocks (memory only, short locks, bounded work): the
  // HTTP server may run it on an I/O thread instead of the handler pool.
  bool nonblocking = false;
};

struct JsonService {
  std::string target_prefix;                      // "Logs_20140328"
  std::string signing_service;                    // "logs"
  std::map<std::string, JsonHandler> operations;  // "CreateLogGroup" → handler
  ErrorMapper map_error = LogsErrorFromStatus;
  // Checks on request values (request_checks.h); null: LogsValueRules().
  const ValueRules* value_rules = nullptr;
};

// A Query-protocol service (EC2, STS): `POST /` with a form-encoded body
// (Action=...), chosen by the SigV4 credential scope's service, else by the
// Action. The request reaches the handler as UnflattenQuery's JSON tree plus
// "@accessKeyId" (the signer's key, empty when unsigned); the handler answers
// with the result's members by their XML locationNames (query_protocol.h).
struct QueryService {
  std::string signing_service;                    // "ec2", "sts"
  std::string xml_namespace;                      // "http://ec2.amazonaws.com/doc/2016-11-15/"
  std::map<std::string, JsonHandler> operations;  // "CreatePlacementGroup" → handler
  // The error of a failed operation (its Action, the handler's Status).
  std::function<ApiError(const std::string& action, const Status&)> map_error;
  // EC2 answers <ActionResponse><requestId/>members</ActionResponse> and
  // errors as <Response><Errors><Error>; the other Query services (STS) wrap
  // members in <ActionResult>, add <ResponseMetadata>, and answer errors as
  // <ErrorResponse><Error>.
  bool ec2_style = true;
};

class ApiRouter : public HttpHandler {
 public:
  // auth may be null: no authentication (--insecure-no-auth).
  explicit ApiRouter(const Authenticator* auth);

  // AWS Batch rest-json operation (signing service "batch"). Replaces an
  // operation registered before with the same method and path.
  void RegisterRestOperation(RestOperation op);
  // A json-protocol service (X-Amz-Target dispatch); replaces one with the
  // same prefix.
  void RegisterJsonService(JsonService service);
  // A Query-protocol service; replaces one with the same signing service.
  void RegisterQueryService(QueryService service);
  // An unsigned GET of an exact path answered 200 with `render()` as
  // `content_type` (the Prometheus /metrics endpoint), or 403
  // AccessDeniedException with its message when render() fails; any other
  // method on it is refused as for an unknown operation.
  void RegisterTextGet(std::string path, std::string content_type,
                       std::function<Result<std::string>()> render);
  // Consulted for every call from then on (null: none). Set before serving.
  void SetAccessControl(const AccessControl* access) { access_ = access; }
  const Authenticator* authenticator() const { return auth_; }
  const AccessControl* access_control() const { return access_; }
  // S3 (s3_api.h) on the same port: the requests it Claims go to it, with
  // their transport errors and streamed bodies (null: none). Set before serving.
  void SetS3(const S3Api* s3) { s3_ = s3; }

  HttpResponse Handle(const HttpRequest& request) const override;
  // Handle for a request its caller has authenticated by other means (a web
  // console session signed in with `access_key_id`): everything but the SigV4
  // check is the same (routing, limits, validation, authorization, handlers,
  // error shapes).
  HttpResponse HandleAuthenticated(const HttpRequest& request,
                                   const std::string& access_key_id) const;
  // True when the operation the request addresses was registered nonblocking.
  bool IsNonblocking(const HttpRequest& request) const override;
  // S3's PutObject and UploadPart bodies stream to disk.
  std::shared_ptr<BodySink> BodySinkFor(const HttpRequest& head) const override;

  // The answer to a failure below the operations (the HTTP layer: too large,
  // malformed, timed out, refused), AWS-shaped for the service the request
  // addresses (json protocol when it has X-Amz-Target, else rest-json):
  // `status` picks the code through that service's error mapper and
  // `http_status` is the HTTP status sent.
  HttpResponse TransportError(const HttpRequest& request, int http_status,
                              const Status& status) const override;
  // A 500 for a handler that threw (a bug): logged with the request id.
  HttpResponse InternalError(const HttpRequest& request, const std::string& what) const override;
  static std::string NewRequestId();

  // Largest request body (bytes) an operation accepts ("Batch.SubmitJob",
  // "Logs_20140328.PutLogEvents"); larger ones are a client error naming the
  // limit. Operations without one accept kDefaultMaxRequestBytes.
  void SetBodyLimit(const std::string& operation, size_t bytes);
  static constexpr size_t kDefaultMaxRequestBytes = 1 << 20;
  // Deepest nesting of objects and arrays accepted in a request body.
  static constexpr int kMaxJsonDepth = 64;

  // Names of registered operations ("Batch.CreateJobQueue", "Logs_20140328.PutLogEvents").
  std::vector<std::string> OperationNames() const;

 private:
  // `key`: the signer, known (console) or found by the SigV4 check (verify).
  HttpResponse HandleChecked(const HttpRequest& request, bool verify, std::string key) const;
  HttpResponse HandleRest(const HttpRequest& request, const std::string& request_id, bool verify,
                          std::string key) const;
  // The handler between the access control's two hooks. A refusal is
  // PermissionDenied whose message is AWS's; *denied tells it from a
  // handler's own error.
  Result<Json> Run(const ApiCall& call, const JsonHandler& handler, const Json& request,
                   bool* denied) const;
  // Tells the access control how a call that ran ended.
  void Finish(const ApiCall& call, const Json& request, const Result<Json>& result,
              const std::string& error_code) const;
  // The operation at method + decoded path (path parameter into *name/*value),
  // or null; *path_known tells a wrong method from an unknown path.
  const RestOperation* FindRest(const std::string& method, const std::string& path,
                                std::string* param_name, std::string* param_value,
                                bool* path_known) const;
  HttpResponse HandleJsonTarget(const HttpRequest& request, const std::string& target,
                                const std::string& request_id, bool verify, std::string key) const;
  size_t BodyLimit(const std::string& operation) const;
  // A Query-protocol request (form-encoded POST / or GET /?Action=).
  bool IsQueryRequest(const HttpRequest& request) const;
  HttpResponse HandleQuery(const HttpRequest& request, const std::string& request_id, bool verify,
                           std::string key) const;

  const Authenticator* auth_;
  const AccessControl* access_ = nullptr;
  const S3Api* s3_ = nullptr;
  std::vector<RestOperation> rest_ops_;
  std::map<std::string, JsonService> json_services_;    // by target prefix
  std::map<std::string, QueryService> query_services_;  // by signing service
  std::map<std::string, size_t> body_limits_;           // by "Batch.SubmitJob"
  std::map<std::string, std::pair<std::string, std::function<Result<std::string>()>>>
      text_gets_;  // path -> content type, render
};

// Builds the response for an error in the given protocol (json 1.1 when
// json_protocol, else rest-json), with the request id.
HttpResponse ErrorResponse(const ApiError& error, bool json_protocol,
                           const std::string& request_id = ApiRouter::NewRequestId());

}  // namespace lote::api
