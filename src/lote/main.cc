// The one lote binary: every subcommand is registered here by its component.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "lote/commands.h"

int main(int argc, char** argv) {
  CLI::App app{
      "lote: a self-hosted batch orchestrator for training large language models.\n"
      "Speaks the AWS Batch and CloudWatch Logs APIs; runs jobs on local processes or Slurm."};
  app.require_subcommand(1);
  app.set_version_flag("--version", "lote 0.1.0");
  lote::RegisterAllCommands(app);
  CLI11_PARSE(app, argc, argv);
  return lote::ExitCode();
}
