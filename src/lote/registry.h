// A component adds its subcommands with a static registrar in its *_commands.cc:
//   static lote::CommandRegistrar reg([](CLI::App& app) { ... });
// and links that object into the binary through the lote_commands target list
// in src/lote/CMakeLists.txt (object libraries, so the registrar is kept).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <vector>

namespace lote {

using CommandRegisterFn = std::function<void(CLI::App&)>;

inline std::vector<CommandRegisterFn>& CommandRegistry() {
  static std::vector<CommandRegisterFn> registry;
  return registry;
}

struct CommandRegistrar {
  explicit CommandRegistrar(CommandRegisterFn fn) { CommandRegistry().push_back(std::move(fn)); }
};

void SetExitCode(int code);

}  // namespace lote
