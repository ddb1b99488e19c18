// Checks every request passes before its handler runs, so that no handler
// sees a value it could crash on or silently mangle. Each failure is an
// InvalidArgument naming the member by its path in the request
// ("containerOverrides.environment[2].value").
// Thread safety: pure functions.
#pragma once

#include <set>
#include <string>
#include <string_view>

#include "common/json.h"
#include "common/status.h"

namespace lote::api {

// Nesting of objects and arrays in JSON text deeper than max_depth (checked
// on the text, before parsing: a parser recursing 100,000 levels is the crash
// this prevents).
Status CheckJsonDepth(std::string_view text, int max_depth);

// Well-formed UTF-8 (no overlong forms, surrogates or code points above U+10FFFF).
bool IsValidUtf8(std::string_view text);

struct ValueRules {
  // Members whose strings (or whose arrays' strings) must be ASCII: names,
  // ARNs, ids. Matched by the member's own key.
  std::set<std::string, std::less<>> ascii_only;
  // Members (by key) whose strings may hold U+0000; everywhere else it is refused.
  std::set<std::string, std::less<>> nul_allowed;
};

// Numbers: not finite, or an integer beyond int64, or a fraction beyond
// ±2^53 (no integer member could hold it) → refused. Strings: U+0000 outside
// nul_allowed, non-ASCII in ascii_only → refused. Keys are checked like strings.
Status CheckRequestValues(const Json& request, const ValueRules& rules);

// The rules of each service: every AWS Batch name, ARN and id is ASCII and no
// Batch string may hold U+0000; CloudWatch Logs group names are ASCII and
// only event messages may hold U+0000.
const ValueRules& BatchValueRules();
const ValueRules& LogsValueRules();

}  // namespace lote::api
