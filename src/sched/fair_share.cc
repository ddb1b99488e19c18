#include "sched/fair_share.h"

#include <cmath>

namespace lote::sched {

double WeightFactor(const FairSharePolicy& policy, std::string_view share_identifier) {
  double prefix_weight = 1.0;
  size_t best_prefix = 0;
  bool have_prefix = false;
  for (const ShareWeight& w : policy.share_distribution) {
    std::string_view id = w.share_identifier;
    if (!id.empty() && id.back() == '*') {
      std::string_view prefix = id.substr(0, id.size() - 1);
      if (share_identifier.substr(0, prefix.size()) == prefix &&
          (!have_prefix || prefix.size() > best_prefix)) {
        have_prefix = true;
        best_prefix = prefix.size();
        prefix_weight = w.weight_factor;
      }
    } else if (id == share_identifier) {
      return w.weight_factor;
    }
  }
  return prefix_weight;
}

namespace {
double DecayFactor(int64_t share_decay_seconds, int64_t elapsed_ms) {
  if (share_decay_seconds <= 0) return 0.0;
  if (elapsed_ms <= 0) return 1.0;
  return std::exp2(-static_cast<double>(elapsed_ms) /
                   (1000.0 * static_cast<double>(share_decay_seconds)));
}
}  // namespace

double DecayedHistory(const ShareUsage& usage, int64_t share_decay_seconds, int64_t now_ms) {
  return usage.history_vcpu_seconds *
         DecayFactor(share_decay_seconds, now_ms - usage.history_as_of_ms);
}

double AccumulatedHistory(const ShareUsage& usage, int64_t share_decay_seconds, int64_t now_ms) {
  if (share_decay_seconds <= 0) return 0.0;
  int64_t elapsed_ms = now_ms - usage.history_as_of_ms;
  if (elapsed_ms <= 0) return usage.history_vcpu_seconds;
  double d = DecayFactor(share_decay_seconds, elapsed_ms);
  // Integral over [0, t] of R * 2^(-(t-s)/H) ds = R * H / ln 2 * (1 - 2^(-t/H)).
  double running_vcpus = static_cast<double>(usage.running_milli_vcpu) / 1000.0;
  double gained =
      running_vcpus * static_cast<double>(share_decay_seconds) / std::log(2.0) * (1.0 - d);
  return usage.history_vcpu_seconds * d + gained;
}

double UsageVcpus(const ShareUsage& usage, int64_t extra_milli_vcpu, int64_t share_decay_seconds,
                  int64_t now_ms) {
  double current = static_cast<double>(usage.running_milli_vcpu + extra_milli_vcpu) / 1000.0;
  if (share_decay_seconds <= 0) return current;
  // A share running R vCPUs forever accumulates R * H / ln 2 vCPU-seconds: scale back to R.
  double rate = DecayedHistory(usage, share_decay_seconds, now_ms) * std::log(2.0) /
                static_cast<double>(share_decay_seconds);
  return current + rate;
}

double ReservedFraction(int32_t compute_reservation, int32_t active_shares) {
  if (compute_reservation <= 0 || active_shares <= 0) return 0.0;
  return std::pow(static_cast<double>(compute_reservation) / 100.0, active_shares);
}

}  // namespace lote::sched
