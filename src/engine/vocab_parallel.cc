#include "engine/vocab_parallel.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "engine/cpu_kernels.h"

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

void CrossEntropyRowMax(float* row_max, const float* logits, int64_t n, int64_t Vl) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < n; ++r) {
    const float* x = logits + r * Vl;
    float mx = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : mx)
    for (int64_t j = 0; j < Vl; ++j) mx = std::max(mx, x[j]);
    row_max[r] = mx;
  }
}

void CrossEntropySums(float* sums, float* logits, const float* row_max, const int32_t* local,
                      const int32_t* targets, int64_t n, int64_t Vl, bool grad) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < n; ++r) {
    float* x = logits + r * Vl;
    const float mx = row_max[r];
    sums[n + r] = (targets[r] >= 0 && local[r] >= 0) ? x[local[r]] - mx : 0.0f;
    float sum = 0.0f;
    if (targets[r] < 0) {
      sums[r] = 0.0f;
      continue;
    }
    if (grad) {
      for (int64_t j = 0; j < Vl; ++j) {
        x[j] = FastExp(x[j] - mx);
        sum += x[j];
      }
    } else {
      for (int64_t j = 0; j < Vl; ++j) sum += FastExp(x[j] - mx);
    }
    sums[r] = sum;
  }
}

double CrossEntropyFinish(float* logits, float* logprob, const float* sums, const int32_t* local,
                          const int32_t* targets, int64_t n, int64_t Vl, float grad_scale) {
  double total = 0.0;
#pragma omp parallel for schedule(static) reduction(+ : total)
  for (int64_t r = 0; r < n; ++r) {
    float* x = logits + r * Vl;
    if (targets[r] < 0) {
      if (logprob != nullptr) logprob[r] = 0.0f;
      if (grad_scale != 0.0f) std::memset(x, 0, sizeof(float) * static_cast<size_t>(Vl));
      continue;
    }
    const float lp = sums[n + r] - std::log(sums[r]);
    if (logprob != nullptr) logprob[r] = lp;
    total += -static_cast<double>(lp);
    if (grad_scale != 0.0f) {
      const float inv = grad_scale / sums[r];
      for (int64_t j = 0; j < Vl; ++j) x[j] *= inv;
      if (local[r] >= 0) x[local[r]] -= grad_scale;
    }
  }
  return total;
}

}  // namespace lote::engine
