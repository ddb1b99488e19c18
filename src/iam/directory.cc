#include "iam/directory.h"

#include <algorithm>

#include "common/crypto.h"
#include "common/ids.h"

namespace lote::iam {

namespace {

bool NameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         std::string_view("+=,.@_-").find(c) != std::string_view::npos;
}

Status ValidatePolicyName(const std::string& name) {
  if (name.empty() || name.size() > 128 || !std::all_of(name.begin(), name.end(), NameChar)) {
    return Status::InvalidArgument("PolicyName '" + name +
                                   "' must be 1-128 characters of [A-Za-z0-9+=,.@_-]");
  }
  return Status::Ok();
}

Status ValidateUnixUser(const std::string& name) {
  const bool ok = !name.empty() && name.size() <= 32 && name[0] != '-' &&
                  std::all_of(name.begin(), name.end(), [](char c) {
                    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                           (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.';
                  });
  if (!ok) {
    return Status::InvalidArgument("UnixUsers: '" + name +
                                   "' is not a Unix user name (1-32 of [A-Za-z0-9_.-])");
  }
  return Status::Ok();
}

bool IsAdministrator(const User& user) {
  Request everything{"iam:DeleteUser", "*", {}};
  return Evaluate(everything, user.policies).allowed();
}

}  // namespace

Result<Policy> ParsePolicyDocument(const std::string& policy_name, const std::string& document) {
  RETURN_IF_ERROR(ValidatePolicyName(policy_name));
  if (document.size() > Directory::kMaxPolicyBytes) {
    return Status::InvalidArgument("PolicyDocument: " + std::to_string(document.size()) +
                                   " bytes; the limit is " +
                                   std::to_string(Directory::kMaxPolicyBytes));
  }
  Result<Policy> parsed = Policy::Parse(policy_name, document);
  if (!parsed.ok()) return Status::InvalidArgument("PolicyDocument: " + parsed.status().message());
  return parsed;
}

Status ValidateUserName(const std::string& name) {
  if (name.empty() || name.size() > 64 || !std::all_of(name.begin(), name.end(), NameChar)) {
    return Status::InvalidArgument("UserName '" + name +
                                   "' must be 1-64 characters of [A-Za-z0-9+=,.@_-]");
  }
  return Status::Ok();
}

Result<std::unique_ptr<Directory>> Directory::Open(store::Store* store, const Clock* clock,
                                                   DirectoryOptions options) {
  if (options.secret_key.size() != 32)
    return Status::InvalidArgument("the IAM directory needs the server's 32-byte secret key");
  std::unique_ptr<Directory> d(new Directory(store, clock, std::move(options)));
  RETURN_IF_ERROR(d->Load());
  return d;
}

Status Directory::Load() {
  ASSIGN_OR_RETURN(store::IamSnapshot snap, store_->LoadIam());
  std::lock_guard<std::mutex> lock(mu_);
  for (const store::IamUserRow& row : snap.users) {
    Result<User> user = FromDocument(row.doc);
    if (!user.ok()) return user.status().WithContext("loading IAM user " + row.name);
    auto shared = std::make_shared<const User>(std::move(*user));
    for (const AccessKey& key : shared->keys) keys_[key.id] = KeyOwner{key.secret, shared};
    users_[shared->name] = std::move(shared);
  }
  return Status::Ok();
}

std::string Directory::UserArn(const std::string& name) const {
  return "arn:aws:iam::" + options_.account_id + ":user/" + name;
}

Result<std::string> Directory::ToDocument(const User& user) const {
  Json keys = Json::array();
  for (const AccessKey& key : user.keys) {
    ASSIGN_OR_RETURN(std::string sealed, SealAes256Gcm(options_.secret_key, key.secret));
    keys.push_back(
        {{"AccessKeyId", key.id}, {"SealedSecret", sealed}, {"CreateDate", key.created_ms}});
  }
  Json policies = Json::object();
  for (const auto& [name, doc] : user.policy_documents) policies[name] = doc;
  Json doc = {{"UserName", user.name},         {"UserId", user.user_id},
              {"CreateDate", user.created_ms}, {"Policies", policies},
              {"UnixUsers", user.unix_users},  {"AccessKeys", keys}};
  return doc.dump();
}

Result<User> Directory::FromDocument(const std::string& text) const {
  ASSIGN_OR_RETURN(Json doc, ParseJson(text));
  User user;
  user.name = doc.value("UserName", "");
  user.arn = UserArn(user.name);
  user.user_id = doc.value("UserId", "");
  user.created_ms = doc.value("CreateDate", int64_t{0});
  const Json policies = doc.value("Policies", Json::object());
  for (const auto& [name, policy] : policies.items()) {
    ASSIGN_OR_RETURN(Policy parsed, Policy::Parse(name, policy.get<std::string>()));
    user.policy_documents[name] = policy.get<std::string>();
    user.policies.push_back(std::move(parsed));
  }
  user.unix_users = doc.value("UnixUsers", std::vector<std::string>{});
  const Json keys = doc.value("AccessKeys", Json::array());
  for (const Json& key : keys) {
    ASSIGN_OR_RETURN(std::string secret,
                     OpenAes256Gcm(options_.secret_key, key.value("SealedSecret", "")));
    user.keys.push_back(AccessKey{key.value("AccessKeyId", ""), std::move(secret),
                                  key.value("CreateDate", int64_t{0})});
  }
  return user;
}

Status Directory::Commit(User user, bool deleted) {
  store::WriteBatch batch;
  if (deleted) {
    batch.DeleteIamUser(user.name);
  } else {
    ASSIGN_OR_RETURN(std::string doc, ToDocument(user));
    batch.PutIamUser(store::IamUserRow{user.name, std::move(doc), clock_->NowMillis()});
  }
  RETURN_IF_ERROR(store_->Write(std::move(batch)));
  std::lock_guard<std::mutex> lock(mu_);
  if (auto old = users_.find(user.name); old != users_.end()) {
    for (const AccessKey& key : old->second->keys) keys_.erase(key.id);
    users_.erase(old);
  }
  if (deleted) return Status::Ok();
  auto shared = std::make_shared<const User>(std::move(user));
  for (const AccessKey& key : shared->keys) keys_[key.id] = KeyOwner{key.secret, shared};
  users_[shared->name] = std::move(shared);
  return Status::Ok();
}

Status Directory::Change(const std::string& name, const std::function<Status(User&)>& change) {
  std::lock_guard<std::mutex> write(write_mu_);
  std::shared_ptr<const User> current = FindUser(name);
  if (!current) return Status::NotFound("The user with name " + name + " cannot be found.");
  User user = *current;
  RETURN_IF_ERROR(change(user));
  return Commit(std::move(user));
}

AccessKey Directory::NewKey() const {
  return AccessKey{"AKIA" + RandomUpperAlnum(16), RandomSecret(40), clock_->NowMillis()};
}

Status Directory::Bootstrap(const std::string& name, const std::string& key_id,
                            const std::string& secret) {
  std::lock_guard<std::mutex> write(write_mu_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!users_.empty()) return Status::Ok();
  }
  RETURN_IF_ERROR(ValidateUserName(name));
  User user;
  user.name = name;
  user.arn = UserArn(name);
  user.user_id = "AIDA" + RandomUpperAlnum(17);
  user.created_ms = clock_->NowMillis();
  ASSIGN_OR_RETURN(Policy admin, Policy::Parse(kAdministratorPolicyName, kAdministratorPolicy));
  user.policy_documents[kAdministratorPolicyName] = kAdministratorPolicy;
  user.policies.push_back(std::move(admin));
  user.unix_users = {"*"};
  user.keys.push_back(AccessKey{key_id, secret, user.created_ms});
  return Commit(std::move(user));
}

std::optional<KeyOwner> Directory::FindKey(const std::string& key_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = keys_.find(key_id);
  if (it == keys_.end()) return std::nullopt;
  return it->second;
}

std::shared_ptr<const User> Directory::FindUser(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = users_.find(name);
  return it == users_.end() ? nullptr : it->second;
}

std::vector<std::shared_ptr<const User>> Directory::Users() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::shared_ptr<const User>> out;
  for (const auto& [_, user] : users_) out.push_back(user);
  return out;
}

Result<std::shared_ptr<const User>> Directory::CreateUser(const std::string& name) {
  RETURN_IF_ERROR(ValidateUserName(name));
  std::lock_guard<std::mutex> write(write_mu_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (users_.count(name))
      return Status::AlreadyExists("User with name " + name + " already exists.");
    if (users_.size() >= kMaxUsers)
      return Status::ResourceExhausted("this server holds at most " + std::to_string(kMaxUsers) +
                                       " users");
  }
  User user;
  user.name = name;
  user.arn = UserArn(name);
  user.user_id = "AIDA" + RandomUpperAlnum(17);
  user.created_ms = clock_->NowMillis();
  RETURN_IF_ERROR(Commit(std::move(user)));
  return FindUser(name);
}

Status Directory::DeleteUser(const std::string& name) {
  std::lock_guard<std::mutex> write(write_mu_);
  std::shared_ptr<const User> user = FindUser(name);
  if (!user) return Status::NotFound("The user with name " + name + " cannot be found.");
  if (IsAdministrator(*user)) {
    const auto users = Users();
    const bool another = std::any_of(users.begin(), users.end(), [&](const auto& u) {
      return u->name != name && IsAdministrator(*u) && !u->keys.empty();
    });
    if (!another) {
      return Status::FailedPrecondition("user " + name +
                                        " is the last administrator with an access key; create "
                                        "another one before deleting it");
    }
  }
  return Commit(*user, /*deleted=*/true);
}

Status Directory::PutUserPolicy(const std::string& user, const std::string& policy_name,
                                const std::string& document) {
  ASSIGN_OR_RETURN(Policy parsed, ParsePolicyDocument(policy_name, document));
  return Change(user, [&](User& u) {
    u.policy_documents[policy_name] = document;
    u.policies.erase(std::remove_if(u.policies.begin(), u.policies.end(),
                                    [&](const Policy& p) { return p.name == policy_name; }),
                     u.policies.end());
    u.policies.push_back(parsed);
    return Status::Ok();
  });
}

Status Directory::DeleteUserPolicy(const std::string& user, const std::string& policy_name) {
  return Change(user, [&](User& u) {
    if (!u.policy_documents.erase(policy_name)) {
      return Status::NotFound("The user policy with name " + policy_name + " cannot be found.");
    }
    u.policies.erase(std::remove_if(u.policies.begin(), u.policies.end(),
                                    [&](const Policy& p) { return p.name == policy_name; }),
                     u.policies.end());
    return Status::Ok();
  });
}

Status Directory::SetUnixUsers(const std::string& user, std::vector<std::string> unix_users) {
  for (const std::string& name : unix_users)
    if (name != "*") RETURN_IF_ERROR(ValidateUnixUser(name));
  return Change(user, [&](User& u) {
    u.unix_users = unix_users;
    return Status::Ok();
  });
}

Result<AccessKey> Directory::CreateAccessKey(const std::string& user) {
  AccessKey key = NewKey();
  RETURN_IF_ERROR(Change(user, [&](User& u) {
    if (u.keys.size() >= kMaxKeysPerUser) {
      return Status::ResourceExhausted("Cannot exceed quota for AccessKeysPerUser: " +
                                       std::to_string(kMaxKeysPerUser));
    }
    u.keys.push_back(key);
    return Status::Ok();
  }));
  return key;
}

Status Directory::DeleteAccessKey(const std::string& user, const std::string& key_id) {
  return Change(user, [&](User& u) {
    auto it = std::find_if(u.keys.begin(), u.keys.end(),
                           [&](const AccessKey& k) { return k.id == key_id; });
    if (it == u.keys.end()) {
      return Status::NotFound("The Access Key with id " + key_id + " cannot be found.");
    }
    u.keys.erase(it);
    return Status::Ok();
  });
}

Result<AccessKey> Directory::RotateAccessKey(const std::string& user, const std::string& key_id) {
  AccessKey key = NewKey();
  RETURN_IF_ERROR(Change(user, [&](User& u) {
    auto it = std::find_if(u.keys.begin(), u.keys.end(),
                           [&](const AccessKey& k) { return k.id == key_id; });
    if (it == u.keys.end()) {
      return Status::NotFound("The Access Key with id " + key_id + " cannot be found.");
    }
    *it = key;
    return Status::Ok();
  }));
  return key;
}

}  // namespace lote::iam
