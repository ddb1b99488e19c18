#include "engine/adamw.h"

#include <algorithm>
#include <cmath>

namespace lote::engine {

AdamW::AdamW(const ParamLayout& layout, AdamWOptions options)
    : AdamW(layout, options, 0, layout.total()) {}

AdamW::AdamW(const ParamLayout& layout, AdamWOptions options, int64_t shard_begin,
             int64_t shard_end)
    : opt_(options),
      m_(static_cast<size_t>(shard_end - shard_begin), 0.0f),
      v_(static_cast<size_t>(shard_end - shard_begin), 0.0f),
      begin_(shard_begin),
      end_(shard_end) {
  for (const TensorSpec& t : layout.tensors()) {
    const int64_t b = std::max(t.offset, begin_), e = std::min(t.offset + t.numel, end_);
    if (b >= e) continue;
    if (!segments_.empty() && segments_.back().end == b &&
        segments_.back().decays == t.weight_decay) {
      segments_.back().end = e;
    } else {
      segments_.push_back({b, e, t.weight_decay});
    }
  }
}

void AdamW::Step(float* params, const float* grads, float lr, float grad_scale) {
  ++t_;
  const float b1 = opt_.beta1, b2 = opt_.beta2, eps = opt_.eps;
  const float c1 = 1.0f - std::pow(b1, static_cast<float>(t_));
  const float c2 = 1.0f - std::pow(b2, static_cast<float>(t_));
  const float step = lr / c1;
  const float inv_sqrt_c2 = 1.0f / std::sqrt(c2);
  float* m = m_.data() - begin_;  // m[i] belongs to params[i]
  float* v = v_.data() - begin_;
  for (const Segment& seg : segments_) {
    // Decoupled weight decay first (p *= 1 - lr*wd), as torch.optim.AdamW does; a
    // factor of 1 leaves the norm weights exactly as they are.
    const float decay = seg.decays ? 1.0f - lr * opt_.weight_decay : 1.0f;
#pragma omp parallel for simd schedule(static)
    for (int64_t i = seg.begin; i < seg.end; ++i) {
      const float g = grads[i] * grad_scale;
      const float p = params[i] * decay;
      m[i] = b1 * m[i] + (1.0f - b1) * g;
      v[i] = b2 * v[i] + (1.0f - b2) * g * g;
      params[i] = p - step * m[i] / (std::sqrt(v[i]) * inv_sqrt_c2 + eps);
    }
  }
}

double LearningRate(int64_t step, int64_t warmup_steps, int64_t max_steps, double peak) {
  if (warmup_steps > 0 && step <= warmup_steps) {
    return peak * static_cast<double>(step) / static_cast<double>(warmup_steps);
  }
  if (max_steps <= warmup_steps) return peak;
  const double left =
      static_cast<double>(max_steps - step) / static_cast<double>(max_steps - warmup_steps);
  return peak * std::max(0.0, left);
}

double ClipCoefficient(double norm, double max_norm) {
  return std::min(1.0, max_norm / (norm + 1e-6));
}

double SumOfSquares(const float* x, int64_t begin, int64_t end) {
  double ss = 0.0;
#pragma omp parallel for simd schedule(static) reduction(+ : ss)
  for (int64_t i = begin; i < end; ++i) ss += static_cast<double>(x[i]) * x[i];
  return ss;
}

double ClipGradNorm(float* grads, int64_t n, double max_norm) {
  const double norm = std::sqrt(SumOfSquares(grads, 0, n));
  const double coef = max_norm / (norm + 1e-6);
  if (coef < 1.0) {
    const float c = static_cast<float>(coef);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) grads[i] *= c;
  }
  return norm;
}

}  // namespace lote::engine
