#include "common/recipe_config.h"

#include <unistd.h>

#include <cctype>
#include <climits>
#include <cstdlib>
#include <filesystem>
#include <functional>

#include "common/files.h"

namespace lote {
namespace {

bool IsNameChar(char c, bool first) {
  return c == '_' || std::isupper(static_cast<unsigned char>(c)) ||
         std::islower(static_cast<unsigned char>(c)) ||
         (!first && std::isdigit(static_cast<unsigned char>(c)));
}

bool ValidName(const std::string& s) {
  if (s.empty()) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    if (!IsNameChar(s[i], i == 0)) return false;
  }
  return true;
}

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

std::string Where(const std::string& name, int line) {
  return name + ":" + std::to_string(line) + ": ";
}

// Expands ${NAME} and ${NAME:-default} in `text` (a config value; `bare`
// also expands $NAME, as the shell sourcing config.txt would).
Result<std::string> Expand(const std::string& text, bool bare,
                           const std::function<std::optional<std::string>(const std::string&)>& get,
                           const std::string& where) {
  std::string out;
  for (size_t i = 0; i < text.size();) {
    if (text[i] != '$' || i + 1 >= text.size()) {
      out += text[i++];
      continue;
    }
    if (text[i + 1] == '{') {
      size_t close = std::string::npos;
      int depth = 0;
      for (size_t k = i + 2; k < text.size(); ++k) {
        if (text[k] == '{' && text[k - 1] == '$') ++depth;
        if (text[k] == '}') {
          if (depth == 0) {
            close = k;
            break;
          }
          --depth;
        }
      }
      if (close == std::string::npos) {
        return Status::InvalidArgument(where + "unclosed ${ in '" + text + "'");
      }
      std::string inner = text.substr(i + 2, close - i - 2);
      std::string name = inner;
      std::optional<std::string> fallback;
      if (size_t d = inner.find(":-"); d != std::string::npos) {
        name = inner.substr(0, d);
        fallback = inner.substr(d + 2);
      }
      if (!ValidName(name)) {
        return Status::InvalidArgument(where + "'${" + inner + "}' is not a variable name");
      }
      std::optional<std::string> value = get(name);
      if ((!value || value->empty()) && fallback) {
        ASSIGN_OR_RETURN(std::string f, Expand(*fallback, bare, get, where));
        value = f;
      }
      if (!value) {
        return Status::InvalidArgument(
            where + "${" + name +
            "} is not defined: set it in config.txt (NAME=value) or in the environment");
      }
      out += *value;
      i = close + 1;
      continue;
    }
    if (bare && IsNameChar(text[i + 1], true)) {
      size_t k = i + 1;
      while (k < text.size() && IsNameChar(text[k], k == i + 1)) ++k;
      std::string name = text.substr(i + 1, k - i - 1);
      std::optional<std::string> value = get(name);
      if (!value) {
        return Status::InvalidArgument(
            where + "$" + name +
            " is not defined: set it in config.txt (NAME=value) or in the environment");
      }
      out += *value;
      i = k;
      continue;
    }
    out += text[i++];
  }
  return out;
}

std::optional<std::string> Builtin(const std::string& name, const std::string& dir) {
  if (name == "CONFIG_DIR") return dir;
  if (name == "LOTE_BIN") return SelfBinary();
  if (name == "LOTE_BIN_DIR") return std::filesystem::path(SelfBinary()).parent_path().string();
  return std::nullopt;
}

std::optional<std::string> Environment(const std::string& name) {
  const char* v = std::getenv(name.c_str());
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

}  // namespace

std::string SelfBinary() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return "lote";
  return std::string(buf, static_cast<size_t>(n));
}

Result<RecipeConfig> RecipeConfig::Load(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    return Status::NotFound("no " + path);
  }
  ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  return Parse(text, path);
}

Result<RecipeConfig> RecipeConfig::Parse(const std::string& text, const std::string& path) {
  RecipeConfig c;
  c.path_ = path;
  std::error_code ec;
  std::filesystem::path abs = std::filesystem::absolute(path, ec);
  c.dir_ = abs.parent_path().lexically_normal().string();
  while (c.dir_.size() > 1 && c.dir_.back() == '/') c.dir_.pop_back();
  auto get = [&c](const std::string& name) -> std::optional<std::string> {
    if (auto it = c.values_.find(name); it != c.values_.end()) return it->second;
    if (auto b = Builtin(name, c.dir_)) return b;
    return Environment(name);
  };
  int line_no = 0;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t nl = text.find('\n', pos);
    std::string line = text.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
    pos = nl == std::string::npos ? text.size() + 1 : nl + 1;
    ++line_no;
    line = Trim(line);
    if (line.empty() || line[0] == '#') continue;
    if (line.rfind("export ", 0) == 0) line = Trim(line.substr(7));
    size_t eq = line.find('=');
    const std::string where = Where(path, line_no);
    if (eq == std::string::npos) {
      return Status::InvalidArgument(where + "expected KEY=VALUE, got '" + line + "'");
    }
    std::string key = line.substr(0, eq);
    std::string raw = line.substr(eq + 1);
    if (!ValidName(key)) {
      return Status::InvalidArgument(where + "'" + key +
                                     "' is not a variable name (letters, digits, _)");
    }
    // A trailing comment after an unquoted value, as in the shell.
    std::string value;
    if (!raw.empty() && (raw[0] == '"' || raw[0] == '\'')) {
      size_t close = raw.find(raw[0], 1);
      if (close == std::string::npos) {
        return Status::InvalidArgument(where + "unclosed quote in the value of " + key);
      }
      value = raw.substr(1, close - 1);
      if (raw[0] == '\'') {  // single quotes: literal, as in the shell
        c.entries_.emplace_back(key, value);
        c.values_[key] = value;
        continue;
      }
    } else {
      size_t hash = raw.find(" #");
      value = Trim(hash == std::string::npos ? raw : raw.substr(0, hash));
    }
    ASSIGN_OR_RETURN(std::string expanded, Expand(value, true, get, where));
    c.entries_.emplace_back(key, expanded);
    c.values_[key] = expanded;
  }
  return c;
}

std::optional<std::string> RecipeConfig::Get(const std::string& key) const {
  auto it = values_.find(key);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

std::string RecipeConfig::GetOr(const std::string& key, const std::string& fallback) const {
  std::optional<std::string> v = Get(key);
  return v && !v->empty() ? *v : fallback;
}

Result<std::string> RecipeConfig::Require(const std::string& key) const {
  std::optional<std::string> v = Get(key);
  if (!v || v->empty()) {
    return Status::InvalidArgument(path_ + " does not set " + key + " (add a line " + key +
                                   "=...)");
  }
  return *v;
}

Result<int64_t> RecipeConfig::RequireInt(const std::string& key) const {
  ASSIGN_OR_RETURN(std::string v, Require(key));
  bool digits = !v.empty() && v.size() <= 12;
  for (char ch : v) digits = digits && std::isdigit(static_cast<unsigned char>(ch));
  if (!digits || std::stoll(v) <= 0) {
    return Status::InvalidArgument(path_ + ": " + key + "=" + v + " must be a positive integer");
  }
  return std::stoll(v);
}

Result<bool> RecipeConfig::GetBool(const std::string& key, bool fallback) const {
  std::optional<std::string> v = Get(key);
  if (!v || v->empty()) return fallback;
  std::string s;
  for (char ch : *v) s += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (s == "true" || s == "yes" || s == "1") return true;
  if (s == "false" || s == "no" || s == "0") return false;
  return Status::InvalidArgument(path_ + ": " + key + "=" + *v + " must be true or false");
}

std::string RecipeConfig::ResolvePath(const std::string& value) const {
  if (value.empty() || value[0] == '/' || value.find("://") != std::string::npos) return value;
  return (std::filesystem::path(dir_) / value).lexically_normal().string();
}

std::optional<std::string> RecipeConfig::Lookup(const std::string& name) const {
  if (auto v = Get(name)) return v;
  if (auto b = Builtin(name, dir_)) return b;
  return Environment(name);
}

Result<RecipeConfig> LoadRecipeConfig(const std::string& flag) {
  const std::string path = flag.empty() ? std::string(kConfigFileName) : flag;
  Result<RecipeConfig> c = RecipeConfig::Load(path);
  if (c.ok() || !c.status().IsNotFound()) return c;
  if (!flag.empty()) return Status::NotFound("no config file " + flag);
  return Status::NotFound(
      "no config.txt in this folder: run the workflow commands in an example folder (cd "
      "examples/llama2) or pass --config-file PATH");
}

Result<std::string> RenderTemplate(const std::string& text, const std::string& name,
                                   const RecipeConfig& config) {
  std::string out;
  size_t pos = 0;
  int line_no = 0;
  auto get = [&config](const std::string& n) { return config.Lookup(n); };
  while (pos <= text.size()) {
    size_t nl = text.find('\n', pos);
    const bool last = nl == std::string::npos;
    std::string line = text.substr(pos, last ? std::string::npos : nl - pos);
    pos = last ? text.size() + 1 : nl + 1;
    ++line_no;
    ASSIGN_OR_RETURN(std::string rendered, Expand(line, false, get, Where(name, line_no)));
    out += rendered;
    if (!last) out += '\n';
  }
  return out;
}

}  // namespace lote
