// Registration of every component's subcommands into the one `lote` binary.
// Each component owns one Register* function in its own folder; a subcommand's
// callback stores its process exit code with SetExitCode.
#pragma once

#include <CLI/CLI.hpp>

namespace lote {

void RegisterAllCommands(CLI::App& app);
void SetExitCode(int code);
int ExitCode();

}  // namespace lote
