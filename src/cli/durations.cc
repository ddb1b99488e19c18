#include "cli/durations.h"

#include <charconv>
#include <cstdio>
#include <ctime>

namespace lote::cli {

Result<int64_t> ParseDuration(std::string_view text) {
  auto bad = [&] {
    return Status::InvalidArgument("invalid duration '" + std::string(text) +
                                   "': use a whole number and a unit, s, m, h or d "
                                   "(e.g. 30s, 10m, 2h, 1d)");
  };
  if (text.size() < 2) return bad();
  int64_t unit_ms = 0;
  switch (text.back()) {
    case 's':
      unit_ms = 1000;
      break;
    case 'm':
      unit_ms = 60 * 1000;
      break;
    case 'h':
      unit_ms = 3600 * 1000;
      break;
    case 'd':
      unit_ms = 24 * 3600 * 1000;
      break;
    default:
      return bad();
  }
  std::string_view digits = text.substr(0, text.size() - 1);
  int64_t n = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
  if (ec != std::errc() || end != digits.data() + digits.size() || n <= 0) return bad();
  // About 100 years is plenty and keeps the product far from overflow.
  if (n > 36500LL * 24 * 3600 * 1000 / unit_ms) {
    return Status::InvalidArgument("duration '" + std::string(text) +
                                   "' is too long: at most 36500d");
  }
  return n * unit_ms;
}

std::string FormatDuration(int64_t seconds) {
  if (seconds < 0) seconds = 0;
  char buf[48];
  if (seconds < 60) {
    std::snprintf(buf, sizeof buf, "%llds", static_cast<long long>(seconds));
  } else if (seconds < 3600) {
    std::snprintf(buf, sizeof buf, "%lldm%02llds", static_cast<long long>(seconds / 60),
                  static_cast<long long>(seconds % 60));
  } else if (seconds < 86400) {
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", static_cast<long long>(seconds / 3600),
                  static_cast<long long>(seconds % 3600 / 60));
  } else {
    std::snprintf(buf, sizeof buf, "%lldd%02lldh", static_cast<long long>(seconds / 86400),
                  static_cast<long long>(seconds % 86400 / 3600));
  }
  return buf;
}

}  // namespace lote::cli
