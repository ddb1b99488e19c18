#include "control/capacity_hold.h"

#include <cctype>

namespace lote::control {
namespace {

// A whole number 1..kMaxInjectedShortageSeconds, else nullopt.
std::optional<int64_t> ParseSeconds(const std::string& text) {
  if (text.empty() || text.size() > 6) return std::nullopt;
  int64_t n = 0;
  for (char c : text) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
    n = n * 10 + (c - '0');
  }
  if (n < 1 || n > kMaxInjectedShortageSeconds) return std::nullopt;
  return n;
}

Status CheckTag(const TagMap& map) {
  auto it = map.find(kInjectCapacityShortageKey);
  if (it == map.end() || ParseSeconds(it->second)) return Status();
  return Status::InvalidArgument(std::string(kInjectCapacityShortageKey) + " is '" + it->second +
                                 "': give a whole number of seconds from 1 to " +
                                 std::to_string(kMaxInjectedShortageSeconds) +
                                 " (how long the job waits RUNNABLE as if no capacity came)");
}

std::string Described(const InjectedShortage& s) {
  return "injected capacity shortage (" + std::to_string(s.seconds) + " s" +
         (s.environment.empty() ? "" : ", from the tags of compute environment " + s.environment) +
         ")";
}

}  // namespace

std::optional<int64_t> InjectedShortageSeconds(const Job& job) {
  const std::string* value = job.LoteSetting(kInjectCapacityShortageKey);
  return value ? ParseSeconds(*value) : std::nullopt;
}

std::optional<InjectedShortage> InjectedShortageOf(
    const Job& job, const std::vector<ComputeEnvironmentSpec>& queue_environments) {
  if (job.LoteSetting(kInjectCapacityShortageKey) != nullptr) {
    std::optional<int64_t> own = InjectedShortageSeconds(job);
    if (!own) return std::nullopt;
    return InjectedShortage{*own, ""};
  }
  std::optional<InjectedShortage> shortest;
  for (const ComputeEnvironmentSpec& ce : queue_environments) {
    auto it = ce.lote_tags.find(kInjectCapacityShortageKey);
    std::optional<int64_t> seconds =
        it == ce.lote_tags.end() ? std::nullopt : ParseSeconds(it->second);
    if (!seconds) return std::nullopt;  // this one has capacity: no shortage for the job
    if (!shortest || *seconds < shortest->seconds) shortest = InjectedShortage{*seconds, ce.name};
  }
  return shortest;
}

Status ValidateInjectedShortage(const Job& job) {
  RETURN_IF_ERROR(CheckTag(job.parameters));
  return CheckTag(job.tags);
}

Status ValidateInjectedShortageTag(const TagMap& tags) { return CheckTag(tags); }

std::string InjectedShortageReason(const InjectedShortage& shortage) {
  return "CAPACITY: " + Described(shortage);
}

std::string InjectedShortageEndReason(const InjectedShortage& shortage) {
  return Described(shortage) + " ended";
}

std::optional<RecordedHold> RecordedHoldOf(const std::vector<JobEvent>& events,
                                           const InjectedShortage& shortage) {
  const std::string held = InjectedShortageReason(shortage);
  const std::string ended = InjectedShortageEndReason(shortage);
  std::optional<RecordedHold> recorded;
  for (const JobEvent& e : events) {
    if (e.type == JobEventType::kScheduled) {
      recorded.reset();  // a placement: what came before was another RUNNABLE period's
    } else if (e.type == JobEventType::kStatusReason) {
      if (e.reason == held && !recorded) recorded = RecordedHold{e.at_ms, false};
      if (e.reason == ended && recorded) recorded->ended = true;
    }
  }
  return recorded;
}

void CapacityHolds::Hold(const std::string& job_id, const InjectedShortage& shortage,
                         int64_t since_ms) {
  holds_[job_id] = Held{since_ms + shortage.seconds * 1000, shortage};
}

std::vector<std::pair<std::string, InjectedShortage>> CapacityHolds::TakeEnded(int64_t now_ms) {
  std::vector<std::pair<std::string, InjectedShortage>> ended;
  for (auto it = holds_.begin(); it != holds_.end();) {
    if (it->second.until_ms <= now_ms) {
      ended.emplace_back(it->first, it->second.shortage);
      it = holds_.erase(it);
    } else {
      ++it;
    }
  }
  return ended;
}

}  // namespace lote::control
