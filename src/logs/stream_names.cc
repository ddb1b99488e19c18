#include "logs/stream_names.h"

#include "common/crypto.h"

namespace lote::logs {

std::string NewTaskId() { return HexEncode(RandomBytes(16)); }

Status ValidateLogGroupName(std::string_view name, std::string_view field) {
  if (name.empty() || name.size() > 512) {
    return Status::InvalidArgument(
        "1 validation error detected: Value '" + std::string(name) + "' at '" + std::string(field) +
        "' failed to satisfy constraint: Member must have length between 1 and 512");
  }
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '-' || c == '_' || c == '/' || c == '#';
    if (!ok) {
      return Status::InvalidArgument(
          "1 validation error detected: Value '" + std::string(name) + "' at '" +
          std::string(field) +
          "' failed to satisfy constraint: Member must satisfy regular expression "
          "pattern: [\\.\\-_/#A-Za-z0-9]+");
    }
  }
  return Status::Ok();
}

Status ValidateLogStreamName(std::string_view name, std::string_view field) {
  if (name.empty() || name.size() > 512) {
    return Status::InvalidArgument(
        "1 validation error detected: Value '" + std::string(name) + "' at '" + std::string(field) +
        "' failed to satisfy constraint: Member must have length between 1 and 512");
  }
  if (name.find_first_of(":*") != std::string_view::npos) {
    return Status::InvalidArgument(
        "1 validation error detected: Value '" + std::string(name) + "' at '" + std::string(field) +
        "' failed to satisfy constraint: Member must satisfy regular expression "
        "pattern: [^:*]*");
  }
  return Status::Ok();
}

Result<std::string> BatchLogStreamName(std::string_view job_definition_name,
                                       std::string_view task_id) {
  if (job_definition_name.empty()) return Status::InvalidArgument("job definition name is empty");
  if (task_id.empty()) return Status::InvalidArgument("task id is empty");
  std::string name = std::string(job_definition_name) + "/default/" + std::string(task_id);
  RETURN_IF_ERROR(ValidateLogStreamName(name));
  return name;
}

}  // namespace lote::logs
