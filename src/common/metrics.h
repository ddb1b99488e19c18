// Metrics: counters, gauges and histograms, rendered in the Prometheus text
// exposition format (version 0.0.4) for the server's /metrics endpoint.
//
// A family is a metric name with help text and a type; its series are told
// apart by label values. Families and series are created on first use and
// live as long as the registry (a series is never removed), so the pointers
// handed out stay valid and updating them costs one atomic operation, never a
// lock or an allocation: hot paths keep the pointer.
//
// Thread safety: everything may be called from any thread. Registration and
// Render take the registry's mutex; Add/Set/Observe are lock-free.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace lote::metrics {

using Labels = std::vector<std::pair<std::string, std::string>>;  // name, value

class Counter {
 public:
  void Add(uint64_t n = 1) { value_.fetch_add(n, std::memory_order_relaxed); }
  uint64_t value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> value_{0};
};

class Gauge {
 public:
  void Set(int64_t v) { value_.store(v, std::memory_order_relaxed); }
  void Add(int64_t n) { value_.fetch_add(n, std::memory_order_relaxed); }
  int64_t value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<int64_t> value_{0};
};

// Cumulative buckets by upper bound (seconds or any unit the name says), as
// Prometheus histograms are; the sum is kept in micro-units.
class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void Observe(double value);
  const std::vector<double>& bounds() const { return bounds_; }
  // Per bucket (non-cumulative) counts; the last is +Inf.
  std::vector<uint64_t> counts() const;
  uint64_t count() const { return count_.load(std::memory_order_relaxed); }
  double sum() const {
    return static_cast<double>(sum_micros_.load(std::memory_order_relaxed)) / 1e6;
  }

 private:
  const std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> buckets_;  // bounds_.size() + 1
  std::atomic<uint64_t> count_{0};
  std::atomic<int64_t> sum_micros_{0};
};

// Bucket bounds for latencies in seconds: 0.5 ms .. 10 s.
std::vector<double> LatencyBuckets();

class Registry {
 public:
  // The series of a family with these label values (created on first use).
  // A name used with another type or label names is a programmer error.
  Counter* GetCounter(const std::string& name, const std::string& help, const Labels& labels = {});
  Gauge* GetGauge(const std::string& name, const std::string& help, const Labels& labels = {});
  Histogram* GetHistogram(const std::string& name, const std::string& help,
                          const std::vector<double>& bounds, const Labels& labels = {});

  // Gauges whose values are computed when scraped (jobs per queue and status):
  // `collect` is called by Render with no registry lock held and returns the
  // series of one gauge family.
  using Collector = std::function<std::vector<std::pair<Labels, double>>()>;
  void AddCollector(const std::string& name, const std::string& help, Collector collect);

  // Every family in name order, in the text format.
  std::string Render() const;

 private:
  enum class Type { kCounter, kGauge, kHistogram };
  struct Family {
    Type type;
    std::string help;
    std::map<Labels, std::unique_ptr<Counter>> counters;
    std::map<Labels, std::unique_ptr<Gauge>> gauges;
    std::map<Labels, std::unique_ptr<Histogram>> histograms;
  };
  Family& FamilyLocked(const std::string& name, const std::string& help, Type type);

  mutable std::mutex mu_;
  std::map<std::string, Family> families_;                               // protected by mu_
  std::map<std::string, std::pair<std::string, Collector>> collectors_;  // protected by mu_
};

// Escapes a label value for the text format (backslash, quote, newline).
std::string EscapeLabelValue(const std::string& value);

}  // namespace lote::metrics
