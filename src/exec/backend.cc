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

Result<NodeKey> NodeKeyFromJobId(const std::string& job_id, int32_t attempt) {
  size_t hash = job_id.find('#');
  std::string base = job_id.substr(0, hash);
  if (base.empty()) return Status::InvalidArgument("job id '" + job_id + "' is empty before '#'");
  int32_t node = 0;
  if (hash != std::string::npos) {
    std::string digits = job_id.substr(hash + 1);
    if (digits.empty() || digits.size() > 6 ||
        digits.find_first_not_of("0123456789") != std::string::npos) {
      return Status::InvalidArgument("job id '" + job_id +
                                     "': '#' must be followed by a node index");
    }
    node = static_cast<int32_t>(std::stol(digits));
  }
  return NodeKey{AttemptKey{base, attempt}, node};
}

std::string JobIdOfNode(const NodeKey& key, bool multi_node) {
  return multi_node ? key.attempt.job_id + "#" + std::to_string(key.node_index)
                    : key.attempt.job_id;
}

int32_t ContainerExitCode(const NodeEvent& event) {
  switch (event.outcome) {
    case NodeOutcome::kExited:
      return event.exit_code;
    case NodeOutcome::kSignaled:
      return 128 + event.signal;
    case NodeOutcome::kLost:
    case NodeOutcome::kStartFailed:
      return -1;
  }
  return -1;
}

}  // namespace lote::exec
