// `lote checkpoints list`, `lote checkpoint export`, `lote checkpoint reshard`
// (docs/checkpoints.md).
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>

#include "common/recipe_config.h"
#include "engine/checkpoint_reshard.h"
#include "engine/checkpoint_tools.h"
#include "lote/registry.h"

namespace lote::engine {
namespace {

int Fail(const Status& s) {
  fmt::print(stderr, "error: {}\n", s.ToString());
  return 1;
}

std::string HumanBytes(uint64_t b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(b);
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  return u == 0 ? fmt::format("{} B", b) : fmt::format("{:.1f} {}", v, units[u]);
}

int List(const std::string& arg, const std::string& base_flag, bool json) {
  std::string base = base_flag;
  if (base.empty()) {
    const char* env = std::getenv("CHECKPOINT_SAVE_URI");
    if (env != nullptr) base = env;
  }
  if (base.empty() && arg.find('/') == std::string::npos) {
    // In an example folder: the recipe's config.txt says where checkpoints go.
    Result<RecipeConfig> config = RecipeConfig::Load(kConfigFileName);
    if (config.ok()) base = config->GetOr("CHECKPOINT_SAVE_URI", "");
  }
  const std::string uri = ResolveJobUri(arg, base);
  auto list = ListCheckpoints(uri);
  if (!list.ok()) return Fail(list.status());
  if (json) {
    Json out = Json::array();
    for (const CheckpointSummary& s : *list) out.push_back(s.ToJson());
    fmt::print("{}\n", Json{{"uri", uri}, {"checkpoints", out}}.dump(2));
    return 0;
  }
  if (list->empty()) {
    fmt::print("no step_<N> checkpoint folders under {}\n", uri);
    return 0;
  }
  fmt::print("{:>10}  {:>10}  {:<10}  {:<7}  {}\n", "STEP", "SIZE", "STATE", "LAYOUT", "URI");
  for (const CheckpointSummary& s : *list) {
    const std::string layout =
        s.tensor_parallel > 0
            ? fmt::format("{}x{}", s.tensor_parallel,
                          s.data_parallel > 0 ? std::to_string(s.data_parallel) : std::string("?"))
            : "?";
    fmt::print("{:>10}  {:>10}  {:<10}  {:<7}  {}{}\n", s.step, HumanBytes(s.total_bytes),
               s.complete ? "complete" : "incomplete", layout, s.uri,
               s.complete ? "" : "  (" + s.problem + ")");
  }
  return 0;
}

void AddReshard(CLI::App* ckpt) {
  auto* cmd = ckpt->add_subcommand(
      "reshard",
      "Rewrite a checkpoint for another TP x DP layout, tensor by tensor (bounded memory)");
  struct ReshardArgs {
    std::string uri;
    ReshardOptions options;
  };
  auto a = std::make_shared<ReshardArgs>();
  cmd->add_option("uri", a->uri,
                  "a step_<N> checkpoint folder, or a job folder (its latest complete "
                  "checkpoint)")
      ->required();
  cmd->add_option("--output", a->options.output_dir,
                  "local folder (path or file:// URI): the new checkpoint goes to its "
                  "step_<N>/ (or to the folder itself if it is named step_<N>)")
      ->required();
  cmd->add_option("--tensor-parallel-size", a->options.tensor_parallel, "the new TP size")
      ->required()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--data-parallel-size", a->options.data_parallel, "the new DP size")
      ->required()
      ->check(CLI::PositiveNumber);
  cmd->callback([a] {
    a->options.log = [](std::string_view line) { fmt::print(stderr, "{}\n", line); };
    auto r = ReshardCheckpoint(a->uri, a->options);
    if (!r.ok()) {
      SetExitCode(Fail(r.status()));
      return;
    }
    fmt::print("re-sharded step {} of {} from {}x{} to {}x{}: {} files, {} in {}\n", r->step,
               r->checkpoint_uri, r->from_tp, r->from_dp, a->options.tensor_parallel,
               a->options.data_parallel, r->files, HumanBytes(r->bytes), r->step_dir);
    SetExitCode(0);
  });
}

void Register(CLI::App& app) {
  auto* lists = app.add_subcommand("checkpoints", "List a training job's checkpoints");
  lists->require_subcommand(1);
  auto* list = lists->add_subcommand(
      "list", "List the step_<N> checkpoints of a job: step, size, complete or not, layout TPxDP");
  struct ListArgs {
    std::string target, base;
    bool json = false;
  };
  auto la = std::make_shared<ListArgs>();
  list->add_option("target", la->target,
                   "a job's checkpoint folder URI (file://, s3://, a path), one step_<N> "
                   "folder, or a job id (with --checkpoint-uri)")
      ->required();
  list->add_option("--checkpoint-uri", la->base,
                   "base URI holding <job id>/ folders (default: $CHECKPOINT_SAVE_URI, else "
                   "CHECKPOINT_SAVE_URI of ./config.txt); "
                   "used when the target is a job id (no '/')");
  list->add_flag("--json", la->json, "print JSON instead of a table");
  list->callback([la] { SetExitCode(List(la->target, la->base, la->json)); });

  auto* ckpt = app.add_subcommand("checkpoint", "Work with one training checkpoint");
  ckpt->require_subcommand(1);
  auto* exp = ckpt->add_subcommand(
      "export",
      "Write a consolidated Hugging Face model.safetensors + config.json from a checkpoint");
  struct ExportArgs {
    std::string uri, output;
    DType dtype = DType::kF32;
  };
  auto ea = std::make_shared<ExportArgs>();
  exp->add_option("uri", ea->uri,
                  "a step_<N> checkpoint folder, or a job folder (its latest complete "
                  "checkpoint)")
      ->required();
  exp->add_option("--output", ea->output, "folder to write model.safetensors and config.json")
      ->required();
  const std::map<std::string, DType> dtypes{{"fp32", DType::kF32}, {"bf16", DType::kBF16}};
  exp->add_option("--dtype", ea->dtype,
                  "tensors as fp32 (the master weights as saved) or bf16 (rounded to nearest "
                  "even) (default fp32)")
      ->transform(CLI::CheckedTransformer(dtypes));
  exp->callback([ea] {
    ExportOptions o;
    o.output_dir = ea->output;
    o.dtype = ea->dtype;
    o.log = [](std::string_view line) { fmt::print(stderr, "{}\n", line); };
    auto r = ExportCheckpoint(ea->uri, o);
    if (!r.ok()) {
      SetExitCode(Fail(r.status()));
      return;
    }
    fmt::print("exported step {} of {} (TP {}) to {}\n", r->step, r->checkpoint_uri,
               r->tensor_parallel, ea->output);
    SetExitCode(0);
  });
  AddReshard(ckpt);
}

lote::CommandRegistrar checkpoint_registrar(Register);

}  // namespace
}  // namespace lote::engine
