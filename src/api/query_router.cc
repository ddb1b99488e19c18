// ApiRouter's Query-protocol half (EC2, STS): routing by the SigV4 scope's
// service or the Action, form parsing, XML answers and error shapes.
#include <spdlog/spdlog.h>

#include "api/query_protocol.h"
#include "api/router.h"

namespace lote::api {

namespace {

constexpr const char* kXmlContentType = "text/xml";

// "AWS4-HMAC-SHA256 Credential=AKID/20260101/us-east-1/ec2/aws4_request, ..."
// → {"AKID", "ec2"}; empty strings when the header has no credential.
std::pair<std::string, std::string> CredentialScope(const std::string& authorization) {
  const std::string marker = "Credential=";
  size_t at = authorization.find(marker);
  if (at == std::string::npos) return {};
  size_t end = authorization.find_first_of(", ", at);
  std::string credential = authorization.substr(
      at + marker.size(), end == std::string::npos ? std::string::npos : end - at - marker.size());
  std::vector<std::string> parts;
  size_t pos = 0;
  while (true) {
    size_t slash = credential.find('/', pos);
    parts.push_back(credential.substr(pos, slash == std::string::npos ? slash : slash - pos));
    if (slash == std::string::npos) break;
    pos = slash + 1;
  }
  if (parts.size() != 5) return {parts.empty() ? "" : parts[0], ""};
  return {parts[0], parts[3]};
}

HttpResponse Xml(int status, const std::string& body, const std::string& request_id) {
  HttpResponse r;
  r.status = status;
  r.headers.emplace_back("Content-Type", kXmlContentType);
  r.headers.emplace_back("x-amzn-RequestId", request_id);
  r.body = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n" + body;
  return r;
}

HttpResponse QueryError(const ApiError& error, bool ec2_style, const std::string& xml_namespace,
                        const std::string& request_id) {
  const std::string inner = "<Code>" + XmlEscape(error.code) + "</Code><Message>" +
                            XmlEscape(error.message) + "</Message>";
  if (ec2_style) {
    return Xml(error.http_status,
               "<Response><Errors><Error>" + inner + "</Error></Errors><RequestID>" + request_id +
                   "</RequestID></Response>",
               request_id);
  }
  const char* type = error.http_status >= 500 ? "Receiver" : "Sender";
  return Xml(error.http_status,
             "<ErrorResponse xmlns=\"" + xml_namespace + "\"><Error><Type>" + type + "</Type>" +
                 inner + "</Error><RequestId>" + request_id + "</RequestId></ErrorResponse>",
             request_id);
}

}  // namespace

bool ApiRouter::IsQueryRequest(const HttpRequest& request) const {
  if (query_services_.empty() || request.raw_path != "/") return false;
  if (request.method == "POST") {
    return request.Header("content-type").rfind("application/x-www-form-urlencoded", 0) == 0;
  }
  return request.method == "GET" && request.raw_query.find("Action=") != std::string::npos;
}

HttpResponse ApiRouter::HandleQuery(const HttpRequest& request, const std::string& id, bool verify,
                                    std::string key) const {
  auto pairs = ParseFormEncoded(request.method == "POST" ? request.body : request.raw_query);
  std::string action;
  for (const auto& [k, v] : pairs)
    if (k == "Action") action = v;
  const auto [access_key, scope_service] = CredentialScope(request.Header("authorization"));
  const QueryService* service = nullptr;
  if (auto it = query_services_.find(scope_service); it != query_services_.end()) {
    service = &it->second;
  } else {
    for (const auto& [_, candidate] : query_services_)
      if (candidate.operations.count(action)) service = &candidate;
  }
  if (service == nullptr) {
    return QueryError({400, "InvalidAction",
                       "no Query-protocol service of this server has the action '" + action +
                           "' (signed for '" + scope_service + "'); see docs/api.md"},
                      true, "", id);
  }
  const bool ec2 = service->ec2_style;
  if (request.body.size() > BodyLimit(service->signing_service + "." + action)) {
    return QueryError(
        {413, "RequestEntityTooLarge",
         "the request body is " + std::to_string(request.body.size()) + " bytes; the limit is " +
             std::to_string(BodyLimit(service->signing_service + "." + action))},
        ec2, service->xml_namespace, id);
  }
  if (auth_ && verify) {
    if (auto denied = auth_->Verify(request, service->signing_service, &key)) {
      return QueryError(*denied, ec2, service->xml_namespace, id);
    }
  }
  auto op = service->operations.find(action);
  if (op == service->operations.end()) {
    return QueryError({400, "InvalidAction",
                       "the action '" + action + "' is not supported by lote's " +
                           service->signing_service + "; see docs/api.md for the supported list"},
                      ec2, service->xml_namespace, id);
  }
  Result<Json> tree = UnflattenQuery(pairs);
  if (!tree.ok())
    return QueryError(service->map_error(action, tree.status()), ec2, service->xml_namespace, id);
  const std::string signer = key.empty() ? access_key : key;
  (*tree)["@accessKeyId"] = signer;
  const ApiCall call{service->signing_service, action, signer, id};
  bool denied = false;
  Result<Json> result = Run(call, op->second, *tree, &denied);
  if (denied) {
    return QueryError({403, ec2 ? "UnauthorizedOperation" : "AccessDenied",
                       (ec2 ? "You are not authorized to perform this operation. " : "") +
                           result.status().message()},
                      ec2, service->xml_namespace, id);
  }
  if (!result.ok()) {
    ApiError err = service->map_error(action, result.status());
    if (err.http_status >= 500) {
      spdlog::error("request {}: {}.{} failed: {}", id, service->signing_service, action,
                    result.status().ToString());
    }
    Finish(call, *tree, result, err.code);
    return QueryError(err, ec2, service->xml_namespace, id);
  }
  Finish(call, *tree, result, "");
  std::string members;
  AppendXml(*result, &members);
  const std::string open = "<" + action + "Response xmlns=\"" + service->xml_namespace + "\">";
  const std::string close = "</" + action + "Response>";
  if (ec2) return Xml(200, open + "<requestId>" + id + "</requestId>" + members + close, id);
  return Xml(200,
             open + "<" + action + "Result>" + members + "</" + action + "Result>" +
                 "<ResponseMetadata><RequestId>" + id + "</RequestId></ResponseMetadata>" + close,
             id);
}

}  // namespace lote::api
