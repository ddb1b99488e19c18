#include "console/console_service.h"

#include <spdlog/spdlog.h>
#include <strings.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <set>
#include <thread>

#include "common/crypto.h"
#include "common/sigv4.h"
#include "console/assets.h"
#include "objstore/objstore.h"

namespace lote::console {
namespace {

constexpr const char* kCookie = "lote_console";
constexpr const char* kBatchJobGroup = "/aws/batch/job";
constexpr int kCountPage = 1000;  // overview counts beyond this show as "1000+"

// The operations the console may call, and whether each changes something.
const std::map<std::string, bool>& BatchOperations() {
  static const std::map<std::string, bool> ops = {
      {"DescribeJobs", false},
      {"ListJobs", false},
      {"DescribeJobQueues", false},
      {"DescribeComputeEnvironments", false},
      {"DescribeJobDefinitions", false},
      {"GetJobQueueSnapshot", false},
      {"CancelJob", true},
      {"TerminateJob", true},
      {"ReleaseNode", true},  // lote's own: ends a node's quarantine (docs/quarantine.md)
  };
  return ops;
}
const std::set<std::string>& LogsOperations() {
  static const std::set<std::string> ops = {"GetLogEvents", "FilterLogEvents",
                                            "DescribeLogStreams"};
  return ops;
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string Dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

api::HttpResponse JsonAnswer(int status, const Json& body) {
  api::HttpResponse r;
  r.status = status;
  r.headers.emplace_back("Content-Type", "application/json");
  r.headers.emplace_back("Cache-Control", "no-store");
  r.body = Dump(body);
  return r;
}

api::HttpResponse Error(int status, const std::string& code, const std::string& message) {
  return JsonAnswer(status, Json{{"__type", code}, {"message", message}});
}

std::string CookieValue(const api::HttpRequest& request, std::string_view name) {
  const std::string header = request.Header("cookie");
  size_t pos = 0;
  while (pos < header.size()) {
    size_t end = header.find(';', pos);
    if (end == std::string::npos) end = header.size();
    std::string part = header.substr(pos, end - pos);
    const size_t start = part.find_first_not_of(' ');
    if (start != std::string::npos) part = part.substr(start);
    const size_t eq = part.find('=');
    if (eq != std::string::npos && part.compare(0, eq, name) == 0) return part.substr(eq + 1);
    pos = end + 1;
  }
  return "";
}

std::map<std::string, std::string> Query(const std::string& raw) {
  std::map<std::string, std::string> out;
  size_t pos = 0;
  while (pos < raw.size()) {
    size_t amp = raw.find('&', pos);
    if (amp == std::string::npos) amp = raw.size();
    const std::string part = raw.substr(pos, amp - pos);
    const size_t eq = part.find('=');
    std::string v = eq == std::string::npos ? "" : part.substr(eq + 1);
    for (char& c : v)
      if (c == '+') c = ' ';
    out[sigv4::UriDecode(part.substr(0, eq))] = sigv4::UriDecode(v);
    pos = amp + 1;
  }
  return out;
}

// The query parameter `name` of a request ("" when absent).
std::string QueryParam(const api::HttpRequest& request, const std::string& name) {
  const auto query = Query(request.raw_query);
  auto it = query.find(name);
  return it == query.end() ? "" : it->second;
}

void AddSecurityHeaders(api::HttpResponse& r) {
  r.headers.emplace_back("Content-Security-Policy",
                         "default-src 'self'; img-src 'self' data:; style-src 'self' "
                         "'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'; "
                         "form-action 'self'");
  r.headers.emplace_back("X-Content-Type-Options", "nosniff");
  r.headers.emplace_back("X-Frame-Options", "DENY");
  r.headers.emplace_back("Referrer-Policy", "no-referrer");
}

int MaskContainer(Json& container) {
  int masked = 0;
  if (!container.is_object()) return 0;
  auto env = container.find("environment");
  if (env == container.end() || !env->is_array()) return 0;
  for (Json& e : *env) {
    if (e.is_object() && e.contains("value")) {
      e["value"] = ConsoleService::kMask;
      e["masked"] = true;
      ++masked;
    }
  }
  return masked;
}

}  // namespace

ConsoleService::ConsoleService(const api::ApiRouter* router, SessionManager* sessions,
                               const logs::ProgressHistory* history, const Clock* clock,
                               ConsoleOptions options)
    : router_(router), sessions_(sessions), history_(history), clock_(clock), options_(options) {}

int ConsoleService::MaskEnvironment(Json& answer) {
  int masked = 0;
  for (const char* list : {"jobs", "jobDefinitions"}) {
    if (!answer.contains(list) || !answer[list].is_array()) continue;
    for (Json& item : answer[list]) {
      if (!item.is_object()) continue;
      if (item.contains("container")) masked += MaskContainer(item["container"]);
      if (item.contains("nodeProperties") && item["nodeProperties"].is_object()) {
        Json& ranges = item["nodeProperties"]["nodeRangeProperties"];
        if (ranges.is_array())
          for (Json& r : ranges)
            if (r.is_object() && r.contains("container")) masked += MaskContainer(r["container"]);
      }
    }
  }
  return masked;
}

api::HttpResponse ConsoleService::TransportError(const api::HttpRequest&, int http_status,
                                                 const Status& status) const {
  return Error(http_status, "TransportError", status.message());
}

api::HttpResponse ConsoleService::InternalError(const api::HttpRequest& request,
                                                const std::string& what) const {
  spdlog::error("console: {} {}: internal error: {}", request.method, request.raw_path, what);
  return Error(500, "InternalError", "internal error; see the server log");
}

std::string ConsoleService::SessionCookie(const Session& session) const {
  const int64_t max_age = std::max<int64_t>(0, (session.expires_ms - clock_->NowMillis()) / 1000);
  std::string c = std::string(kCookie) + "=" + session.id +
                  "; Path=/console; Max-Age=" + std::to_string(max_age) +
                  "; HttpOnly; SameSite=Strict";
  if (options_.secure_cookie) c += "; Secure";
  return c;
}

api::HttpResponse ConsoleService::Handle(const api::HttpRequest& request) const {
  const std::string path = request.raw_path;
  api::HttpResponse r;
  if (path == "/" || path == "/console") {
    r.status = 302;
    r.headers.emplace_back("Location", "/console/");
  } else if (path == "/console/signin") {
    r = SignInLink(request);
  } else if (path.rfind("/console/api/", 0) == 0) {
    r = Api(request, path.substr(std::string("/console/api/").size()));
  } else if (path.rfind("/console/", 0) == 0 &&
             (request.method == "GET" || request.method == "HEAD")) {
    std::string name = path.substr(std::string("/console/").size());
    if (name.empty()) name = "index.html";
    const Asset* asset = FindAsset(name);
    if (asset == nullptr) {
      r = Error(404, "NotFound", "no such console page: " + path);
    } else {
      r.status = 200;
      r.headers.emplace_back("Content-Type", std::string(asset->content_type));
      r.headers.emplace_back("Cache-Control", name == "index.html" ? "no-cache" : "max-age=300");
      r.body = std::string(asset->data);
    }
  } else {
    r = Error(404, "NotFound", "the console is at /console/");
  }
  AddSecurityHeaders(r);
  return r;
}

api::HttpResponse ConsoleService::SignInLink(const api::HttpRequest& request) const {
  Result<Session> session = sessions_->SignInWithToken(QueryParam(request, "token"));
  api::HttpResponse r;
  r.status = 303;
  if (!session.ok()) {
    spdlog::warn("console: a sign-in link was refused");
    r.headers.emplace_back("Location", "/console/#signin-refused");
    return r;
  }
  spdlog::info("console: {} signed in with a one-time link", session->principal);
  r.headers.emplace_back("Set-Cookie", SessionCookie(*session));
  r.headers.emplace_back("Location", "/console/");
  return r;
}

api::HttpResponse ConsoleService::SignIn(const api::HttpRequest& request) const {
  Result<Json> body = ParseJson(request.body);
  if (!body.ok() || !body->is_object())
    return Error(400, "InvalidRequest", "the sign-in request must be a JSON object");
  Result<Session> session = Status::Unauthenticated("");
  if (body->contains("token") && (*body)["token"].is_string()) {
    session = sessions_->SignInWithToken((*body)["token"].get<std::string>());
  } else {
    const Json& id = (*body)["accessKeyId"];
    const Json& secret = (*body)["secretAccessKey"];
    if (!id.is_string() || !secret.is_string())
      return Error(400, "InvalidRequest", "give accessKeyId and secretAccessKey (strings)");
    session = sessions_->SignIn(id.get<std::string>(), secret.get<std::string>());
  }
  if (!session.ok()) {
    spdlog::warn("console: sign-in refused");
    return Error(401, "SignInRefused", session.status().message());
  }
  spdlog::info("console: {} signed in", session->principal);
  api::HttpResponse r = JsonAnswer(200, Json{{"principal", session->principal},
                                             {"csrfToken", session->csrf},
                                             {"expiresAt", session->expires_ms}});
  r.headers.emplace_back("Set-Cookie", SessionCookie(*session));
  return r;
}

api::HttpResponse ConsoleService::Api(const api::HttpRequest& request,
                                      const std::string& path) const {
  const bool post = request.method == "POST";
  if (post) {
    const std::string type = request.Header("content-type");
    if (type.rfind("application/json", 0) != 0)
      return Error(415, "UnsupportedMediaType",
                   "console API calls send Content-Type application/json");
  } else if (request.method != "GET") {
    return Error(405, "MethodNotAllowed", "console API calls are GET or POST");
  }
  if (path == "signin") {
    if (!post) return Error(405, "MethodNotAllowed", "sign in with POST");
    return SignIn(request);
  }
  Result<Session> session = sessions_->Find(CookieValue(request, kCookie));
  if (!session.ok()) return Error(401, "NotSignedIn", session.status().message());
  if (post && !SessionManager::CheckCsrf(*session, request.Header("x-csrf-token")))
    return Error(403, "CsrfTokenMissing",
                 "this request needs the session's CSRF token in X-CSRF-Token");
  if (path == "session") {
    return JsonAnswer(200, Json{{"principal", session->principal},
                                {"csrfToken", session->csrf},
                                {"expiresAt", session->expires_ms}});
  }
  if (path == "signout" && post) {
    sessions_->SignOut(session->id);
    api::HttpResponse r = JsonAnswer(200, Json::object());
    r.headers.emplace_back(
        "Set-Cookie",
        std::string(kCookie) + "=; Path=/console; Max-Age=0; HttpOnly; SameSite=Strict");
    return r;
  }
  if (path.rfind("batch/", 0) == 0 && post)
    return Operation(request, *session, "batch", path.substr(6));
  if (path.rfind("logs/", 0) == 0 && post)
    return Operation(request, *session, "logs", path.substr(5));
  if (path == "progress" && !post) return Progress(request, *session);
  if (path == "wait" && !post) return Wait(request, *session);
  if (path == "download" && !post) return Download(request, *session);
  if (path == "overview" && !post) return Overview(*session);
  if (path == "checkpoints" && !post) return Checkpoints(request, *session);
  return Error(404, "NotFound", "no console API call " + request.method + " " + path);
}

api::HttpResponse ConsoleService::CallRaw(const std::string& service, const std::string& op,
                                          const Json& body, const Session& session) const {
  api::HttpRequest call;
  call.method = "POST";
  call.body = Dump(body);
  if (service == "batch") {
    call.raw_path = "/v1/" + Lower(op);
    call.headers.emplace_back("Content-Type", "application/json");
  } else {
    call.raw_path = "/";
    call.headers.emplace_back("Content-Type", "application/x-amz-json-1.1");
    call.headers.emplace_back("X-Amz-Target", "Logs_20140328." + op);
  }
  return router_->HandleAuthenticated(call, session.principal);
}

Result<Json> ConsoleService::Call(const std::string& service, const std::string& op,
                                  const Json& body, const Session& session) const {
  api::HttpResponse r = CallRaw(service, op, body, session);
  Result<Json> parsed = ParseJson(r.body);
  if (r.status != 200) {
    std::string message = parsed.ok() ? parsed->value("message", r.body) : r.body;
    return Status::FailedPrecondition(op + ": " + message);
  }
  return parsed;
}

api::HttpResponse ConsoleService::Operation(const api::HttpRequest& request, const Session& session,
                                            const std::string& service,
                                            const std::string& op) const {
  bool mutation = false;
  if (service == "batch") {
    auto it = BatchOperations().find(op);
    if (it == BatchOperations().end())
      return Error(404, "NotFound", "the console does not call Batch operation '" + op + "'");
    mutation = it->second;
  } else if (!LogsOperations().count(op)) {
    return Error(404, "NotFound", "the console does not call Logs operation '" + op + "'");
  }
  Result<Json> body = request.body.empty() ? Result<Json>(Json::object()) : ParseJson(request.body);
  if (!body.ok() || !body->is_object())
    return Error(400, "InvalidRequest", "the request body must be a JSON object");
  bool reveal = false;
  if (body->contains("reveal")) {
    reveal = (*body)["reveal"].is_boolean() && (*body)["reveal"].get<bool>();
    body->erase("reveal");
  }
  if (mutation) {
    spdlog::info("console: {} calls {} {}", session.principal, op, Dump(*body));
  }
  api::HttpResponse r = CallRaw(service, op, *body, session);
  r.headers.emplace_back("Cache-Control", "no-store");
  if (r.status == 200 && (op == "DescribeJobs" || op == "DescribeJobDefinitions")) {
    Result<Json> answer = ParseJson(r.body);
    if (answer.ok()) {
      if (reveal) {
        spdlog::warn("console: {} revealed the environment of {} {}", session.principal,
                     op == "DescribeJobs" ? "jobs" : "job definitions",
                     Dump(body->value("jobs", body->value("jobDefinitions", Json::array()))));
      } else {
        MaskEnvironment(*answer);
      }
      r.body = Dump(*answer);
    } else {
      return Error(500, "InternalError", "an answer could not be masked");
    }
  }
  return r;
}

std::optional<api::HttpResponse> ConsoleService::DescribeJob(const std::string& job_id,
                                                             const Session& session,
                                                             Json* job) const {
  if (job_id.empty()) return Error(400, "InvalidRequest", "jobId is required");
  Result<Json> described = Call("batch", "DescribeJobs", Json{{"jobs", {job_id}}}, session);
  if (!described.ok()) return Error(400, "ClientException", described.status().message());
  if ((*described)["jobs"].empty()) return Error(404, "NotFound", "no job " + job_id);
  *job = (*described)["jobs"][0];
  return std::nullopt;
}

api::HttpResponse ConsoleService::Progress(const api::HttpRequest& request,
                                           const Session& session) const {
  const std::string job_id = QueryParam(request, "jobId");
  Json job;
  if (std::optional<api::HttpResponse> error = DescribeJob(job_id, session, &job)) return *error;
  int32_t attempts = static_cast<int32_t>(job.value("attempts", Json::array()).size()) + 1;
  Json out = {{"jobId", job_id}, {"attempts", Json::array()}};
  for (int32_t a = 1; a <= attempts; ++a) {
    Result<std::vector<logs::ProgressPoint>> points = history_->Points(job_id, a);
    if (!points.ok()) continue;
    // Columns: one array per key, aligned with `step` (null where absent).
    Json steps = Json::array(), times = Json::array();
    std::map<std::string, Json> columns;
    for (const logs::ProgressPoint& p : *points)
      for (auto it = p.values.begin(); it != p.values.end(); ++it)
        if (it.value().is_number()) columns.emplace(it.key(), Json::array());
    for (const logs::ProgressPoint& p : *points) {
      steps.push_back(p.step);
      times.push_back(p.time_ms);
      for (auto& [key, col] : columns) {
        auto v = p.values.find(key);
        col.push_back(v != p.values.end() && v->is_number() ? *v : Json(nullptr));
      }
    }
    Json series = Json::object();
    for (auto& [key, col] : columns) series[key] = std::move(col);
    out["attempts"].push_back(
        Json{{"attempt", a}, {"step", steps}, {"time", times}, {"series", series}});
  }
  return JsonAnswer(200, out);
}

std::string ConsoleService::JobDigest(const std::string& job_id, const Session& session) const {
  std::string text;
  Result<Json> described = Call("batch", "DescribeJobs", Json{{"jobs", {job_id}}}, session);
  if (!described.ok()) return "error";
  text += Dump(*described);
  if ((*described)["jobs"].empty()) return Sha256Hex(text);
  const Json& job = (*described)["jobs"][0];
  // Node views carry each node's log stream.
  std::set<std::string> streams;
  auto add_stream = [&streams](const Json& j) {
    if (j.contains("container") && j["container"].contains("logStreamName"))
      streams.insert(j["container"]["logStreamName"].get<std::string>());
    for (const Json& a : j.value("attempts", Json::array()))
      if (a.contains("container") && a["container"].contains("logStreamName"))
        streams.insert(a["container"]["logStreamName"].get<std::string>());
  };
  add_stream(job);
  if (job.contains("nodeProperties")) {
    Json ids = Json::array();
    const int n = job["nodeProperties"].value("numNodes", 0);
    for (int i = 0; i < n && i < 100; ++i) ids.push_back(job_id + "#" + std::to_string(i));
    Result<Json> nodes = Call("batch", "DescribeJobs", Json{{"jobs", ids}}, session);
    if (nodes.ok()) {
      text += Dump(*nodes);
      for (const Json& node : (*nodes)["jobs"]) add_stream(node);
    }
  }
  for (const std::string& stream : streams) {
    Result<Json> last = Call("logs", "GetLogEvents",
                             Json{{"logGroupName", kBatchJobGroup},
                                  {"logStreamName", stream},
                                  {"startFromHead", false},
                                  {"limit", 1}},
                             session);
    if (last.ok()) text += last->value("nextForwardToken", "");
  }
  return Sha256Hex(text);
}

api::HttpResponse ConsoleService::Wait(const api::HttpRequest& request,
                                       const Session& session) const {
  const std::string job_id = QueryParam(request, "jobId");
  if (job_id.empty()) return Error(400, "InvalidRequest", "jobId is required");
  const std::string since = QueryParam(request, "v");
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.wait_ms);
  std::string digest = JobDigest(job_id, session);
  while (digest == since && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(options_.wait_poll_ms));
    digest = JobDigest(job_id, session);
  }
  return JsonAnswer(200, Json{{"v", digest}, {"changed", digest != since}});
}

api::HttpResponse ConsoleService::Download(const api::HttpRequest& request,
                                           const Session& session) const {
  const std::string stream = QueryParam(request, "stream");
  if (stream.empty()) return Error(400, "InvalidRequest", "stream is required");
  std::string text;
  std::string token;
  for (int pages = 0; pages < 10'000; ++pages) {
    Json body = {
        {"logGroupName", kBatchJobGroup}, {"logStreamName", stream}, {"startFromHead", true}};
    if (!token.empty()) body["nextToken"] = token;
    Result<Json> page = Call("logs", "GetLogEvents", body, session);
    if (!page.ok()) return Error(400, "ClientException", page.status().message());
    for (const Json& e : page->value("events", Json::array()))
      text += e.value("message", "") + "\n";
    const std::string next = page->value("nextForwardToken", "");
    if (next.empty() || next == token || page->value("events", Json::array()).empty()) break;
    token = next;
  }
  api::HttpResponse r;
  r.status = 200;
  r.headers.emplace_back("Content-Type", "text/plain; charset=utf-8");
  std::string file = stream;
  std::replace(file.begin(), file.end(), '/', '_');
  std::erase_if(file,
                [](char c) { return c == '"' || c == '\\' || static_cast<unsigned char>(c) < 32; });
  r.headers.emplace_back("Content-Disposition", "attachment; filename=\"" + file + ".log\"");
  r.headers.emplace_back("Cache-Control", "no-store");
  r.body = std::move(text);
  return r;
}

namespace {

// The checkpoint base URI a job names: `--checkpoint-uri URI` (or `=URI`) in a
// command, else the environment variable CHECKPOINT_SAVE_URI; "" if none.
std::string CheckpointBase(const Json& job) {
  auto member = [](const Json& j, const char* key) -> const Json* {
    if (!j.is_object()) return nullptr;
    auto it = j.find(key);
    return it == j.end() ? nullptr : &*it;
  };
  std::vector<const Json*> containers;
  if (const Json* c = member(job, "container")) containers.push_back(c);
  if (const Json* np = member(job, "nodeProperties"))
    if (const Json* ranges = member(*np, "nodeRangeProperties"); ranges && ranges->is_array())
      for (const Json& r : *ranges)
        if (const Json* c = member(r, "container")) containers.push_back(c);
  std::string from_env;
  for (const Json* c : containers) {
    const Json* command = member(*c, "command");
    if (command && command->is_array()) {
      for (size_t i = 0; i < command->size(); ++i) {
        if (!(*command)[i].is_string()) continue;
        const std::string arg = (*command)[i].get<std::string>();
        if (arg == "--checkpoint-uri" && i + 1 < command->size() && (*command)[i + 1].is_string())
          return (*command)[i + 1].get<std::string>();
        if (arg.rfind("--checkpoint-uri=", 0) == 0) return arg.substr(17);
      }
    }
    const Json* env = member(*c, "environment");
    if (env && env->is_array())
      for (const Json& e : *env) {
        const Json* name = member(e, "name");
        const Json* value = member(e, "value");
        if (name && value && name->is_string() && value->is_string() &&
            name->get<std::string>() == "CHECKPOINT_SAVE_URI")
          from_env = value->get<std::string>();
      }
  }
  return from_env;
}

}  // namespace

api::HttpResponse ConsoleService::Checkpoints(const api::HttpRequest& request,
                                              const Session& session) const {
  const std::string job_id = QueryParam(request, "jobId");
  Json job;
  if (std::optional<api::HttpResponse> error = DescribeJob(job_id, session, &job)) return *error;
  std::string base = CheckpointBase(job);
  Json out = {{"jobId", job_id}, {"checkpoints", Json::array()}};
  if (base.empty()) return JsonAnswer(200, out);
  while (!base.empty() && base.back() == '/') base.pop_back();
  const std::string parent = job_id.substr(0, job_id.find('#'));
  out["uri"] = base + "/" + parent + "/";
  Result<std::unique_ptr<objstore::ObjectStore>> store = objstore::OpenObjectStore(base);
  if (!store.ok()) {
    out["error"] = store.status().message();
    return JsonAnswer(200, out);
  }
  Result<std::vector<objstore::ObjectInfo>> objects = (*store)->List(parent + "/");
  if (!objects.ok()) {
    out["error"] = objects.status().message();
    return JsonAnswer(200, out);
  }
  struct Folder {
    uint64_t bytes = 0;
    int64_t objects = 0;
    bool manifest = false;
  };
  std::map<int64_t, Folder> steps;
  for (const objstore::ObjectInfo& o : *objects) {
    // "<job>/step_<N>/<file>"
    const std::string rest = o.key.substr(parent.size() + 1);
    const size_t slash = rest.find('/');
    if (rest.rfind("step_", 0) != 0 || slash == std::string::npos || slash == 5) continue;
    const std::string digits = rest.substr(5, slash - 5);
    if (digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 15) continue;
    Folder& f = steps[std::stoll(digits)];
    f.bytes += o.size;
    ++f.objects;
    if (rest.substr(slash + 1) == "manifest.json") f.manifest = true;
  }
  for (const auto& [step, f] : steps)
    out["checkpoints"].push_back(
        Json{{"step", step}, {"complete", f.manifest}, {"bytes", f.bytes}, {"objects", f.objects}});
  return JsonAnswer(200, out);
}

api::HttpResponse ConsoleService::Overview(const Session& session) const {
  static const char* kStatuses[] = {"SUBMITTED", "PENDING",   "RUNNABLE", "STARTING",
                                    "RUNNING",   "SUCCEEDED", "FAILED"};
  Result<Json> queues = Call("batch", "DescribeJobQueues", Json::object(), session);
  Result<Json> envs = Call("batch", "DescribeComputeEnvironments", Json::object(), session);
  if (!queues.ok()) return Error(500, "InternalError", queues.status().message());
  if (!envs.ok()) return Error(500, "InternalError", envs.status().message());
  Json out = {{"jobQueues", Json::array()},
              {"computeEnvironments", (*envs)["computeEnvironments"]},
              {"recentFailures", Json::array()}};
  std::vector<Json> failures;
  const int64_t week_ago = clock_->NowMillis() - 7LL * 24 * 3600 * 1000;
  for (const Json& q : (*queues)["jobQueues"]) {
    const std::string name = q.value("jobQueueName", "");
    Json counts = Json::object();
    for (const char* status : kStatuses) {
      // Counted with one ListJobs page of 1000 ("1000+" beyond): the
      // overview refreshes every few seconds and must stay cheap.
      Result<Json> listed = Call(
          "batch", "ListJobs",
          Json{{"jobQueue", name}, {"jobStatus", status}, {"maxResults", kCountPage}}, session);
      const int64_t count =
          listed.ok() ? static_cast<int64_t>((*listed)["jobSummaryList"].size()) : 0;
      const bool more = listed.ok() && !listed->value("nextToken", "").empty();
      counts[status] = more ? Json(std::to_string(count) + "+") : Json(count);
    }
    Json listed_failures =
        Call("batch", "ListJobs",
             Json{{"jobQueue", name},
                  {"maxResults", 200},
                  {"filters", Json::array({Json{{"name", "AFTER_CREATED_AT"},
                                                {"values", {std::to_string(week_ago)}}}})}},
             session)
            .value_or(Json::object());
    for (const Json& j : listed_failures.value("jobSummaryList", Json::array()))
      if (j.value("status", "") == "FAILED") {
        Json f = j;
        f["jobQueue"] = name;
        failures.push_back(f);
      }
    out["jobQueues"].push_back(Json{{"jobQueueName", name},
                                    {"state", q.value("state", "")},
                                    {"status", q.value("status", "")},
                                    {"priority", q.value("priority", 0)},
                                    {"counts", counts}});
  }
  std::sort(failures.begin(), failures.end(), [](const Json& a, const Json& b) {
    return a.value("stoppedAt", int64_t{0}) > b.value("stoppedAt", int64_t{0});
  });
  for (size_t i = 0; i < failures.size() && i < 20; ++i)
    out["recentFailures"].push_back(failures[i]);
  return JsonAnswer(200, out);
}

}  // namespace lote::console
