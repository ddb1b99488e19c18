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

}  // namespace

std::optional<int64_t> InjectedShortageSeconds(const Job& job) {
  const std::string* value = job.LoteSetting(kInjectCapacityShortageKey);
  return value ? ParseSeconds(*value) : std::nullopt;
}

Status ValidateInjectedShortage(const Job& job) {
  for (const auto* map : {&job.parameters, &job.tags}) {
    auto it = map->find(kInjectCapacityShortageKey);
    if (it != map->end() && !ParseSeconds(it->second)) {
      return Status::InvalidArgument(std::string(kInjectCapacityShortageKey) + " is '" +
                                     it->second + "': give a whole number of seconds from 1 to " +
                                     std::to_string(kMaxInjectedShortageSeconds) +
                                     " (how long the job waits RUNNABLE as if no capacity came)");
    }
  }
  return Status();
}

std::string InjectedShortageReason(int64_t seconds) {
  return "CAPACITY: injected capacity shortage (" + std::to_string(seconds) + " s)";
}

std::string InjectedShortageEndReason(int64_t seconds) {
  return "injected capacity shortage (" + std::to_string(seconds) + " s) ended";
}

void CapacityHolds::Hold(const std::string& job_id, int64_t seconds, int64_t now_ms) {
  holds_[job_id] = Held{now_ms + seconds * 1000, seconds};
}

std::vector<std::pair<std::string, int64_t>> CapacityHolds::TakeEnded(int64_t now_ms) {
  std::vector<std::pair<std::string, int64_t>> ended;
  for (auto it = holds_.begin(); it != holds_.end();) {
    if (it->second.until_ms <= now_ms) {
      ended.emplace_back(it->first, it->second.seconds);
      it = holds_.erase(it);
    } else {
      ++it;
    }
  }
  return ended;
}

}  // namespace lote::control
