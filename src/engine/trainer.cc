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
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "common/files.h"
#include "common/json.h"
#include "engine/adamw.h"
#include "engine/bf16_gemm.h"
#include "engine/checkpoint.h"
#include "engine/checkpoint_failures.h"
#include "engine/checkpoint_tools.h"
#include "engine/communicator.h"
#include "engine/compile_cache.h"
#include "engine/cpu_kernels.h"
#include "engine/indexed_dataset.h"
#include "engine/llama_config.h"
#include "engine/llama_model.h"
#include "engine/memory_plan.h"
#include "engine/weights_io.h"
#include "engine/zero_comm.h"

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

// The upload failure the node runner asked for (exec/node_fault.h): its length
// in ms and its first step; nullopt when none (or malformed).
std::optional<std::pair<int64_t, int64_t>> InjectedUploadFailure() {
  const char* secs = std::getenv("LOTE_INJECT_UPLOAD_FAIL_SECONDS");
  if (secs == nullptr || *secs == '\0') return std::nullopt;
  const char* from = std::getenv("LOTE_INJECT_UPLOAD_FAIL_AT_STEP");
  try {
    const int64_t s = std::stoll(secs), step = from != nullptr && *from ? std::stoll(from) : 1;
    if (s < 0 || step < 1) return std::nullopt;
    return std::pair<int64_t, int64_t>{s * 1000, step};
  } catch (const std::exception&) {
    return std::nullopt;
  }
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

// Gradients are reduce-scattered over DP in buckets of this many floats (4 MiB) while
// backward runs, and parameters all-gathered in such buckets during the next forward
// (zero_comm.h). Small enough that a layer of the 19 M bench model (0.8 M floats) is
// sent as soon as the layer after it has started its backward; 16 MiB held all four.
constexpr int64_t kGradBucketFloats = int64_t{1} << 20;

// What one optimizer step measured.
struct StepResult {
  double loss = 0, norm = 0, lr = 0;
  bool preempted = false;
};

// One process of a run: set-up steps, then the step loop, then the outputs. Each
// method is one named step of RunTraining; members are what the steps share.
class Trainer {
 public:
  Trainer(const RunPlan& plan, std::FILE* out, RunGroups groups);
  ~Trainer() {
    if (devnull_ != nullptr) std::fclose(devnull_);
  }

  Status PrintPlanOnly();
  Status OpenData();
  Status BuildModel();
  Status OpenCheckpoints();
  Status Resume();
  Status MeasurePeak();
  Status Train();
  Status Finish();

 private:
  Result<std::string> ResumeUri();
  Status RecordPlan();
  Result<StepResult> Step(int64_t step);
  std::vector<int64_t> StepEmbeddingRows() const;
  Status UpdateWeights(int64_t step, StepResult* r);
  Status ParamsGathered();
  Status Checkpoint(int64_t step);
  Status CheckUpload(Status upload);
  void MaybeOpenInjectedWindow(int64_t step);
  void FillSnapshot(int64_t step, TrainState& st);
  void Log(int64_t step, const StepResult& r);
  Status MaybeEvaluate(int64_t step);
  Result<double> Evaluate();
  Json Metrics(double total_s, int64_t steps_run) const;
  double ExposedCommSeconds() const;

  const TrainOptions& o_;
  const LlamaConfig& config_;
  const ParallelDims dims_;
  const int64_t accum_;
  const ActivationOptions activations_;
  std::FILE* out_;
  std::FILE* devnull_ = nullptr;
  std::unique_ptr<Communicator> solo_world_, solo_tp_, solo_dp_;
  Communicator* world_;
  Communicator* tp_;
  Communicator* dp_;
  int threads_ = 1;
  int64_t B_ = 0, T_ = 0;
  std::unique_ptr<IndexedDataset> data_;
  std::unique_ptr<BatchSampler> sampler_;
  MemoryPlan memory_;
  std::unique_ptr<LlamaModel> model_;
  std::unique_ptr<AdamW> adamw_;
  Range shard_;                     // ZeRO-1: this DP rank's part of the flat buffer
  std::vector<int64_t> dp_counts_;  // every DP rank's shard size
  std::vector<Range> norm_ranges_;  // of the shard, counted in the global gradient norm
  std::unique_ptr<ZeroComm> zero_;  // DP > 1: reduce-scatter and all-gather, overlapped
  std::vector<int32_t> inputs_, targets_;
  // Checkpoints.
  std::string job_id_;
  std::unique_ptr<CheckpointWriter> writer_;
  int64_t first_step_ = 1;
  double checkpoint_block_s_ = 0.0;         // training time spent taking snapshots
  Json checkpoint_blocks_ = Json::array();  // per checkpoint
  int64_t checkpoints_ = 0;
  int64_t pending_step_ = 0;  // the checkpoint in flight (0: none)
  std::optional<CheckpointFailures> failures_;
  // An injected upload failure (LOTE_INJECT_UPLOAD_FAIL_*): its length and first
  // step, and when its window closes once training reached that step.
  int64_t inject_fail_ms_ = -1, inject_from_step_ = 1;
  std::optional<Clock::time_point> inject_until_;
  // The compile cache and the MFU denominator.
  Json shape_;
  std::optional<CompilePlan> cached_;
  double peak_ = 0;
  // Progress.
  Json losses_ = Json::array(), val_losses_ = Json::array(), step_times_ = Json::array(),
       step_cpu_ = Json::array();
  double last_loss_ = 0, last_val_ = std::nan(""), peak_tps_ = 0;
  double step_s_ = 0, step_comm_s_ = 0;  // summed over steps: wall, and exposed communication
  Clock::time_point start_, interval_start_;
  int64_t interval_steps_ = 0;
};

Trainer::Trainer(const RunPlan& plan, std::FILE* out, RunGroups groups)
    : o_(plan.options),
      config_(plan.config),
      dims_(plan.dims),
      accum_(plan.accum),
      activations_(plan.activations),
      out_(out) {
  world_ = groups.world != nullptr ? groups.world
                                   : (solo_world_ = MakeSingleProcessCommunicator()).get();
  tp_ = groups.tp != nullptr ? groups.tp : (solo_tp_ = MakeSingleProcessCommunicator()).get();
  dp_ = groups.dp != nullptr ? groups.dp : (solo_dp_ = MakeSingleProcessCommunicator()).get();
  // Only rank 0 speaks; the others' lines go nowhere (errors still reach stderr).
  if (dims_.rank() != 0) out_ = devnull_ = std::fopen("/dev/null", "w");
  InitCpuBackend(o_.threads);
  threads_ = CpuThreads();
  if (o_.precompile) {
    fmt::print(out_,
               "precompile: {} steps to check the config, data, layout and memory plan, and "
               "record the plan in {}\n",
               o_.max_steps, o_.compile_cache);
  }
  fmt::print(out_,
             "lote train: Llama with {} parameters ({} layers, hidden {}, heads {}/{} kv, "
             "vocab {}), {} ranks (tensor parallel {} x data parallel {}), {} threads per rank, "
             "OpenBLAS {} kernels{}\n",
             HumanCount(static_cast<double>(config_.NumParameters())), config_.num_hidden_layers,
             config_.hidden_size, config_.num_attention_heads, config_.num_key_value_heads,
             config_.vocab_size, dims_.world(), dims_.tp(), dims_.dp(), threads_, BlasCoreName(),
             activations_.precision == Precision::kBf16Mixed
                 ? fmt::format(", bf16 GEMMs on {}", Bf16GemmKernelName(ActiveBf16GemmKernel()))
                 : std::string());
}

Status Trainer::PrintPlanOnly() {
  const int64_t T = o_.seq_len > 0 ? o_.seq_len : config_.max_position_embeddings;
  const MemoryPlan plan = PlanRankMemory(config_, o_.batch_size, T, threads_, dims_, activations_);
  fmt::print(out_,
             "parameters: {} ({})\nmemory plan per rank for micro batch {} x seq {} (activation "
             "recompute {}, sequence parallel {}, precision {}):\n{}",
             config_.NumParameters(), HumanCount(static_cast<double>(config_.NumParameters())),
             o_.batch_size, T, RecomputeName(activations_.recompute),
             activations_.sequence_parts > 1 ? "on" : "off", PrecisionName(activations_.precision),
             plan.ToString());
  fmt::print(
      out_, "per rank with each way of keeping activations{}, {}:\n{}",
      dims_.tp() > 1 ? " (SP: sequence parallel)" : "", PrecisionName(activations_.precision),
      CompareActivationOptions(config_, o_.batch_size, T, threads_, dims_, activations_.precision));
  fmt::print(out_, "per rank in each precision, activation recompute {}{}:\n{}",
             RecomputeName(activations_.recompute),
             activations_.sequence_parts > 1 ? ", sequence parallel" : "",
             ComparePrecisions(config_, o_.batch_size, T, threads_, dims_, activations_));
  std::fflush(out_);
  return Status::Ok();
}

// The dataset, the sequence length and the sampler; prints the memory plan.
Status Trainer::OpenData() {
  ASSIGN_OR_RETURN(data_, IndexedDataset::Open(o_.data_dir));
  if (data_->vocab_size() > config_.vocab_size) {
    return Status::InvalidArgument(
        fmt::format("dataset {} has vocab_size {} but the model config has {}; use a config whose "
                    "vocab_size is at least the tokenizer's",
                    o_.data_dir, data_->vocab_size(), config_.vocab_size));
  }
  T_ = o_.seq_len > 0 ? o_.seq_len : std::min(data_->block_size(), config_.max_position_embeddings);
  if (T_ > config_.max_position_embeddings) {
    return Status::InvalidArgument(
        fmt::format("--seq-len {} exceeds the model's max_position_embeddings {}; lower --seq-len",
                    T_, config_.max_position_embeddings));
  }
  ASSIGN_OR_RETURN(sampler_, BatchSampler::Create(data_.get(), T_, o_.val_fraction, o_.seed));
  B_ = o_.batch_size;
  inputs_.resize(static_cast<size_t>(B_ * T_));
  targets_.resize(static_cast<size_t>(B_ * T_));
  memory_ = PlanRankMemory(config_, B_, T_, threads_, dims_, activations_);
  fmt::print(out_,
             "memory plan per rank (micro batch {} x seq {}, activation recompute {}, sequence "
             "parallel {}, precision {}):\n{}",
             B_, T_, RecomputeName(activations_.recompute),
             activations_.sequence_parts > 1 ? "on" : "off", PrecisionName(activations_.precision),
             memory_.ToString());
  fmt::print(out_, "data: {} blocks of {} tokens, {} training samples, {} validation samples\n",
             data_->num_sequences(), data_->block_size(), sampler_->num_train_samples(),
             sampler_->num_val_samples());
  fmt::print(out_,
             "global batch {} sequences = micro batch {} x {} accumulation x {} data parallel\n",
             B_ * accum_ * dims_.dp(), B_, accum_, dims_.dp());
  std::fflush(out_);
  return Status::Ok();
}

// The model (this TP rank's shard), its initial weights, and AdamW over this DP
// rank's ZeRO-1 shard.
Status Trainer::BuildModel() {
  ASSIGN_OR_RETURN(model_, LlamaModel::Create(config_, B_, T_, true, dims_,
                                              dims_.tp() > 1 ? tp_ : nullptr, activations_));
  if (o_.init_weights.empty()) {
    model_->InitWeights(o_.seed);
  } else {
    RETURN_IF_ERROR(LoadWeights(model_.get(), o_.init_weights));
    fmt::print(out_, "initial weights from {}\n", o_.init_weights);
  }
  dp_counts_ = dims_.ZeroCounts(model_->num_params());
  shard_ = dims_.ZeroShard(model_->num_params());
  AdamWOptions adam_opts;
  adam_opts.weight_decay = static_cast<float>(o_.weight_decay);
  adamw_ = std::make_unique<AdamW>(model_->layout(), adam_opts, shard_.begin, shard_.end);
  if (dims_.dp() > 1) {
    zero_ = std::make_unique<ZeroComm>(dp_, dp_counts_, kGradBucketFloats);
    // A forward reads each layer's parameters once the gather has brought them.
    model_->set_params_needed([this](int64_t end) { (void)zero_->WaitParams(end); });
  }
  // Ranges of the shard that count towards the global gradient norm: everything on TP
  // rank 0; on the others only the TP-sharded tensors (replicated ones are counted once).
  for (const TensorSpec& t : model_->layout().tensors()) {
    if (dims_.tp_rank() != 0 && t.replicated()) continue;
    const int64_t b = std::max(t.offset, shard_.begin);
    const int64_t e = std::min(t.offset + t.numel, shard_.end);
    if (b < e) norm_ranges_.push_back({b, e});
  }
  return Status::Ok();
}

Status Trainer::OpenCheckpoints() {
  job_id_ = o_.job_id.empty() ? DefaultJobId() : o_.job_id;
  if (o_.checkpoint_uri.empty()) return Status::Ok();
  CheckpointOptions co;
  co.uri = o_.checkpoint_uri;
  co.job_id = job_id_;
  co.keep = o_.keep_checkpoints;
  co.run = std::to_string(JobAttempt());
  ASSIGN_OR_RETURN(writer_, CheckpointWriter::Create(co, config_, dims_));
  failures_.emplace(o_.max_checkpoint_failures);
  if (auto fault = InjectedUploadFailure()) {
    std::tie(inject_fail_ms_, inject_from_step_) = *fault;
    fmt::print(out_, "fault injection: checkpoint writes fail for {} s from step {}\n",
               inject_fail_ms_ / 1000, inject_from_step_);
  }
  // The snapshot buffer's pages are touched now, not at the first checkpoint (a fresh
  // 700 MB buffer costs ~1 s of page faults; a warm one ~50 ms to fill).
  ASSIGN_OR_RETURN(TrainState * buffer, writer_->Snapshot());
  buffer->params.assign(static_cast<size_t>(model_->num_params()), 0.0f);
  buffer->exp_avg.assign(static_cast<size_t>(shard_.size()), 0.0f);
  buffer->exp_avg_sq.assign(static_cast<size_t>(shard_.size()), 0.0f);
  std::signal(SIGTERM, OnPreempt);  // cooperative preemption: checkpoint, then exit
  return Status::Ok();
}

// The step folder --resume names ("" = start from step 1).
Result<std::string> Trainer::ResumeUri() {
  std::string resume = o_.resume;
  if (resume.empty()) resume = (JobAttempt() > 1 && !o_.checkpoint_uri.empty()) ? "latest" : "none";
  if (resume == "none") return std::string();
  if (resume == "latest") {
    if (o_.checkpoint_uri.empty()) {
      return Status::InvalidArgument("--resume latest needs --checkpoint-uri");
    }
    Result<std::string> latest = LatestCheckpoint(o_.checkpoint_uri, job_id_);
    if (!latest.ok() && !latest.status().IsNotFound()) return latest.status();
    if (latest.ok()) return *latest;
    fmt::print(out_, "no checkpoint under {}/{} yet: starting from step 1\n", o_.checkpoint_uri,
               job_id_);
    return std::string();
  }
  int64_t named_step = 0;
  if (IsStepFolder(resume, &named_step)) return resume;
  // A job's folder of checkpoints (e.g. another job's): its latest complete one.
  std::string folder = resume;
  while (!folder.empty() && folder.back() == '/') folder.pop_back();
  const size_t slash = folder.rfind('/');
  if (slash == std::string::npos) {
    return Status::InvalidArgument("--resume " + resume +
                                   ": expected latest, none, a step_<N> URI or a job's "
                                   "checkpoint folder URI");
  }
  Result<std::string> latest = LatestCheckpoint(folder.substr(0, slash), folder.substr(slash + 1));
  if (!latest.ok()) {
    return Status::NotFound("--resume " + resume + ": no complete checkpoint there (" +
                            latest.status().message() + ")");
  }
  return *latest;
}

// Parameters, AdamW moments and step, and the sampler's position, from a checkpoint.
Status Trainer::Resume() {
  ASSIGN_OR_RETURN(const std::string step_uri, ResumeUri());
  if (step_uri.empty()) return Status::Ok();
  ASSIGN_OR_RETURN(TrainState st, LoadCheckpoint(step_uri, config_, dims_));
  std::copy(st.params.begin(), st.params.end(), model_->params());
  std::copy(st.exp_avg.begin(), st.exp_avg.end(), adamw_->m());
  std::copy(st.exp_avg_sq.begin(), st.exp_avg_sq.end(), adamw_->v());
  adamw_->set_steps(st.adam_step);
  SamplerState restored;
  restored.epoch = static_cast<uint64_t>(st.sampler_epoch);
  restored.position = st.sampler_position;
  RETURN_IF_ERROR(sampler_->Restore(restored));
  first_step_ = st.step + 1;
  fmt::print(out_, "resumed from {} (step {}, made with tensor parallel {} x data parallel {})\n",
             step_uri, st.step, st.train.value("tensor_parallel", 0),
             st.train.value("data_parallel", 0));
  return Status::Ok();
}

// The GEMM peak (the MFU denominator): --peak-gflops, the compile cache's, or measured
// now; every rank uses rank 0's.
Status Trainer::MeasurePeak() {
  shape_ = CompileShape(config_, dims_.tp(), dims_.dp(), B_, T_, threads_);
  if (!o_.compile_cache.empty() && !o_.precompile) {
    ASSIGN_OR_RETURN(cached_, LookupCompilePlan(o_.compile_cache, shape_));
    if (cached_) {
      fmt::print(out_,
                 "compile cache: found the plan recorded by job {} at {} ({}): GEMM peak {:.1f} "
                 "GFLOP/s, not measured again\n",
                 cached_->recorded_by, cached_->uri, cached_->created_at,
                 cached_->gemm_peak_gflops);
    } else {
      fmt::print(out_,
                 "compile cache: no plan for this model, layout and shape under {} (a "
                 "DO_PRE_COMPILATION run records one): measuring now\n",
                 o_.compile_cache);
    }
  }
  peak_ = o_.peak_gflops > 0 ? o_.peak_gflops
          : cached_          ? cached_->gemm_peak_gflops
                             : MeasureGemmPeakGflops();
  if (dims_.world() > 1) {
    double buf[1] = {dims_.rank() == 0 ? peak_ : 0.0};
    RETURN_IF_ERROR(world_->AllReduce(buf, 1, ReduceOp::kSum));
    peak_ = buf[0];
  }
  fmt::print(out_, "GEMM peak {:.1f} GFLOP/s per rank (MFU denominator: x {} ranks)\n", peak_,
             dims_.world());
  // A main run that found no plan records one at once (a failure to write is only a
  // warning); a precompile run records it once its steps have succeeded (Finish).
  if (!o_.compile_cache.empty() && !cached_ && !o_.precompile && dims_.rank() == 0) {
    if (Status st = RecordPlan(); !st.ok()) {
      fmt::print(out_, "warning: compile cache: {} (training goes on)\n", st.message());
    }
  }
  return Status::Ok();
}

Status Trainer::RecordPlan() {
  CompilePlan record;
  record.shape = shape_;
  record.gemm_peak_gflops = peak_;
  record.memory_plan = MemoryPlanJson(memory_);
  record.recorded_by = job_id_;
  ASSIGN_OR_RETURN(std::string at, RecordCompilePlan(o_.compile_cache, record));
  fmt::print(out_, "compile cache: recorded the plan (GEMM peak, memory plan) at {}\n", at);
  return Status::Ok();
}

// The validation loss over --eval-batches micro batches, split over the DP ranks.
Result<double> Trainer::Evaluate() {
  RETURN_IF_ERROR(ParamsGathered());
  const int64_t n = std::min(sampler_->num_val_samples(), o_.eval_batches * B_);
  double acc[2] = {0.0, 0.0};  // loss sum, targets
  for (int64_t i = 0, micro = 0; i < n; i += B_, ++micro) {
    if (micro % dims_.dp() != dims_.dp_rank()) continue;
    const int64_t b = std::min(B_, n - i);
    for (int64_t j = 0; j < b; ++j) {
      sampler_->ValSample(i + j, inputs_.data() + j * T_, targets_.data() + j * T_);
    }
    int64_t valid = 0;
    const double loss =
        model_->ForwardBackward(inputs_.data(), targets_.data(), b, T_, 0.0f, &valid);
    acc[0] += loss * static_cast<double>(valid);
    acc[1] += static_cast<double>(valid);
  }
  RETURN_IF_ERROR(model_->comm_status());
  RETURN_IF_ERROR(dp_->AllReduce(acc, 2, ReduceOp::kSum));
  return acc[1] > 0 ? acc[0] / acc[1] : std::nan("");
}

// Forward and backward of this DP rank's micro batches [d*A, (d+1)*A) of the global
// batch (every rank draws the whole batch in one order), then the update. With DP > 1
// the first forward reads the parameters as their gather brings them, and the last
// micro batch's backward hands finished gradients to the reduce-scatter as it goes.
Result<StepResult> Trainer::Step(int64_t step) {
  model_->ZeroGrad();
  const float micro_scale = 1.0f / static_cast<float>(accum_ * dims_.dp());
  const int64_t last_micro = (dims_.dp_rank() + 1) * accum_ - 1;
  const LlamaModel::GradReady ready = [this](int64_t begin) { zero_->GradsReady(begin); };
  if (zero_ != nullptr) {
    zero_->BeginReduce(model_->grads());
    if (!config_.tie_word_embeddings) {
      const int64_t C = config_.hidden_size, embed = model_->layout().embed();
      zero_->SetSparseRows(embed, embed + model_->shard_config().vocab_size * C, C,
                           StepEmbeddingRows());
    }
  }
  double loss_sum = 0.0;
  for (int64_t micro = 0; micro < accum_ * dims_.dp(); ++micro) {
    if (micro / accum_ != dims_.dp_rank()) {
      sampler_->SkipTrainBatch(B_);
      continue;
    }
    sampler_->NextTrainBatch(B_, inputs_.data(), targets_.data());
    RETURN_IF_ERROR(CheckTokens(inputs_, config_.vocab_size));
    RETURN_IF_ERROR(CheckTokens(targets_, config_.vocab_size));
    const bool hook = zero_ != nullptr && micro == last_micro;
    loss_sum += model_->ForwardBackward(inputs_.data(), targets_.data(), B_, T_, micro_scale,
                                        nullptr, hook ? &ready : nullptr);
  }
  const Status reduced = zero_ != nullptr ? zero_->FinishReduce() : Status::Ok();
  RETURN_IF_ERROR(model_->comm_status());
  RETURN_IF_ERROR(reduced);
  StepResult r;
  r.loss = loss_sum;  // this rank's; UpdateWeights makes it the step's
  RETURN_IF_ERROR(UpdateWeights(step, &r));
  return r;
}

// This rank's embedding rows (of its vocabulary slice) that some DP rank's micro batch
// of the step the sampler is at reads: the only rows of the embedding's gradient that
// are not zero on any rank, so the reduce-scatter sends only them
// (ZeroComm::SetSparseRows), and the only rows the step's forward reads before its LM
// head, so the parameter gather sends them first (ZeroComm::StartGather). Read from a
// copy of the sampler, which every rank advances through the whole global batch.
std::vector<int64_t> Trainer::StepEmbeddingRows() const {
  BatchSampler peek = *sampler_;
  const int64_t v0 = model_->layout().vocab_begin(), Vl = model_->shard_config().vocab_size;
  std::vector<int32_t> inputs(inputs_.size()), targets(targets_.size());
  std::vector<uint8_t> used(static_cast<size_t>(Vl), 0);
  for (int64_t micro = 0; micro < accum_ * dims_.dp(); ++micro) {
    peek.NextTrainBatch(B_, inputs.data(), targets.data());
    for (int32_t t : inputs) {
      if (t >= v0 && t < v0 + Vl) used[static_cast<size_t>(t - v0)] = 1;
    }
  }
  std::vector<int64_t> rows;
  for (int64_t v = 0; v < Vl; ++v) {
    if (used[static_cast<size_t>(v)] != 0) rows.push_back(v);
  }
  return rows;
}

// ZeRO-1: the gradients reduce-scattered over DP (by the reducer, when there is one),
// the global norm over the world, clip, AdamW on this rank's shard, all-gather the
// updated shards.
Status Trainer::UpdateWeights(int64_t step, StepResult* r) {
  float* params = model_->params();
  float* grads = model_->grads();
  if (zero_ == nullptr) RETURN_IF_ERROR(dp_->ReduceScatter(grads, dp_counts_));
  double ss = 0.0;
  for (const Range& range : norm_ranges_) ss += SumOfSquares(grads, range.begin, range.end);
  // One world all-reduce carries the norm, "a rank was asked to stop" (SIGTERM), so
  // every rank agrees to stop after this step, and the loss: every TP rank of a replica
  // holds the same loss, so each adds 1/TP of it.
  double reduce[3] = {ss, g_preempt.load() ? 1.0 : 0.0, r->loss / dims_.tp()};
  RETURN_IF_ERROR(world_->AllReduce(reduce, 3, ReduceOp::kSum));
  r->loss = reduce[2] / static_cast<double>(accum_ * dims_.dp());
  if (!std::isfinite(r->loss)) return NonFiniteError(step, "the loss", r->loss, *model_, grads);
  r->norm = std::sqrt(reduce[0]);
  r->preempted = writer_ != nullptr && reduce[1] > 0;
  if (!std::isfinite(r->norm)) {
    return NonFiniteError(step, "the gradient norm", r->norm, *model_, grads);
  }
  const double coef = ClipCoefficient(r->norm, o_.grad_clip);
  r->lr = LearningRate(step, o_.warmup_steps, o_.max_steps, o_.lr);
  adamw_->Step(params, grads, static_cast<float>(r->lr),
               coef < 1.0 ? static_cast<float>(coef) : 1.0f);
  // The other shards arrive during the next forward (or before anything else reads
  // the parameters: ParamsGathered), the embedding rows of the next step's tokens
  // first (the sampler is at the next step now; the embedding is the buffer's first
  // tensor), the rest of the embedding last.
  if (zero_ != nullptr) {
    const int64_t embed_end =
        model_->layout().embed() == 0 ? model_->shard_config().vocab_size * config_.hidden_size : 0;
    zero_->StartGather(params, embed_end, config_.hidden_size, StepEmbeddingRows());
    return Status::Ok();
  }
  return dp_->AllGather(params, dp_counts_);
}

// Waits for the parameters' all-gather of the last update, if one is under way.
Status Trainer::ParamsGathered() {
  return zero_ != nullptr ? zero_->WaitParams(zero_->total()) : Status::Ok();
}

// Fills the writer's snapshot buffer: the only time training waits for a checkpoint.
void Trainer::FillSnapshot(int64_t step, TrainState& st) {
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
  st.step = step;
  st.adam_step = adamw_->steps();
  st.sampler_epoch = static_cast<int64_t>(sampler_->state().epoch);
  st.sampler_position = sampler_->state().position;
  parallel_copy(model_->params(), model_->num_params(), &st.params);
  parallel_copy(adamw_->m(), shard_.size(), &st.exp_avg);
  parallel_copy(adamw_->v(), shard_.size(), &st.exp_avg_sq);
  st.shard_begin = shard_.begin;
  st.shard_end = shard_.end;
  st.train = Json{{"seed", o_.seed},
                  {"lr", o_.lr},
                  {"warmup_steps", o_.warmup_steps},
                  {"max_steps", o_.max_steps},
                  {"global_batch_size", B_ * accum_ * dims_.dp()},
                  {"micro_batch_size", B_},
                  {"seq_len", T_},
                  {"grad_clip", o_.grad_clip},
                  {"weight_decay", o_.weight_decay},
                  {"tensor_parallel", dims_.tp()},
                  {"data_parallel", dims_.dp()}};
}

Status Trainer::Checkpoint(int64_t step) {
  const auto t0 = Clock::now();
  RETURN_IF_ERROR(ParamsGathered());
  RETURN_IF_ERROR(CheckUpload(writer_->Wait()));
  ASSIGN_OR_RETURN(TrainState * st, writer_->Snapshot());
  FillSnapshot(step, *st);
  checkpoint_block_s_ += Seconds(t0, Clock::now());
  checkpoint_blocks_.push_back(Seconds(t0, Clock::now()));
  if (inject_until_ && Clock::now() < *inject_until_) {
    writer_->FailNextUpload(
        fmt::format("injected fault: the object store refuses checkpoint writes for {} s from "
                    "step {} (lote:injectUploadFailSeconds)",
                    inject_fail_ms_ / 1000, inject_from_step_),
        *inject_until_);
  }
  RETURN_IF_ERROR(writer_->Start());
  pending_step_ = step;
  ++checkpoints_;
  return Status::Ok();
}

// The end of the checkpoint upload in flight: a failure is a warning until
// --max-checkpoint-failures of them in a row (checkpoint_failures.h).
Status Trainer::CheckUpload(Status upload) {
  if (pending_step_ == 0) return upload;
  const int64_t step = std::exchange(pending_step_, 0);
  std::string warning;
  Status s = failures_->Record(step, writer_->StepUri(step), upload, &warning);
  if (!warning.empty()) {
    fmt::print(out_, "{}\n", warning);
    std::fflush(out_);
  }
  return s;
}

// The injected upload failure's window opens when training reaches its first step.
void Trainer::MaybeOpenInjectedWindow(int64_t step) {
  if (inject_fail_ms_ < 0 || inject_until_ || step < inject_from_step_) return;
  inject_until_ = Clock::now() + std::chrono::milliseconds(inject_fail_ms_);
}

// The human line and the LOTE_PROGRESS line of a logging interval.
void Trainer::Log(int64_t step, const StepResult& r) {
  const auto now = Clock::now();
  const double dt = Seconds(interval_start_, now);
  const int64_t tokens_per_step = B_ * T_ * accum_ * dims_.dp();
  const double tps = static_cast<double>(tokens_per_step * interval_steps_) / dt;
  const double sps = static_cast<double>(B_ * accum_ * dims_.dp() * interval_steps_) / dt;
  const double mfu = tps * config_.TrainFlopsPerToken(T_) / (peak_ * 1e9 * dims_.world());
  peak_tps_ = std::max(peak_tps_, tps);
  fmt::print(out_,
             "step {:>6}/{} | loss {:.4f} | lr {:.3e} | grad norm {:.4f} | {:.0f} tokens/s | "
             "{:.2f} sequences/s | MFU {:.1f}%\n",
             step, o_.max_steps, r.loss, r.lr, r.norm, tps, sps, 100.0 * mfu);
  Json progress{
      {"step", step},        {"total_steps", o_.max_steps}, {"loss", r.loss},         {"lr", r.lr},
      {"grad_norm", r.norm}, {"tokens_per_s", tps},         {"sequences_per_s", sps}, {"mfu", mfu}};
  fmt::print(out_, "LOTE_PROGRESS {}\n", progress.dump());
  std::fflush(out_);
  interval_start_ = Clock::now();
  interval_steps_ = 0;
}

Status Trainer::MaybeEvaluate(int64_t step) {
  const bool now = sampler_->num_val_samples() > 0 &&
                   ((o_.eval_interval > 0 && step % o_.eval_interval == 0) || step == o_.max_steps);
  if (!now) return Status::Ok();
  const auto t0 = Clock::now();
  ASSIGN_OR_RETURN(last_val_, Evaluate());
  if (!std::isfinite(last_val_)) {
    return NonFiniteError(step, "the validation loss", last_val_, *model_, nullptr);
  }
  val_losses_.push_back(Json{{"step", step}, {"loss", last_val_}});
  fmt::print(out_, "eval step {:>6} | validation loss {:.4f}\n", step, last_val_);
  fmt::print(out_, "LOTE_PROGRESS {}\n",
             Json{{"step", step}, {"total_steps", o_.max_steps}, {"val_loss", last_val_}}.dump());
  std::fflush(out_);
  interval_start_ += Clock::now() - t0;  // evaluation time is not training throughput
  return Status::Ok();
}

double CollectiveSeconds(const Communicator* a, const Communicator* b, const Communicator* c) {
  return a->seconds_in_collectives() + b->seconds_in_collectives() + c->seconds_in_collectives();
}

// Seconds the training thread has been blocked by communication: its own collectives,
// and its waits for the reducer (whose collectives ran beside backward).
double Trainer::ExposedCommSeconds() const {
  const double all = CollectiveSeconds(world_, tp_, dp_);
  if (zero_ == nullptr) return all;
  return all - zero_->comm_seconds() + zero_->wait_seconds();
}

// The step loop: step, checkpoint, stop when preempted, log, evaluate.
Status Trainer::Train() {
  start_ = interval_start_ = Clock::now();
  for (int64_t step = first_step_; step <= o_.max_steps; ++step) {
    const auto step_start = Clock::now();
    const double cpu_start = ProcessCpuSeconds();
    const double comm_start = ExposedCommSeconds();
    MaybeOpenInjectedWindow(step);
    ASSIGN_OR_RETURN(const StepResult r, Step(step));
    if (writer_ != nullptr && (r.preempted || step == o_.max_steps ||
                               (o_.checkpoint_freq > 0 && step % o_.checkpoint_freq == 0))) {
      RETURN_IF_ERROR(Checkpoint(step));
    }
    if (r.preempted) {
      pending_step_ = 0;  // no next checkpoint step: a failure here ends the run
      RETURN_IF_ERROR(writer_->Wait());
      fmt::print(out_, "preempted: stopped after step {}; checkpoint {} is complete\n", step,
                 writer_->StepUri(step));
      std::fflush(out_);
      RETURN_IF_ERROR(world_->Barrier());
      return Status::Cancelled(
          fmt::format("preempted after step {} (checkpoint {})", step, writer_->StepUri(step)));
    }
    const double step_s = Seconds(step_start, Clock::now());
    losses_.push_back(r.loss);
    step_times_.push_back(step_s);
    step_cpu_.push_back(ProcessCpuSeconds() - cpu_start);
    step_s_ += step_s;
    step_comm_s_ += ExposedCommSeconds() - comm_start;
    last_loss_ = r.loss;
    ++interval_steps_;
    if (step % o_.logging_interval == 0 || step == o_.max_steps) Log(step, r);
    RETURN_IF_ERROR(MaybeEvaluate(step));
  }
  return Status::Ok();
}

Json Trainer::Metrics(double total_s, int64_t steps_run) const {
  const int64_t tokens_per_step = B_ * T_ * accum_ * dims_.dp();
  const double flops_per_token = config_.TrainFlopsPerToken(T_);
  const double avg_tps = static_cast<double>(tokens_per_step * steps_run) / total_s;
  const double comm_s = CollectiveSeconds(world_, tp_, dp_);
  return Json{{"final_loss", last_loss_},
              {"final_val_loss", std::isfinite(last_val_) ? Json(last_val_) : Json(nullptr)},
              {"steps", o_.max_steps},
              {"first_step", first_step_},
              {"checkpoint_block_s", checkpoint_block_s_},
              {"checkpoint_blocks_s", checkpoint_blocks_},
              {"checkpoint_failures", failures_ ? failures_->failed_total() : 0},
              {"time_s", total_s},
              {"avg_tokens_per_s", avg_tps},
              {"peak_tokens_per_s", peak_tps_},
              {"avg_mfu", avg_tps * flops_per_token / (peak_ * 1e9 * dims_.world())},
              {"gemm_peak_gflops", peak_},
              {"parameters", config_.NumParameters()},
              {"tokens_per_step", tokens_per_step},
              {"seq_len", T_},
              {"flops_per_token", flops_per_token},
              {"losses", losses_},
              {"step_times_s", step_times_},
              {"step_cpu_s", step_cpu_},
              {"threads", threads_},
              {"blas_core", BlasCoreName()},
              {"bf16_gemm", std::string(Bf16GemmKernelName(ActiveBf16GemmKernel()))},
              {"world_size", dims_.world()},
              {"tensor_parallel", dims_.tp()},
              {"data_parallel", dims_.dp()},
              {"grad_accum_steps", accum_},
              {"activation_recompute", RecomputeName(activations_.recompute)},
              {"sequence_parallel", activations_.sequence_parts > 1},
              {"precision", PrecisionName(activations_.precision)},
              {"collective_s", comm_s},
              {"collective_share", total_s > 0 ? comm_s / total_s : 0.0},
              {"exposed_comm_s", step_comm_s_},
              {"exposed_comm_share", step_s_ > 0 ? step_comm_s_ / step_s_ : 0.0},
              {"val_losses", val_losses_},
              {"sampler", sampler_->state().ToJson()}};
}

// The last checkpoint's upload, metrics, the summary line and --output (rank 0).
Status Trainer::Finish() {
  RETURN_IF_ERROR(ParamsGathered());
  const auto start = Clock::now();
  if (writer_ != nullptr) {
    pending_step_ = 0;  // the last checkpoint: no next step to try again at
    if (Status s = writer_->Wait(); !s.ok())
      return Status(s.code(), fmt::format("the last checkpoint, at step {}, failed: {}",
                                          o_.max_steps, s.message()));
    fmt::print(out_,
               "checkpoint {} is complete ({} written, {} failed, {:.3f} s of training "
               "blocked by snapshots, {:.1f} s waiting for the last upload)\n",
               writer_->StepUri(o_.max_steps), checkpoints_ - failures_->failed_total(),
               failures_->failed_total(), checkpoint_block_s_, Seconds(start, Clock::now()));
  }
  const double total_s = Seconds(start_, Clock::now());
  const int64_t steps_run = o_.max_steps - first_step_ + 1;
  const Json metrics = Metrics(total_s, steps_run);
  if (o_.precompile && dims_.rank() == 0) RETURN_IF_ERROR(RecordPlan());
  fmt::print(out_,
             "done: {} steps in {:.1f} s, final loss {:.4f}, validation loss {:.4f}, "
             "{:.0f} tokens/s average, {:.1f}% of the time in collectives, {:.1f}% of step time "
             "exposed communication (rank 0)\n",
             steps_run, total_s, last_loss_, last_val_, metrics.value("avg_tokens_per_s", 0.0),
             100.0 * metrics.value("collective_share", 0.0),
             100.0 * metrics.value("exposed_comm_share", 0.0));
  // --output: whole tensors from DP rank 0's tensor-parallel group, one at a time.
  if (!o_.output_dir.empty() && dims_.dp_rank() == 0) {
    const bool writes = dims_.rank() == 0;
    const Status dir = writes ? MakeDirs(o_.output_dir) : Status::Ok();
    const Status saved =
        SaveWeightsGathered(*model_, tp_, writes && dir.ok(), o_.output_dir + "/model.safetensors");
    RETURN_IF_ERROR(dir);
    RETURN_IF_ERROR(saved);
    if (writes) {
      RETURN_IF_ERROR(
          WriteFileAtomic(o_.output_dir + "/config.json", config_.ToJson().dump(2) + "\n"));
      RETURN_IF_ERROR(WriteFileAtomic(o_.output_dir + "/metrics.json", metrics.dump(2) + "\n"));
      fmt::print(out_, "wrote {}/model.safetensors, config.json, metrics.json\n", o_.output_dir);
    }
  }
  std::fflush(out_);
  // Leave together: a rank that exits while another is still in a collective would
  // look like a failure to it.
  return world_->Barrier();
}

}  // namespace

Result<RunPlan> PlanRun(const TrainOptions& options, int world, int rank) {
  if (options.precompile && options.compile_cache.empty()) {
    return Status::InvalidArgument("--precompile true needs --compile-cache URI to record into");
  }
  RunPlan plan;
  plan.options = PrecompileOptions(options);
  const TrainOptions& o = plan.options;
  RETURN_IF_ERROR(CheckOptions(o));
  ASSIGN_OR_RETURN(plan.config, LlamaConfig::Load(o.config_path));
  ASSIGN_OR_RETURN(plan.dims, ParallelDims::Create(plan.config, world,
                                                   static_cast<int>(o.tensor_parallel_size), rank));
  if (o.sequence_parallel && plan.dims.tp() == 1) {
    return Status::InvalidArgument(
        "--sequence-parallel splits the sequence over the tensor-parallel group: it needs "
        "--tensor-parallel-size > 1 (and as many ranks)");
  }
  plan.activations.recompute = o.activation_recompute;
  plan.activations.sequence_parts = o.sequence_parallel ? plan.dims.tp() : 1;
  plan.activations.precision = o.precision;
  const int64_t dp = plan.dims.dp();
  plan.accum = o.grad_accum_steps;
  if (o.global_batch_size > 0) {
    if (o.global_batch_size % (o.batch_size * dp) != 0) {
      return Status::InvalidArgument(fmt::format(
          "--global-batch-size {} is not a multiple of micro batch {} x data parallel {}; "
          "gradient accumulation = global / (micro x DP) must be whole",
          o.global_batch_size, o.batch_size, dp));
    }
    plan.accum = o.global_batch_size / (o.batch_size * dp);
  }
  return plan;
}

Status RunTraining(const RunPlan& plan, std::FILE* out, RunGroups groups) {
  Trainer t(plan, out, groups);
  if (plan.options.plan_only) return t.PrintPlanOnly();
  RETURN_IF_ERROR(t.OpenData());
  RETURN_IF_ERROR(t.BuildModel());
  RETURN_IF_ERROR(t.OpenCheckpoints());
  RETURN_IF_ERROR(t.Resume());
  RETURN_IF_ERROR(t.MeasurePeak());
  RETURN_IF_ERROR(t.Train());
  return t.Finish();
}

}  // namespace lote::engine
