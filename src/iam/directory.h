// iam::Directory: the server's principals (IAM users), their inline policies,
// the Unix users their jobs may run as, and their access keys, durable in the
// store (schema version 3, table iam_users).
//
// Secret access keys are kept sealed (AES-256-GCM under the server's key,
// $LOTE_HOME/secrets.key) in the store and in plain text only in memory,
// since SigV4 verification needs the secret itself. A change is visible to
// FindKey/FindUser as soon as the call that made it returns (after its commit):
// a deleted or rotated key stops authenticating at once.
//
// Errors: NotFound (no such user/key/policy), AlreadyExists, InvalidArgument
// (a name or policy document; the message names the member),
// ResourceExhausted (two keys per user, as IAM), FailedPrecondition (the last
// user holding administrator access cannot be deleted).
//
// Thread safety: every method may be called concurrently; readers see whole
// users (copy on write), writers are serialized.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/json.h"
#include "common/status.h"
#include "iam/policy.h"
#include "store/store.h"

namespace lote::iam {

struct AccessKey {
  std::string id;
  std::string secret;  // plain text: memory only
  int64_t created_ms = 0;
};

struct User {
  std::string name;
  std::string arn;      // arn:aws:iam::ACCOUNT:user/NAME
  std::string user_id;  // "AIDA..."
  int64_t created_ms = 0;
  std::map<std::string, std::string> policy_documents;  // policy name → document text
  std::vector<Policy> policies;                         // the same, parsed
  std::vector<std::string> unix_users;                  // jobs may run as these
  std::vector<AccessKey> keys;
};

struct KeyOwner {
  std::string secret;
  std::shared_ptr<const User> user;
};

struct DirectoryOptions {
  std::string account_id = "000000000000";
  std::string secret_key;  // 32 bytes: seals secret access keys
};

// The policy the first user gets: every action on every resource.
inline constexpr const char* kAdministratorPolicyName = "AdministratorAccess";
inline constexpr const char* kAdministratorPolicy =
    R"({"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"*","Resource":"*"}]})";

class Directory {
 public:
  static Result<std::unique_ptr<Directory>> Open(store::Store* store, const Clock* clock,
                                                 DirectoryOptions options);

  // When there are no users yet (the first start): creates `name` with
  // AdministratorAccess and the given key pair. Otherwise nothing.
  Status Bootstrap(const std::string& name, const std::string& key_id, const std::string& secret);

  std::optional<KeyOwner> FindKey(const std::string& key_id) const;
  std::shared_ptr<const User> FindUser(const std::string& name) const;
  std::vector<std::shared_ptr<const User>> Users() const;  // by name
  std::string UserArn(const std::string& name) const;

  Result<std::shared_ptr<const User>> CreateUser(const std::string& name);
  Status DeleteUser(const std::string& name);
  Status PutUserPolicy(const std::string& user, const std::string& policy_name,
                       const std::string& document);
  Status DeleteUserPolicy(const std::string& user, const std::string& policy_name);
  // Replaces the user's allowed Unix users (names of accounts on the nodes).
  Status SetUnixUsers(const std::string& user, std::vector<std::string> unix_users);
  Result<AccessKey> CreateAccessKey(const std::string& user);
  Status DeleteAccessKey(const std::string& user, const std::string& key_id);
  // A new key in place of `key_id`, in one commit: the old one stops working.
  Result<AccessKey> RotateAccessKey(const std::string& user, const std::string& key_id);

  static constexpr size_t kMaxKeysPerUser = 2;
  static constexpr size_t kMaxPolicyBytes = 10240;
  static constexpr size_t kMaxUsers = 5000;

 private:
  Directory(store::Store* store, const Clock* clock, DirectoryOptions options)
      : store_(store), clock_(clock), options_(std::move(options)) {}
  Status Load();
  // Applies `change` to a copy of user `name` (NotFound when there is none)
  // and commits it, serialized with every other change.
  Status Change(const std::string& name, const std::function<Status(User&)>& change);
  // Seals and writes `user` (or deletes it when `deleted`), then publishes it.
  // Called with write_mu_ held.
  Status Commit(User user, bool deleted = false);
  Result<User> FromDocument(const std::string& text) const;
  Result<std::string> ToDocument(const User& user) const;
  AccessKey NewKey() const;

  store::Store* store_;
  const Clock* clock_;
  const DirectoryOptions options_;

  std::mutex write_mu_;  // held by every change from read to publish
  mutable std::mutex mu_;
  // Protected by mu_:
  std::map<std::string, std::shared_ptr<const User>> users_;
  std::map<std::string, KeyOwner> keys_;  // access key id → owner
};

// A policy document as PutUserPolicy takes it: at most kMaxPolicyBytes, and
// parse errors prefixed "PolicyDocument: ".
Result<Policy> ParsePolicyDocument(const std::string& policy_name, const std::string& document);

// A user name as IAM allows it: 1-64 of [A-Za-z0-9+=,.@_-].
Status ValidateUserName(const std::string& name);

}  // namespace lote::iam
