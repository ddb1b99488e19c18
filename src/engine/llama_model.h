// LlamaModel: a Llama decoder with its parameters, gradients and activations, each in
// one flat fp32 buffer allocated once from the MemoryPlan. Forward runs the layers in
// order, backward in reverse, through the XForward/XBackward kernels of cpu_kernels.h.
// Not thread-safe (one caller at a time; kernels use OpenMP internally). Inputs are
// the caller's contract: tokens and targets in [0, V) (targets may be -1 = ignored),
// B <= max batch and T <= max sequence length given at Create.
//
// Tensor parallel (Megatron): with a ParallelDims of TP > 1 and the tensor-parallel
// group's Communicator, the model holds only this rank's shard of every tensor (see
// param_layout.h) and all-reduces over the group after the row-parallel o/down
// projections and the vocabulary-parallel embedding (forward), and after the
// column-parallel qkv/gate-up projections and the LM head (backward); the
// cross-entropy is vocabulary-parallel. Every rank of the group calls the same methods
// with the same inputs and gets the same loss. A failed collective is sticky in the
// communicator: check comm_status() after a step.
//
// Sequence parallel (Megatron's; ActivationOptions::sequence_parts = TP): the residual
// stream, the RMSNorms and the residual adds hold only this rank's part of the B*T token
// rows (EvenSplit); the norm output is all-gathered before the column-parallel GEMMs and
// the row-parallel outputs (and the embedding) are reduce-scattered instead of
// all-reduced; backward mirrors them (all-gather of the residual gradient before the
// row-parallel GEMMs' backward, reduce-scatter after the column-parallel ones), and the
// norm weights' gradients, partial sums over the rows, are all-reduced over the group.
//
// Recomputation (ActivationOptions::recompute, memory_plan.h): backward runs the
// attention core, or the whole layer, forward again instead of keeping it; the same
// kernels on the same inputs, so losses and gradients are the same bits.
//
// bf16-mixed (ActivationOptions::precision, memory_plan.h): params() stays the fp32
// master copy that the optimizer updates (and checkpoints save); the kernels read it
// rounded to bf16 (a layer's tensors, or the LM head's, rounded into one weight copy as
// they are needed), the activations are rounded to bf16 where they are made and kept as
// bf16, the GEMMs multiply bf16 operands (Bf16Gemm), and every sum is fp32. Rounding is
// deterministic (nearest, ties to even) and so is the GEMM's order of sums, so
// recomputation still gives the same bits, and so does a resumed run.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "common/status.h"
#include "engine/communicator.h"
#include "engine/cpu_kernels.h"
#include "engine/llama_config.h"
#include "engine/memory_plan.h"
#include "engine/parallel_dims.h"
#include "engine/param_layout.h"

namespace lote::engine {

class LlamaModel {
 public:
  // training=false allocates no gradients (scoring / evaluation only).
  static Result<std::unique_ptr<LlamaModel>> Create(const LlamaConfig& config, int64_t max_batch,
                                                    int64_t max_seq_len, bool training,
                                                    const ParallelDims& dims = {},
                                                    Communicator* tp_comm = nullptr,
                                                    const ActivationOptions& options = {});

  const LlamaConfig& config() const { return config_; }
  // This rank's view of the config (its heads, MLP rows, vocabulary rows).
  const LlamaConfig& shard_config() const { return shard_; }
  TensorParallel tp() const { return layout_.tp(); }
  Status comm_status() const { return tp_comm_ != nullptr ? tp_comm_->status() : Status::Ok(); }
  const ParamLayout& layout() const { return layout_; }
  int64_t num_params() const { return layout_.total(); }
  float* params() { return params_.data(); }
  const float* params() const { return params_.data(); }
  Precision precision() const { return options_.precision; }
  float* grads() { return grads_.data(); }  // empty when training=false
  int64_t max_batch() const { return max_batch_; }
  int64_t max_seq_len() const { return max_seq_; }
  // Bytes of every buffer the model holds (parameters, gradients, activations and their
  // scratch): PlanMemory's total less the optimizer state, which AdamW owns.
  int64_t allocated_bytes() const;

  // Normal(0, initializer_range) for matrices and embeddings, 1 for norm weights;
  // a function of (seed, tensor name) only.
  void InitWeights(uint64_t seed);
  void ZeroGrad();

  // Told during backward that the gradients [begin, num_params()) are complete for this
  // call, begin decreasing: after the LM head and final norm, after each layer from the
  // last, and after the embedding (begin 0). A reducer sends them while backward goes on.
  using GradReady = std::function<void(int64_t begin)>;
  // Called before forward reads parameters [0, end) (end increasing: the embedding, each
  // layer, the final norm and LM head), when set: a ZeRO-1 gather still filling the
  // buffer blocks until they are there. Kept until set again (empty: none).
  using ParamsNeeded = std::function<void(int64_t end)>;
  void set_params_needed(ParamsNeeded fn) { params_needed_ = std::move(fn); }

  // inputs, targets: [B,T]. Returns the mean cross-entropy over targets != -1 (0 if
  // none) and, when grad_scale != 0, adds grad_scale * d(mean loss)/d(params) to
  // grads(). Sets *valid_targets when non-null; calls *ready (when non-null) as above.
  double ForwardBackward(const int32_t* inputs, const int32_t* targets, int64_t B, int64_t T,
                         float grad_scale, int64_t* valid_targets = nullptr,
                         const GradReady* ready = nullptr);
  // Forward only. logprob[B*T] (log p(target), 0 where ignored) and logits[B*T*V] are
  // written when non-null (logits only without tensor parallelism). Returns the mean loss like
  // ForwardBackward.
  double Forward(const int32_t* inputs, const int32_t* targets, int64_t B, int64_t T,
                 float* logprob, float* logits);

 private:
  LlamaModel(const LlamaConfig& config, int64_t max_batch, int64_t max_seq_len, bool training,
             TensorParallel tp, Communicator* tp_comm, const ActivationOptions& options);
  void TpAllReduce(float* data, int64_t n, ReduceOp op);
  // Sequence parallel: this rank's token rows of N (all of them otherwise).
  Range LocalRange(int64_t N) const;
  // full[N,C] holds this rank's rows in place; all-gathers the others' (sequence
  // parallel; otherwise every row is there already).
  void GatherRows(float* full, int64_t N);
  // full[N,C] holds this rank's partial sums (a row-parallel GEMM's output): sums them
  // over the TP group, this rank's rows into local[Nl,C] (reduce-scatter under sequence
  // parallelism, else all-reduce; local may be full).
  void ReduceRows(float* full, float* local, int64_t N);
  // RmsNormBackward over this rank's rows; under sequence parallelism the weight's
  // gradient is all-reduced over the group before it is added.
  void NormBackward(float* dinp, float* dweight, const float* dout, const float* inp,
                    const float* weight, const float* rstd, int64_t Nl);
  double Run(const int32_t* inputs, const int32_t* targets, int64_t B, int64_t T, float grad_scale,
             float* logprob, float* logits, int64_t* valid_targets);
  void EmbedForward(const int32_t* inputs, int64_t N);
  // Layer l forward from its input; recompute: again in backward (no parameter waits,
  // and it stops before the down projection, whose output backward does not read).
  void LayerForward(int64_t l, int64_t B, int64_t T, bool recompute);
  // The LM head and loss over every row of the final norm's output; with gradients,
  // also its backward into the dln scratch. Sets *valid_targets.
  double LmHead(const int32_t* targets, int64_t N, float grad_scale, float* logprob,
                float* logits_out, int64_t* valid_targets);
  void Backward(const int32_t* inputs, int64_t B, int64_t T);
  // Where the kernels read a layer's weights: the parameters (fp32), or the weight copy
  // holding them rounded to bf16 (bf16-mixed; rounded once per layer and pass).
  struct LayerWeights {
    const float *input_norm, *wqkv, *wo, *post_norm, *wgate_up, *wdown;
  };
  LayerWeights Weights(int64_t l);
  const float* HeadWeights();       // the LM head's [V,C], likewise
  const float* FinalNormWeights();  // the final norm's [C], likewise
  // bf16-mixed: rounds x[n] to bf16 in place; kept >= 0 (and not a recomputation) also
  // keeps the bf16 values at kept_[kept]. fp32: nothing.
  void ToBf16(float* x, int64_t n, int64_t kept = -1, bool recompute = false);
  // bf16-mixed: layer l's kept bf16 activations into the shared fp32 layer.
  void UnpackLayer(int64_t l, int64_t N);
  void MlpBackward(int64_t l, int64_t N);
  void AttentionLayerBackward(int64_t l, int64_t B, int64_t T);
  // The gradient of the residual stream as the row-parallel GEMMs' backward reads it:
  // [N,C], gathered into the dln scratch under sequence parallelism.
  const float* GatheredResidualGrad(int64_t N);
  void GradsReady(int64_t begin) const {
    if (ready_ != nullptr) (*ready_)(begin);
  }
  void NeedParams(int64_t end) const {
    if (params_needed_) params_needed_(end);
  }

  LlamaConfig config_;
  LlamaConfig shard_;
  ParamLayout layout_;
  Communicator* tp_comm_;
  int64_t max_batch_, max_seq_;
  bool training_;
  ActivationOptions options_;
  bool sp_;            // sequence parallel
  bool bf16_;          // bf16-mixed
  GemmOperands gemm_;  // what the GEMMs multiply: bf16 operands in bf16-mixed
  ActivationLayout acts_;
  std::vector<float> params_;
  std::vector<float> grads_;
  std::vector<float> act_;             // saved activations (acts_.total)
  std::vector<float> act_grad_;        // gradient scratch (acts_.grad_total)
  std::vector<uint16_t> kept_;         // bf16-mixed: kept activations (acts_.kept_total)
  int64_t weight_copy_holds_ = -1;     // the layer in the weight copy (-1: none, -2: LM head)
  int64_t rope_len_ = 0;               // sequence length the rope tables were built for
  std::vector<int32_t> local_tokens_;  // [2*B*T] inputs' and targets' shard ids (TP only)
  const GradReady* ready_ = nullptr;   // during ForwardBackward
  ParamsNeeded params_needed_;
};

}  // namespace lote::engine
