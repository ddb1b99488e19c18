// MemoryPlan: every buffer the engine allocates for one configuration, computed up
// front as a pure function of (config, micro batch, sequence length, threads) and
// printed at start-up. The model allocates exactly these sizes; nothing grows later.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/llama_config.h"
#include "engine/parallel_dims.h"

namespace lote::engine {

// Rows of the LM head / cross-entropy processed at once (bounds the logits buffer).
inline constexpr int64_t kHeadChunkRows = 512;

// What backward recomputes instead of keeping (`--activation-recompute`):
//   kNone: every layer keeps what its backward reads (below). The attention's
//     probabilities are never kept in any mode (its backward recomputes them from the
//     log-sum-exp), nor the RMSNorm outputs (recomputed from the residual and rstd).
//   kSelective: the attention core (scores, softmax and the weighted sum: the attention
//     output and its log-sum-exp) is not kept per layer; backward runs the attention
//     forward again from the kept q/k/v, into one buffer shared by all layers.
//   kFull: a layer keeps only its input (the residual stream); backward runs the whole
//     layer forward again from it into one shared layer's worth of buffers.
// Every mode gives the same bits: the recomputation is the same kernels on the same inputs.
enum class Recompute { kNone, kSelective, kFull };
const char* RecomputeName(Recompute r);  // "none", "selective", "full"

// The numbers the model computes with (`--precision`):
//   kFp32: everything fp32.
//   kBf16Mixed: the kernels read the weights rounded to bf16 (from the fp32 master
//     weights, which the optimizer updates: the parameter buffer), and the activations
//     are rounded to bf16 where they are made: every GEMM's inputs (the norm outputs,
//     the attention output, the SwiGLU output), q/k/v after rotary, the gate/up
//     pre-activations and the residual stream. Kept activations are stored as bf16 and
//     unpacked into one shared fp32 layer before the layer's backward. The GEMMs
//     multiply bf16 operands with fp32 sums (Bf16Gemm: vdpbf16ps where the CPU has
//     avx512_bf16, else fp32 arithmetic); softmax, norms and their sums compute in fp32.
//     Gradients, their reduction and clipping, and AdamW's state stay fp32.
enum class Precision { kFp32, kBf16Mixed };
const char* PrecisionName(Precision p);  // "fp32", "bf16-mixed"

// How the activations are laid out: the recomputation, sequence parallelism's split of
// the residual stream (the B*T token rows, in `sequence_parts` contiguous parts: the TP
// size when `--sequence-parallel`, else 1) and the precision they are kept in.
struct ActivationOptions {
  Recompute recompute = Recompute::kNone;
  int sequence_parts = 1;
  Precision precision = Precision::kFp32;
};

// Token rows of the residual stream a rank holds: N split over `parts` (EvenSplit),
// the largest part.
inline int64_t LocalRows(int64_t N, int parts) { return (N + parts - 1) / parts; }

// Offsets (in floats) of one layer's saved activations inside the activation buffer.
// Everything is linear in T: attention keeps its log-sum-exp, not its probabilities,
// and the RMSNorm outputs are recomputed in backward from the residual input and rstd.
// Nl = LocalRows(N, sequence_parts): the rows of the residual stream this rank holds.
// Fields that backward recomputes (ActivationOptions) point into one shared copy.
struct LayerActs {
  int64_t res;      // [Nl,C]  residual stream entering the layer (always per layer)
  int64_t rstd1;    // [Nl]    input RMSNorm
  int64_t qkv;      // [N,qkv_dim] after rotary
  int64_t lse;      // [B,nh,T] attention log-sum-exp per query row
  int64_t att;      // [N,q_dim] attention output (input to o_proj)
  int64_t res_mid;  // [Nl,C]  residual after attention
  int64_t rstd2;    // [Nl]    post-attention RMSNorm
  int64_t gate_up;  // [N,2I]  gate/up pre-activations
  int64_t act;      // [N,I]   silu(gate) * up
  // bf16-mixed: the fields above that hold [N,*] or [Nl,*] values point into one shared
  // fp32 layer, and the layer keeps them as bf16 at these offsets of the kept store
  // (in bf16 elements; -1: not kept, backward recomputes it). rstd1/2 and lse stay fp32.
  struct Kept {
    int64_t res = -1, qkv = -1, att = -1, res_mid = -1, gate_up = -1, act = -1;
  } kept;
};

struct ActivationLayout {
  std::vector<LayerActs> layers;
  int64_t res_final = 0;     // [Nl,C]
  int64_t rstdf = 0;         // [Nl]
  int64_t ln = 0;            // [N,C] RMSNorm output, shared: ln1/ln2 of the layer being
                             // run (forward) or differentiated (backward, recomputed), lnf;
                             // under sequence parallelism each rank writes its rows and
                             // all-gathers, and the row-parallel outputs are reduce-scattered
                             // from it
  int64_t logits = 0;        // [kHeadChunkRows, V]
  int64_t head_stats = 0;    // HeadStatsFloats(kHeadChunkRows, V): the chunk's softmax stats
  int64_t logprob = 0;       // [N]
  int64_t rope_cos = 0;      // [T, hd/2]
  int64_t rope_sin = 0;      // [T, hd/2]
  int64_t attn_scratch = 0;  // [threads, AttentionForwardScratch(T, hd)]
  // bf16-mixed: the weights as the kernels read them, rounded from the master weights:
  // one layer's or the LM head's (whichever is larger), then the final norm's [C].
  int64_t weight_copy = 0;
  int64_t weight_copy_floats = 0;  // its size (0 in fp32)
  int64_t total = 0;               // floats
  int64_t kept_total = 0;          // bf16 elements of the kept store (0 in fp32)
  // Gradient scratch (training only), reused by every layer.
  int64_t dres = 0, dln = 0, dqkv = 0, datt = 0, dgate_up = 0,
          dact = 0;               // [Nl,C] [N,C] [N,qkv] [N,q] [N,2I] [N,I]
  int64_t dnorm = 0;              // [C] a norm weight's gradient before its TP all-reduce
                                  // (sequence parallel only)
  int64_t attn_grad_scratch = 0;  // [threads, AttentionBackwardScratch(T, hd)]
  int64_t grad_total = 0;         // floats
};

ActivationLayout PlanActivations(const LlamaConfig& config, int64_t batch, int64_t seq_len,
                                 int threads, const ActivationOptions& options = {});

struct MemoryPlan {
  int64_t params_bytes = 0;
  int64_t grads_bytes = 0;
  int64_t optimizer_bytes = 0;  // AdamW m and v
  int64_t activation_bytes = 0;
  int64_t activation_grad_bytes = 0;
  int64_t weight_copy_bytes = 0;  // bf16-mixed: the rounded weights in use (fp32 values)
  Precision precision = Precision::kFp32;
  int64_t total_bytes() const {
    return params_bytes + grads_bytes + optimizer_bytes + activation_bytes + activation_grad_bytes +
           weight_copy_bytes;
  }
  // Multi-line human table.
  std::string ToString() const;
};

MemoryPlan PlanMemory(const LlamaConfig& config, int64_t batch, int64_t seq_len, int threads,
                      bool training, const ActivationOptions& options = {});

// The memory of one rank of a TP x DP run (dims): its parameter and gradient shard (TP
// rank 0's, the largest), its ZeRO-1 optimizer shard (AdamW m + v over 1/DP of them, plus
// the reduce-scatter's receive buffer) and its activations (its heads and MLP rows;
// the residual stream is whole on every rank). With tp = dp = 1, PlanMemory.
MemoryPlan PlanRankMemory(const LlamaConfig& config, int64_t batch, int64_t seq_len, int threads,
                          const ParallelDims& dims, const ActivationOptions& options = {});

// One rank's plan (PlanRankMemory) under each way of keeping activations, side by side:
// recompute none / selective / full, and each of them with sequence parallelism when
// TP > 1. A table of bytes per row (parameters ... total), one column per technique.
// Each column in options.precision.
std::string CompareActivationOptions(const LlamaConfig& config, int64_t batch, int64_t seq_len,
                                     int threads, const ParallelDims& dims,
                                     Precision precision = Precision::kFp32);
// One rank's plan with `options` in fp32 and in bf16-mixed, side by side.
std::string ComparePrecisions(const LlamaConfig& config, int64_t batch, int64_t seq_len,
                              int threads, const ParallelDims& dims, ActivationOptions options);

// "6.74 B", "60.1 M"
std::string HumanCount(double n);
// "25.1 GiB"
std::string HumanBytes(double bytes);

}  // namespace lote::engine
