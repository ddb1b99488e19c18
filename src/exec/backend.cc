#include "exec/backend.h"

namespace lote::exec {

std::string NodeKey::ToString() const {
  return attempt.job_id + "/" + std::to_string(attempt.attempt) + "/" + std::to_string(node_index);
}

std::string_view NodeOutcomeName(NodeOutcome outcome) {
  switch (outcome) {
    case NodeOutcome::kExited: return "exited";
    case NodeOutcome::kSignaled: return "signaled";
    case NodeOutcome::kLost: return "lost";
    case NodeOutcome::kStartFailed: return "start_failed";
  }
  return "lost";
}

int32_t ContainerExitCode(const NodeEvent& event) {
  switch (event.outcome) {
    case NodeOutcome::kExited: return event.exit_code;
    case NodeOutcome::kSignaled: return 128 + event.signal;
    case NodeOutcome::kLost:
    case NodeOutcome::kStartFailed: return -1;
  }
  return -1;
}

}  // namespace lote::exec
