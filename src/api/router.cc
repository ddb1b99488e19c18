#include "api/router.h"

#include <spdlog/spdlog.h>
#include <strings.h>

#include <exception>

#include "common/ids.h"
#include "common/sigv4.h"

namespace lote::api {

namespace {

constexpr const char* kRestContentType = "application/json";
constexpr const char* kJsonContentType = "application/x-amz-json-1.1";

HttpResponse JsonOk(const Json& body, bool json_protocol) {
  HttpResponse r;
  r.status = 200;
  r.headers.emplace_back("Content-Type", json_protocol ? kJsonContentType : kRestContentType);
  r.headers.emplace_back("x-amzn-RequestId", NewUuid());
  r.body = body.dump();
  return r;
}

// Splits "a=1&b=2" into decoded pairs.
std::vector<std::pair<std::string, std::string>> ParseQuery(const std::string& raw) {
  std::vector<std::pair<std::string, std::string>> out;
  size_t pos = 0;
  while (pos <= raw.size() && !raw.empty()) {
    size_t amp = raw.find('&', pos);
    std::string part = raw.substr(pos, amp == std::string::npos ? std::string::npos : amp - pos);
    if (!part.empty()) {
      size_t eq = part.find('=');
      std::string k = part.substr(0, eq);
      std::string v = eq == std::string::npos ? "" : part.substr(eq + 1);
      for (char& c : v) {
        if (c == '+') c = ' ';
      }
      out.emplace_back(sigv4::UriDecode(k), sigv4::UriDecode(v));
    }
    if (amp == std::string::npos) break;
    pos = amp + 1;
  }
  return out;
}

Result<Json> ParseBody(const std::string& body) {
  if (body.empty()) return Json::object();
  Result<Json> parsed = ParseJson(body);
  if (!parsed.ok()) {
    return Status::InvalidArgument("the request body is not valid JSON: " +
                                   parsed.status().message());
  }
  if (!parsed->is_object()) {
    return Status::InvalidArgument("the request body must be a JSON object");
  }
  return parsed;
}

// Runs a handler; exceptions (a bug) become Internal.
Result<Json> Invoke(const JsonHandler& handler, const Json& request) {
  try {
    return handler(request);
  } catch (const nlohmann::json::exception& e) {
    return Status::InvalidArgument(std::string("a request field has the wrong type: ") + e.what());
  } catch (const std::exception& e) {
    return Status::Internal(std::string("internal error: ") + e.what());
  }
}

}  // namespace

std::string HttpRequest::Header(std::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (k.size() == name.size() && strncasecmp(k.data(), name.data(), k.size()) == 0) return v;
  }
  return "";
}

bool HttpRequest::HasHeader(std::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (k.size() == name.size() && strncasecmp(k.data(), name.data(), k.size()) == 0) return true;
  }
  return false;
}

HttpResponse ErrorResponse(const ApiError& error, bool json_protocol) {
  HttpResponse r;
  r.status = error.http_status;
  r.headers.emplace_back("Content-Type", json_protocol ? kJsonContentType : kRestContentType);
  r.headers.emplace_back("x-amzn-RequestId", NewUuid());
  r.headers.emplace_back("x-amzn-ErrorType", error.code);
  r.body = Json{{"__type", error.code}, {"message", error.message}}.dump();
  return r;
}

ApiRouter::ApiRouter(const Authenticator* auth) : auth_(auth) {}

void ApiRouter::RegisterRestOperation(RestOperation op) {
  for (RestOperation& existing : rest_ops_) {
    if (existing.method == op.method && existing.path == op.path) {
      existing = std::move(op);
      return;
    }
  }
  rest_ops_.push_back(std::move(op));
}

void ApiRouter::RegisterJsonService(JsonService service) {
  std::string prefix = service.target_prefix;
  json_services_[prefix] = std::move(service);
}

std::vector<std::string> ApiRouter::OperationNames() const {
  std::vector<std::string> names;
  for (const RestOperation& op : rest_ops_) names.push_back("Batch." + op.name);
  for (const auto& [prefix, svc] : json_services_) {
    for (const auto& [name, _] : svc.operations) names.push_back(prefix + "." + name);
  }
  return names;
}

HttpResponse ApiRouter::Handle(const HttpRequest& request) const {
  const std::string target = request.Header("x-amz-target");
  if (!target.empty()) return HandleJsonTarget(request, target);
  return HandleRest(request);
}

HttpResponse ApiRouter::HandleJsonTarget(const HttpRequest& request,
                                         const std::string& target) const {
  size_t dot = target.find('.');
  std::string prefix = target.substr(0, dot);
  std::string operation = dot == std::string::npos ? "" : target.substr(dot + 1);
  auto svc = json_services_.find(prefix);
  if (svc == json_services_.end() || request.method != "POST" || request.raw_path != "/") {
    std::string known;
    for (const auto& [p, _] : json_services_) known += (known.empty() ? "" : ", ") + p;
    return ErrorResponse({400, "UnknownOperationException",
                          "X-Amz-Target '" + target + "' names no service of this server (" +
                              (known.empty() ? std::string("none registered") : known) +
                              "); json-protocol calls are POST / with X-Amz-Target "
                              "<Service>.<Operation>"},
                         true);
  }
  if (auth_) {
    if (auto denied = auth_->Verify(request, svc->second.signing_service)) {
      return ErrorResponse(*denied, true);
    }
  }
  auto op = svc->second.operations.find(operation);
  if (op == svc->second.operations.end()) {
    return ErrorResponse({400, "UnknownOperationException",
                          "operation '" + operation + "' of " + prefix +
                              " is not supported by lote; see docs/api.md for the supported list"},
                         true);
  }
  Result<Json> body = ParseBody(request.body);
  if (!body.ok())
    return ErrorResponse({400, "SerializationException", body.status().message()}, true);
  Result<Json> result = Invoke(op->second, *body);
  if (!result.ok()) {
    ApiError err = svc->second.map_error(result.status());
    if (err.http_status >= 500) spdlog::error("{} failed: {}", target, result.status().ToString());
    return ErrorResponse(err, true);
  }
  return JsonOk(*result, true);
}

HttpResponse ApiRouter::HandleRest(const HttpRequest& request) const {
  const std::string path = sigv4::UriDecode(request.raw_path);
  const RestOperation* found = nullptr;
  std::string param_name, param_value;
  bool path_known = false;
  for (const RestOperation& op : rest_ops_) {
    size_t brace = op.path.find('{');
    bool match = false;
    std::string name, value;
    if (brace == std::string::npos) {
      match = path == op.path;
    } else if (path.size() > brace && path.compare(0, brace, op.path, 0, brace) == 0) {
      match = true;
      name = op.path.substr(brace + 1, op.path.size() - brace - 2);
      value = path.substr(brace);
    }
    if (!match) continue;
    path_known = true;
    if (op.method != request.method) continue;
    found = &op;
    param_name = name;
    param_value = value;
    break;
  }
  if (!found) {
    if (path_known) {
      return ErrorResponse({405, "UnknownOperationException",
                            "method " + request.method + " is not allowed on " + path},
                           false);
    }
    return ErrorResponse({404, "UnknownOperationException",
                          "no AWS Batch operation at " + request.method + " " + path +
                              "; see docs/api.md for the supported operations"},
                         false);
  }
  if (auth_) {
    if (auto denied = auth_->Verify(request, "batch")) return ErrorResponse(*denied, false);
  }
  Result<Json> body = ParseBody(request.body);
  if (!body.ok()) return ErrorResponse(BatchErrorFromStatus(body.status()), false);
  Json& req = *body;
  if (!param_name.empty()) req[param_name] = param_value;
  for (const auto& [k, v] : ParseQuery(request.raw_query)) {
    bool is_list = std::find(found->list_query_params.begin(), found->list_query_params.end(), k) !=
                   found->list_query_params.end();
    if (is_list) {
      if (!req.contains(k) || !req[k].is_array()) req[k] = Json::array();
      req[k].push_back(v);
    } else {
      req[k] = v;
    }
  }
  Result<Json> result = Invoke(found->handler, req);
  if (!result.ok()) {
    ApiError err = BatchErrorFromStatus(result.status());
    if (err.http_status >= 500)
      spdlog::error("{} failed: {}", found->name, result.status().ToString());
    return ErrorResponse(err, false);
  }
  return JsonOk(*result, false);
}

}  // namespace lote::api
