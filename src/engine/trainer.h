// The training loop of `lote train`: loads the config and data, plans and allocates
// memory, initialises (or loads) weights, runs AdamW steps with gradient accumulation,
// warmup/decay and clipping, evaluates on the held-out split, logs a human line and a
// `LOTE_PROGRESS {json}` line per logging interval, and writes model.safetensors,
// config.json and metrics.json to the output directory. Errors (bad flags, data that
// does not fit the model, NaN/Inf) come back as a Status naming the problem.
//
// Distributed (Megatron layout, parallel_dims.h): world = TP x DP ranks. Each optimizer
// step draws the global batch (global_batch_size sequences = micro batch x
// accumulation x DP) in one order on every rank; DP rank d trains on micro batches
// [d*A, (d+1)*A). Gradients are reduce-scattered over DP, each DP rank clips with the
// global norm and updates only its ZeRO-1 shard with AdamW, and the updated shards are
// all-gathered. Only rank 0 prints and writes outputs.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include "common/status.h"
#include "engine/llama_config.h"
#include "engine/memory_plan.h"
#include "engine/parallel_dims.h"

namespace lote::engine {

struct TrainOptions {
  std::string config_path;
  std::string data_dir;
  std::string init_weights;  // safetensors (lote or HF); empty = random init
  std::string output_dir;    // empty = write nothing
  int64_t batch_size = 1;    // micro batch (sequences per forward/backward)
  int64_t grad_accum_steps = 1;
  int64_t max_steps = 100;
  int64_t warmup_steps = 0;
  int64_t seq_len = 0;  // 0 = min(block size, max_position_embeddings)
  int64_t logging_interval = 10;
  int64_t eval_interval = 0;  // 0 = evaluate only at the end
  int64_t eval_batches = 4;   // micro batches of validation per evaluation
  int64_t tensor_parallel_size = 1;
  int64_t global_batch_size = 0;  // sequences per step; 0 = batch_size * grad_accum * DP
  std::string checkpoint_uri;     // "" = no checkpoints
  int64_t checkpoint_freq = 0;    // steps between checkpoints (0 = only at the end)
  int keep_checkpoints = 0;       // 0 = keep all
  // Failed checkpoints in a row that end the run (checkpoint_failures.h).
  int max_checkpoint_failures = 3;
  std::string resume;  // "" = latest when AWS_BATCH_JOB_ATTEMPT > 1; "latest", "none", URI
  std::string job_id;  // "" = AWS_BATCH_JOB_ID without "#node", else "local"
  // Compile cache (compile_cache.h): "" = none. A precompile run trains at most
  // 2 steps, writes no checkpoint or output, and records the plan there.
  std::string compile_cache;
  bool precompile = false;
  double lr = 3e-4;
  double weight_decay = 0.01;
  double grad_clip = 1.0;
  double val_fraction = 0.05;
  double peak_gflops = 0;  // MFU denominator; 0 = measure the GEMM peak at start
  uint64_t seed = 1234;
  int threads = 0;  // 0 = OpenMP default
  bool plan_only = false;
  // What backward recomputes instead of keeping (memory_plan.h).
  Recompute activation_recompute = Recompute::kNone;
  // Megatron's sequence parallelism over the tensor-parallel group (needs TP > 1).
  bool sequence_parallel = false;
  // The numbers the model computes with (memory_plan.h): fp32, or bf16 weights and
  // activations over fp32 master weights, gradients and optimizer state.
  Precision precision = Precision::kFp32;
};

class Communicator;

// Exit code of a run stopped by SIGTERM after it saved a checkpoint (EX_TEMPFAIL):
// the jobs layer reads it as a preemption.
inline constexpr int kPreemptedExitCode = 75;

// A run as one of its processes sees it, checked once by PlanRun: the options as run
// (a precompile run's limits applied), the model config, the parallel layout and the
// gradient accumulation steps per data-parallel rank, and how activations are kept.
struct RunPlan {
  TrainOptions options;
  LlamaConfig config;
  ParallelDims dims;
  int64_t accum = 1;
  ActivationOptions activations;
};

// Checks the options, loads the config and makes the layout of `world` ranks as rank
// `rank` sees it (ParallelDims::Create), and checks that the global batch divides into
// micro batches x DP. The messages name the flag to change.
Result<RunPlan> PlanRun(const TrainOptions& options, int world, int rank);

// The process's three groups; null members are groups of one (a single process).
struct RunGroups {
  Communicator* world = nullptr;
  Communicator* tp = nullptr;  // ranks [dp_rank*TP, (dp_rank+1)*TP)
  Communicator* dp = nullptr;  // ranks tp_rank, tp_rank + TP, ...
};

// Runs training; human and progress lines go to `out` (rank 0 only).
Status RunTraining(const RunPlan& plan, std::FILE* out, RunGroups groups = {});

}  // namespace lote::engine
