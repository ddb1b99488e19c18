// Injected capacity shortage (issue 24): a job whose parameters (first) or
// tags carry `lote:injectCapacityShortageSeconds` = N waits RUNNABLE with the
// reason "CAPACITY: injected capacity shortage (N s)" for N seconds from when
// its attempt became RUNNABLE, then is scheduled as usual. A compute
// environment may carry the key as a tag: a job whose queue's environments
// all carry it (and which has no key of its own, which wins) is held for the
// shortest of theirs, and the reason names the environment. Nothing is held
// unless a job or its environments ask for it.
//
// CapacityHolds keeps the jobs held now and when each hold ends. Pure: no
// clock (the time is passed in), no I/O, no locks; owned by the thread that
// runs the passes. The hold and its end are StatusReason events of the job;
// after a restart RecordedHoldOf reads them back, so a hold goes on from when
// it began (not from the restart) and one that ended is not served again.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "control/control_plane.h"
#include "control/job_model.h"
#include "control/job_state.h"
#include "control/validation.h"

namespace lote::control {

inline constexpr const char* kInjectCapacityShortageKey = "lote:injectCapacityShortageSeconds";
inline constexpr int64_t kMaxInjectedShortageSeconds = 86400;

// One injected shortage: how long, and who asked.
struct InjectedShortage {
  int64_t seconds = 0;
  std::string environment = {};  // the compute environment whose tag asked; empty: the job
  bool operator==(const InjectedShortage&) const = default;
};

// The job's own injected shortage in seconds; nullopt when it asks for none.
std::optional<int64_t> InjectedShortageSeconds(const Job& job);
// The shortage that holds `job`: its own key, else, when every environment
// of its queue (`queue_environments`, in the queue's order) carries the tag,
// the shortest (the first such environment on a tie); else nullopt.
std::optional<InjectedShortage> InjectedShortageOf(
    const Job& job, const std::vector<ComputeEnvironmentSpec>& queue_environments);
// InvalidArgument naming the key when its value is not a whole number 1..86400.
Status ValidateInjectedShortage(const Job& job);
// The same for the tags of a compute environment.
Status ValidateInjectedShortageTag(const TagMap& tags);
// "CAPACITY: injected capacity shortage (N s)" (+ ", from the tags of
// compute environment X" inside the parentheses).
std::string InjectedShortageReason(const InjectedShortage& shortage);
// The reason recorded when the hold ends.
std::string InjectedShortageEndReason(const InjectedShortage& shortage);

// What a job's events (in order) say of `shortage` since its last placement
// (a Scheduled event), i.e. in the RUNNABLE period it is in now: nullopt when
// no hold was recorded, else when the hold began and whether its end was
// recorded.
struct RecordedHold {
  int64_t since_ms = 0;
  bool ended = false;
  bool operator==(const RecordedHold&) const = default;
};
std::optional<RecordedHold> RecordedHoldOf(const std::vector<JobEvent>& events,
                                           const InjectedShortage& shortage);

class CapacityHolds {
 public:
  // Holds `job_id` until since_ms + seconds * 1000 (replacing any hold of it).
  void Hold(const std::string& job_id, const InjectedShortage& shortage, int64_t since_ms);
  // Whether the job is held (its hold not yet taken by TakeEnded).
  bool IsHeld(const std::string& job_id) const { return holds_.count(job_id) > 0; }
  // Drops the job's hold (it left RUNNABLE).
  void Release(const std::string& job_id) { holds_.erase(job_id); }
  // The jobs whose hold ended at or before now_ms, with their shortage; they
  // are no longer held.
  std::vector<std::pair<std::string, InjectedShortage>> TakeEnded(int64_t now_ms);
  size_t size() const { return holds_.size(); }

 private:
  struct Held {
    int64_t until_ms;
    InjectedShortage shortage;
  };
  std::map<std::string, Held> holds_;
};

}  // namespace lote::control
