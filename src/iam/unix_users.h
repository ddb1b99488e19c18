// iam::CheckJobUsers: which Unix users a principal's jobs may run as. A job
// runs as its job definition's `user` (containerProperties.user, each node
// range's container.user), or, without one, as the server's own user. A
// principal may use a user listed in its UnixUsers, or any when the list
// holds "*" (the first start's administrator). So root is allowed only to
// principals granted "root" or "*"; and, when the server runs as root, so is
// a definition without `user`.
// Thread safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/json.h"
#include "iam/directory.h"

namespace lote::iam {

// The users a job definition (AWS JobDefinition shape) runs its nodes as; ""
// for a container without `user`.
std::vector<std::string> JobDefinitionUsers(const Json& definition);

// nullopt when `user` may run jobs as each of `job_users` ("" is
// `server_user`); else the refusal message.
std::optional<std::string> CheckJobUsers(const User& user,
                                         const std::vector<std::string>& job_users,
                                         const std::string& server_user,
                                         const std::string& definition);

}  // namespace lote::iam
