// Injected capacity shortage (issue 24): a job whose parameters (first) or
// tags carry `lote:injectCapacityShortageSeconds` = N waits RUNNABLE with the
// reason "CAPACITY: injected capacity shortage (N s)" for N seconds from when
// its attempt became RUNNABLE, then is scheduled as usual. Nothing is held
// unless a job asks for it.
//
// CapacityHolds keeps the jobs held now and when each hold ends. Pure: no
// clock (the time is passed in), no I/O, no locks; owned by the thread that
// runs the passes. The hold lives in memory: after a restart a job still
// RUNNABLE is held again for N s from the restart.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "control/job_model.h"

namespace lote::control {

inline constexpr const char* kInjectCapacityShortageKey = "lote:injectCapacityShortageSeconds";
inline constexpr int64_t kMaxInjectedShortageSeconds = 86400;

// The job's injected shortage in seconds; nullopt when it asks for none.
std::optional<int64_t> InjectedShortageSeconds(const Job& job);
// InvalidArgument naming the key when its value is not a whole number 1..86400.
Status ValidateInjectedShortage(const Job& job);
// "CAPACITY: injected capacity shortage (N s)"
std::string InjectedShortageReason(int64_t seconds);
// The reason recorded when the hold ends.
std::string InjectedShortageEndReason(int64_t seconds);

class CapacityHolds {
 public:
  // Holds `job_id` until now_ms + seconds * 1000 (replacing any hold of it).
  void Hold(const std::string& job_id, int64_t seconds, int64_t now_ms);
  // Whether the job is held (its hold not yet taken by TakeEnded).
  bool IsHeld(const std::string& job_id) const { return holds_.count(job_id) > 0; }
  // Drops the job's hold (it left RUNNABLE).
  void Release(const std::string& job_id) { holds_.erase(job_id); }
  // The jobs whose hold ended at or before now_ms, with their seconds; they
  // are no longer held.
  std::vector<std::pair<std::string, int64_t>> TakeEnded(int64_t now_ms);
  size_t size() const { return holds_.size(); }

 private:
  struct Held {
    int64_t until_ms;
    int64_t seconds;
  };
  std::map<std::string, Held> holds_;
};

}  // namespace lote::control
