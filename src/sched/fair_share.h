// Fair-share arithmetic (AWS Batch scheduling-policy semantics), as pure functions.
#pragma once

#include <cstdint>
#include <string_view>

#include "sched/snapshot.h"

namespace lote::sched {

// The weightFactor of `share_identifier`: an exact entry, else the longest
// matching prefix entry ("abc*", "*"), else 1.0.
double WeightFactor(const FairSharePolicy& policy, std::string_view share_identifier);

// `usage.history_vcpu_seconds` decayed to now_ms: halved every
// share_decay_seconds; 0 when share_decay_seconds is 0 (only current usage counts).
double DecayedHistory(const ShareUsage& usage, int64_t share_decay_seconds, int64_t now_ms);

// History to keep after now_ms: the decayed history plus the decayed integral
// of running_milli_vcpu over [history_as_of_ms, now_ms] (vCPU-seconds).
double AccumulatedHistory(const ShareUsage& usage, int64_t share_decay_seconds, int64_t now_ms);

// A share's recent usage in vCPUs: current vCPUs plus the decayed history
// expressed as an average rate over the decay window.
double UsageVcpus(const ShareUsage& usage, int64_t extra_milli_vcpu, int64_t share_decay_seconds,
                  int64_t now_ms);

// computeReservation: the fraction (computeReservation/100)^active_shares of
// the queue's maximum vCPUs that active shares may not use.
double ReservedFraction(int32_t compute_reservation, int32_t active_shares);

}  // namespace lote::sched
