// Kernels of the vocabulary-parallel embedding and cross-entropy (Megatron): each
// tensor-parallel rank holds vocabulary rows [v0, v0 + Vl) of the embedding and LM head,
// so no rank ever holds full-vocabulary logits. The caller all-reduces between the
// phases (max, then the sums) over the tensor-parallel group. Shapes as cpu_kernels.h;
// like them these never allocate and never fail.
#pragma once

#include <cstdint>

namespace lote::engine {

// local[n] = tokens[n] - v0 when tokens[n] is in [v0, v0 + Vl), else -1.
void LocalTokens(int32_t* local, const int32_t* tokens, int64_t N, int64_t v0, int64_t Vl);
// out[N,C] = wte[local[n]] for local[n] >= 0, else 0 (the all-reduce adds the owners' rows).
void EmbeddingForwardShard(float* out, const int32_t* local, const float* wte, int64_t N,
                           int64_t C);

// Phase 1: row_max[r] = max over this shard's logits[r, 0..Vl).
void CrossEntropyRowMax(float* row_max, const float* logits, int64_t n, int64_t Vl);
// Phase 2 (after row_max is all-reduced with max): sums[r] = sum exp(logit - max) over
// the shard, sums[n + r] = the target's logit - max when this shard owns the target
// (local[r] >= 0), else 0. With grad, logits are overwritten by exp(logit - max).
void CrossEntropySums(float* sums, float* logits, const float* row_max, const int32_t* local,
                      const int32_t* targets, int64_t n, int64_t Vl, bool grad);
// Phase 3 (after sums[2n] are all-reduced with sum): returns the sum over valid rows
// of -log p(target), writes logprob[r] when non-null; with grad_scale != 0 turns the
// exponentials of phase 2 into (softmax - onehot) * grad_scale (0 for ignored rows).
double CrossEntropyFinish(float* logits, float* logprob, const float* sums, const int32_t* local,
                          const int32_t* targets, int64_t n, int64_t Vl, float grad_scale);

}  // namespace lote::engine
