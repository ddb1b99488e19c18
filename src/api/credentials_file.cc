#include "api/credentials_file.h"

#include <sys/stat.h>

#include "common/crypto.h"
#include "common/files.h"
#include "common/ids.h"

namespace lote::api {

namespace {

std::string Trim(const std::string& s) {
  size_t a = s.find_first_not_of(" \t\r");
  if (a == std::string::npos) return "";
  size_t b = s.find_last_not_of(" \t\r");
  return s.substr(a, b - a + 1);
}

}  // namespace

Result<sigv4::Credentials> ReadCredentialsProfile(const std::string& path,
                                                  const std::string& profile) {
  if (!FileExists(path)) return Status::NotFound("credentials file " + path + " does not exist");
  ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  sigv4::Credentials creds;
  bool in_profile = false, found = false;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    std::string line =
        Trim(text.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos));
    pos = nl == std::string::npos ? text.size() : nl + 1;
    if (line.empty() || line[0] == '#' || line[0] == ';') continue;
    if (line.front() == '[' && line.back() == ']') {
      std::string name = Trim(line.substr(1, line.size() - 2));
      if (name.rfind("profile ", 0) == 0) name = Trim(name.substr(8));
      in_profile = name == profile;
      found = found || in_profile;
      continue;
    }
    if (!in_profile) continue;
    size_t eq = line.find('=');
    if (eq == std::string::npos) continue;
    std::string key = Trim(line.substr(0, eq)), value = Trim(line.substr(eq + 1));
    if (key == "aws_access_key_id") creds.access_key_id = value;
    if (key == "aws_secret_access_key") creds.secret_access_key = value;
    if (key == "aws_session_token") creds.session_token = value;
  }
  if (!found) return Status::NotFound("profile [" + profile + "] is not in " + path);
  if (creds.access_key_id.empty() || creds.secret_access_key.empty()) {
    return Status::InvalidArgument("profile [" + profile + "] in " + path +
                                   " lacks aws_access_key_id or aws_secret_access_key");
  }
  return creds;
}

Result<sigv4::Credentials> EnsureCredentialsFile(const std::string& path,
                                                 const std::string& profile) {
  if (FileExists(path)) {
    Result<sigv4::Credentials> existing = ReadCredentialsProfile(path, profile);
    if (!existing.ok()) {
      return Status::FailedPrecondition(existing.status().message() +
                                        "; fix or remove the file so lote can create its key pair");
    }
    return existing;
  }
  sigv4::Credentials creds;
  creds.access_key_id = "LOTE" + RandomUpperAlnum(16);
  creds.secret_access_key = RandomSecret(40);
  std::string text = "# lote server credentials (AWS shared credentials format).\n[" + profile +
                     "]\naws_access_key_id = " + creds.access_key_id +
                     "\naws_secret_access_key = " + creds.secret_access_key + "\n";
  RETURN_IF_ERROR(WriteFileAtomic(path, text, 0600));
  chmod(path.c_str(), 0600);
  return creds;
}

Result<std::string> EnsureSecretKeyFile(const std::string& path) {
  if (FileExists(path)) {
    ASSIGN_OR_RETURN(std::string text, ReadFile(path));
    std::string key;
    if (!Base64Decode(Trim(text), &key) || key.size() != 32)
      return Status::DataLoss("the secret key file " + path +
                              " is damaged (expected 32 bytes, base64); SecureString parameters "
                              "sealed with it cannot be read");
    return key;
  }
  const std::string key = RandomBytes(32);
  RETURN_IF_ERROR(WriteFileAtomic(path, Base64Encode(key) + "\n", 0600));
  chmod(path.c_str(), 0600);
  return key;
}

}  // namespace lote::api
