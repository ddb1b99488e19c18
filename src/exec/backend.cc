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

Result<std::map<int32_t, std::string>> Backend::CollectStackDumps(const AttemptKey&, int64_t) {
  return Status::Unimplemented("the " + Name() + " backend cannot collect stack dumps");
}

Status Backend::InjectFault(const NodeKey&, const NodeFault&, int32_t) {
  return Status::Unimplemented("the " + Name() +
                               " backend cannot inject a fault into a running node");
}

std::string Backend::InjectedFault(const AttemptKey&, int32_t) { return ""; }

std::optional<std::vector<std::string>> Backend::NodeHosts(const AttemptKey&, int32_t) const {
  return std::nullopt;
}

Status Backend::DrainHost(const std::string&, const std::string&) {
  return Status::Unimplemented("the " + Name() + " backend has no machines of its own to drain");
}

Status Backend::ResumeHost(const std::string&) {
  return Status::Unimplemented("the " + Name() + " backend has no machines of its own to resume");
}

}  // namespace lote::exec
