#include "engine/vocab_parallel.h"

#include <cstring>

namespace lote::engine {

void LocalTokens(int32_t* local, const int32_t* tokens, int64_t N, int64_t v0, int64_t Vl) {
  for (int64_t n = 0; n < N; ++n) {
    const int64_t t = static_cast<int64_t>(tokens[n]) - v0;
    local[n] = (t >= 0 && t < Vl) ? static_cast<int32_t>(t) : -1;
  }
}

void EmbeddingForwardShard(float* out, const int32_t* local, const float* wte, int64_t N,
                           int64_t C) {
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    float* y = out + n * C;
    if (local[n] < 0) {
      std::memset(y, 0, sizeof(float) * static_cast<size_t>(C));
    } else {
      std::memcpy(y, wte + static_cast<int64_t>(local[n]) * C, sizeof(float) * C);
    }
  }
}

}  // namespace lote::engine
