#include "iam/unix_users.h"

#include <algorithm>

namespace lote::iam {

std::vector<std::string> JobDefinitionUsers(const Json& definition) {
  std::vector<std::string> users;
  auto user_of = [](const Json& container) {
    auto it = container.find("user");
    return it != container.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  if (auto c = definition.find("containerProperties"); c != definition.end() && c->is_object())
    users.push_back(user_of(*c));
  if (auto n = definition.find("nodeProperties"); n != definition.end() && n->is_object()) {
    for (const Json& range : n->value("nodeRangeProperties", Json::array())) {
      if (auto c = range.find("container"); c != range.end() && c->is_object())
        users.push_back(user_of(*c));
    }
  }
  if (users.empty()) users.push_back("");
  return users;
}

std::optional<std::string> CheckJobUsers(const User& user,
                                         const std::vector<std::string>& job_users,
                                         const std::string& server_user,
                                         const std::string& definition) {
  const auto& allowed = user.unix_users;
  if (std::find(allowed.begin(), allowed.end(), "*") != allowed.end()) return std::nullopt;
  for (const std::string& wanted : job_users) {
    const std::string unix_user = wanted.empty() ? server_user : wanted;
    if (std::find(allowed.begin(), allowed.end(), unix_user) != allowed.end()) continue;
    std::string list;
    for (const std::string& a : allowed) list += (list.empty() ? "" : ", ") + a;
    return "User: " + user.arn + " is not allowed to run jobs as the Unix user '" + unix_user +
           "' (" +
           (wanted.empty()
                ? "the server's own user: job definition " + definition + " names no user"
                : "the user of job definition " + definition) +
           "); its Unix users are: " + (list.empty() ? std::string("none") : list) +
           " (lote users set-unix-users)";
  }
  return std::nullopt;
}

}  // namespace lote::iam
