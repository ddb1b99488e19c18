// The reference recipe's steps as lote commands, all through the server's
// public API (one BatchClient):
//
//   Setup             templates/*.json rendered with config.txt into build/
//                     (an undefined variable is an error naming it), each
//                     checked to be JSON; build/config.env holds the config.
//   CreateResources   the EC2 placement group and launch template of
//                     build/ (the compute environment names them) →
//                     compute environment → wait VALID → job definition → job
//                     queue → wait VALID. Idempotent: what exists is kept (a
//                     disabled one is enabled again); the job definition gets a
//                     new revision only when its rendered template changed
//                     (tag lote:templateSha256).
//   CleanupResources  disable the queue → wait → delete → wait gone; the same
//                     for the compute environment; delete build/'s launch
//                     template and placement group; deregister every ACTIVE
//                     revision of the job definition. Idempotent.
//   SubmitRecipeJob   the recipe's multi-node job; with DO_PRE_COMPILATION a
//                     2-step precompile job first and the main job depending on it.
//   SubmitCommand     `lote submit --queue Q --nodes N -- COMMAND...`: a job of
//                     any command without writing JSON, as sbatch does.
//
// Errors are values; every message says what to do next. Not thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "cli/batch_client.h"
#include "common/json.h"
#include "common/recipe_config.h"
#include "common/status.h"

namespace lote::workflow {

using Print = std::function<void(const std::string& line)>;

// The folders of an example: <config dir>/templates and <config dir>/build.
std::string TemplatesDir(const RecipeConfig& config);
std::string BuildDir(const RecipeConfig& config);

// Renders every templates/*.json into build/; returns the written paths.
Result<std::vector<std::string>> Setup(const RecipeConfig& config, const Print& print);

// build/<name> parsed; FailedPrecondition ("run `lote setup` first") if absent.
Result<Json> ReadRendered(const RecipeConfig& config, const std::string& name);

struct WaitOptions {
  int64_t timeout_ms = 300'000;
  int64_t poll_ms = 200;
  std::function<void(int64_t millis)> sleep;  // default: a real sleep
};

Status CreateResources(cli::BatchClient* client, const RecipeConfig& config, const Print& print,
                       const WaitOptions& wait = {});
Status CleanupResources(cli::BatchClient* client, const RecipeConfig& config, const Print& print,
                        const WaitOptions& wait = {});

struct RecipeSubmit {
  std::optional<int32_t> num_nodes;  // --num-nodes: nodeOverrides.numNodes
  std::optional<int64_t> max_steps;  // parameter max_steps (default: MAX_STEPS)
  // A job id (its folder under CHECKPOINT_SAVE_URI) or a checkpoint URI to start
  // from; empty: "latest" (the job's own checkpoints, for its retries).
  std::string resume_from;
  std::string name;  // default JOB_NAME
};

struct SubmittedJob {
  std::string job_id;
  std::string name;
};

// The submitted jobs: the precompile job first when there is one, the main job last.
Result<std::vector<SubmittedJob>> SubmitRecipeJob(cli::BatchClient* client,
                                                  const RecipeConfig& config,
                                                  const RecipeSubmit& submit, const Print& print);

struct CommandSubmit {
  std::string queue;
  std::string name;  // default: the command's program name
  int32_t nodes = 1;
  std::optional<int32_t> vcpus;
  std::optional<int64_t> memory_mib;
  std::optional<int32_t> attempts;
  std::optional<int64_t> timeout_s;
  std::vector<std::string> environment;  // NAME=VALUE
  std::vector<std::string> depends_on;   // job ids
  std::vector<std::string> command;
};

// Registers (once) the job definition the generic form uses (lote-submit for
// one node, lote-submit-multinode for gangs) and submits the command with overrides.
Result<SubmittedJob> SubmitCommand(cli::BatchClient* client, const CommandSubmit& submit,
                                   const Print& print);

}  // namespace lote::workflow
