#include "engine/lm_head_loss.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "engine/cpu_kernels.h"

namespace lote::engine {

HeadStats::HeadStats(float* buffer, int64_t m, int64_t Vl, int64_t block)
    : vocab_block(block),
      blocks(HeadVocabBlocks(Vl, block)),
      row_max(buffer),
      sum_exp(buffer + m),
      target(buffer + 2 * m),
      local_max(buffer + 3 * m),
      block_max(buffer + 4 * m) {}

namespace {

// One row of one block: exponentials in place (relative to the block's max) and their
// sum folded into the row's running (max, sum).
void ForwardRowBlock(float* y, int64_t n, int64_t j, int64_t r, const HeadStats& s) {
  float b = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : b)
  for (int64_t i = 0; i < n; ++i) b = std::max(b, y[i]);
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < n; ++i) {
    y[i] = FastExp(y[i] - b);
    sum += y[i];
  }
  s.block_max[r * s.blocks + j] = b;
  if (j == 0) {
    s.row_max[r] = b;
    s.sum_exp[r] = sum;
    return;
  }
  const float mx = std::max(s.row_max[r], b);
  s.sum_exp[r] = s.sum_exp[r] * std::exp(s.row_max[r] - mx) + sum * std::exp(b - mx);
  s.row_max[r] = mx;
}

}  // namespace

void LmHeadForward(float* logits, const HeadStats& s, const float* x, const float* w,
                   const int32_t* local, int64_t m, int64_t C, int64_t Vl, float* raw,
                   int64_t raw_ld, GemmOperands operands) {
  std::fill(s.target, s.target + m, 0.0f);
  for (int64_t j = 0; j < s.blocks; ++j) {
    const int64_t j0 = j * s.vocab_block, n = std::min(Vl, j0 + s.vocab_block) - j0;
    float* block = logits + m * j0;  // [m, n], contiguous (see lm_head_loss.h)
    GemmOf(operands, false, true, m, n, C, 1.0f, x, C, w + j0 * C, C, 0.0f, block, n);
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < m; ++r) {
      float* y = block + r * n;
      if (raw != nullptr) std::memcpy(raw + r * raw_ld + j0, y, sizeof(float) * n);
      if (local[r] >= j0 && local[r] < j0 + n) s.target[r] = y[local[r] - j0];
      ForwardRowBlock(y, n, j, r, s);
    }
  }
  std::copy(s.row_max, s.row_max + m, s.local_max);
}

void LmHeadRescaleSums(const HeadStats& s, int64_t m) {
  for (int64_t r = 0; r < m; ++r) s.sum_exp[r] *= std::exp(s.local_max[r] - s.row_max[r]);
}

double LmHeadLoss(float* logprob, const HeadStats& s, const int32_t* targets, int64_t m) {
  double total = 0.0;
  for (int64_t r = 0; r < m; ++r) {
    const float lp = targets[r] < 0 ? 0.0f : s.target[r] - s.row_max[r] - std::log(s.sum_exp[r]);
    if (logprob != nullptr) logprob[r] = lp;
    total -= static_cast<double>(lp);
  }
  return total;
}

void LmHeadBackward(float* dx, float* dw, float* logits, const HeadStats& s, const float* x,
                    const float* w, const int32_t* local, const int32_t* targets, int64_t m,
                    int64_t C, int64_t Vl, float grad_scale, GemmOperands operands) {
  for (int64_t j = 0; j < s.blocks; ++j) {
    const int64_t j0 = j * s.vocab_block, n = std::min(Vl, j0 + s.vocab_block) - j0;
    float* block = logits + m * j0;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < m; ++r) {
      float* y = block + r * n;
      if (targets[r] < 0) {
        std::memset(y, 0, sizeof(float) * static_cast<size_t>(n));
        continue;
      }
      // softmax = exp(logit - b_j) * exp(b_j - max) / sum
      const float f =
          std::exp(s.block_max[r * s.blocks + j] - s.row_max[r]) / s.sum_exp[r] * grad_scale;
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) y[i] *= f;
      if (local[r] >= j0 && local[r] < j0 + n) y[local[r] - j0] -= grad_scale;
    }
    GemmOf(operands, false, false, m, C, n, 1.0f, block, n, w + j0 * C, C, j == 0 ? 0.0f : 1.0f, dx,
           C);
    GemmOf(operands, true, false, n, C, m, 1.0f, block, n, x, C, 1.0f, dw + j0 * C, C);
  }
}

}  // namespace lote::engine
