// RunCommand: runs a program to completion and captures its output (the
// Slurm backend's sbatch, squeue, scontrol, scancel, sinfo). Thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"

namespace lote::exec {

struct CommandResult {
  int exit_code = -1;  // 128 + signal when killed by one
  std::string out;
  std::string err;
};

// Runs argv[0] (looked up in PATH) with this process's environment plus
// `env` (only `env` when inherit_env is false), stdin from /dev/null. Unavailable when it cannot be
// started; DeadlineExceeded (and the program killed) after `timeout_ms`. A non-zero exit is not an
// error: see exit_code.
Result<CommandResult> RunCommand(const std::vector<std::string>& argv,
                                 const std::map<std::string, std::string>& env = {},
                                 int64_t timeout_ms = 60'000, bool inherit_env = true);

}  // namespace lote::exec
