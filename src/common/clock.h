// Clock: the one source of time. Inject it; tests use FakeClock.
// Thread safety: implementations are safe for concurrent use.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

namespace lote {

class Clock {
 public:
  virtual ~Clock() = default;
  // Wall-clock milliseconds since the Unix epoch (what AWS timestamps use).
  virtual int64_t NowMillis() const = 0;
  // Monotonic nanoseconds, for durations only.
  virtual int64_t MonotonicNanos() const = 0;
};

class SystemClock final : public Clock {
 public:
  int64_t NowMillis() const override;
  int64_t MonotonicNanos() const override;
  static SystemClock* Default();
};

class FakeClock final : public Clock {
 public:
  explicit FakeClock(int64_t now_millis = 1'700'000'000'000) : now_ms_(now_millis) {}
  int64_t NowMillis() const override { return now_ms_.load(); }
  int64_t MonotonicNanos() const override { return now_ms_.load() * 1'000'000; }
  void AdvanceMillis(int64_t ms) { now_ms_ += ms; }
  void SetMillis(int64_t ms) { now_ms_ = ms; }

 private:
  std::atomic<int64_t> now_ms_;
};

// Unix milliseconds as UTC in a strftime format, whole seconds (rounded down,
// also before 1970).
std::string FormatUtc(int64_t unix_millis, const char* strftime_format);
// "2026-12-01T12:35:03Z": ISO 8601 UTC, whole seconds.
std::string Iso8601Utc(int64_t unix_millis);

}  // namespace lote
