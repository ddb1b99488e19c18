#include "engine/llama_model.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <new>

#include "engine/bf16.h"
#include "engine/cpu_kernels.h"
#include "engine/lm_head_loss.h"
#include "engine/vocab_parallel.h"

namespace lote::engine {
namespace {

// splitmix64: the engine's only random source, so runs reproduce across machines.
uint64_t SplitMix(uint64_t* state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t HashName(const std::string& s) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

void AddInPlace(float* y, const float* x, int64_t n) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

void Zero(float* p, int64_t n) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) p[i] = 0.0f;
}

void Copy(float* dst, const float* src, int64_t n) {
  if (dst != src) std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}

}  // namespace

LlamaModel::LlamaModel(const LlamaConfig& config, int64_t max_batch, int64_t max_seq_len,
                       bool training, TensorParallel tp, Communicator* tp_comm,
                       const ActivationOptions& options)
    : config_(config),
      shard_(ShardConfig(config, tp)),
      layout_(config, tp),
      tp_comm_(tp.size > 1 ? tp_comm : nullptr),
      max_batch_(max_batch),
      max_seq_(max_seq_len),
      training_(training),
      options_(options),
      sp_(options.sequence_parts > 1),
      bf16_(options.precision == Precision::kBf16Mixed),
      gemm_(bf16_ ? GemmOperands::kBf16 : GemmOperands::kFp32),
      acts_(PlanActivations(shard_, max_batch, max_seq_len, CpuThreads(), options)) {}

Result<std::unique_ptr<LlamaModel>> LlamaModel::Create(const LlamaConfig& config, int64_t max_batch,
                                                       int64_t max_seq_len, bool training,
                                                       const ParallelDims& dims,
                                                       Communicator* tp_comm,
                                                       const ActivationOptions& options) {
  RETURN_IF_ERROR(config.Validate());
  const TensorParallel tp = dims.tensor_parallel();
  if (tp.size > 1 &&
      (tp_comm == nullptr || tp_comm->size() != tp.size || tp_comm->rank() != tp.rank)) {
    return Status::InvalidArgument("tensor parallelism needs the group's communicator");
  }
  if (options.sequence_parts != 1 && (tp.size == 1 || options.sequence_parts != tp.size)) {
    return Status::InvalidArgument(
        "sequence parallelism splits the sequence over the tensor-parallel group: it needs "
        "--tensor-parallel-size > 1");
  }
  if (max_batch <= 0 || max_seq_len <= 0) {
    return Status::InvalidArgument("batch size and sequence length must be > 0");
  }
  if (max_seq_len > config.max_position_embeddings) {
    return Status::InvalidArgument(fmt::format(
        "sequence length {} exceeds the model's max_position_embeddings {}; lower --seq-len or "
        "raise max_position_embeddings in the config",
        max_seq_len, config.max_position_embeddings));
  }
  std::unique_ptr<LlamaModel> m(
      new LlamaModel(config, max_batch, max_seq_len, training, tp, tp_comm, options));
  const MemoryPlan plan =
      PlanMemory(m->shard_, max_batch, max_seq_len, CpuThreads(), training, options);
  try {
    m->params_.assign(static_cast<size_t>(m->layout_.total()), 0.0f);
    if (training) {
      m->grads_.assign(static_cast<size_t>(m->layout_.total()), 0.0f);
      m->act_grad_.assign(static_cast<size_t>(m->acts_.grad_total), 0.0f);
    }
    m->act_.assign(static_cast<size_t>(m->acts_.total), 0.0f);
    m->kept_.assign(static_cast<size_t>(m->acts_.kept_total), 0);
    if (tp.size > 1) {
      m->local_tokens_.assign(static_cast<size_t>(2 * max_batch * max_seq_len), 0);
    }
  } catch (const std::bad_alloc&) {
    return Status::ResourceExhausted(
        fmt::format("cannot allocate the model's memory plan ({}); lower --batch-size or --seq-len",
                    HumanBytes(static_cast<double>(plan.total_bytes()))));
  }
  return m;
}

void LlamaModel::TpAllReduce(float* data, int64_t n, ReduceOp op) {
  // A failure is sticky in the communicator; the caller checks comm_status().
  if (tp_comm_ != nullptr) (void)tp_comm_->AllReduce(data, n, op);
}

Range LlamaModel::LocalRange(int64_t N) const {
  return sp_ ? EvenSplit(N, tp_comm_->size(), tp_comm_->rank()) : Range{0, N};
}

void LlamaModel::GatherRows(float* full, int64_t N) {
  if (!sp_) return;
  std::vector<int64_t> counts = EvenCounts(N, tp_comm_->size());
  for (int64_t& n : counts) n *= shard_.hidden_size;
  (void)tp_comm_->AllGather(full, counts);  // sticky on failure, as TpAllReduce
}

void LlamaModel::ReduceRows(float* full, float* local, int64_t N) {
  const int64_t C = shard_.hidden_size;
  if (!sp_) {
    TpAllReduce(full, N * C, ReduceOp::kSum);
    Copy(local, full, N * C);
    return;
  }
  std::vector<int64_t> counts = EvenCounts(N, tp_comm_->size());
  for (int64_t& n : counts) n *= C;
  (void)tp_comm_->ReduceScatter(full, counts);
  const Range rows = LocalRange(N);
  Copy(local, full + rows.begin * C, rows.size() * C);
}

void LlamaModel::NormBackward(float* dinp, float* dweight, const float* dout, const float* inp,
                              const float* weight, const float* rstd, int64_t Nl) {
  const int64_t C = shard_.hidden_size;
  if (!sp_) {
    RmsNormBackward(dinp, dweight, dout, inp, weight, rstd, Nl, C);
    return;
  }
  // The weight is replicated but each rank saw only its rows: sum this call's part over
  // the group before adding it (what is already in dweight was summed before).
  float* part = act_grad_.data() + acts_.dnorm;
  Zero(part, C);
  RmsNormBackward(dinp, part, dout, inp, weight, rstd, Nl, C);
  TpAllReduce(part, C, ReduceOp::kSum);
  AddInPlace(dweight, part, C);
}

LlamaModel::LayerWeights LlamaModel::Weights(int64_t l) {
  const LayerOffsets& w = layout_.layer(l);
  const float* base = params_.data();
  int64_t begin = 0;
  if (bf16_) {
    begin = w.input_norm;  // the layer's tensors are contiguous, input_norm first
    const int64_t end =
        l + 1 < shard_.num_hidden_layers ? layout_.layer(l + 1).input_norm : layout_.final_norm();
    float* copy = act_.data() + acts_.weight_copy;
    if (weight_copy_holds_ != l) RoundToBf16(copy, params_.data() + begin, end - begin);
    weight_copy_holds_ = l;
    base = copy;
  }
  return {base + (w.input_norm - begin), base + (w.wqkv - begin),     base + (w.wo - begin),
          base + (w.post_norm - begin),  base + (w.wgate_up - begin), base + (w.wdown - begin)};
}

const float* LlamaModel::HeadWeights() {
  const float* head = params_.data() + layout_.lm_head();
  if (!bf16_) return head;
  float* copy = act_.data() + acts_.weight_copy;
  if (weight_copy_holds_ != -2) RoundToBf16(copy, head, shard_.vocab_size * shard_.hidden_size);
  weight_copy_holds_ = -2;
  return copy;
}

const float* LlamaModel::FinalNormWeights() {
  const float* w = params_.data() + layout_.final_norm();
  if (!bf16_) return w;
  const int64_t C = shard_.hidden_size;
  float* copy = act_.data() + acts_.weight_copy + acts_.weight_copy_floats - C;
  RoundToBf16(copy, w, C);
  return copy;
}

void LlamaModel::ToBf16(float* x, int64_t n, int64_t kept, bool recompute) {
  if (!bf16_) return;
  if (kept >= 0 && !recompute) {
    RoundAndKeepBf16(x, kept_.data() + kept, n);
  } else {
    RoundToBf16(x, x, n);
  }
}

void LlamaModel::UnpackLayer(int64_t l, int64_t N) {
  if (!bf16_) return;
  const LlamaConfig& c = shard_;
  const int64_t C = c.hidden_size, I = c.intermediate_size, Nl = LocalRange(N).size();
  const LayerActs& la = acts_.layers[static_cast<size_t>(l)];
  float* A = act_.data();
  auto unpack = [&](int64_t field, int64_t kept, int64_t n) {
    if (kept >= 0) Bf16ToFloats(A + field, kept_.data() + kept, n);
  };
  unpack(la.res, la.kept.res, Nl * C);
  unpack(la.qkv, la.kept.qkv, N * c.qkv_dim());
  unpack(la.att, la.kept.att, N * c.q_dim());
  unpack(la.res_mid, la.kept.res_mid, Nl * C);
  unpack(la.gate_up, la.kept.gate_up, N * 2 * I);
  unpack(la.act, la.kept.act, N * I);
}

void LlamaModel::InitWeights(uint64_t seed) {
  const float stddev = static_cast<float>(config_.initializer_range);
  std::vector<float> full;
  for (const TensorSpec& t : layout_.tensors()) {
    float* p = params_.data() + t.offset;
    if (t.shape.size() == 1) {
      for (int64_t i = 0; i < t.numel; ++i) p[i] = 1.0f;
      continue;
    }
    // The values are a function of (seed, name) over the whole tensor, so every
    // tensor-parallel layout starts from the same model.
    int64_t total = 1;
    for (int64_t d : t.global_shape) total *= d;
    float* dst = p;
    if (!t.replicated()) {
      full.resize(static_cast<size_t>(total));
      dst = full.data();
    }
    uint64_t state = seed ^ HashName(t.name);
    for (int64_t i = 0; i < total; i += 2) {
      // Box-Muller on two uniforms in (0, 1].
      const double u1 = (static_cast<double>(SplitMix(&state) >> 11) + 1.0) * 0x1.0p-53;
      const double u2 = static_cast<double>(SplitMix(&state) >> 11) * 0x1.0p-53;
      const double r = std::sqrt(-2.0 * std::log(u1));
      dst[i] = stddev * static_cast<float>(r * std::cos(2.0 * M_PI * u2));
      if (i + 1 < total) dst[i + 1] = stddev * static_cast<float>(r * std::sin(2.0 * M_PI * u2));
    }
    if (!t.replicated()) SliceShard(t, full.data(), p);
  }
}

int64_t LlamaModel::allocated_bytes() const {
  const size_t floats = params_.size() + grads_.size() + act_.size() + act_grad_.size();
  return static_cast<int64_t>(floats * sizeof(float) + kept_.size() * sizeof(uint16_t) +
                              local_tokens_.size() * sizeof(int32_t));
}

void LlamaModel::ZeroGrad() {
  if (!grads_.empty()) Zero(grads_.data(), static_cast<int64_t>(grads_.size()));
}

double LlamaModel::ForwardBackward(const int32_t* inputs, const int32_t* targets, int64_t B,
                                   int64_t T, float grad_scale, int64_t* valid_targets,
                                   const GradReady* ready) {
  LOTE_CHECK_MSG(training_ || grad_scale == 0.0f, "gradients requested from an inference model");
  ready_ = ready;
  const double loss = Run(inputs, targets, B, T, grad_scale, nullptr, nullptr, valid_targets);
  ready_ = nullptr;
  return loss;
}

double LlamaModel::Forward(const int32_t* inputs, const int32_t* targets, int64_t B, int64_t T,
                           float* logprob, float* logits) {
  return Run(inputs, targets, B, T, 0.0f, logprob, logits, nullptr);
}

double LlamaModel::Run(const int32_t* inputs, const int32_t* targets, int64_t B, int64_t T,
                       float grad_scale, float* logprob, float* logits_out,
                       int64_t* valid_targets) {
  LOTE_CHECK(B > 0 && B <= max_batch_ && T > 0 && T <= max_seq_);
  LOTE_CHECK_MSG(logits_out == nullptr || tp_comm_ == nullptr,
                 "full logits are not gathered across tensor-parallel ranks");
  const LlamaConfig& c = shard_;
  const int64_t N = B * T, C = c.hidden_size;
  float* A = act_.data();
  if (rope_len_ != T) {
    RopeTables(A + acts_.rope_cos, A + acts_.rope_sin, T, c.head_dim(), c.rope_theta);
    rope_len_ = T;
  }
  const int64_t L = c.num_hidden_layers;
  weight_copy_holds_ = -1;  // the parameters changed since the last pass
  NeedParams(L > 0 ? layout_.layer(0).input_norm : layout_.final_norm());  // the embedding
  EmbedForward(inputs, N);
  for (int64_t l = 0; l < L; ++l) LayerForward(l, B, T, false);
  NeedParams(num_params());  // the final norm and the LM head
  const Range rows = LocalRange(N);
  ToBf16(A + acts_.res_final, rows.size() * C);
  RmsNormForward(A + acts_.ln + rows.begin * C, A + acts_.rstdf, A + acts_.res_final,
                 FinalNormWeights(), rows.size(), C, static_cast<float>(c.rms_norm_eps));
  ToBf16(A + acts_.ln + rows.begin * C, rows.size() * C);
  GatherRows(A + acts_.ln, N);  // the LM head reads every row
  int64_t valid = 0;
  const double loss = LmHead(targets, N, grad_scale, logprob, logits_out, &valid);
  if (valid_targets != nullptr) *valid_targets = valid;
  if (grad_scale != 0.0f && valid > 0) Backward(inputs, B, T);
  return loss;
}

// The residual stream entering layer 0: the embedding rows of the inputs (this rank's
// vocabulary rows, summed over the group, under tensor parallelism).
void LlamaModel::EmbedForward(const int32_t* inputs, int64_t N) {
  const int64_t C = shard_.hidden_size;
  float* A = act_.data();
  float* res = A + (acts_.layers.empty() ? acts_.res_final : acts_.layers[0].res);
  const float* wte = params_.data() + layout_.embed();
  if (tp_comm_ == nullptr) {
    EmbeddingForward(res, inputs, wte, N, C);
    return;
  }
  LocalTokens(local_tokens_.data(), inputs, N, layout_.vocab_begin(), shard_.vocab_size);
  float* full = sp_ ? A + acts_.ln : res;  // [N,C] partial sums
  EmbeddingForwardShard(full, local_tokens_.data(), wte, N, C);
  ReduceRows(full, res, N);  // vocabulary-parallel embedding
}

void LlamaModel::LayerForward(int64_t l, int64_t B, int64_t T, bool recompute) {
  const LlamaConfig& c = shard_;
  const int64_t N = B * T, C = c.hidden_size, I = c.intermediate_size;
  const int64_t nh = c.num_attention_heads, nkv = c.num_key_value_heads, hd = c.head_dim();
  const int64_t D = c.qkv_dim(), Da = c.q_dim();
  const float eps = static_cast<float>(c.rms_norm_eps);
  float* A = act_.data();
  const LayerActs& la = acts_.layers[static_cast<size_t>(l)];
  const LayerOffsets& w = layout_.layer(l);
  const int64_t L = c.num_hidden_layers;
  const Range rows = LocalRange(N);
  const int64_t Nl = rows.size();
  float* ln = A + acts_.ln;              // [N,C]
  float* ln_mine = ln + rows.begin * C;  // [Nl,C] this rank's rows of it
  // Each kernel waits only for the tensor it reads (the layer's tensors are in this
  // order in the flat buffer), so a gather that is behind holds up one GEMM, not the
  // whole layer. A recomputation in backward has every parameter.
  auto need = [this, recompute](int64_t end) {
    if (!recompute) NeedParams(end);
  };
  const int64_t layer_end = l + 1 < L ? layout_.layer(l + 1).input_norm : layout_.final_norm();
  // bf16-mixed rounds the whole layer's weights before its first kernel.
  need(bf16_ ? layer_end : w.wqkv);
  const LayerWeights W = Weights(l);
  // bf16-mixed: the layer's input (the residual stream), each GEMM's input and what
  // backward reads are rounded to bf16 as they are made (nothing, in fp32).
  ToBf16(A + la.res, Nl * C, la.kept.res, recompute);
  RmsNormForward(ln_mine, A + la.rstd1, A + la.res, W.input_norm, Nl, C, eps);
  ToBf16(ln_mine, Nl * C);
  GatherRows(ln, N);
  need(w.wo);
  MatmulForward(A + la.qkv, ln, W.wqkv, N, C, D, gemm_);  // column-parallel q/k/v
  RopeForward(A + la.qkv, A + acts_.rope_cos, A + acts_.rope_sin, B, T, nh, nkv, hd);
  ToBf16(A + la.qkv, N * D, la.kept.qkv, recompute);
  AttentionForward(A + la.att, A + la.lse, A + acts_.attn_scratch, A + la.qkv, B, T, nh, nkv, hd);
  ToBf16(A + la.att, N * Da, la.kept.att, recompute);
  need(w.post_norm);
  float* o = sp_ ? ln : A + la.res_mid;  // [N,C] partial sums
  MatmulForward(o, A + la.att, W.wo, N, Da, C, gemm_);
  ReduceRows(o, A + la.res_mid, N);  // row-parallel o_proj
  need(w.wgate_up);
  if (bf16_) {  // the residual rounded between the add and the norm
    AddInPlace(A + la.res_mid, A + la.res, Nl * C);
    ToBf16(A + la.res_mid, Nl * C, la.kept.res_mid, recompute);
    RmsNormForward(ln_mine, A + la.rstd2, A + la.res_mid, W.post_norm, Nl, C, eps);
    ToBf16(ln_mine, Nl * C);
  } else {
    AddRmsNormForward(ln_mine, A + la.rstd2, A + la.res_mid, A + la.res, W.post_norm, Nl, C,
                      eps);  // res_mid += res, then ln2
  }
  GatherRows(ln, N);
  need(w.wdown);
  MatmulForward(A + la.gate_up, ln, W.wgate_up, N, C, 2 * I, gemm_);  // column-parallel gate/up
  ToBf16(A + la.gate_up, N * 2 * I, la.kept.gate_up, recompute);
  SwiGluForward(A + la.act, A + la.gate_up, N, I);
  ToBf16(A + la.act, N * I, la.kept.act, recompute);
  if (recompute) return;  // backward reads neither the down projection nor res_next
  need(layer_end);
  float* res_next =
      A + (l + 1 < L ? acts_.layers[static_cast<size_t>(l + 1)].res : acts_.res_final);
  float* down = sp_ ? ln : res_next;  // [N,C] partial sums
  MatmulForward(down, A + la.act, W.wdown, N, I, C, gemm_);
  ReduceRows(down, res_next, N);  // row-parallel down_proj
  AddInPlace(res_next, A + la.res_mid, Nl * C);
}

// LM head + cross-entropy in row chunks, each chunk's vocabulary in cache-sized blocks
// (lm_head_loss.h): the full [N, V] logits never exist, and a chunk's logits are made,
// reduced and differentiated block by block. With gradients, leaves d(lnf) [N,C] (this
// rank's vocabulary's part) in the dln scratch.
double LlamaModel::LmHead(const int32_t* targets, int64_t N, float grad_scale, float* logprob,
                          float* logits_out, int64_t* valid_targets) {
  const int64_t C = shard_.hidden_size, V = shard_.vocab_size;
  const float* Wh = HeadWeights();
  float* A = act_.data();
  int64_t valid = 0;
  for (int64_t n = 0; n < N; ++n) valid += targets[n] >= 0 ? 1 : 0;
  *valid_targets = valid;
  const bool backward = grad_scale != 0.0f && valid > 0;
  const float ce_scale = backward ? grad_scale / static_cast<float>(valid) : 0.0f;
  float* G = backward ? grads_.data() : nullptr;
  float* dlnf = backward ? act_grad_.data() + acts_.dln : nullptr;
  float* logits = A + acts_.logits;
  float* lp = logprob != nullptr ? logprob : A + acts_.logprob;
  const int32_t* local = targets;  // the targets' columns in this rank's vocabulary slice
  if (tp_comm_ != nullptr) {
    LocalTokens(local_tokens_.data() + N, targets, N, layout_.vocab_begin(), V);
    local = local_tokens_.data() + N;
  }
  double total = 0.0;
  for (int64_t r0 = 0; r0 < N; r0 += kHeadChunkRows) {
    const int64_t m = std::min(N, r0 + kHeadChunkRows) - r0;
    const float* lnf = A + acts_.ln + r0 * C;
    const HeadStats stats(A + acts_.head_stats, m, V);
    LmHeadForward(logits, stats, lnf, Wh, local + r0, m, C, V,
                  logits_out != nullptr ? logits_out + r0 * V : nullptr, V, gemm_);
    if (tp_comm_ != nullptr) {
      // Vocabulary-parallel: the group's row max, then its sums of exp and target logits.
      TpAllReduce(stats.row_max, m, ReduceOp::kMax);
      LmHeadRescaleSums(stats, m);
      TpAllReduce(stats.sum_exp, 2 * m, ReduceOp::kSum);
    }
    total += LmHeadLoss(lp + r0, stats, targets + r0, m);
    if (backward) {
      LmHeadBackward(dlnf + r0 * C, G + layout_.lm_head(), logits, stats, lnf, Wh, local + r0,
                     targets + r0, m, C, V, ce_scale, gemm_);
    }
  }
  return valid > 0 ? total / static_cast<double>(valid) : 0.0;
}

void LlamaModel::Backward(const int32_t* inputs, int64_t B, int64_t T) {
  const LlamaConfig& c = shard_;
  const int64_t N = B * T, C = c.hidden_size;
  float* G = grads_.data();
  float* A = act_.data();
  float* S = act_grad_.data();
  const Range rows = LocalRange(N);
  float* dres = S + acts_.dres;              // [Nl,C]
  float* dln = S + acts_.dln;                // [N,C]
  ReduceRows(dln, dln + rows.begin * C, N);  // vocabulary-parallel LM head
  Zero(dres, rows.size() * C);
  NormBackward(dres, G + layout_.final_norm(), dln + rows.begin * C, A + acts_.res_final,
               FinalNormWeights(), A + acts_.rstdf, rows.size());
  GradsReady(layout_.final_norm());  // and the LM head's, when untied
  for (int64_t l = c.num_hidden_layers - 1; l >= 0; --l) {
    UnpackLayer(l, N);
    if (options_.recompute == Recompute::kFull) LayerForward(l, B, T, true);
    MlpBackward(l, N);
    AttentionLayerBackward(l, B, T);
  }
  if (tp_comm_ != nullptr) {
    // local_tokens_[0, N) still holds the inputs' shard ids from the forward pass.
    EmbeddingBackward(G + layout_.embed(), GatheredResidualGrad(N), local_tokens_.data(), N, C,
                      c.vocab_size);
  } else {
    EmbeddingBackward(G + layout_.embed(), dres, inputs, N, C, c.vocab_size);
  }
  GradsReady(0);
}

const float* LlamaModel::GatheredResidualGrad(int64_t N) {
  float* dres = act_grad_.data() + acts_.dres;
  if (!sp_) return dres;
  const int64_t C = shard_.hidden_size;
  float* full = act_grad_.data() + acts_.dln;
  const Range rows = LocalRange(N);
  Copy(full + rows.begin * C, dres, rows.size() * C);
  GatherRows(full, N);
  return full;
}

// res_next = res_mid + down(silu(gate(ln2)) * up(ln2)), ln2 = norm(res_mid).
// dinp overwritten (not +=) where nothing else adds into it: no zeroing pass. Each
// weight's gradient is reported as soon as it is complete (a suffix of the flat buffer:
// the layer's tensors from the last), so its reduce-scatter can start.
void LlamaModel::MlpBackward(int64_t l, int64_t N) {
  const int64_t C = shard_.hidden_size, I = shard_.intermediate_size;
  const LayerWeights W = Weights(l);
  float* G = grads_.data();
  float* A = act_.data();
  float* S = act_grad_.data();
  const LayerActs& la = acts_.layers[static_cast<size_t>(l)];
  const LayerOffsets& w = layout_.layer(l);
  const Range rows = LocalRange(N);
  float* dln = S + acts_.dln;                   // [N,C]
  float* ln = A + acts_.ln;                     // [N,C]
  const float* dout = GatheredResidualGrad(N);  // [N,C]
  MatmulBackward(S + acts_.dact, G + w.wdown, dout, A + la.act, W.wdown, N, I, C, true, gemm_);
  GradsReady(w.wdown);
  SwiGluBackward(S + acts_.dgate_up, S + acts_.dact, A + la.gate_up, N, I);
  RmsNormApply(ln + rows.begin * C, A + la.res_mid, W.post_norm, A + la.rstd2, rows.size(),
               C);  // ln2
  ToBf16(ln + rows.begin * C, rows.size() * C);
  GatherRows(ln, N);
  MatmulBackward(dln, G + w.wgate_up, S + acts_.dgate_up, ln, W.wgate_up, N, C, 2 * I, true, gemm_);
  GradsReady(w.wgate_up);
  ReduceRows(dln, dln + rows.begin * C, N);  // column-parallel gate/up
  NormBackward(S + acts_.dres, G + w.post_norm, dln + rows.begin * C, A + la.res_mid, W.post_norm,
               A + la.rstd2, rows.size());
}

// res_mid = res + o_proj(attention(rope(qkv(ln1)))), ln1 = norm(res).
void LlamaModel::AttentionLayerBackward(int64_t l, int64_t B, int64_t T) {
  const LlamaConfig& c = shard_;
  const int64_t N = B * T, C = c.hidden_size;
  const int64_t nh = c.num_attention_heads, nkv = c.num_key_value_heads, hd = c.head_dim();
  const int64_t D = c.qkv_dim(), Da = c.q_dim();
  const LayerWeights W = Weights(l);
  float* G = grads_.data();
  float* A = act_.data();
  float* S = act_grad_.data();
  const LayerActs& la = acts_.layers[static_cast<size_t>(l)];
  const LayerOffsets& w = layout_.layer(l);
  const Range rows = LocalRange(N);
  float* dln = S + acts_.dln;  // [N,C]
  float* ln = A + acts_.ln;    // [N,C]
  float* dqkv = S + acts_.dqkv;
  if (options_.recompute == Recompute::kSelective) {
    // The attention core again, from the kept q/k/v: its output and log-sum-exp.
    AttentionForward(A + la.att, A + la.lse, A + acts_.attn_scratch, A + la.qkv, B, T, nh, nkv, hd);
    ToBf16(A + la.att, N * Da);
  }
  const float* dout = GatheredResidualGrad(N);  // [N,C]
  MatmulBackward(S + acts_.datt, G + w.wo, dout, A + la.att, W.wo, N, Da, C, true, gemm_);
  GradsReady(w.wo);  // and post_norm's
  Zero(dqkv, N * D);
  AttentionBackward(dqkv, S + acts_.attn_grad_scratch, S + acts_.datt, A + la.qkv, A + la.att,
                    A + la.lse, B, T, nh, nkv, hd);
  RopeBackward(dqkv, A + acts_.rope_cos, A + acts_.rope_sin, B, T, nh, nkv, hd);
  RmsNormApply(ln + rows.begin * C, A + la.res, W.input_norm, A + la.rstd1, rows.size(),
               C);  // ln1
  ToBf16(ln + rows.begin * C, rows.size() * C);
  GatherRows(ln, N);
  MatmulBackward(dln, G + w.wqkv, dqkv, ln, W.wqkv, N, C, D, true, gemm_);
  ReduceRows(dln, dln + rows.begin * C, N);  // column-parallel q/k/v
  NormBackward(S + acts_.dres, G + w.input_norm, dln + rows.begin * C, A + la.res, W.input_norm,
               A + la.rstd1, rows.size());
  GradsReady(w.input_norm);  // the layer's first tensor
}

}  // namespace lote::engine
