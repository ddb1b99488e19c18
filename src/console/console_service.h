// ConsoleService: the web console's HTTP handler (served on its own port by
// the server's wiring): the page and its assets under /console/, and a JSON
// API under /console/api/ for the page.
//
// Contract:
// - Nothing but the page, its scripts and styles is served without a session
//   (401 otherwise). Sessions come from POST /console/api/signin (access key
//   id + secret, or a one-time token) or GET /console/signin?token=..., and
//   travel in an HttpOnly, SameSite=Strict cookie with an expiry. Every POST
//   under /console/api/ other than sign-in needs the session's CSRF token in
//   X-CSRF-Token (403 otherwise) and Content-Type application/json.
// - Jobs, queues, environments and logs are read and changed only through
//   the server's own API operations (ApiRouter::HandleAuthenticated, with the
//   session's principal): the same validation, errors and answers as the
//   AWS API. Only a fixed list of operations is reachable.
// - Environment values in DescribeJobs / DescribeJobDefinitions answers are
//   masked, unless the request says "reveal": true; each reveal is logged
//   with the principal and the job ids.
// - GET /console/api/checkpoints: the job's checkpoints (`step_<N>/` folders
//   under the --checkpoint-uri of its command, or CHECKPOINT_SAVE_URI), listed
//   in the object store; complete when the folder has its manifest.json.
// - GET /console/api/progress: the job's progress history (every attempt);
//   GET /console/api/wait: long poll, answers when the job's state, progress
//   or log streams change, or after `wait_ms`.
// Thread safety: Handle is safe from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "api/http_types.h"
#include "api/router.h"
#include "common/clock.h"
#include "common/json.h"
#include "console/sessions.h"
#include "logs/progress_history.h"

namespace lote::console {

struct ConsoleOptions {
  int64_t wait_ms = 20'000;    // longest long poll
  int64_t wait_poll_ms = 250;  // how often a long poll looks for a change
  bool secure_cookie = false;  // add "Secure" (when served over TLS by a proxy)
};

class ConsoleService : public api::HttpHandler {
 public:
  // `router`, `sessions` and `history` must outlive the service.
  ConsoleService(const api::ApiRouter* router, SessionManager* sessions,
                 const logs::ProgressHistory* history, const Clock* clock,
                 ConsoleOptions options = {});

  api::HttpResponse Handle(const api::HttpRequest& request) const override;
  api::HttpResponse TransportError(const api::HttpRequest& request, int http_status,
                                   const Status& status) const override;
  api::HttpResponse InternalError(const api::HttpRequest& request,
                                  const std::string& what) const override;

  // Replaces every environment value in a DescribeJobs / DescribeJobDefinitions
  // answer with a mask (names stay). Returns how many were masked.
  static int MaskEnvironment(Json& answer);
  static constexpr const char* kMask = "••••••";

 private:
  api::HttpResponse Api(const api::HttpRequest& request, const std::string& path) const;
  api::HttpResponse SignIn(const api::HttpRequest& request) const;
  api::HttpResponse SignInLink(const api::HttpRequest& request) const;
  api::HttpResponse Operation(const api::HttpRequest& request, const Session& session,
                              const std::string& service, const std::string& op) const;
  api::HttpResponse Progress(const api::HttpRequest& request, const Session& session) const;
  api::HttpResponse Wait(const api::HttpRequest& request, const Session& session) const;
  api::HttpResponse Download(const api::HttpRequest& request, const Session& session) const;
  api::HttpResponse Overview(const Session& session) const;
  api::HttpResponse Checkpoints(const api::HttpRequest& request, const Session& session) const;

  // Calls a Batch ("/v1/<op>") or Logs (X-Amz-Target) operation in-process.
  api::HttpResponse CallRaw(const std::string& service, const std::string& op, const Json& body,
                            const Session& session) const;
  Result<Json> Call(const std::string& service, const std::string& op, const Json& body,
                    const Session& session) const;
  // The job (DescribeJobs) into *job, or the answer for a missing id or job.
  std::optional<api::HttpResponse> DescribeJob(const std::string& job_id, const Session& session,
                                               Json* job) const;
  // A digest of what the job's pages show (state, progress, log positions).
  std::string JobDigest(const std::string& job_id, const Session& session) const;
  std::string SessionCookie(const Session& session) const;

  const api::ApiRouter* router_;
  SessionManager* sessions_;
  const logs::ProgressHistory* history_;
  const Clock* clock_;
  const ConsoleOptions options_;
};

}  // namespace lote::console
