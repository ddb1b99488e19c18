// Kernels of the vocabulary-parallel embedding (Megatron): each tensor-parallel rank
// holds vocabulary rows [v0, v0 + Vl) of the embedding and LM head. The LM head and its
// cross-entropy are lm_head_loss.h. Shapes as cpu_kernels.h; like them these never
// allocate and never fail.
#pragma once

#include <cstdint>

namespace lote::engine {

// local[n] = tokens[n] - v0 when tokens[n] is in [v0, v0 + Vl), else -1.
void LocalTokens(int32_t* local, const int32_t* tokens, int64_t N, int64_t v0, int64_t Vl);
// out[N,C] = wte[local[n]] for local[n] >= 0, else 0 (the all-reduce adds the owners' rows).
void EmbeddingForwardShard(float* out, const int32_t* local, const float* wte, int64_t N,
                           int64_t C);

}  // namespace lote::engine
