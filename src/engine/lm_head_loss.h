// The LM head fused with the (vocabulary-parallel) cross-entropy, for one chunk of m
// rows, the vocabulary taken in blocks of `vocab_block` columns so each block of logits
// is produced, reduced and differentiated while it is still in cache:
//
//   forward   per block j: logits[:, j] = x · w_jᵀ (one GEMM), the block's row max b_j,
//             logits[:, j] overwritten by exp(logit - b_j) and their sum folded into a
//             running (row max, sum of exp) — an online softmax; the target's raw logit
//             is picked up by the block that holds it. One pass of exp per logit.
//   combine   (tensor parallel only; the caller all-reduces between the calls) the row
//             max with max, then the sums of exp, rescaled to it, and the target logits
//             with sum: no rank holds full-vocabulary logits.
//   backward  per block j: dlogits = exp(logit - b_j) · exp(b_j - lse) · scale − scale
//             at the target, in place, then dx += dlogits · w_j and dw_j += dlogitsᵀ · x
//             (two GEMMs on the block while it is hot).
//
// The chunk buffer holds the blocks one after another, block j as a contiguous [m, n]
// array at offset m * j * vocab_block: with rows of the whole vocabulary (a 128 KiB
// stride at V = 32000, a power of two apart) a block's rows would all fall in the same
// cache sets and the block would not stay in cache (the first version did that and ran
// the step at 0.56x the unblocked one).
//
// The block's exponentials stay in the chunk buffer between forward and backward, so
// nothing is recomputed (a recompute would cost a third of the head's GEMMs). Shapes as
// cpu_kernels.h: row-major fp32, w is this rank's [Vl, C] slice of the head; `local[r]`
// is the target's column in this slice (-1 when another rank owns it, or the row is
// ignored), `targets[r] < 0` marks an ignored row. `operands` picks the GEMMs (fp32, or
// bf16 operands with fp32 sums: cpu_kernels.h). Never allocates, never fails.
#pragma once

#include <cstdint>

#include "engine/cpu_kernels.h"

namespace lote::engine {

// Columns of the vocabulary per block: 1024 × 512 rows × 4 B = 2 MiB, one core's L2.
inline constexpr int64_t kHeadVocabBlock = 1024;

inline int64_t HeadVocabBlocks(int64_t V, int64_t vocab_block = kHeadVocabBlock) {
  return (V + vocab_block - 1) / vocab_block;
}
// Floats of the statistics of a chunk of `rows` rows (see HeadStats).
inline int64_t HeadStatsFloats(int64_t rows, int64_t V, int64_t vocab_block = kHeadVocabBlock) {
  return rows * (4 + HeadVocabBlocks(V, vocab_block));
}

// Views into one buffer of HeadStatsFloats(m, Vl) floats for a chunk of m rows.
// row_max, sum_exp and target are adjacent so the combine's two all-reduces are one
// call each: row_max [m] with max, then sum_exp and target [2m] with sum.
struct HeadStats {
  HeadStats(float* buffer, int64_t m, int64_t Vl, int64_t vocab_block = kHeadVocabBlock);
  int64_t vocab_block;
  int64_t blocks;
  float* row_max;    // [m] max logit of the row (this rank's, then the group's)
  float* sum_exp;    // [m] sum of exp(logit - row_max)
  float* target;     // [m] the target's raw logit where this rank owns it, else 0
  float* local_max;  // [m] this rank's max, kept through the combine
  float* block_max;  // [m, blocks]
};

// Forward over one chunk: logits (the chunk buffer, m * Vl floats, block-major as above)
// ends up holding exp(logit - block max); raw[m, raw_ld], when non-null, receives the
// logits themselves, row-major.
void LmHeadForward(float* logits, const HeadStats& s, const float* x, const float* w,
                   const int32_t* local, int64_t m, int64_t C, int64_t Vl, float* raw,
                   int64_t raw_ld, GemmOperands operands = GemmOperands::kFp32);

// Tensor parallel, after row_max was all-reduced with max: rescales sum_exp to it.
void LmHeadRescaleSums(const HeadStats& s, int64_t m);

// Writes logprob[r] = log p(target) (0 for ignored rows) when non-null; returns the sum
// over valid rows of -log p(target).
double LmHeadLoss(float* logprob, const HeadStats& s, const int32_t* targets, int64_t m);

// Backward over one chunk: dx[m, C] = dloss/dx (overwritten), dw[Vl, C] += dloss/dw, where
// dloss/dlogits = (softmax - onehot) * grad_scale (0 for ignored rows). Overwrites logits.
void LmHeadBackward(float* dx, float* dw, float* logits, const HeadStats& s, const float* x,
                    const float* w, const int32_t* local, const int32_t* targets, int64_t m,
                    int64_t C, int64_t Vl, float grad_scale,
                    GemmOperands operands = GemmOperands::kFp32);

}  // namespace lote::engine
