#include "common/clock.h"

#include <chrono>
#include <ctime>

namespace lote {

int64_t SystemClock::NowMillis() const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

int64_t SystemClock::MonotonicNanos() const {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

SystemClock* SystemClock::Default() {
  static SystemClock clock;
  return &clock;
}

std::string FormatUtc(int64_t unix_millis, const char* strftime_format) {
  const int64_t seconds = unix_millis >= 0 ? unix_millis / 1000 : -((-unix_millis + 999) / 1000);
  std::time_t t = static_cast<std::time_t>(seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof(buf), strftime_format, &tm);
  return buf;
}

std::string Iso8601Utc(int64_t unix_millis) { return FormatUtc(unix_millis, "%Y-%m-%dT%H:%M:%SZ"); }

}  // namespace lote
