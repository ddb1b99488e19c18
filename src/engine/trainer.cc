#include "engine/trainer.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <vector>

#include "common/files.h"
#include "common/json.h"
#include "engine/adamw.h"
#include "engine/checkpoint.h"
#include "engine/checkpoint_tools.h"
#include "engine/communicator.h"
#include "engine/compile_cache.h"
#include "engine/cpu_kernels.h"
#include "engine/indexed_dataset.h"
#include "engine/llama_config.h"
#include "engine/llama_model.h"
#include "engine/memory_plan.h"
#include "engine/weights_io.h"

namespace lote::engine {
namespace {

std::atomic<bool> g_preempt{false};
void OnPreempt(int) { g_preempt = true; }

std::string DefaultJobId() {
  const char* v = std::getenv("AWS_BATCH_JOB_ID");
  std::string id = v != nullptr ? v : "";
  if (const size_t hash = id.find('#'); hash != std::string::npos) id.resize(hash);
  return id.empty() ? "local" : id;
}

int64_t JobAttempt() {
  const char* v = std::getenv("AWS_BATCH_JOB_ATTEMPT");
  return v != nullptr ? std::atoll(v) : 1;
}

using Clock = std::chrono::steady_clock;

// CPU seconds used by this process (all threads): a throughput measure that stays
// meaningful on a machine shared with other work.
double ProcessCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

Status CheckOptions(const TrainOptions& o) {
  auto positive = [](const char* flag, int64_t v) -> Status {
    if (v <= 0) return Status::InvalidArgument(fmt::format("{} must be > 0 (got {})", flag, v));
    return Status::Ok();
  };
  RETURN_IF_ERROR(positive("--batch-size", o.batch_size));
  RETURN_IF_ERROR(positive("--grad-accum-steps", o.grad_accum_steps));
  RETURN_IF_ERROR(positive("--max-steps", o.max_steps));
  RETURN_IF_ERROR(positive("--logging-interval", o.logging_interval));
  RETURN_IF_ERROR(positive("--eval-batches", o.eval_batches));
  if (o.warmup_steps < 0 || o.eval_interval < 0 || o.seq_len < 0) {
    return Status::InvalidArgument("--warmup-steps, --eval-interval and --seq-len must be >= 0");
  }
  if (!(o.lr > 0)) return Status::InvalidArgument("--lr must be > 0");
  if (!(o.weight_decay >= 0)) return Status::InvalidArgument("--weight-decay must be >= 0");
  if (o.config_path.empty()) return Status::InvalidArgument("--config is required");
  if (!o.plan_only && o.data_dir.empty()) {
    return Status::InvalidArgument(
        "--data is required (a dataset directory from `lote data prepare`)");
  }
  return Status::Ok();
}

// Names the first tensor of `buf` (laid out as `layout`) holding NaN/Inf, or "".
std::string FirstNonFinite(const ParamLayout& layout, const float* buf) {
  for (const TensorSpec& t : layout.tensors()) {
    for (int64_t i = 0; i < t.numel; ++i) {
      if (!std::isfinite(buf[t.offset + i])) return t.name;
    }
  }
  return "";
}

Status NonFiniteError(int64_t step, const char* what, double value, const LlamaModel& model,
                      const float* grads) {
  std::string where = FirstNonFinite(model.layout(), model.params());
  if (!where.empty()) {
    where = "parameter " + where;
  } else if (grads != nullptr && !(where = FirstNonFinite(model.layout(), grads)).empty()) {
    where = "gradient of " + where;
  } else {
    where = "the logits (parameters and gradients are finite)";
  }
  return Status::FailedPrecondition(fmt::format(
      "step {}: {} is {}; first non-finite tensor: {}. Lower --lr or raise --warmup-steps", step,
      what, value, where));
}

Status CheckTokens(const std::vector<int32_t>& tokens, int64_t vocab) {
  for (int32_t t : tokens) {
    if (t >= vocab) {
      return Status::InvalidArgument(fmt::format(
          "the dataset holds token id {} but the model's vocab_size is {}; use a config whose "
          "vocab_size covers the tokenizer",
          t, vocab));
    }
  }
  return Status::Ok();
}

}  // namespace

Result<int64_t> CheckLayout(const TrainOptions& o, int world) {
  RETURN_IF_ERROR(CheckOptions(o));
  const int64_t tp = o.tensor_parallel_size;
  if (tp < 1 || world % tp != 0) {
    return Status::InvalidArgument(
        fmt::format("--tensor-parallel-size {} does not divide the {} ranks of the job (nodes x "
                    "--nproc-per-node); data parallel = ranks / tensor parallel must be whole",
                    tp, world));
  }
  const int64_t dp = world / tp;
  if (o.global_batch_size <= 0) return o.grad_accum_steps;
  if (o.global_batch_size % (o.batch_size * dp) != 0) {
    return Status::InvalidArgument(fmt::format(
        "--global-batch-size {} is not a multiple of micro batch {} x data parallel {}; "
        "gradient accumulation = global / (micro x DP) must be whole",
        o.global_batch_size, o.batch_size, dp));
  }
  return o.global_batch_size / (o.batch_size * dp);
}

// A precompile run (the recipe's DO_PRE_COMPILATION job): at most 2 steps, no
// checkpoint, resume or output; it exists to check everything and record the plan.
TrainOptions PrecompileOptions(TrainOptions o) {
  if (!o.precompile) return o;
  o.max_steps = std::min<int64_t>(o.max_steps, 2);
  o.warmup_steps = std::min(o.warmup_steps, o.max_steps);
  o.logging_interval = 1;
  o.eval_interval = 0;
  o.checkpoint_uri.clear();
  o.resume = "none";
  o.output_dir.clear();
  return o;
}

Status RunTraining(const TrainOptions& options, std::FILE* out, const DistContext* dist) {
  if (options.precompile && options.compile_cache.empty()) {
    return Status::InvalidArgument("--precompile true needs --compile-cache URI to record into");
  }
  const TrainOptions o = PrecompileOptions(options);
  if (o.precompile) {
    fmt::print(out,
               "precompile: {} steps to check the config, data, layout and memory plan, and "
               "record the plan in {}\n",
               o.max_steps, o.compile_cache);
  }
  const DistContext single;
  const DistContext& d = dist != nullptr ? *dist : single;
  std::unique_ptr<Communicator> solo_tp, solo_dp, solo_world;
  Communicator* world_comm = d.world_comm;
  Communicator* tp_comm = d.tp_comm;
  Communicator* dp_comm = d.dp_comm;
  if (world_comm == nullptr) world_comm = (solo_world = MakeSingleProcessCommunicator()).get();
  if (tp_comm == nullptr) tp_comm = (solo_tp = MakeSingleProcessCommunicator()).get();
  if (dp_comm == nullptr) dp_comm = (solo_dp = MakeSingleProcessCommunicator()).get();
  ASSIGN_OR_RETURN(const int64_t accum, CheckLayout(o, d.world));
  const int tp = static_cast<int>(o.tensor_parallel_size);
  const int dp = d.world / tp;
  const int tp_rank = d.rank % tp, dp_rank = d.rank / tp;
  // Only rank 0 speaks; the others' lines go nowhere (errors still reach stderr).
  std::FILE* devnull = nullptr;
  if (d.rank != 0) {
    devnull = std::fopen("/dev/null", "w");
    out = devnull;
  }
  struct Closer {
    std::FILE* f;
    ~Closer() {
      if (f != nullptr) std::fclose(f);
    }
  } closer{devnull};

  InitCpuBackend(o.threads);
  ASSIGN_OR_RETURN(LlamaConfig config, LlamaConfig::Load(o.config_path));
  RETURN_IF_ERROR(ValidateTensorParallel(config, tp));
  const int threads = CpuThreads();
  fmt::print(out,
             "lote train: Llama with {} parameters ({} layers, hidden {}, heads {}/{} kv, "
             "vocab {}), {} ranks (tensor parallel {} x data parallel {}), {} threads per rank\n",
             HumanCount(static_cast<double>(config.NumParameters())), config.num_hidden_layers,
             config.hidden_size, config.num_attention_heads, config.num_key_value_heads,
             config.vocab_size, d.world, tp, dp, threads);
  if (o.plan_only) {
    const int64_t T = o.seq_len > 0 ? o.seq_len : config.max_position_embeddings;
    const MemoryPlan plan = PlanRankMemory(config, o.batch_size, T, threads, tp, dp);
    fmt::print(out, "parameters: {} ({})\nmemory plan per rank for micro batch {} x seq {}:\n{}",
               config.NumParameters(), HumanCount(static_cast<double>(config.NumParameters())),
               o.batch_size, T, plan.ToString());
    std::fflush(out);
    return Status::Ok();
  }

  ASSIGN_OR_RETURN(auto data, IndexedDataset::Open(o.data_dir));
  if (data->vocab_size() > config.vocab_size) {
    return Status::InvalidArgument(
        fmt::format("dataset {} has vocab_size {} but the model config has {}; use a config whose "
                    "vocab_size is at least the tokenizer's",
                    o.data_dir, data->vocab_size(), config.vocab_size));
  }
  const int64_t T =
      o.seq_len > 0 ? o.seq_len : std::min(data->block_size(), config.max_position_embeddings);
  if (T > config.max_position_embeddings) {
    return Status::InvalidArgument(
        fmt::format("--seq-len {} exceeds the model's max_position_embeddings {}; lower --seq-len",
                    T, config.max_position_embeddings));
  }
  ASSIGN_OR_RETURN(auto sampler, BatchSampler::Create(data.get(), T, o.val_fraction, o.seed));
  const int64_t B = o.batch_size;
  const MemoryPlan plan = PlanRankMemory(config, B, T, threads, tp, dp);
  fmt::print(out, "memory plan per rank (micro batch {} x seq {}):\n{}", B, T, plan.ToString());
  fmt::print(out, "data: {} blocks of {} tokens, {} training samples, {} validation samples\n",
             data->num_sequences(), data->block_size(), sampler->num_train_samples(),
             sampler->num_val_samples());
  fmt::print(out,
             "global batch {} sequences = micro batch {} x {} accumulation x {} data parallel\n",
             B * accum * dp, B, accum, dp);
  std::fflush(out);

  ASSIGN_OR_RETURN(auto model, LlamaModel::Create(config, B, T, true, TensorParallel{tp_rank, tp},
                                                  tp > 1 ? tp_comm : nullptr));
  if (o.init_weights.empty()) {
    model->InitWeights(o.seed);
  } else {
    RETURN_IF_ERROR(LoadWeights(model.get(), o.init_weights));
    fmt::print(out, "initial weights from {}\n", o.init_weights);
  }
  // ZeRO-1: this DP rank's shard of the flat buffer.
  const std::vector<int64_t> dp_counts = EvenCounts(model->num_params(), dp);
  const Range shard = EvenSplit(model->num_params(), dp, dp_rank);
  AdamWOptions adam_opts;
  adam_opts.weight_decay = static_cast<float>(o.weight_decay);
  AdamW adamw(model->layout(), adam_opts, shard.begin, shard.end);
  // Ranges of the shard that count towards the global gradient norm: everything on TP
  // rank 0; on the others only the TP-sharded tensors (replicated ones are counted once).
  std::vector<Range> norm_ranges;
  for (const TensorSpec& t : model->layout().tensors()) {
    if (tp_rank != 0 && t.replicated()) continue;
    const int64_t b = std::max(t.offset, shard.begin), e = std::min(t.offset + t.numel, shard.end);
    if (b < e) norm_ranges.push_back({b, e});
  }

  // Checkpoints and resume.
  const RankPlace place{d.rank, d.world, tp_rank, tp, dp_rank, dp};
  const std::string job_id = o.job_id.empty() ? DefaultJobId() : o.job_id;
  std::unique_ptr<CheckpointWriter> writer;
  int64_t first_step = 1;
  if (!o.checkpoint_uri.empty()) {
    CheckpointOptions co;
    co.uri = o.checkpoint_uri;
    co.job_id = job_id;
    co.keep = o.keep_checkpoints;
    ASSIGN_OR_RETURN(writer, CheckpointWriter::Create(co, config, place));
    // The snapshot buffer's pages are touched now, not at the first checkpoint (a fresh
    // 700 MB buffer costs ~1 s of page faults; a warm one ~50 ms to fill).
    ASSIGN_OR_RETURN(TrainState * buffer, writer->Snapshot());
    buffer->params.assign(static_cast<size_t>(model->num_params()), 0.0f);
    buffer->exp_avg.assign(static_cast<size_t>(shard.size()), 0.0f);
    buffer->exp_avg_sq.assign(static_cast<size_t>(shard.size()), 0.0f);
    std::signal(SIGTERM, OnPreempt);  // cooperative preemption: checkpoint, then exit
  }
  std::string resume = o.resume;
  const bool implicit = resume.empty();
  if (implicit) resume = (JobAttempt() > 1 && !o.checkpoint_uri.empty()) ? "latest" : "none";
  if (resume != "none") {
    std::string step_uri = resume;
    if (resume == "latest") {
      if (o.checkpoint_uri.empty()) {
        return Status::InvalidArgument("--resume latest needs --checkpoint-uri");
      }
      Result<std::string> latest = LatestCheckpoint(o.checkpoint_uri, job_id);
      if (!latest.ok() && !latest.status().IsNotFound()) return latest.status();
      step_uri = latest.ok() ? *latest : "";
      if (step_uri.empty()) {
        fmt::print(out, "no checkpoint under {}/{} yet: starting from step 1\n", o.checkpoint_uri,
                   job_id);
      }
    }
    int64_t named_step = 0;
    if (resume != "latest" && !IsStepFolder(resume, &named_step)) {
      // A job's folder of checkpoints (e.g. another job's): its latest complete one.
      std::string folder = resume;
      while (!folder.empty() && folder.back() == '/') folder.pop_back();
      const size_t slash = folder.rfind('/');
      if (slash == std::string::npos) {
        return Status::InvalidArgument("--resume " + resume +
                                       ": expected latest, none, a step_<N> URI or a job's "
                                       "checkpoint folder URI");
      }
      Result<std::string> latest =
          LatestCheckpoint(folder.substr(0, slash), folder.substr(slash + 1));
      if (!latest.ok()) {
        return Status::NotFound("--resume " + resume + ": no complete checkpoint there (" +
                                latest.status().message() + ")");
      }
      step_uri = *latest;
    }
    if (!step_uri.empty()) {
      ASSIGN_OR_RETURN(TrainState st,
                       LoadCheckpoint(step_uri, config, place, shard.begin, shard.end));
      std::copy(st.params.begin(), st.params.end(), model->params());
      std::copy(st.exp_avg.begin(), st.exp_avg.end(), adamw.m());
      std::copy(st.exp_avg_sq.begin(), st.exp_avg_sq.end(), adamw.v());
      adamw.set_steps(st.adam_step);
      SamplerState restored;
      restored.epoch = static_cast<uint64_t>(st.sampler_epoch);
      restored.position = st.sampler_position;
      RETURN_IF_ERROR(sampler->Restore(restored));
      first_step = st.step + 1;
      fmt::print(out,
                 "resumed from {} (step {}, made with tensor parallel {} x data parallel {})\n",
                 step_uri, st.step, st.train.value("tensor_parallel", 0),
                 st.train.value("data_parallel", 0));
    }
  }
  // Fills the writer's snapshot buffer: the only time training waits for a checkpoint.
  auto parallel_copy = [](const float* from, int64_t n, std::vector<float>* to) {
    to->resize(static_cast<size_t>(n));
    float* dst = to->data();
    constexpr int64_t kChunk = 1 << 20;
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < (n + kChunk - 1) / kChunk; ++c) {
      const int64_t b = c * kChunk, e = std::min(n, b + kChunk);
      std::copy(from + b, from + e, dst + b);
    }
  };
  auto snapshot = [&](int64_t step, TrainState& st) {
    st.step = step;
    st.adam_step = adamw.steps();
    st.sampler_epoch = sampler->state().epoch;
    st.sampler_position = sampler->state().position;
    parallel_copy(model->params(), model->num_params(), &st.params);
    parallel_copy(adamw.m(), shard.size(), &st.exp_avg);
    parallel_copy(adamw.v(), shard.size(), &st.exp_avg_sq);
    st.shard_begin = shard.begin;
    st.shard_end = shard.end;
    st.train = Json{{"seed", o.seed},
                    {"lr", o.lr},
                    {"warmup_steps", o.warmup_steps},
                    {"max_steps", o.max_steps},
                    {"global_batch_size", B * accum * dp},
                    {"micro_batch_size", B},
                    {"seq_len", T},
                    {"grad_clip", o.grad_clip},
                    {"weight_decay", o.weight_decay},
                    {"tensor_parallel", tp},
                    {"data_parallel", dp}};
  };
  double checkpoint_block_s = 0.0;         // training time spent taking snapshots
  Json checkpoint_blocks = Json::array();  // per checkpoint
  int64_t checkpoints = 0;

  // The compile cache: a plan recorded for this shape gives the GEMM peak
  // without measuring it again (every rank reads the same entry).
  const Json shape = CompileShape(config, tp, dp, B, T, threads);
  std::optional<CompilePlan> cached;
  if (!o.compile_cache.empty() && !o.precompile) {
    ASSIGN_OR_RETURN(cached, LookupCompilePlan(o.compile_cache, shape));
    if (cached) {
      fmt::print(out,
                 "compile cache: found the plan recorded by job {} at {} ({}): GEMM peak {:.1f} "
                 "GFLOP/s, not measured again\n",
                 cached->recorded_by, cached->uri, cached->created_at, cached->gemm_peak_gflops);
    } else {
      fmt::print(out,
                 "compile cache: no plan for this model, layout and shape under {} (a "
                 "DO_PRE_COMPILATION run records one): measuring now\n",
                 o.compile_cache);
    }
  }
  double peak = o.peak_gflops > 0 ? o.peak_gflops
                : cached          ? cached->gemm_peak_gflops
                                  : MeasureGemmPeakGflops();
  {
    double p = peak;  // every rank uses rank 0's measurement
    if (d.world > 1) {
      double buf[1] = {d.rank == 0 ? p : 0.0};
      RETURN_IF_ERROR(world_comm->AllReduce(buf, 1, ReduceOp::kSum));
      p = buf[0];
    }
    peak = p;
  }
  fmt::print(out, "GEMM peak {:.1f} GFLOP/s per rank (MFU denominator: x {} ranks)\n", peak,
             d.world);
  // Rank 0 records the plan: a main run that found none at once (a failure to
  // write is only a warning), a precompile run once its steps have succeeded.
  auto record_plan = [&]() -> Status {
    CompilePlan record;
    record.shape = shape;
    record.gemm_peak_gflops = peak;
    record.memory_plan = MemoryPlanJson(plan);
    record.recorded_by = job_id;
    ASSIGN_OR_RETURN(std::string at, RecordCompilePlan(o.compile_cache, record));
    fmt::print(out, "compile cache: recorded the plan (GEMM peak, memory plan) at {}\n", at);
    return Status::Ok();
  };
  if (!o.compile_cache.empty() && !cached && !o.precompile && d.rank == 0) {
    if (Status st = record_plan(); !st.ok()) {
      fmt::print(out, "warning: compile cache: {} (training goes on)\n", st.message());
    }
  }
  const double flops_per_token = config.TrainFlopsPerToken(T);
  const int64_t tokens_per_step = B * T * accum * dp;
  const double job_peak = peak * 1e9 * d.world;

  std::vector<int32_t> inputs(static_cast<size_t>(B * T)), targets(static_cast<size_t>(B * T));
  auto evaluate = [&]() -> Result<double> {
    const int64_t n = std::min(sampler->num_val_samples(), o.eval_batches * B);
    double acc[2] = {0.0, 0.0};  // loss sum, targets
    for (int64_t i = 0, micro = 0; i < n; i += B, ++micro) {
      if (micro % dp != dp_rank) continue;
      const int64_t b = std::min(B, n - i);
      for (int64_t j = 0; j < b; ++j) {
        sampler->ValSample(i + j, inputs.data() + j * T, targets.data() + j * T);
      }
      int64_t valid = 0;
      const double loss = model->ForwardBackward(inputs.data(), targets.data(), b, T, 0.0f, &valid);
      acc[0] += loss * static_cast<double>(valid);
      acc[1] += static_cast<double>(valid);
    }
    RETURN_IF_ERROR(model->comm_status());
    RETURN_IF_ERROR(dp_comm->AllReduce(acc, 2, ReduceOp::kSum));
    return acc[1] > 0 ? acc[0] / acc[1] : std::nan("");
  };

  Json losses = Json::array(), val_losses = Json::array(), step_times = Json::array(),
       step_cpu = Json::array();
  double last_loss = 0, last_val = std::nan(""), peak_tps = 0;
  const auto start = Clock::now();
  auto interval_start = start;
  int64_t interval_steps = 0;
  float* params = model->params();
  float* grads = model->grads();
  const float micro_scale = 1.0f / static_cast<float>(accum * dp);
  bool preempted = false;
  for (int64_t step = first_step; step <= o.max_steps; ++step) {
    const auto step_start = Clock::now();
    const double cpu_start = ProcessCpuSeconds();
    model->ZeroGrad();
    double loss_sum = 0.0;
    for (int64_t micro = 0; micro < accum * dp; ++micro) {
      if (micro / accum != dp_rank) {
        sampler->SkipTrainBatch(B);
        continue;
      }
      sampler->NextTrainBatch(B, inputs.data(), targets.data());
      RETURN_IF_ERROR(CheckTokens(inputs, config.vocab_size));
      RETURN_IF_ERROR(CheckTokens(targets, config.vocab_size));
      loss_sum += model->ForwardBackward(inputs.data(), targets.data(), B, T, micro_scale);
    }
    RETURN_IF_ERROR(model->comm_status());
    RETURN_IF_ERROR(dp_comm->AllReduce(&loss_sum, 1, ReduceOp::kSum));
    const double loss = loss_sum / static_cast<double>(accum * dp);
    if (!std::isfinite(loss)) return NonFiniteError(step, "the loss", loss, *model, grads);
    RETURN_IF_ERROR(dp_comm->ReduceScatter(grads, dp_counts));
    double ss = 0.0;
    for (const Range& r : norm_ranges) {
#pragma omp parallel for schedule(static) reduction(+ : ss)
      for (int64_t i = r.begin; i < r.end; ++i) ss += static_cast<double>(grads[i]) * grads[i];
    }
    // The norm's all-reduce also carries "a rank was asked to stop" (SIGTERM), so
    // every rank agrees to stop after this step.
    double reduce[2] = {ss, g_preempt.load() ? 1.0 : 0.0};
    RETURN_IF_ERROR(world_comm->AllReduce(reduce, 2, ReduceOp::kSum));
    const double norm = std::sqrt(reduce[0]);
    preempted = writer != nullptr && reduce[1] > 0;
    if (!std::isfinite(norm)) {
      return NonFiniteError(step, "the gradient norm", norm, *model, grads);
    }
    const double coef = ClipCoefficient(norm, o.grad_clip);
    if (coef < 1.0) {
      const float c = static_cast<float>(coef);
#pragma omp parallel for schedule(static)
      for (int64_t i = shard.begin; i < shard.end; ++i) grads[i] *= c;
    }
    const double lr = LearningRate(step, o.warmup_steps, o.max_steps, o.lr);
    adamw.Step(params, grads, static_cast<float>(lr));
    RETURN_IF_ERROR(dp_comm->AllGather(params, dp_counts));
    if (writer != nullptr && (preempted || step == o.max_steps ||
                              (o.checkpoint_freq > 0 && step % o.checkpoint_freq == 0))) {
      const auto t0 = Clock::now();
      ASSIGN_OR_RETURN(TrainState * st, writer->Snapshot());
      snapshot(step, *st);
      checkpoint_block_s += Seconds(t0, Clock::now());
      checkpoint_blocks.push_back(Seconds(t0, Clock::now()));
      RETURN_IF_ERROR(writer->Start());
      ++checkpoints;
    }
    if (preempted) {
      RETURN_IF_ERROR(writer->Wait());
      fmt::print(out, "preempted: stopped after step {}; checkpoint {} is complete\n", step,
                 writer->StepUri(step));
      std::fflush(out);
      RETURN_IF_ERROR(world_comm->Barrier());
      return Status::Cancelled(
          fmt::format("preempted after step {} (checkpoint {})", step, writer->StepUri(step)));
    }
    losses.push_back(loss);
    step_times.push_back(Seconds(step_start, Clock::now()));
    step_cpu.push_back(ProcessCpuSeconds() - cpu_start);
    last_loss = loss;
    ++interval_steps;

    if (step % o.logging_interval == 0 || step == o.max_steps) {
      const auto now = Clock::now();
      const double dt = Seconds(interval_start, now);
      const double tps = static_cast<double>(tokens_per_step * interval_steps) / dt;
      const double sps = static_cast<double>(B * accum * dp * interval_steps) / dt;
      const double mfu = tps * flops_per_token / job_peak;
      peak_tps = std::max(peak_tps, tps);
      fmt::print(out,
                 "step {:>6}/{} | loss {:.4f} | lr {:.3e} | grad norm {:.4f} | {:.0f} tokens/s | "
                 "{:.2f} sequences/s | MFU {:.1f}%\n",
                 step, o.max_steps, loss, lr, norm, tps, sps, 100.0 * mfu);
      Json progress{{"step", step},           {"total_steps", o.max_steps},
                    {"loss", loss},           {"lr", lr},
                    {"grad_norm", norm},      {"tokens_per_s", tps},
                    {"sequences_per_s", sps}, {"mfu", mfu}};
      fmt::print(out, "LOTE_PROGRESS {}\n", progress.dump());
      std::fflush(out);
      interval_start = Clock::now();
      interval_steps = 0;
    }
    const bool eval_now =
        sampler->num_val_samples() > 0 &&
        ((o.eval_interval > 0 && step % o.eval_interval == 0) || step == o.max_steps);
    if (eval_now) {
      const auto t0 = Clock::now();
      ASSIGN_OR_RETURN(last_val, evaluate());
      if (!std::isfinite(last_val)) {
        return NonFiniteError(step, "the validation loss", last_val, *model, nullptr);
      }
      val_losses.push_back(Json{{"step", step}, {"loss", last_val}});
      fmt::print(out, "eval step {:>6} | validation loss {:.4f}\n", step, last_val);
      fmt::print(out, "LOTE_PROGRESS {}\n",
                 Json{{"step", step}, {"total_steps", o.max_steps}, {"val_loss", last_val}}.dump());
      std::fflush(out);
      interval_start += Clock::now() - t0;  // evaluation time is not training throughput
    }
  }
  if (writer != nullptr) {
    const auto t0 = Clock::now();
    RETURN_IF_ERROR(writer->Wait());
    fmt::print(out,
               "checkpoint {} is complete ({} written, {:.3f} s of training blocked by "
               "snapshots, {:.1f} s waiting for the last upload)\n",
               writer->StepUri(o.max_steps), checkpoints, checkpoint_block_s,
               Seconds(t0, Clock::now()));
  }
  const double total_s = Seconds(start, Clock::now());
  const int64_t steps_run = o.max_steps - first_step + 1;
  const double avg_tps = static_cast<double>(tokens_per_step * steps_run) / total_s;
  const double comm_s = tp_comm->seconds_in_collectives() + dp_comm->seconds_in_collectives() +
                        world_comm->seconds_in_collectives();

  Json metrics{{"final_loss", last_loss},
               {"final_val_loss", std::isfinite(last_val) ? Json(last_val) : Json(nullptr)},
               {"steps", o.max_steps},
               {"first_step", first_step},
               {"checkpoint_block_s", checkpoint_block_s},
               {"checkpoint_blocks_s", checkpoint_blocks},
               {"time_s", total_s},
               {"avg_tokens_per_s", avg_tps},
               {"peak_tokens_per_s", peak_tps},
               {"avg_mfu", avg_tps * flops_per_token / job_peak},
               {"gemm_peak_gflops", peak},
               {"parameters", config.NumParameters()},
               {"tokens_per_step", tokens_per_step},
               {"seq_len", T},
               {"flops_per_token", flops_per_token},
               {"losses", losses},
               {"step_times_s", step_times},
               {"step_cpu_s", step_cpu},
               {"threads", threads},
               {"world_size", d.world},
               {"tensor_parallel", tp},
               {"data_parallel", dp},
               {"grad_accum_steps", accum},
               {"collective_s", comm_s},
               {"collective_share", total_s > 0 ? comm_s / total_s : 0.0},
               {"val_losses", val_losses},
               {"sampler", sampler->state().ToJson()}};
  if (o.precompile && d.rank == 0) RETURN_IF_ERROR(record_plan());
  fmt::print(out,
             "done: {} steps in {:.1f} s, final loss {:.4f}, validation loss {:.4f}, "
             "{:.0f} tokens/s average, {:.1f}% of the time in collectives (rank 0)\n",
             steps_run, total_s, last_loss, last_val, avg_tps,
             total_s > 0 ? 100.0 * comm_s / total_s : 0.0);
  if (!o.output_dir.empty()) {
    // Assemble whole tensors from the tensor-parallel shards (every TP group does the
    // same all-gather, so the groups stay in step; DP rank 0's group writes).
    std::vector<float> full;
    if (tp > 1) {
      const std::vector<int64_t> tp_counts = [&] {
        std::vector<int64_t> c;
        for (int r = 0; r < tp; ++r) c.push_back(ParamLayout(config, {r, tp}).total());
        return c;
      }();
      int64_t total = 0;
      for (int64_t c : tp_counts) total += c;
      std::vector<float> all(static_cast<size_t>(total));
      int64_t offset = 0;
      for (int r = 0; r < tp_rank; ++r) offset += tp_counts[static_cast<size_t>(r)];
      std::copy(params, params + model->num_params(), all.begin() + offset);
      RETURN_IF_ERROR(tp_comm->AllGather(all.data(), tp_counts));
      const ParamLayout global(config);
      full.assign(static_cast<size_t>(global.total()), 0.0f);
      offset = 0;
      for (int r = 0; r < tp; ++r) {
        const ParamLayout lr(config, {r, tp});
        for (const TensorSpec& t : lr.tensors()) {
          const TensorSpec* g = global.Find(t.name);
          PlaceShard(t, all.data() + offset + t.offset, full.data() + g->offset);
        }
        offset += tp_counts[static_cast<size_t>(r)];
      }
    } else {
      full.assign(params, params + model->num_params());
    }
    if (d.rank == 0) {
      RETURN_IF_ERROR(MakeDirs(o.output_dir));
      RETURN_IF_ERROR(SaveWeights(config, full.data(), o.output_dir + "/model.safetensors"));
      RETURN_IF_ERROR(
          WriteFileAtomic(o.output_dir + "/config.json", config.ToJson().dump(2) + "\n"));
      RETURN_IF_ERROR(WriteFileAtomic(o.output_dir + "/metrics.json", metrics.dump(2) + "\n"));
      fmt::print(out, "wrote {}/model.safetensors, config.json, metrics.json\n", o.output_dir);
    }
  }
  std::fflush(out);
  // Leave together: a rank that exits while another is still in a collective would
  // look like a failure to it.
  RETURN_IF_ERROR(world_comm->Barrier());
  return Status::Ok();
}

}  // namespace lote::engine
