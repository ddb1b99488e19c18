// Durations and times as the client subcommands read and print them.
//
// Pure functions, no clock: callers pass "now" in.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace lote::cli {

// "30s", "10m", "2h", "1d" (a positive integer and one unit) → milliseconds.
// InvalidArgument naming the accepted forms otherwise.
Result<int64_t> ParseDuration(std::string_view text);

// A short human duration: "45s", "3m20s", "1h05m", "2d03h"; negative → "0s".
std::string FormatDuration(int64_t seconds);

}  // namespace lote::cli
