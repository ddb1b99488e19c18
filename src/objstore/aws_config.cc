#include "objstore/aws_config.h"

#include <cstdlib>

#include "common/files.h"

namespace lote::objstore {
namespace {

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

std::optional<std::string> NonEmpty(const EnvLookup& env, const std::string& name) {
  auto v = env(name);
  if (v && !v->empty()) return v;
  return std::nullopt;
}

std::map<std::string, std::map<std::string, std::string>> ReadIniFile(const std::string& path) {
  auto text = ReadFile(path);
  if (!text.ok()) return {};
  return ParseIni(*text);
}

}  // namespace

EnvLookup ProcessEnv() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (!v) return std::nullopt;
    return std::string(v);
  };
}

std::map<std::string, std::map<std::string, std::string>> ParseIni(const std::string& text) {
  std::map<std::string, std::map<std::string, std::string>> out;
  std::string section;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    std::string line = Trim(text.substr(pos, nl - pos));
    pos = nl + 1;
    if (line.empty() || line[0] == '#' || line[0] == ';') continue;
    if (line.front() == '[' && line.back() == ']') {
      section = Trim(line.substr(1, line.size() - 2));
      continue;
    }
    size_t eq = line.find('=');
    if (eq == std::string::npos) continue;
    out[section][Trim(line.substr(0, eq))] = Trim(line.substr(eq + 1));
  }
  return out;
}

Result<S3Config> ResolveS3Config(const EnvLookup& env) {
  S3Config cfg;
  std::string home = env("HOME").value_or(HomeDir());
  std::string profile = NonEmpty(env, "AWS_PROFILE")
                            .value_or(NonEmpty(env, "AWS_DEFAULT_PROFILE").value_or("default"));
  std::string creds_path =
      NonEmpty(env, "AWS_SHARED_CREDENTIALS_FILE").value_or(home + "/.aws/credentials");
  std::string config_path = NonEmpty(env, "AWS_CONFIG_FILE").value_or(home + "/.aws/config");
  auto creds_file = ReadIniFile(creds_path);
  auto config_file = ReadIniFile(config_path);
  const std::string config_section = profile == "default" ? "default" : "profile " + profile;
  auto from_config = [&](const std::string& key) -> std::optional<std::string> {
    auto s = config_file.find(config_section);
    if (s == config_file.end()) return std::nullopt;
    auto k = s->second.find(key);
    if (k == s->second.end() || k->second.empty()) return std::nullopt;
    return k->second;
  };

  cfg.region = NonEmpty(env, "AWS_REGION")
                   .value_or(NonEmpty(env, "AWS_DEFAULT_REGION")
                                 .value_or(from_config("region").value_or("us-east-1")));
  if (auto e = NonEmpty(env, "AWS_ENDPOINT_URL_S3")) {
    cfg.endpoint = *e;
  } else if (auto e2 = NonEmpty(env, "AWS_ENDPOINT_URL")) {
    cfg.endpoint = *e2;
  } else if (auto e3 = from_config("endpoint_url")) {
    cfg.endpoint = *e3;
  } else {
    cfg.endpoint = "https://s3." + cfg.region + ".amazonaws.com";
  }
  while (!cfg.endpoint.empty() && cfg.endpoint.back() == '/') cfg.endpoint.pop_back();
  if (cfg.endpoint.rfind("http://", 0) != 0 && cfg.endpoint.rfind("https://", 0) != 0) {
    return Status::InvalidArgument(
        "S3 endpoint '" + cfg.endpoint +
        "' must start with http:// or https:// (check AWS_ENDPOINT_URL_S3)");
  }

  auto id = NonEmpty(env, "AWS_ACCESS_KEY_ID");
  auto secret = NonEmpty(env, "AWS_SECRET_ACCESS_KEY");
  if (id && secret) {
    cfg.credentials = {*id, *secret, NonEmpty(env, "AWS_SESSION_TOKEN").value_or("")};
    return cfg;
  }
  for (const auto* file : {&creds_file, &config_file}) {
    const std::string section = file == &creds_file ? profile : config_section;
    auto s = file->find(section);
    if (s == file->end()) continue;
    auto k = s->second.find("aws_access_key_id");
    auto v = s->second.find("aws_secret_access_key");
    if (k == s->second.end() || v == s->second.end()) continue;
    cfg.credentials.access_key_id = k->second;
    cfg.credentials.secret_access_key = v->second;
    auto t = s->second.find("aws_session_token");
    if (t != s->second.end()) cfg.credentials.session_token = t->second;
    return cfg;
  }
  return Status::Unauthenticated(
      "no S3 credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or put profile '" +
      profile + "' in " + creds_path + " (AWS_SHARED_CREDENTIALS_FILE / AWS_PROFILE)");
}

}  // namespace lote::objstore
