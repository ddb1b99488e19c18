// The router's authorization hook (docs/api.md, "Principals and policies"):
// asked before an operation's handler runs, told what came of it after.
// Implemented by IamAccessControl; the router holds none when the server runs
// with --insecure-no-auth.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "common/json.h"
#include "iam/directory.h"

namespace lote::api {

struct ApiCall {
  std::string service;        // the SigV4 signing service: "batch", "logs", "ec2", ...
  std::string operation;      // "SubmitJob", a Query Action
  std::string access_key_id;  // the key that signed it (a console session's key)
  std::string request_id;
};

class AccessControl {
 public:
  virtual ~AccessControl() = default;
  // nullopt: the call may go on. Else AWS's refusal message, which the router
  // answers with its protocol's access-denied error (HTTP 403); the handler
  // does not run. Must be thread safe.
  virtual std::optional<std::string> Authorize(const ApiCall& call, const Json& request) const = 0;
  // After the handler ran: its response, or null and the error code answered.
  virtual void Completed(const ApiCall& call, const Json& request, const Json* response,
                         const std::string& error_code) const = 0;
};

// The user whose call this thread's handler is running: set by the
// AccessControl when it allows a call, reset by the router when the handler
// returns. Null outside a handler and when the router has no AccessControl
// (--insecure-no-auth). Handlers that answer per principal (SubmitJob's
// owner, DescribeJobs' filter) read it.
const iam::User* CurrentCaller();
void SetCurrentCaller(std::shared_ptr<const iam::User> user);

}  // namespace lote::api
