// `lote train`, `lote model plan`, `lote model score`, `lote model dump`.
#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <vector>

#include "common/files.h"
#include "engine/adamw.h"
#include "engine/cpu_kernels.h"
#include "engine/launcher.h"
#include "engine/llama_config.h"
#include "engine/llama_model.h"
#include "engine/memory_plan.h"
#include "engine/safetensors.h"
#include "engine/trainer.h"
#include "engine/weights_io.h"
#include "lote/registry.h"

namespace lote::engine {
namespace {

// This process's command line, from /proc (the launcher starts its ranks with it).
std::vector<std::string> ProcessArguments() {
  std::vector<std::string> out;
  Result<std::string> raw = ReadFile("/proc/self/cmdline");
  if (!raw.ok()) return out;
  size_t start = 0;
  for (size_t i = 0; i < raw->size(); ++i) {
    if ((*raw)[i] == '\0') {
      out.push_back(raw->substr(start, i - start));
      start = i + 1;
    }
  }
  return out;
}

int Fail(const Status& s) {
  fmt::print(stderr, "error: {}\n", s.ToString());
  return 1;
}

Result<std::vector<int32_t>> ParseTokens(const std::string& text) {
  std::vector<int32_t> out;
  std::istringstream in(text);
  std::string word;
  while (in >> word) {
    char* end = nullptr;
    const long v = std::strtol(word.c_str(), &end, 10);
    if (*end != '\0' || v < 0 || v > INT32_MAX) {
      return Status::InvalidArgument(
          fmt::format("\"{}\" is not a token id (want integers >= 0)", word));
    }
    out.push_back(static_cast<int32_t>(v));
  }
  return out;
}

Status Score(const std::string& config_path, const std::string& weights,
             const std::string& tokens_text, const std::string& token_file, bool json) {
  InitCpuBackend(0);
  ASSIGN_OR_RETURN(LlamaConfig config, LlamaConfig::Load(config_path));
  std::string text = tokens_text;
  if (!token_file.empty()) {
    ASSIGN_OR_RETURN(text, ReadFile(token_file));
  }
  ASSIGN_OR_RETURN(std::vector<int32_t> tokens, ParseTokens(text));
  if (tokens.size() < 2) {
    return Status::InvalidArgument(
        "give at least two tokens (--tokens \"1 15043 ...\" or --token-file)");
  }
  for (int32_t t : tokens) {
    if (t >= config.vocab_size) {
      return Status::InvalidArgument(
          fmt::format("token {} is outside the model's vocab_size {}", t, config.vocab_size));
    }
  }
  const int64_t T = static_cast<int64_t>(tokens.size()) - 1;
  ASSIGN_OR_RETURN(auto model, LlamaModel::Create(config, 1, T, false));
  RETURN_IF_ERROR(LoadWeights(model.get(), weights));
  std::vector<int32_t> targets(tokens.begin() + 1, tokens.end());
  std::vector<float> logprob(static_cast<size_t>(T));
  const double loss = model->Forward(tokens.data(), targets.data(), 1, T, logprob.data(), nullptr);
  if (json) {
    Json j{{"tokens", tokens}, {"logprobs", logprob}, {"mean_loss", loss}};
    fmt::print("{}\n", j.dump());
  } else {
    fmt::print("position\ttoken\tnext\tlogprob\n");
    for (int64_t t = 0; t < T; ++t) {
      fmt::print("{}\t{}\t{}\t{:.6f}\n", t, tokens[static_cast<size_t>(t)],
                 targets[static_cast<size_t>(t)], logprob[static_cast<size_t>(t)]);
    }
    fmt::print("mean_loss {:.6f}\nperplexity {:.4f}\n", loss, std::exp(loss));
  }
  return Status::Ok();
}

struct DumpOptions {
  std::string config, weights, tokens_file, output;
  int64_t batch = 1, steps = 0, warmup = 0;
  double lr = 1e-3, weight_decay = 0.01;
};

// Golden-test support: loads weights and one batch (raw little-endian int32 [B, T+1]),
// writes logits, loss and every parameter gradient to a safetensors file; with
// --steps K it then runs K AdamW steps (lr schedule, clipping) on that batch and adds
// their losses ("train_losses") and the final weights ("final.<name>").
Status Dump(const DumpOptions& o) {
  InitCpuBackend(0);
  ASSIGN_OR_RETURN(LlamaConfig config, LlamaConfig::Load(o.config));
  ASSIGN_OR_RETURN(std::string raw, ReadFile(o.tokens_file));
  const int64_t total = static_cast<int64_t>(raw.size() / 4);
  if (o.batch <= 0 || total % o.batch != 0 || total / o.batch < 2) {
    return Status::InvalidArgument("--tokens-file must hold int32 [batch, seq_len + 1]");
  }
  const int64_t B = o.batch, T = total / B - 1;
  std::vector<int32_t> all(static_cast<size_t>(total));
  std::memcpy(all.data(), raw.data(), raw.size());
  std::vector<int32_t> inputs(static_cast<size_t>(B * T)), targets(static_cast<size_t>(B * T));
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t < T; ++t) {
      inputs[static_cast<size_t>(b * T + t)] = all[static_cast<size_t>(b * (T + 1) + t)];
      targets[static_cast<size_t>(b * T + t)] = all[static_cast<size_t>(b * (T + 1) + t + 1)];
    }
  }
  ASSIGN_OR_RETURN(auto model, LlamaModel::Create(config, B, T, true));
  RETURN_IF_ERROR(LoadWeights(model.get(), o.weights));
  std::vector<float> logits(static_cast<size_t>(B * T * config.vocab_size));
  model->Forward(inputs.data(), targets.data(), B, T, nullptr, logits.data());
  model->ZeroGrad();
  const float loss =
      static_cast<float>(model->ForwardBackward(inputs.data(), targets.data(), B, T, 1.0f));
  std::vector<float> grads(model->grads(), model->grads() + model->num_params());
  std::vector<TensorToWrite> out;
  out.push_back({"logits", {B, T, config.vocab_size}, logits.data()});
  out.push_back({"loss", {1}, &loss});
  for (const TensorSpec& t : model->layout().tensors()) {
    out.push_back({"grad." + t.name, t.shape, grads.data() + t.offset});
  }
  std::vector<float> train_losses;
  if (o.steps > 0) {
    AdamWOptions opts;
    opts.weight_decay = static_cast<float>(o.weight_decay);
    AdamW adamw(model->layout(), opts);
    for (int64_t step = 1; step <= o.steps; ++step) {
      model->ZeroGrad();
      const double l = model->ForwardBackward(inputs.data(), targets.data(), B, T, 1.0f);
      train_losses.push_back(static_cast<float>(l));
      ClipGradNorm(model->grads(), model->num_params(), 1.0);
      adamw.Step(model->params(), model->grads(),
                 static_cast<float>(LearningRate(step, o.warmup, o.steps, o.lr)));
    }
    out.push_back({"train_losses", {o.steps}, train_losses.data()});
    for (const TensorSpec& t : model->layout().tensors()) {
      out.push_back({"final." + t.name, t.shape, model->params() + t.offset});
    }
  }
  RETURN_IF_ERROR(WriteSafetensors(o.output, out, {}));
  fmt::print("loss {:.6f}; wrote {}\n", loss, o.output);
  return Status::Ok();
}

// --activation-recompute and --sequence-parallel (train and model plan), with the
// recipe's names (neuronx-distributed's --selective_checkpoint_enabled and
// --sequence_parallel_enabled) accepted as well.
void AddActivationFlags(CLI::App* sub, TrainOptions* opts) {
  const std::map<std::string, Recompute> recompute{
      {"none", Recompute::kNone}, {"selective", Recompute::kSelective}, {"full", Recompute::kFull}};
  auto* mode =
      sub->add_option("--activation-recompute", opts->activation_recompute,
                      "what backward recomputes instead of keeping: none, selective (the "
                      "attention core: scores, softmax, weighted sum) or full (the whole layer "
                      "from its input) (default none)")
          ->transform(CLI::CheckedTransformer(recompute));
  sub->add_flag_callback(
         "--selective_checkpoint_enabled",
         [opts] { opts->activation_recompute = Recompute::kSelective; },
         "the recipe's name for --activation-recompute selective")
      ->excludes(mode);
  sub->add_flag("--sequence-parallel,--sequence_parallel_enabled", opts->sequence_parallel,
                "Megatron's sequence parallelism: norms, residuals and the embedding output "
                "split along the sequence over the tensor-parallel group (needs "
                "--tensor-parallel-size > 1)");
  const std::map<std::string, Precision> precision{{"fp32", Precision::kFp32},
                                                   {"bf16-mixed", Precision::kBf16Mixed}};
  auto* prec = sub->add_option("--precision", opts->precision,
                               "fp32, or bf16-mixed: bf16 weights and activations over fp32 "
                               "master weights, gradients and AdamW state (default fp32)")
                   ->transform(CLI::CheckedTransformer(precision));
  sub->add_flag_callback(
         "--use_mix_precision", [opts] { opts->precision = Precision::kBf16Mixed; },
         "the recipe's name for --precision bf16-mixed")
      ->excludes(prec);
}

void RegisterTrain(CLI::App& app) {
  auto* sub = app.add_subcommand("train",
                                 "Train a Llama model on a lote dataset (CPU engine; its own "
                                 "launcher for many ranks and nodes)");
  auto opts = std::make_shared<TrainOptions>();
  sub->add_option("--config", opts->config_path, "Hugging Face Llama config.json")->required();
  sub->add_option("--data", opts->data_dir, "dataset directory written by `lote data prepare`");
  sub->add_option("--batch-size", opts->batch_size, "micro batch size (sequences)")
      ->capture_default_str();
  sub->add_option("--grad-accum-steps", opts->grad_accum_steps, "micro batches per optimizer step")
      ->capture_default_str();
  sub->add_option("--max-steps", opts->max_steps, "optimizer steps")->capture_default_str();
  sub->add_option("--warmup-steps", opts->warmup_steps, "linear warmup steps")
      ->capture_default_str();
  sub->add_option("--lr", opts->lr, "peak learning rate (linear decay to 0 at --max-steps)")
      ->capture_default_str();
  sub->add_option("--seq-len", opts->seq_len,
                  "tokens per sequence (0 = min(block size, max_position_embeddings))")
      ->capture_default_str();
  sub->add_option("--logging-interval", opts->logging_interval, "steps per log line")
      ->capture_default_str();
  sub->add_option("--eval-interval", opts->eval_interval,
                  "steps per validation (0 = at the end only)")
      ->capture_default_str();
  sub->add_option("--eval-batches", opts->eval_batches, "validation micro batches per evaluation")
      ->capture_default_str();
  sub->add_option("--val-fraction", opts->val_fraction,
                  "fraction of blocks held out for validation")
      ->capture_default_str();
  sub->add_option("--seed", opts->seed, "seed of initialisation and data order")
      ->capture_default_str();
  sub->add_option("--weight-decay", opts->weight_decay, "AdamW decoupled weight decay")
      ->capture_default_str();
  sub->add_option("--grad-clip", opts->grad_clip, "global gradient-norm clip")
      ->capture_default_str();
  sub->add_option("--tensor-parallel-size", opts->tensor_parallel_size,
                  "tensor-parallel ranks per model replica (data parallel = ranks / this)")
      ->capture_default_str();
  sub->add_option("--global-batch-size", opts->global_batch_size,
                  "sequences per optimizer step over all ranks; gradient accumulation = "
                  "global / (micro batch x data parallel) (0 = micro batch x "
                  "--grad-accum-steps x data parallel)")
      ->capture_default_str();
  sub->add_option("--checkpoint-uri", opts->checkpoint_uri,
                  "write checkpoints to URI/<job id>/step_<N>/ (file:// or s3://)");
  sub->add_option("--checkpoint-freq", opts->checkpoint_freq,
                  "steps between checkpoints (0 = only at the end; always at the end)")
      ->capture_default_str();
  sub->add_option("--keep-checkpoints", opts->keep_checkpoints,
                  "keep the newest K complete checkpoints (0 = all)")
      ->capture_default_str();
  sub->add_option("--max-checkpoint-failures", opts->max_checkpoint_failures,
                  "end the run after K failed checkpoints in a row (a failed one is a warning; "
                  "the previous stays the latest)")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  sub->add_option(
      "--resume", opts->resume,
      "latest | none | a step_<N> URI | a job's checkpoint folder URI (its latest complete "
      "one) (default: latest when AWS_BATCH_JOB_ATTEMPT > 1)");
  sub->add_option("--compile-cache", opts->compile_cache,
                  "URI of the compile cache (the recipe's NEURON_COMPILE_CACHE_URI): reuse the "
                  "plan recorded for this model, layout and shape, else record it");
  sub->add_option("--precompile", opts->precompile,
                  "true: a 2-step dry run that checks everything and records the plan in "
                  "--compile-cache (no checkpoints, no output)")
      ->capture_default_str();
  sub->add_option("--job-id", opts->job_id,
                  "checkpoint folder name (default: AWS_BATCH_JOB_ID without #node, else local)");
  auto launch = std::make_shared<LaunchOptions>();
  sub->add_option("--nproc-per-node", launch->nproc_per_node,
                  "rank processes to start on this node (each with --threads threads)")
      ->capture_default_str();
  sub->add_option("--nnodes", launch->nnodes,
                  "nodes of the job (0 = AWS_BATCH_JOB_NUM_NODES, else 1)")
      ->capture_default_str();
  sub->add_option("--node-rank", launch->node_rank,
                  "this node's index (-1 = AWS_BATCH_JOB_NODE_INDEX, else 0)")
      ->capture_default_str();
  sub->add_option("--master-addr", launch->master_addr,
                  "the main node's address (default: AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS, "
                  "on the main node LOTE_PRIVATE_IPV4_ADDRESS, else 127.0.0.1)");
  sub->add_option("--master-port", launch->master_port,
                  "the rendezvous store's port (default: one node, any free port; several, 29500, "
                  "under AWS Batch 29500 + a hash of the job id and attempt, so jobs sharing a "
                  "host do not collide)");
  sub->add_option("--node-addr", launch->node_addr,
                  "this node's address for the ranks' connections (default: "
                  "LOTE_PRIVATE_IPV4_ADDRESS, else the route to the main node)");
  sub->add_option("--rdzv-timeout", launch->rdzv_timeout_s,
                  "seconds to wait for every node and rank to join")
      ->capture_default_str();
  sub->add_option("--comm", launch->comm,
                  "collectives between ranks: auto (shared memory for a group whose ranks are "
                  "all on one host, else Gloo over TCP), shm (the same, but a group that "
                  "cannot use shared memory fails), gloo (always TCP)")
      ->check(CLI::IsMember({"auto", "shm", "gloo"}))
      ->capture_default_str();
  sub->add_option("--init-weights", opts->init_weights,
                  "start from a safetensors file (lote or Hugging Face names)");
  sub->add_option("--output", opts->output_dir,
                  "directory for model.safetensors, config.json, metrics.json");
  sub->add_option("--threads", opts->threads, "OpenMP threads (0 = all)")->capture_default_str();
  sub->add_option("--peak-gflops", opts->peak_gflops, "MFU denominator (0 = measure GEMM peak)")
      ->capture_default_str();
  sub->add_flag("--plan-only", opts->plan_only,
                "print parameter count and memory plan, allocate nothing");
  AddActivationFlags(sub, opts.get());
  sub->callback(
      [opts, launch] { SetExitCode(RunTrainCommand(*opts, *launch, ProcessArguments())); });
}

void RegisterModel(CLI::App& app) {
  auto* model = app.add_subcommand("model", "Inspect and evaluate Llama models");
  model->require_subcommand(1);

  auto* plan = model->add_subcommand("plan", "Print a config's parameter count and memory plan");
  auto plan_cfg = std::make_shared<std::string>();
  auto plan_b = std::make_shared<int64_t>(1);
  auto plan_t = std::make_shared<int64_t>(0);
  plan->add_option("--config", *plan_cfg, "Hugging Face Llama config.json")->required();
  plan->add_option("--batch-size", *plan_b, "micro batch")->capture_default_str();
  plan->add_option("--seq-len", *plan_t, "sequence length (0 = max_position_embeddings)")
      ->capture_default_str();
  auto plan_tp = std::make_shared<int64_t>(1);
  auto plan_launch = std::make_shared<LaunchOptions>();
  plan_launch->nnodes = 1;
  plan->add_option("--tensor-parallel-size", *plan_tp, "tensor-parallel size of the layout")
      ->capture_default_str();
  plan->add_option("--nnodes", plan_launch->nnodes, "nodes of the layout")->capture_default_str();
  plan->add_option("--nproc-per-node", plan_launch->nproc_per_node, "ranks per node")
      ->capture_default_str();
  auto plan_acts = std::make_shared<TrainOptions>();
  AddActivationFlags(plan, plan_acts.get());
  plan->callback([plan_cfg, plan_b, plan_t, plan_tp, plan_launch, plan_acts] {
    TrainOptions o = *plan_acts;
    o.config_path = *plan_cfg;
    o.batch_size = *plan_b;
    o.seq_len = *plan_t;
    o.tensor_parallel_size = *plan_tp;
    o.plan_only = true;
    plan_launch->node_rank = 0;
    plan_launch->main_node = 0;
    SetExitCode(RunTrainCommand(o, *plan_launch, {}));
  });

  auto* score = model->add_subcommand(
      "score", "Print each position's log-probability of the next token and the mean loss");
  struct ScoreArgs {
    std::string config, weights, tokens, token_file;
    bool json = false;
  };
  auto sa = std::make_shared<ScoreArgs>();
  score->add_option("--config", sa->config, "Hugging Face Llama config.json")->required();
  score
      ->add_option("--weights", sa->weights,
                   "safetensors weights (lote output or HF model.safetensors)")
      ->required();
  auto* tok = score->add_option("--tokens", sa->tokens, "token ids, e.g. \"1 15043 3186\"");
  auto* tf =
      score->add_option("--token-file", sa->token_file, "file of whitespace-separated token ids");
  tok->excludes(tf);
  score->add_flag("--json", sa->json, "print one JSON object instead of a table");
  score->callback([sa] {
    if (sa->tokens.empty() && sa->token_file.empty()) {
      SetExitCode(Fail(Status::InvalidArgument("give --tokens or --token-file")));
      return;
    }
    Status s = Score(sa->config, sa->weights, sa->tokens, sa->token_file, sa->json);
    SetExitCode(s.ok() ? 0 : Fail(s));
  });

  auto* dump = model->add_subcommand(
      "dump", "Write logits, loss and all gradients for one batch (golden tests)");
  auto da = std::make_shared<DumpOptions>();
  dump->add_option("--config", da->config)->required();
  dump->add_option("--weights", da->weights)->required();
  dump->add_option("--tokens-file", da->tokens_file, "raw int32 [batch, seq_len+1]")->required();
  dump->add_option("--batch-size", da->batch)->capture_default_str();
  dump->add_option("--output", da->output, "safetensors file to write")->required();
  dump->add_option("--steps", da->steps, "then run this many AdamW steps on the batch")
      ->capture_default_str();
  dump->add_option("--warmup-steps", da->warmup)->capture_default_str();
  dump->add_option("--lr", da->lr)->capture_default_str();
  dump->add_option("--weight-decay", da->weight_decay)->capture_default_str();
  dump->callback([da] {
    Status s = Dump(*da);
    SetExitCode(s.ok() ? 0 : Fail(s));
  });
}

lote::CommandRegistrar train_registrar(RegisterTrain);
lote::CommandRegistrar model_registrar(RegisterModel);

}  // namespace
}  // namespace lote::engine
