// A small AWS API client for lote's client subcommands (and benchmarks): it
// signs every request with SigV4 and speaks both protocols of the server
// (AWS Batch rest-json, json 1.1 X-Amz-Target services such as Logs, and the
// Query protocol of EC2).
//
// Finding the server: --endpoint, else LOTE_ENDPOINT of ./config.txt (in an
// example folder, when set), else $LOTE_ENDPOINT, else
// $AWS_ENDPOINT_URL_BATCH, else http://127.0.0.1:7480. Credentials follow the
// standard AWS chain: AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY(/AWS_SESSION_TOKEN),
// else the shared credentials file ($AWS_SHARED_CREDENTIALS_FILE or
// ~/.aws/credentials) with profile $AWS_PROFILE (else "default"); if that
// yields nothing, $LOTE_HOME/credentials (profile lote) as a convenience.
//
// Errors: an AWS error answer becomes a Status whose message starts with the
// AWS code ("ClientException: ..."): 400 → InvalidArgument (NotFound for
// *NotFound* and *.Unknown* codes, AlreadyExists for *.Duplicate* and
// *AlreadyExists* codes), 403 → PermissionDenied, 429 and throttling codes →
// ResourceExhausted, 503 → Unavailable, other 5xx → Internal; a connection
// failure → Unavailable naming the endpoint.
//
// Commands use the typed BatchClient (batch_client.h) on top of this one.
// Thread safety: one ApiClient per thread (it holds one keep-alive connection).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/json.h"
#include "common/sigv4.h"
#include "common/status.h"

namespace httplib {
class Client;
}

namespace lote::cli {

std::string ResolveEndpoint(const std::string& flag);
std::string ResolveRegion();
Result<sigv4::Credentials> ResolveCredentials();

struct ClientOptions {
  std::string endpoint;                           // "http://host:port"; empty: ResolveEndpoint("")
  std::string region;                             // empty: ResolveRegion()
  std::optional<sigv4::Credentials> credentials;  // empty: ResolveCredentials()
  int timeout_seconds = 30;
};

// A JSON tree as Query parameters: object members joined with '.', list
// items numbered from 1 ("A.B.1.C"), booleans "true"/"false", numbers as
// written. The inverse of the server's UnflattenQuery.
std::vector<std::pair<std::string, std::string>> FlattenQuery(const Json& tree);

class ApiClient {
 public:
  static Result<std::unique_ptr<ApiClient>> Create(const ClientOptions& options);
  ~ApiClient();

  // An AWS Batch operation: `method` and raw (already percent-encoded) path,
  // e.g. ("POST", "/v1/describejobqueues", {}).
  Result<Json> Batch(const std::string& method, const std::string& raw_path, const Json& body);
  // A json-protocol call: POST / with X-Amz-Target `target`, signed for
  // `service` ("logs").
  Result<Json> JsonTarget(const std::string& service, const std::string& target, const Json& body);

  // A Query-protocol call (EC2): POST / form-encoded Action, Version and
  // `params` ("Name.1" style, sent as given), signed for `service` ("ec2").
  // Only the outcome is returned; an error answer's XML
  // (<Errors><Error><Code>/<Message>) becomes a Status as above.
  Status Query(const std::string& service, const std::string& action, const std::string& version,
               const std::vector<std::pair<std::string, std::string>>& params);

  const std::string& endpoint() const { return endpoint_; }

 private:
  struct Answer {
    int status = 0;
    std::string body;
    std::string error_type;  // the x-amzn-ErrorType header
  };
  ApiClient() = default;
  Result<Answer> Exchange(const std::string& method, const std::string& raw_path,
                          const std::string& service, const std::string& content_type,
                          const std::string& target, const std::string& body);
  Result<Json> Send(const std::string& method, const std::string& raw_path,
                    const std::string& service, const std::string& content_type,
                    const std::string& target, const std::string& body);

  std::string endpoint_;
  std::string host_header_;
  std::string region_;
  sigv4::Credentials credentials_;
  std::unique_ptr<httplib::Client> http_;
};

}  // namespace lote::cli
