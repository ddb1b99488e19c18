#include "common/json.h"

#include "common/files.h"

namespace lote {

Result<Json> ParseJson(std::string_view text) {
  try {
    return Json::parse(text.begin(), text.end());
  } catch (const Json::parse_error& e) {
    return Status::InvalidArgument(std::string("invalid JSON: ") + e.what());
  }
}

Result<Json> ReadJsonFile(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  auto json = ParseJson(text);
  if (!json.ok()) return json.status().WithContext(path);
  return json;
}

}  // namespace lote
