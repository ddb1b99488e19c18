// JSON (nlohmann) and helpers that never throw across a component boundary.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "common/status.h"

namespace lote {

using Json = nlohmann::json;
using OrderedJson = nlohmann::ordered_json;

// Parses text; InvalidArgument with position and reason on failure.
Result<Json> ParseJson(std::string_view text);
// Reads and parses a file.
Result<Json> ReadJsonFile(const std::string& path);

}  // namespace lote
