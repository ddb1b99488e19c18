#include "server/server_config.h"

#include <cctype>
#include <set>
#include <sstream>

namespace lote::server {

namespace {

std::string Trim(const std::string& s) {
  const size_t begin = s.find_first_not_of(" \t\r");
  if (begin == std::string::npos) return "";
  const size_t end = s.find_last_not_of(" \t\r");
  return s.substr(begin, end - begin + 1);
}

bool ValidKey(const std::string& key) {
  if (key.empty() || !std::islower(static_cast<unsigned char>(key[0]))) return false;
  for (char c : key) {
    if (!(std::islower(static_cast<unsigned char>(c)) ||
          std::isdigit(static_cast<unsigned char>(c)) || c == '-'))
      return false;
  }
  return true;
}

}  // namespace

Result<std::vector<ConfigEntry>> ParseServerConfig(const std::string& text,
                                                   const std::string& path) {
  std::vector<ConfigEntry> entries;
  std::set<std::string> seen;
  std::istringstream in(text);
  std::string raw;
  for (int number = 1; std::getline(in, raw); ++number) {
    const std::string line = Trim(raw);
    if (line.empty() || line[0] == '#') continue;
    const std::string where = path + ":" + std::to_string(number) + ": ";
    const size_t eq = line.find('=');
    if (eq == std::string::npos)
      return Status::InvalidArgument(where + "expected `key = value`, got '" + line + "'");
    ConfigEntry entry{number, Trim(line.substr(0, eq)), Trim(line.substr(eq + 1))};
    if (!ValidKey(entry.key))
      return Status::InvalidArgument(where + "'" + entry.key +
                                     "' is not a key: use an option name without its --, "
                                     "e.g. listen");
    if (entry.value.size() >= 2 && entry.value.front() == '"' && entry.value.back() == '"')
      entry.value = entry.value.substr(1, entry.value.size() - 2);
    if (!seen.insert(entry.key).second)
      return Status::InvalidArgument(where + "'" + entry.key + "' is set twice");
    entries.push_back(std::move(entry));
  }
  return entries;
}

}  // namespace lote::server
