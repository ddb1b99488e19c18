#include "common/metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace lote::metrics {
namespace {

std::string FormatValue(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (std::isnan(v)) return "NaN";
  if (v == std::floor(v) && std::fabs(v) < 1e15) return std::to_string(static_cast<int64_t>(v));
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

std::string LabelText(const Labels& labels, const std::string& extra_name = "",
                      const std::string& extra_value = "") {
  if (labels.empty() && extra_name.empty()) return "";
  std::string out = "{";
  bool first = true;
  auto add = [&](const std::string& k, const std::string& v) {
    if (!first) out += ',';
    first = false;
    out += k + "=\"" + EscapeLabelValue(v) + "\"";
  };
  for (const auto& [k, v] : labels) add(k, v);
  if (!extra_name.empty()) add(extra_name, extra_value);
  return out + "}";
}

void Header(std::string& out, const std::string& name, const std::string& help, const char* type) {
  std::string escaped;
  for (char c : help) {
    if (c == '\\') {
      escaped += "\\\\";
    } else if (c == '\n') {
      escaped += "\\n";
    } else {
      escaped += c;
    }
  }
  out += "# HELP " + name + " " + escaped + "\n# TYPE " + name + " " + type + "\n";
}

}  // namespace

std::string EscapeLabelValue(const std::string& value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_([&] {
        std::sort(upper_bounds.begin(), upper_bounds.end());
        return upper_bounds;
      }()),
      buckets_(new std::atomic<uint64_t>[bounds_.size() + 1]) {
  for (size_t i = 0; i <= bounds_.size(); ++i) buckets_[i].store(0);
}

void Histogram::Observe(double value) {
  const size_t i = std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
  buckets_[i].fetch_add(1, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
  sum_micros_.fetch_add(static_cast<int64_t>(std::llround(value * 1e6)), std::memory_order_relaxed);
}

std::vector<uint64_t> Histogram::counts() const {
  std::vector<uint64_t> out(bounds_.size() + 1);
  for (size_t i = 0; i < out.size(); ++i) out[i] = buckets_[i].load(std::memory_order_relaxed);
  return out;
}

std::vector<double> LatencyBuckets() {
  return {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10};
}

Registry::Family& Registry::FamilyLocked(const std::string& name, const std::string& help,
                                         Type type) {
  auto [it, inserted] = families_.try_emplace(name);
  if (inserted) {
    it->second.type = type;
    it->second.help = help;
  } else if (it->second.type != type) {
    std::fprintf(stderr, "metrics: %s registered with two types\n", name.c_str());
    std::abort();
  }
  return it->second;
}

Counter* Registry::GetCounter(const std::string& name, const std::string& help,
                              const Labels& labels) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& slot = FamilyLocked(name, help, Type::kCounter).counters[labels];
  if (!slot) slot = std::make_unique<Counter>();
  return slot.get();
}

Gauge* Registry::GetGauge(const std::string& name, const std::string& help, const Labels& labels) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& slot = FamilyLocked(name, help, Type::kGauge).gauges[labels];
  if (!slot) slot = std::make_unique<Gauge>();
  return slot.get();
}

Histogram* Registry::GetHistogram(const std::string& name, const std::string& help,
                                  const std::vector<double>& bounds, const Labels& labels) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& slot = FamilyLocked(name, help, Type::kHistogram).histograms[labels];
  if (!slot) slot = std::make_unique<Histogram>(bounds);
  return slot.get();
}

void Registry::AddCollector(const std::string& name, const std::string& help, Collector collect) {
  std::lock_guard<std::mutex> lock(mu_);
  collectors_[name] = {help, std::move(collect)};
}

std::string Registry::Render() const {
  // Collectors run without the lock: they may take locks of their own.
  std::map<std::string, std::pair<std::string, Collector>> collectors;
  {
    std::lock_guard<std::mutex> lock(mu_);
    collectors = collectors_;
  }
  std::map<std::string, std::string> sections;  // name -> text, rendered in name order
  for (const auto& [name, entry] : collectors) {
    std::string& out = sections[name];
    Header(out, name, entry.first, "gauge");
    for (const auto& [labels, value] : entry.second()) {
      out += name + LabelText(labels) + " " + FormatValue(value) + "\n";
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [name, f] : families_) {
    std::string& out = sections[name];
    switch (f.type) {
      case Type::kCounter:
        Header(out, name, f.help, "counter");
        for (const auto& [labels, c] : f.counters) {
          out += name + LabelText(labels) + " " + std::to_string(c->value()) + "\n";
        }
        break;
      case Type::kGauge:
        Header(out, name, f.help, "gauge");
        for (const auto& [labels, g] : f.gauges) {
          out += name + LabelText(labels) + " " + std::to_string(g->value()) + "\n";
        }
        break;
      case Type::kHistogram:
        Header(out, name, f.help, "histogram");
        for (const auto& [labels, h] : f.histograms) {
          const std::vector<uint64_t> counts = h->counts();
          uint64_t cumulative = 0;
          for (size_t i = 0; i < counts.size(); ++i) {
            cumulative += counts[i];
            const std::string le = i < h->bounds().size() ? FormatValue(h->bounds()[i]) : "+Inf";
            out += name + "_bucket" + LabelText(labels, "le", le) + " " +
                   std::to_string(cumulative) + "\n";
          }
          out += name + "_sum" + LabelText(labels) + " " + FormatValue(h->sum()) + "\n";
          out += name + "_count" + LabelText(labels) + " " + std::to_string(cumulative) + "\n";
        }
        break;
    }
  }
  std::string text;
  for (const auto& [name, section] : sections) text += section;
  return text;
}

}  // namespace lote::metrics
