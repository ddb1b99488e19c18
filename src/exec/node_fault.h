// A fault that one node's runner injects into its own command, on purpose,
// because the job asked for it (control/fault_plan.h parses the job's
// `lote:inject...` keys into one NodeFault per node). The runner (shim.cc)
// fires it once, when the gang reaches a step (read from the LOTE_PROGRESS
// lines of the main node's output, where `lote train` prints them) or a time
// after the command started, and records what it did in status.json
// (`injected`) and fault.json; the control plane puts that sentence into the
// attempt's reason.
//
// A node without a fault (action kNone) costs nothing: no timer, no reads.
// FaultWatch is not thread-safe (the runner is single-threaded).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/json.h"

namespace lote::exec {

enum class FaultAction {
  kNone,
  kKill,     // SIGKILL to the command's process group (a node that dies)
  kPreempt,  // SIGTERM, SIGKILL after grace_ms (a spot reclaim)
  kStop,     // SIGSTOP to the command's process group (a node that hangs)
  // Checkpoint writes fail for upload_fail_ms from step upload_from_step: the
  // runner passes it to the command in LOTE_INJECT_UPLOAD_FAIL_SECONDS and
  // LOTE_INJECT_UPLOAD_FAIL_AT_STEP (lote train obeys them) and records it at
  // the start; it sends no signal.
  kUploadFail,
  // A slow node: from the step or time on, the runner stops and continues the
  // command's process group in turns (SIGSTOP, SIGCONT; Throttle below) so
  // that it runs slow_percent of every kThrottlePeriodMs. Works on any host:
  // no cgroup is needed (the cgroup v2 cpu.max way needs a delegated v2
  // hierarchy, which hosts such as this project's do not have).
  kSlow,
};

inline constexpr int64_t kThrottlePeriodMs = 100;

struct NodeFault {
  FaultAction action = FaultAction::kNone;
  int64_t at_step = 0;       // > 0: once the gang's progress reports this step
  int64_t after_ms = -1;     // >= 0: this long after the command started
  int64_t grace_ms = 30000;  // kPreempt: SIGTERM to SIGKILL
  // The file whose LOTE_PROGRESS lines give the step (the main node's output;
  // filled in by the backend, which knows where it is).
  std::string progress_path;
  int64_t upload_fail_ms = 0;    // kUploadFail: the window's length
  int64_t upload_from_step = 1;  // kUploadFail: the step where it opens
  int64_t slow_percent = 0;      // kSlow: the share of each period it runs, 1 to 99

  bool Any() const { return action != FaultAction::kNone; }
  bool operator==(const NodeFault&) const = default;
};

Json ToJson(const NodeFault& f);
NodeFault NodeFaultFromJson(const Json& j);  // absent/unknown action: kNone
// "kill", "preempt", "stop", "upload-fail", "slow"; "" for kNone.
std::string FaultActionName(FaultAction a);

// The command's environment for a kUploadFail fault ({} for any other).
std::vector<std::string> UploadFailEnv(const NodeFault& f);

// How every sentence of an injected fault begins (the control plane finds
// them in reasons by it).
inline constexpr char kInjectedFaultPrefix[] = "Injected fault:";

// What the runner did, e.g. "Injected fault: node 1 killed (SIGKILL) at step 8".
std::string DescribeInjected(const NodeFault& f, int32_t node_index, int64_t step_seen,
                             int64_t after_ms_seen);

// The highest "step" of the complete LOTE_PROGRESS lines in `text`; nullopt if none.
std::optional<int64_t> LastProgressStep(const std::string& text);

// Decides when a node's fault fires. `started_mono_ms`: the command's start
// on the monotonic clock.
class FaultWatch {
 public:
  FaultWatch(NodeFault fault, int64_t started_mono_ms);
  // How long the runner may sleep before the next Check (-1: forever, the
  // fault has fired or there is none).
  int PollTimeoutMs(int64_t now_mono_ms) const;
  // True once when the fault is due; then `step_seen` / `after_ms_seen` say why.
  bool Due(int64_t now_mono_ms);
  int64_t step_seen() const { return step_seen_; }
  int64_t after_ms_seen() const { return after_ms_seen_; }
  const NodeFault& fault() const { return fault_; }

 private:
  NodeFault fault_;
  int64_t started_mono_ms_;
  bool fired_ = false;
  off_t offset_ = 0;  // of progress_path read so far (complete lines)
  int64_t step_seen_ = 0;
  int64_t after_ms_seen_ = -1;
};

// The turns of a kSlow fault: running for percent% of each kThrottlePeriodMs,
// stopped for the rest. Pure (the runner sends the signals Due returns).
class Throttle {
 public:
  // Starts running at `now_mono_ms` (the first turn stops it).
  Throttle(int64_t percent, int64_t now_mono_ms);
  // The signal due at `now_mono_ms`: SIGSTOP or SIGCONT when a turn ends, else 0.
  int Due(int64_t now_mono_ms);
  // How long the runner may sleep before the next turn.
  int PollTimeoutMs(int64_t now_mono_ms) const;
  bool stopped() const { return stopped_; }
  // How many times it has been stopped.
  int64_t stops() const { return stops_; }

 private:
  int64_t run_ms_, stop_ms_;
  int64_t next_mono_ms_;
  bool stopped_ = false;
  int64_t stops_ = 0;
};

}  // namespace lote::exec
