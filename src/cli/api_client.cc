#include "cli/api_client.h"

#include <httplib.h>

#include <cstdlib>
#include <cstring>

#include "api/credentials_file.h"
#include "common/clock.h"
#include "common/crypto.h"
#include "common/files.h"
#include "common/recipe_config.h"

namespace lote::cli {

namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// An AWS error answer (HTTP status, AWS code, message) as a Status.
Status ErrorStatus(int http_status, std::string code, const std::string& message) {
  size_t colon = code.find(':');
  if (colon != std::string::npos) code = code.substr(0, colon);
  std::string text = code + ": " + message;
  if (http_status == 403) return Status::PermissionDenied(text);
  // The server did not do the request and says to try again later.
  if (http_status == 429 || code == "ThrottlingException" || code == "TooManyRequestsException") {
    return Status::ResourceExhausted(text);
  }
  if (http_status == 503) return Status::Unavailable(text);
  if (http_status >= 500) return Status::Internal(text);
  if (code.find("NotFound") != std::string::npos || code.find(".Unknown") != std::string::npos)
    return Status::NotFound(text);
  if (code.find(".Duplicate") != std::string::npos ||
      code.find("AlreadyExists") != std::string::npos)
    return Status::AlreadyExists(text);
  return Status::InvalidArgument(text);
}

// The text of the first <tag>...</tag> in `xml`, its entities decoded.
std::string XmlText(const std::string& xml, const std::string& tag) {
  const size_t open = xml.find("<" + tag + ">");
  if (open == std::string::npos) return "";
  const size_t start = open + tag.size() + 2;
  const size_t close = xml.find("</" + tag + ">", start);
  std::string raw =
      xml.substr(start, close == std::string::npos ? std::string::npos : close - start);
  std::string out;
  for (size_t i = 0; i < raw.size(); ++i) {
    bool decoded = false;
    for (const auto& [entity, c] : {std::pair<const char*, char>{"&amp;", '&'},
                                    {"&lt;", '<'},
                                    {"&gt;", '>'},
                                    {"&quot;", '"'},
                                    {"&apos;", '\''}}) {
      if (raw.compare(i, std::strlen(entity), entity) == 0) {
        out += c;
        i += std::strlen(entity) - 1;
        decoded = true;
        break;
      }
    }
    if (!decoded) out += raw[i];
  }
  return out;
}

void FlattenInto(const Json& value, const std::string& name,
                 std::vector<std::pair<std::string, std::string>>* out) {
  const std::string prefix = name.empty() ? "" : name + ".";
  if (value.is_object()) {
    for (const auto& [k, v] : value.items()) FlattenInto(v, prefix + k, out);
  } else if (value.is_array()) {
    for (size_t i = 0; i < value.size(); ++i)
      FlattenInto(value[i], prefix + std::to_string(i + 1), out);
  } else if (value.is_string()) {
    out->emplace_back(name, value.get<std::string>());
  } else if (!value.is_null()) {
    out->emplace_back(name, value.dump());
  }
}

}  // namespace

std::vector<std::pair<std::string, std::string>> FlattenQuery(const Json& tree) {
  std::vector<std::pair<std::string, std::string>> out;
  FlattenInto(tree, "", &out);
  return out;
}

std::string ResolveEndpoint(const std::string& flag) {
  if (!flag.empty()) return flag;
  // In an example folder, the recipe's config.txt may name the server.
  if (Result<RecipeConfig> config = RecipeConfig::Load(kConfigFileName); config.ok()) {
    std::string v = config->GetOr("LOTE_ENDPOINT", "");
    if (!v.empty()) return v;
  }
  for (const char* var : {"LOTE_ENDPOINT", "AWS_ENDPOINT_URL_BATCH"}) {
    std::string v = Env(var);
    if (!v.empty()) return v;
  }
  return "http://127.0.0.1:7480";
}

std::string ResolveRegion() {
  for (const char* var : {"AWS_REGION", "AWS_DEFAULT_REGION"}) {
    std::string v = Env(var);
    if (!v.empty()) return v;
  }
  return "us-east-1";
}

Result<sigv4::Credentials> ResolveCredentials() {
  std::string id = Env("AWS_ACCESS_KEY_ID"), secret = Env("AWS_SECRET_ACCESS_KEY");
  if (!id.empty() && !secret.empty()) {
    return sigv4::Credentials{id, secret, Env("AWS_SESSION_TOKEN")};
  }
  std::string file = Env("AWS_SHARED_CREDENTIALS_FILE");
  if (file.empty()) file = HomeDir() + "/.aws/credentials";
  std::string profile = Env("AWS_PROFILE");
  if (profile.empty()) profile = "default";
  Result<sigv4::Credentials> shared = api::ReadCredentialsProfile(file, profile);
  if (shared.ok() || !shared.status().IsNotFound()) return shared;
  std::string lote_home = Env("LOTE_HOME");
  if (lote_home.empty()) lote_home = HomeDir() + "/.lote";
  Result<sigv4::Credentials> lote =
      api::ReadCredentialsProfile(lote_home + "/credentials", api::kLoteProfile);
  if (lote.ok()) return lote;
  return Status::Unauthenticated(
      "no AWS credentials found (tried AWS_ACCESS_KEY_ID, profile '" + profile + "' in " + file +
      ", and " + lote_home + "/credentials); run eval \"$(lote env)\" after starting lote server");
}

Result<std::unique_ptr<ApiClient>> ApiClient::Create(const ClientOptions& options) {
  std::unique_ptr<ApiClient> c(new ApiClient());
  c->endpoint_ = ResolveEndpoint(options.endpoint);
  while (!c->endpoint_.empty() && c->endpoint_.back() == '/') c->endpoint_.pop_back();
  if (c->endpoint_.rfind("http://", 0) != 0) {
    return Status::InvalidArgument("endpoint '" + c->endpoint_ +
                                   "' must start with http:// (e.g. http://127.0.0.1:7480)");
  }
  c->host_header_ = c->endpoint_.substr(7);
  c->region_ = options.region.empty() ? ResolveRegion() : options.region;
  if (options.credentials) {
    c->credentials_ = *options.credentials;
  } else {
    ASSIGN_OR_RETURN(c->credentials_, ResolveCredentials());
  }
  c->http_ = std::make_unique<httplib::Client>(c->endpoint_);
  c->http_->set_keep_alive(true);
  c->http_->set_tcp_nodelay(true);
  c->http_->set_connection_timeout(options.timeout_seconds);
  c->http_->set_read_timeout(options.timeout_seconds);
  c->http_->set_write_timeout(options.timeout_seconds);
  return c;
}

ApiClient::~ApiClient() = default;

Result<Json> ApiClient::Batch(const std::string& method, const std::string& raw_path,
                              const Json& body) {
  std::string text = method == "GET" || method == "DELETE" ? "" : body.dump();
  return Send(method, raw_path, "batch", "application/json", "", text);
}

Result<Json> ApiClient::JsonTarget(const std::string& service, const std::string& target,
                                   const Json& body) {
  return Send("POST", "/", service, "application/x-amz-json-1.1", target, body.dump());
}

Status ApiClient::Query(const std::string& service, const std::string& action,
                        const std::string& version,
                        const std::vector<std::pair<std::string, std::string>>& params) {
  std::string body =
      "Action=" + sigv4::UriEncode(action, true) + "&Version=" + sigv4::UriEncode(version, true);
  for (const auto& [k, v] : params)
    body += "&" + sigv4::UriEncode(k, true) + "=" + sigv4::UriEncode(v, true);
  ASSIGN_OR_RETURN(
      Answer a,
      Exchange("POST", "/", service, "application/x-www-form-urlencoded; charset=utf-8", "", body));
  if (a.status == 200) return Status::Ok();
  std::string code = XmlText(a.body, "Code");
  std::string message = XmlText(a.body, "Message");
  if (code.empty()) code = a.error_type;
  return ErrorStatus(a.status, code, message.empty() ? a.body : message);
}

Result<Json> ApiClient::Send(const std::string& method, const std::string& raw_path,
                             const std::string& service, const std::string& content_type,
                             const std::string& target, const std::string& body) {
  ASSIGN_OR_RETURN(Answer a, Exchange(method, raw_path, service, content_type, target, body));
  Result<Json> parsed = a.body.empty() ? Result<Json>(Json::object()) : ParseJson(a.body);
  if (a.status == 200) {
    if (!parsed.ok()) return Status::Internal("the server answered invalid JSON: " + a.body);
    return parsed;
  }
  std::string code = a.error_type;
  std::string message = a.body;
  if (parsed.ok() && parsed->is_object()) {
    if (code.empty()) code = parsed->value("__type", "");
    message = parsed->value("message", parsed->value("Message", a.body));
  }
  return ErrorStatus(a.status, code, message);
}

Result<ApiClient::Answer> ApiClient::Exchange(const std::string& method,
                                              const std::string& raw_path,
                                              const std::string& service,
                                              const std::string& content_type,
                                              const std::string& target, const std::string& body) {
  sigv4::Request req;
  req.method = method;
  size_t q = raw_path.find('?');
  req.raw_path = raw_path.substr(0, q);
  req.raw_query = q == std::string::npos ? "" : raw_path.substr(q + 1);
  req.headers.emplace_back("Host", host_header_);
  if (!body.empty()) req.headers.emplace_back("Content-Type", content_type);
  if (!target.empty()) req.headers.emplace_back("X-Amz-Target", target);
  req.payload_sha256_hex = Sha256Hex(body);
  sigv4::SignRequest(&req, credentials_, region_, service,
                     sigv4::FormatAmzDate(SystemClock::Default()->NowMillis()));
  httplib::Headers headers;
  for (const auto& [k, v] : req.headers) {
    if (k != "Content-Type") headers.emplace(k, v);
  }
  httplib::Result res{nullptr, httplib::Error::Unknown};
  if (method == "GET") {
    res = http_->Get(raw_path.c_str(), headers);
  } else if (method == "DELETE") {
    res = http_->Delete(raw_path.c_str(), headers, body, content_type.c_str());
  } else if (method == "PUT") {
    res = http_->Put(raw_path.c_str(), headers, body, content_type.c_str());
  } else {
    res = http_->Post(raw_path.c_str(), headers, body, content_type.c_str());
  }
  if (!res) {
    return Status::Unavailable("cannot reach the lote server at " + endpoint_ + " (" +
                               httplib::to_string(res.error()) +
                               "); start it with `lote server` or pass --endpoint");
  }
  return Answer{res->status, res->body, res->get_header_value("x-amzn-ErrorType")};
}

}  // namespace lote::cli
