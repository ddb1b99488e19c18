#include "api/router.h"

#include <spdlog/spdlog.h>
#include <strings.h>

#include <algorithm>
#include <exception>

#include "api/query_protocol.h"
#include "api/request_checks.h"
#include "api/s3_api.h"
#include "common/ids.h"
#include "common/sigv4.h"

namespace lote::api {

namespace {

constexpr const char* kRestContentType = "application/json";
constexpr const char* kJsonContentType = "application/x-amz-json-1.1";

// Never throws: a string that is not UTF-8 (which the checks keep out of
// requests) is written with U+FFFD rather than failing the answer.
std::string Dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

// A header value on one line: control characters (a newline in a message)
// become spaces.
// An error message as a header value: printable ASCII only (the body keeps the
// exact text) and at most kMaxHeaderMessage bytes, since a message may echo a
// client's oversized input and HTTP clients refuse long header lines.
constexpr size_t kMaxHeaderMessage = 1024;

std::string HeaderSafe(std::string text) {
  if (text.size() > kMaxHeaderMessage) text = text.substr(0, kMaxHeaderMessage - 3) + "...";
  for (char& c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u >= 0x7f) c = u >= 0x80 ? '?' : ' ';
  }
  return text;
}

HttpResponse JsonOk(const Json& body, bool json_protocol, const std::string& request_id) {
  HttpResponse r;
  r.status = 200;
  r.headers.emplace_back("Content-Type", json_protocol ? kJsonContentType : kRestContentType);
  r.headers.emplace_back("x-amzn-RequestId", request_id);
  r.body = Dump(body);
  return r;
}

// The parser's "number overflow parsing '1e400'" names the number, not the
// member: find the member whose value it is (the nearest key before it).
std::string NumberOverflowMessage(const std::string& body, const std::string& what) {
  std::string number;
  size_t open = what.find('\'');
  size_t close = what.rfind('\'');
  if (open != std::string::npos && close > open) number = what.substr(open + 1, close - open - 1);
  std::string member;
  size_t at = number.empty() ? std::string::npos : body.find(number);
  if (at != std::string::npos) {
    size_t colon = body.rfind(':', at);
    size_t key_end = colon == std::string::npos ? std::string::npos : body.rfind('"', colon);
    size_t key_start = key_end == std::string::npos || key_end == 0 ? std::string::npos
                                                                    : body.rfind('"', key_end - 1);
    if (key_start != std::string::npos)
      member = body.substr(key_start + 1, key_end - key_start - 1);
  }
  return (member.empty() ? std::string("a number") : member) + " is " +
         (number.empty() ? std::string("a number") : number) +
         ", too large to represent (it overflows a 64-bit float)";
}

Result<Json> ParseBody(const std::string& body) {
  if (body.empty()) return Json::object();
  RETURN_IF_ERROR(CheckJsonDepth(body, ApiRouter::kMaxJsonDepth));
  Json parsed;
  try {
    parsed = Json::parse(body);
  } catch (const Json::out_of_range& e) {
    return Status::InvalidArgument(NumberOverflowMessage(body, e.what()));
  } catch (const Json::exception& e) {
    return Status::InvalidArgument(std::string("the request body is not valid JSON: ") + e.what());
  }
  if (!parsed.is_object()) {
    return Status::InvalidArgument("the request body must be a JSON object");
  }
  return Result<Json>(std::move(parsed));
}

Status CheckBodySize(const std::string& operation, size_t size, size_t limit) {
  if (size <= limit) return Status::Ok();
  return Status::InvalidArgument("the " + operation + " request body is " + std::to_string(size) +
                                 " bytes; the limit is " + std::to_string(limit) +
                                 " bytes (see docs/api.md, \"Limits\")");
}

// Runs a handler; exceptions (a bug) become Internal.
Result<Json> Invoke(const JsonHandler& handler, const Json& request) {
  try {
    return handler(request);
  } catch (const nlohmann::json::exception& e) {
    return Status::InvalidArgument(std::string("a request field has the wrong type: ") + e.what());
  } catch (const std::exception& e) {
    return Status::Internal(std::string("internal error: ") + e.what());
  } catch (...) {
    return Status::Internal("internal error: unknown exception");
  }
}

thread_local std::shared_ptr<const iam::User> current_caller;

}  // namespace

const iam::User* CurrentCaller() { return current_caller.get(); }
void SetCurrentCaller(std::shared_ptr<const iam::User> user) { current_caller = std::move(user); }

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

HttpResponse ErrorResponse(const ApiError& error, bool json_protocol,
                           const std::string& request_id) {
  HttpResponse r;
  r.status = error.http_status;
  r.headers.emplace_back("Content-Type", json_protocol ? kJsonContentType : kRestContentType);
  r.headers.emplace_back("x-amzn-RequestId", request_id);
  r.headers.emplace_back("x-amzn-ErrorType", error.code);
  // Older SDKs (the AWS SDK for Go 1.44 in Debian) read the message only here.
  r.headers.emplace_back("x-amzn-ErrorMessage", HeaderSafe(error.message));
  r.body = Dump(Json{{"__type", error.code}, {"message", error.message}});
  return r;
}

std::string ApiRouter::NewRequestId() { return NewUuid(); }

void ApiRouter::SetBodyLimit(const std::string& operation, size_t bytes) {
  body_limits_[operation] = bytes;
}

size_t ApiRouter::BodyLimit(const std::string& operation) const {
  auto it = body_limits_.find(operation);
  return it == body_limits_.end() ? kDefaultMaxRequestBytes : it->second;
}

HttpResponse ApiRouter::TransportError(const HttpRequest& request, int http_status,
                                       const Status& status) const {
  if (s3_ != nullptr && s3_->Claims(request))
    return s3_->TransportError(request, http_status, status);
  const std::string id = NewRequestId();
  const std::string target = request.Header("x-amz-target");
  ApiError error;
  if (!target.empty()) {
    auto svc = json_services_.find(target.substr(0, target.find('.')));
    error =
        svc == json_services_.end() ? LogsErrorFromStatus(status) : svc->second.map_error(status);
  } else {
    error = BatchErrorFromStatus(status);
  }
  error.http_status = http_status;
  if (http_status >= 500) {
    spdlog::warn("request {}: {} {}: {}", id, request.method, request.raw_path, status.message());
  }
  return ErrorResponse(error, !target.empty(), id);
}

HttpResponse ApiRouter::InternalError(const HttpRequest& request, const std::string& what) const {
  const std::string id = NewRequestId();
  spdlog::error("request {}: {} {} {}: internal error: {}", id, request.method, request.raw_path,
                request.Header("x-amz-target"), what);
  const std::string target = request.Header("x-amz-target");
  Status st = Status::Internal("internal error (request id " + id + "); see the server log");
  ApiError error = target.empty() ? BatchErrorFromStatus(st) : LogsErrorFromStatus(st);
  error.http_status = 500;
  return ErrorResponse(error, !target.empty(), id);
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

void ApiRouter::RegisterQueryService(QueryService service) {
  std::string name = service.signing_service;
  query_services_[name] = std::move(service);
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
  for (const auto& [service, svc] : query_services_) {
    for (const auto& [name, _] : svc.operations) names.push_back(service + "." + name);
  }
  return names;
}

HttpResponse ApiRouter::Handle(const HttpRequest& request) const {
  return HandleChecked(request, /*verify=*/true, "");
}

HttpResponse ApiRouter::HandleAuthenticated(const HttpRequest& request,
                                            const std::string& access_key_id) const {
  spdlog::debug("{} {} {} as {}", request.method, request.raw_path, request.Header("x-amz-target"),
                access_key_id);
  return HandleChecked(request, /*verify=*/false, access_key_id);
}

void ApiRouter::RegisterTextGet(std::string path, std::string content_type,
                                std::function<Result<std::string>()> render) {
  text_gets_[std::move(path)] = {std::move(content_type), std::move(render)};
}

Result<Json> ApiRouter::Run(const ApiCall& call, const JsonHandler& handler, const Json& request,
                            bool* denied) const {
  *denied = false;
  struct ResetCaller {
    ~ResetCaller() { SetCurrentCaller(nullptr); }
  } reset_caller;
  if (access_ != nullptr) {
    if (std::optional<std::string> refusal = access_->Authorize(call, request)) {
      *denied = true;
      return Status::PermissionDenied(*refusal);
    }
  }
  return Invoke(handler, request);
}

void ApiRouter::Finish(const ApiCall& call, const Json& request, const Result<Json>& result,
                       const std::string& error_code) const {
  if (access_ == nullptr) return;
  access_->Completed(call, request, result.ok() ? &*result : nullptr, error_code);
}

HttpResponse ApiRouter::HandleChecked(const HttpRequest& request, bool verify,
                                      std::string key) const {
  const std::string id = NewRequestId();
  const std::string target = request.Header("x-amz-target");
  try {
    if (s3_ != nullptr && s3_->Claims(request)) {
      return s3_->Handle(request, id, verify && auth_ != nullptr, key);
    }
    if (auto text = text_gets_.find(request.raw_path);
        text != text_gets_.end() && request.method == "GET" && target.empty()) {
      Result<std::string> body = text->second.second();
      if (!body.ok())
        return ErrorResponse({403, "AccessDeniedException", body.status().message()}, true, id);
      return HttpResponse{
          200, {{"Content-Type", text->second.first}}, std::move(*body), std::nullopt};
    }
    if (!target.empty()) return HandleJsonTarget(request, target, id, verify, std::move(key));
    if (IsQueryRequest(request)) return HandleQuery(request, id, verify, std::move(key));
    return HandleRest(request, id, verify, std::move(key));
  } catch (const std::exception& e) {
    return InternalError(request, e.what());
  }
}

HttpResponse ApiRouter::HandleJsonTarget(const HttpRequest& request, const std::string& target,
                                         const std::string& id, bool verify,
                                         std::string key) const {
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
                         true, id);
  }
  const JsonService& service = svc->second;
  if (auto st = CheckBodySize(operation.empty() ? prefix : operation, request.body.size(),
                              BodyLimit(target));
      !st.ok()) {
    ApiError err = service.map_error(st);
    err.http_status = 413;
    return ErrorResponse(err, true, id);
  }
  if (auth_ && verify) {
    if (auto denied = auth_->Verify(request, service.signing_service, &key)) {
      return ErrorResponse(*denied, true, id);
    }
  }
  auto op = service.operations.find(operation);
  if (op == service.operations.end()) {
    return ErrorResponse({400, "UnknownOperationException",
                          "operation '" + operation + "' of " + prefix +
                              " is not supported by lote; see docs/api.md for the supported list"},
                         true, id);
  }
  Result<Json> body = ParseBody(request.body);
  if (!body.ok()) {
    return ErrorResponse({400, "SerializationException", body.status().message()}, true, id);
  }
  if (Status st =
          CheckRequestValues(*body, service.value_rules ? *service.value_rules : LogsValueRules());
      !st.ok()) {
    return ErrorResponse(service.map_error(st), true, id);
  }
  const ApiCall call{service.signing_service, operation, key, id};
  bool denied = false;
  Result<Json> result = Run(call, op->second, *body, &denied);
  if (denied)
    return ErrorResponse({403, "AccessDeniedException", result.status().message()}, true, id);
  if (!result.ok()) {
    ApiError err = service.map_error(result.status());
    if (err.http_status >= 500) {
      spdlog::error("request {}: {} failed: {}", id, target, result.status().ToString());
    }
    Finish(call, *body, result, err.code);
    return ErrorResponse(err, true, id);
  }
  Finish(call, *body, result, "");
  return JsonOk(*result, true, id);
}

const RestOperation* ApiRouter::FindRest(const std::string& method, const std::string& path,
                                         std::string* param_name, std::string* param_value,
                                         bool* path_known) const {
  for (const RestOperation& op : rest_ops_) {
    size_t brace = op.path.find('{');
    bool match = false;
    if (brace == std::string::npos) {
      match = path == op.path;
    } else {
      match = path.size() > brace && path.compare(0, brace, op.path, 0, brace) == 0;
    }
    if (!match) continue;
    *path_known = true;
    if (op.method != method) continue;
    if (brace != std::string::npos) {
      *param_name = op.path.substr(brace + 1, op.path.size() - brace - 2);
      *param_value = path.substr(brace);
    }
    return &op;
  }
  return nullptr;
}

std::shared_ptr<BodySink> ApiRouter::BodySinkFor(const HttpRequest& head) const {
  if (s3_ != nullptr && s3_->Claims(head)) return s3_->BodySinkFor(head);
  return nullptr;
}

bool ApiRouter::IsNonblocking(const HttpRequest& request) const {
  if (s3_ != nullptr && s3_->Claims(request)) return false;
  if (request.HasHeader("x-amz-target")) return false;
  std::string name, value;
  bool known = false;
  const RestOperation* op =
      FindRest(request.method, sigv4::UriDecode(request.raw_path), &name, &value, &known);
  return op != nullptr && op->nonblocking;
}

HttpResponse ApiRouter::HandleRest(const HttpRequest& request, const std::string& id, bool verify,
                                   std::string key) const {
  const std::string path = sigv4::UriDecode(request.raw_path);
  std::string param_name, param_value;
  bool path_known = false;
  const RestOperation* found =
      FindRest(request.method, path, &param_name, &param_value, &path_known);
  auto client_error = [&](const Status& st) {
    return ErrorResponse(BatchErrorFromStatus(st), false, id);
  };
  const std::string printable_path = IsValidUtf8(path) ? path : request.raw_path;
  if (!found) {
    if (path_known) {
      return ErrorResponse({405, "UnknownOperationException",
                            "method " + request.method + " is not allowed on " + printable_path},
                           false, id);
    }
    return ErrorResponse({404, "UnknownOperationException",
                          "no AWS Batch operation at " + request.method + " " + printable_path +
                              "; see docs/api.md for the supported operations"},
                         false, id);
  }
  if (Status st =
          CheckBodySize(found->name, request.body.size(), BodyLimit("Batch." + found->name));
      !st.ok()) {
    ApiError err = BatchErrorFromStatus(st);
    err.http_status = 413;
    return ErrorResponse(err, false, id);
  }
  if (auth_ && verify) {
    if (auto denied = auth_->Verify(request, "batch", &key))
      return ErrorResponse(*denied, false, id);
  }
  Result<Json> body = ParseBody(request.body);
  if (!body.ok()) return client_error(body.status());
  Json& req = *body;
  if (!param_name.empty()) {
    if (!IsValidUtf8(param_value)) {
      return client_error(Status::InvalidArgument(
          param_name + " (in the path) is not valid UTF-8 once percent-decoded"));
    }
    req[param_name] = param_value;
  }
  for (const auto& [k, v] : ParseFormEncoded(request.raw_query)) {
    if (!IsValidUtf8(k) || !IsValidUtf8(v)) {
      return client_error(Status::InvalidArgument(
          "the query parameter " + (IsValidUtf8(k) ? "'" + k + "'" : std::string("name")) +
          " is not valid UTF-8 once percent-decoded"));
    }
    bool is_list = std::find(found->list_query_params.begin(), found->list_query_params.end(), k) !=
                   found->list_query_params.end();
    if (is_list) {
      if (!req.contains(k) || !req[k].is_array()) req[k] = Json::array();
      req[k].push_back(v);
    } else {
      req[k] = v;
    }
  }
  if (Status st = CheckRequestValues(req, BatchValueRules()); !st.ok()) return client_error(st);
  const ApiCall call{"batch", found->name, key, id};
  bool denied = false;
  Result<Json> result = Run(call, found->handler, req, &denied);
  if (denied) {
    return ErrorResponse({403, "AccessDeniedException", result.status().message()}, false, id);
  }
  if (!result.ok()) {
    ApiError err = BatchErrorFromStatus(result.status());
    if (err.http_status >= 500) {
      spdlog::error("request {}: {} failed: {}", id, found->name, result.status().ToString());
    }
    Finish(call, req, result, err.code);
    return ErrorResponse(err, false, id);
  }
  Finish(call, req, result, "");
  return JsonOk(*result, false, id);
}

}  // namespace lote::api
