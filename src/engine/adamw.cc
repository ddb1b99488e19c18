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
    if (!t.weight_decay) continue;
    const int64_t b = std::max(t.offset, begin_), e = std::min(t.offset + t.numel, end_);
    if (b >= e) continue;
    if (!decay_ranges_.empty() && decay_ranges_.back().second == b) {
      decay_ranges_.back().second = e;
    } else {
      decay_ranges_.emplace_back(b, e);
    }
  }
}

void AdamW::Step(float* params, const float* grads, float lr) {
  ++t_;
  const float b1 = opt_.beta1, b2 = opt_.beta2, eps = opt_.eps;
  const float c1 = 1.0f - std::pow(b1, static_cast<float>(t_));
  const float c2 = 1.0f - std::pow(b2, static_cast<float>(t_));
  const float step = lr / c1;
  const float inv_sqrt_c2 = 1.0f / std::sqrt(c2);
  float* m = m_.data();  // m[i - begin_] belongs to params[i]
  float* v = v_.data();
  // Decoupled weight decay first (p *= 1 - lr*wd), as torch.optim.AdamW does.
  const float decay = 1.0f - lr * opt_.weight_decay;
  for (const auto& [begin, end] : decay_ranges_) {
#pragma omp parallel for schedule(static)
    for (int64_t i = begin; i < end; ++i) params[i] *= decay;
  }
#pragma omp parallel for schedule(static)
  for (int64_t i = begin_; i < end_; ++i) {
    const int64_t k = i - begin_;
    const float g = grads[i];
    m[k] = b1 * m[k] + (1.0f - b1) * g;
    v[k] = b2 * v[k] + (1.0f - b2) * g * g;
    params[i] -= step * m[k] / (std::sqrt(v[k]) * inv_sqrt_c2 + eps);
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

double ClipGradNorm(float* grads, int64_t n, double max_norm) {
  double ss = 0.0;
#pragma omp parallel for schedule(static) reduction(+ : ss)
  for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(grads[i]) * grads[i];
  const double norm = std::sqrt(ss);
  const double coef = max_norm / (norm + 1e-6);
  if (coef < 1.0) {
    const float c = static_cast<float>(coef);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) grads[i] *= c;
  }
  return norm;
}

}  // namespace lote::engine
