// `lote users`, `lote keys` and `lote audit`: lote's own user API
// (docs/api.md, "Users, keys and audit") from the command line. Each prints
// the server's JSON answer (keys: once, with their secret) or a table.
// Exit codes: 0 on success, 1 when the server refused or failed the call.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>

#include "api/iam_api.h"
#include "cli/api_client.h"
#include "cli/durations.h"
#include "lote/registry.h"

namespace lote::cli {
namespace {

struct Common {
  std::string endpoint;
};

void AddEndpoint(CLI::App* sub, Common* common) {
  sub->add_option("--endpoint", common->endpoint,
                  "Server URL; default $LOTE_ENDPOINT, $AWS_ENDPOINT_URL_BATCH or "
                  "http://127.0.0.1:7480");
}

// Calls `operation` of the user API; prints the error and sets exit code 1 on
// failure.
Result<Json> Call(const char* command, const Common& common, const std::string& operation,
                  const Json& body) {
  ClientOptions options;
  options.endpoint = common.endpoint;
  Result<std::unique_ptr<ApiClient>> client = ApiClient::Create(options);
  Result<Json> answer =
      client.ok()
          ? (*client)->JsonTarget("iam", std::string(api::kIamTargetPrefix) + "." + operation, body)
          : Result<Json>(client.status());
  if (!answer.ok()) {
    std::fprintf(stderr, "lote %s: %s\n", command, answer.status().message().c_str());
    lote::SetExitCode(1);
  }
  return answer;
}

void Print(const Result<Json>& answer) {
  if (answer.ok()) std::printf("%s\n", answer->dump(2).c_str());
}

Result<std::string> ReadPolicyFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::NotFound("cannot read the policy file " + path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Registers `lote users <name>` whose body builds the request (or fails).
void UserCommand(CLI::App* users, const char* name, const char* help, const std::string& operation,
                 std::function<void(CLI::App*)> options, std::function<Result<Json>()> body) {
  auto common = std::make_shared<Common>();
  CLI::App* sub = users->add_subcommand(name, help);
  AddEndpoint(sub, common.get());
  options(sub);
  sub->callback([common, operation, body, name] {
    Result<Json> request = body();
    if (!request.ok()) {
      std::fprintf(stderr, "lote users %s: %s\n", name, request.status().message().c_str());
      lote::SetExitCode(1);
      return;
    }
    Print(Call("users", *common, operation, *request));
  });
}

void RegisterUsers(CLI::App& app) {
  CLI::App* users = app.add_subcommand("users",
                                       "Principals: create, list, show, delete users and "
                                       "their policies and Unix users");
  users->require_subcommand(1);
  struct Args {
    std::string user, policy_file, policy_name = "inline";
    std::vector<std::string> unix_users;
  };
  auto a = std::make_shared<Args>();
  auto with_user = [a](CLI::App* sub) {
    sub->add_option("user", a->user, "User name")->required();
  };
  auto with_policy = [a](CLI::App* sub) {
    sub->add_option("--policy-file", a->policy_file, "IAM policy document (JSON file)");
    sub->add_option("--policy-name", a->policy_name, "Name of the inline policy (default inline)");
  };
  UserCommand(
      users, "create", "Create a user (optionally with a policy and Unix users)", "CreateUser",
      [=](CLI::App* sub) {
        with_user(sub);
        with_policy(sub);
        sub->add_option("--unix-user", a->unix_users, "A Unix user its jobs may run as (repeat)");
      },
      [a]() -> Result<Json> {
        Json body = {{"UserName", a->user}, {"PolicyName", a->policy_name}};
        if (!a->policy_file.empty()) {
          ASSIGN_OR_RETURN(body["PolicyDocument"], ReadPolicyFile(a->policy_file));
        }
        if (!a->unix_users.empty()) body["UnixUsers"] = a->unix_users;
        return body;
      });
  UserCommand(
      users, "list", "List users", "ListUsers", [](CLI::App*) {},
      []() -> Result<Json> { return Json::object(); });
  UserCommand(users, "show", "A user's policies, Unix users and access key ids", "GetUser",
              with_user, [a]() -> Result<Json> {
                return Json{{"UserName", a->user}};
              });
  UserCommand(users, "delete", "Delete a user and its keys", "DeleteUser", with_user,
              [a]() -> Result<Json> {
                return Json{{"UserName", a->user}};
              });
  UserCommand(
      users, "attach-policy", "Add or replace a user's inline policy", "PutUserPolicy",
      [=](CLI::App* sub) {
        with_user(sub);
        with_policy(sub);
        sub->get_option("--policy-file")->required();
      },
      [a]() -> Result<Json> {
        ASSIGN_OR_RETURN(std::string doc, ReadPolicyFile(a->policy_file));
        return Json{{"UserName", a->user}, {"PolicyName", a->policy_name}, {"PolicyDocument", doc}};
      });
  UserCommand(
      users, "detach-policy", "Remove a user's inline policy", "DeleteUserPolicy",
      [=](CLI::App* sub) {
        with_user(sub);
        sub->add_option("--policy-name", a->policy_name, "Name of the inline policy")->required();
      },
      [a]() -> Result<Json> {
        return Json{{"UserName", a->user}, {"PolicyName", a->policy_name}};
      });
  UserCommand(
      users, "set-unix-users", "The Unix users a user's jobs may run as", "SetUnixUsers",
      [=](CLI::App* sub) {
        with_user(sub);
        sub->add_option("unix_users", a->unix_users, "Unix user names ('*': any)");
      },
      [a]() -> Result<Json> {
        return Json{{"UserName", a->user}, {"UnixUsers", a->unix_users}};
      });
}

void RegisterKeys(CLI::App& app) {
  CLI::App* keys = app.add_subcommand("keys", "Access keys: create, rotate, delete");
  keys->require_subcommand(1);
  struct Args {
    std::string user, key;
  };
  auto a = std::make_shared<Args>();
  struct Spec {
    const char* name;
    const char* help;
    const char* operation;
    bool key;
  };
  for (const Spec& spec :
       {Spec{"create", "A new access key for a user (its secret is printed once)",
             "CreateAccessKey", false},
        Spec{"rotate", "Replace a key by a new one; the old stops working at once",
             "RotateAccessKey", true},
        Spec{"delete", "Delete a key; it stops working at once", "DeleteAccessKey", true}}) {
    auto common = std::make_shared<Common>();
    CLI::App* sub = keys->add_subcommand(spec.name, spec.help);
    AddEndpoint(sub, common.get());
    sub->add_option("user", a->user, "User name")->required();
    if (spec.key) sub->add_option("access_key_id", a->key, "Access key id")->required();
    const std::string operation = spec.operation;
    const bool with_key = spec.key;
    sub->callback([a, common, operation, with_key] {
      Json body = {{"UserName", a->user}};
      if (with_key) body["AccessKeyId"] = a->key;
      Print(Call("keys", *common, operation, body));
    });
  }
}

void RegisterAudit(CLI::App& app) {
  auto common = std::make_shared<Common>();
  struct Args {
    std::string principal, since;
    bool json = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(
      "audit", "The audit trail: every mutation and every refused call, oldest first");
  AddEndpoint(sub, common.get());
  sub->add_option("--principal", a->principal, "Only this user's calls");
  sub->add_option("--since", a->since, "Only calls in this last duration (30s, 10m, 2h, 1d)");
  sub->add_flag("--json", a->json, "Print the events as JSON");
  sub->callback([a, common] {
    Json body = Json::object();
    if (!a->principal.empty()) body["Username"] = a->principal;
    if (!a->since.empty()) {
      Result<int64_t> ms = ParseDuration(a->since);
      if (!ms.ok()) {
        std::fprintf(stderr, "lote audit: --since: %s\n", ms.status().message().c_str());
        lote::SetExitCode(1);
        return;
      }
      const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count();
      body["StartTime"] = static_cast<double>(now - *ms) / 1000.0;
    }
    Json events = Json::array();
    for (;;) {
      Result<Json> page = Call("audit", *common, "LookupEvents", body);
      if (!page.ok()) return;
      for (const Json& e : (*page)["Events"]) events.push_back(e);
      if (!page->contains("NextToken")) break;
      body["NextToken"] = (*page)["NextToken"];
    }
    if (a->json) {
      std::printf("%s\n", events.dump(2).c_str());
      return;
    }
    std::printf("%-24s %-16s %-28s %-14s %s\n", "TIME (UTC)", "PRINCIPAL", "OPERATION", "RESULT",
                "RESOURCE");
    for (const Json& e : events) {
      const auto t = static_cast<time_t>(e["EventTime"].get<double>());
      char when[32];
      std::strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
      std::printf("%-24s %-16s %-28s %-14s %s\n", when, e.value("Username", "").c_str(),
                  e.value("EventName", "").c_str(), e.value("Result", "").c_str(),
                  e.value("Resources", "").c_str());
    }
  });
}

lote::CommandRegistrar iam_commands([](CLI::App& app) {
  RegisterUsers(app);
  RegisterKeys(app);
  RegisterAudit(app);
});

}  // namespace
}  // namespace lote::cli
