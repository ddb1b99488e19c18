#include "exec/backend.h"

namespace lote::exec {

std::string NodeKey::ToString() const {
  return attempt.job_id + "/" + std::to_string(attempt.attempt) + "/" + std::to_string(node_index);
}

std::string_view NodeOutcomeName(NodeOutcome outcome) {
  switch (outcome) {
    case NodeOutcome::kExited:
      return "exited";
    case NodeOutcome::kSignaled:
      return "signaled";
    case NodeOutcome::kLost:
      return "lost";
    case NodeOutcome::kStartFailed:
      return "start_failed";
  }
  return "lost";
}

}  // namespace lote::exec
