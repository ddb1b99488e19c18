// AdamW over the flat parameter buffer (decoupled weight decay, as torch.optim.AdamW),
// the learning-rate schedule (linear warmup, then linear decay to 0 at max steps) and
// global-norm gradient clipping (as torch.nn.utils.clip_grad_norm_). The moments m and
// v share the parameter layout; weight decay applies to matrices, not to norm weights.
// ZeRO-1: an AdamW made with a shard [begin, end) of the flat buffer keeps m and v
// for that range only and updates only those parameters; the data-parallel ranks
// then all-gather the updated shards.
// Not thread-safe; the loops use OpenMP.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/param_layout.h"

namespace lote::engine {

struct AdamWOptions {
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-6f;
  float weight_decay = 0.01f;
};

class AdamW {
 public:
  AdamW(const ParamLayout& layout, AdamWOptions options);
  // Optimizer state for params [shard_begin, shard_end) only.
  AdamW(const ParamLayout& layout, AdamWOptions options, int64_t shard_begin, int64_t shard_end);
  // One update with learning rate lr of params[begin, end) from grad_scale *
  // grads[begin, end) (both full-layout buffers; grad_scale is the clipping factor, so
  // clipping costs no pass of its own); increments the step count used for bias
  // correction. One pass over the shard: decay, moments and update fused per element.
  void Step(float* params, const float* grads, float lr, float grad_scale = 1.0f);
  int64_t steps() const { return t_; }
  // Restores the bias-correction step count (resume from a checkpoint).
  void set_steps(int64_t t) { t_ = t; }
  int64_t shard_begin() const { return begin_; }
  int64_t shard_end() const { return end_; }
  float* m() { return m_.data(); }
  float* v() { return v_.data(); }

 private:
  AdamWOptions opt_;
  int64_t t_ = 0;
  std::vector<float> m_, v_;
  struct Segment {
    int64_t begin, end;
    bool decays;
  };
  std::vector<Segment> segments_;  // [begin_, end_) in order, by whether weights decay
  int64_t begin_, end_;
};

// step is 1-based: warmup gives peak*step/warmup for step <= warmup, then
// peak*(max_steps-step)/(max_steps-warmup), reaching 0 at max_steps.
double LearningRate(int64_t step, int64_t warmup_steps, int64_t max_steps, double peak);

// Returns the global L2 norm of grads[n] (in double) before clipping; scales grads by
// max_norm/(norm+1e-6) when the norm exceeds max_norm.
double ClipGradNorm(float* grads, int64_t n, double max_norm);
// Sum of x[i]^2 over [begin, end) in double (a range's share of a global norm);
// vectorized and threaded, so the order of the additions is not a plain loop's.
double SumOfSquares(const float* x, int64_t begin, int64_t end);
// The clipping factor of clip_grad_norm_ for a global norm: min(1, max/(norm+1e-6)).
double ClipCoefficient(double norm, double max_norm);

}  // namespace lote::engine
