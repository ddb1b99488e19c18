#include "exec/node_fault.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

namespace lote::exec {
namespace {

constexpr char kProgressPrefix[] = "LOTE_PROGRESS ";
constexpr int kStepPollMs = 100;

FaultAction ActionFromName(const std::string& s) {
  if (s == "kill") return FaultAction::kKill;
  if (s == "preempt") return FaultAction::kPreempt;
  if (s == "stop") return FaultAction::kStop;
  if (s == "upload-fail") return FaultAction::kUploadFail;
  if (s == "slow") return FaultAction::kSlow;
  return FaultAction::kNone;
}

// The bytes of `path` from `offset` up to its last newline; `offset` moves past them.
std::string ReadCompleteLines(const std::string& path, off_t* offset) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  std::string out;
  struct stat st;
  if (::fstat(fd, &st) == 0 && st.st_size > *offset) {
    out.resize(static_cast<size_t>(std::min<off_t>(st.st_size - *offset, 1 << 20)));
    ssize_t n = ::pread(fd, out.data(), out.size(), *offset);
    out.resize(n > 0 ? static_cast<size_t>(n) : 0);
    const size_t end = out.rfind('\n');
    if (end == std::string::npos && out.size() == (1u << 20)) {
      *offset += static_cast<off_t>(out.size());  // 1 MiB without a line end: no progress line
      return "";
    }
    out.resize(end == std::string::npos ? 0 : end + 1);
    *offset += static_cast<off_t>(out.size());
  }
  ::close(fd);
  return out;
}

}  // namespace

std::string FaultActionName(FaultAction a) {
  switch (a) {
    case FaultAction::kKill:
      return "kill";
    case FaultAction::kPreempt:
      return "preempt";
    case FaultAction::kStop:
      return "stop";
    case FaultAction::kUploadFail:
      return "upload-fail";
    case FaultAction::kSlow:
      return "slow";
    case FaultAction::kNone:
      break;
  }
  return "";
}

Json ToJson(const NodeFault& f) {
  if (!f.Any()) return Json();
  return Json{{"action", FaultActionName(f.action)},
              {"at_step", f.at_step},
              {"after_ms", f.after_ms},
              {"grace_ms", f.grace_ms},
              {"upload_fail_ms", f.upload_fail_ms},
              {"upload_from_step", f.upload_from_step},
              {"slow_percent", f.slow_percent},
              {"progress_path", f.progress_path}};
}

NodeFault NodeFaultFromJson(const Json& j) {
  NodeFault f;
  if (!j.is_object()) return f;
  f.action = ActionFromName(j.value("action", std::string()));
  f.at_step = j.value("at_step", int64_t{0});
  f.after_ms = j.value("after_ms", int64_t{-1});
  f.grace_ms = j.value("grace_ms", int64_t{30000});
  f.progress_path = j.value("progress_path", std::string());
  f.upload_fail_ms = j.value("upload_fail_ms", int64_t{0});
  f.upload_from_step = j.value("upload_from_step", int64_t{1});
  f.slow_percent = j.value("slow_percent", int64_t{0});
  return f;
}

std::vector<std::string> UploadFailEnv(const NodeFault& f) {
  if (f.action != FaultAction::kUploadFail) return {};
  return {"LOTE_INJECT_UPLOAD_FAIL_SECONDS=" + std::to_string(f.upload_fail_ms / 1000),
          "LOTE_INJECT_UPLOAD_FAIL_AT_STEP=" + std::to_string(f.upload_from_step)};
}

std::string DescribeInjected(const NodeFault& f, int32_t node_index, int64_t step_seen,
                             int64_t after_ms_seen) {
  std::string what;
  switch (f.action) {
    case FaultAction::kKill:
      what = "killed (SIGKILL)";
      break;
    case FaultAction::kPreempt:
      what = "preempted (SIGTERM, " + std::to_string(f.grace_ms / 1000) + " s grace)";
      break;
    case FaultAction::kStop:
      what = "stopped (SIGSTOP)";
      break;
    case FaultAction::kSlow:
      what = "slowed to " + std::to_string(f.slow_percent) +
             "% of its CPU time (SIGSTOP and SIGCONT in turns, every " +
             std::to_string(kThrottlePeriodMs) + " ms)";
      break;
    case FaultAction::kUploadFail:
      return std::string(kInjectedFaultPrefix) + " checkpoint writes of node " +
             std::to_string(node_index) + " fail for " + std::to_string(f.upload_fail_ms / 1000) +
             " s from step " + std::to_string(f.upload_from_step);
    case FaultAction::kNone:
      return "";
  }
  const std::string when = after_ms_seen >= 0
                               ? "after " + std::to_string(after_ms_seen / 1000) + " s"
                               : "at step " + std::to_string(step_seen);
  return std::string(kInjectedFaultPrefix) + " node " + std::to_string(node_index) + " " + what +
         " " + when;
}

std::optional<int64_t> LastProgressStep(const std::string& text) {
  std::optional<int64_t> step;
  size_t pos = 0;
  while ((pos = text.find(kProgressPrefix, pos)) != std::string::npos) {
    const bool line_start = pos == 0 || text[pos - 1] == '\n';
    const size_t end = text.find('\n', pos);
    if (end == std::string::npos) break;
    if (line_start) {
      const size_t from = pos + sizeof(kProgressPrefix) - 1;
      Json j = Json::parse(text.substr(from, end - from), nullptr, false);
      if (j.is_object() && j.contains("step") && j["step"].is_number_integer())
        step = std::max(step.value_or(0), j["step"].get<int64_t>());
    }
    pos = end;
  }
  return step;
}

FaultWatch::FaultWatch(NodeFault fault, int64_t started_mono_ms)
    : fault_(std::move(fault)), started_mono_ms_(started_mono_ms) {}

int FaultWatch::PollTimeoutMs(int64_t now_mono_ms) const {
  if (fired_ || !fault_.Any() || fault_.action == FaultAction::kUploadFail) return -1;
  if (fault_.after_ms >= 0)
    return static_cast<int>(std::max<int64_t>(0, started_mono_ms_ + fault_.after_ms - now_mono_ms));
  return fault_.at_step > 0 && !fault_.progress_path.empty() ? kStepPollMs : -1;
}

bool FaultWatch::Due(int64_t now_mono_ms) {
  if (fired_ || !fault_.Any() || fault_.action == FaultAction::kUploadFail) return false;
  if (fault_.after_ms >= 0) {
    if (now_mono_ms < started_mono_ms_ + fault_.after_ms) return false;
    after_ms_seen_ = fault_.after_ms;
    fired_ = true;
    return true;
  }
  if (fault_.at_step <= 0 || fault_.progress_path.empty()) return false;
  std::optional<int64_t> step = LastProgressStep(ReadCompleteLines(fault_.progress_path, &offset_));
  if (!step || *step < fault_.at_step) return false;
  step_seen_ = *step;
  fired_ = true;
  return true;
}

Throttle::Throttle(int64_t percent, int64_t now_mono_ms)
    : run_ms_(kThrottlePeriodMs * std::clamp<int64_t>(percent, 1, 99) / 100),
      stop_ms_(kThrottlePeriodMs - run_ms_),
      next_mono_ms_(now_mono_ms + run_ms_) {}

int Throttle::Due(int64_t now_mono_ms) {
  if (now_mono_ms < next_mono_ms_) return 0;
  stopped_ = !stopped_;
  if (stopped_) ++stops_;
  // From now, not from when the turn was due: a late turn is not caught up
  // with a burst of short ones.
  next_mono_ms_ = now_mono_ms + (stopped_ ? stop_ms_ : run_ms_);
  return stopped_ ? SIGSTOP : SIGCONT;
}

int Throttle::PollTimeoutMs(int64_t now_mono_ms) const {
  return static_cast<int>(std::max<int64_t>(0, next_mono_ms_ - now_mono_ms));
}

}  // namespace lote::exec
