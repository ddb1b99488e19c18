#include "lote/commands.h"

#include "lote/registry.h"

namespace lote {
namespace {
int g_exit_code = 0;
}  // namespace

void SetExitCode(int code) { g_exit_code = code; }
int ExitCode() { return g_exit_code; }

void RegisterAllCommands(CLI::App& app) {
  for (auto& entry : CommandRegistry()) entry(app);
}

}  // namespace lote
