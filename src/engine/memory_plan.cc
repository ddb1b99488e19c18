#include "engine/memory_plan.h"

#include <fmt/format.h>

#include <algorithm>

#include "engine/communicator.h"
#include "engine/cpu_kernels.h"
#include "engine/lm_head_loss.h"
#include "engine/param_layout.h"

namespace lote::engine {

ActivationLayout PlanActivations(const LlamaConfig& c, int64_t B, int64_t T, int threads) {
  ActivationLayout a;
  const int64_t N = B * T, C = c.hidden_size, I = c.intermediate_size;
  int64_t off = 0;
  auto take = [&off](int64_t n) {
    const int64_t at = off;
    off += (n + 15) / 16 * 16;  // 64-byte aligned sub-buffers
    return at;
  };
  const int64_t nthreads = std::max(threads, 1);
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    LayerActs la{};
    la.res = take(N * C);
    la.rstd1 = take(N);
    la.qkv = take(N * c.qkv_dim());
    la.lse = take(B * c.num_attention_heads * T);
    la.att = take(N * c.q_dim());
    la.res_mid = take(N * C);
    la.rstd2 = take(N);
    la.gate_up = take(N * 2 * I);
    la.act = take(N * I);
    a.layers.push_back(la);
  }
  a.res_final = take(N * C);
  a.rstdf = take(N);
  a.ln = take(N * C);
  a.logits = take(std::min(N, kHeadChunkRows) * c.vocab_size);
  a.head_stats = take(HeadStatsFloats(std::min(N, kHeadChunkRows), c.vocab_size));
  a.logprob = take(N);
  a.rope_cos = take(T * c.head_dim() / 2);
  a.rope_sin = take(T * c.head_dim() / 2);
  a.attn_scratch = take(nthreads * AttentionForwardScratch(T, c.head_dim()));
  a.total = off;
  off = 0;
  a.dres = take(N * C);
  a.dln = take(N * C);
  a.dqkv = take(N * c.qkv_dim());
  a.datt = take(N * c.q_dim());
  a.dgate_up = take(N * 2 * I);
  a.dact = take(N * I);
  a.attn_grad_scratch = take(nthreads * AttentionBackwardScratch(T, c.head_dim()));
  a.grad_total = off;
  return a;
}

MemoryPlan PlanMemory(const LlamaConfig& config, int64_t batch, int64_t seq_len, int threads,
                      bool training) {
  MemoryPlan p;
  const ParamLayout layout(config);
  const ActivationLayout acts = PlanActivations(config, batch, seq_len, threads);
  p.params_bytes = layout.total() * 4;
  p.activation_bytes = acts.total * 4;
  if (training) {
    p.grads_bytes = layout.total() * 4;
    p.optimizer_bytes = 2 * layout.total() * 4;
    p.activation_grad_bytes = acts.grad_total * 4;
  }
  return p;
}

std::string HumanCount(double n) {
  if (n >= 1e9) return fmt::format("{:.2f} B", n / 1e9);
  if (n >= 1e6) return fmt::format("{:.2f} M", n / 1e6);
  if (n >= 1e3) return fmt::format("{:.2f} K", n / 1e3);
  return fmt::format("{:.0f}", n);
}

std::string HumanBytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024.0 && u < 4) {
    bytes /= 1024.0;
    ++u;
  }
  return fmt::format("{:.2f} {}", bytes, units[u]);
}

std::string MemoryPlan::ToString() const {
  std::string s;
  auto line = [&s](const char* what, int64_t bytes) {
    s += fmt::format("  {:<28} {:>12}\n", what, HumanBytes(static_cast<double>(bytes)));
  };
  line("parameters (fp32)", params_bytes);
  line("gradients (fp32)", grads_bytes);
  line("AdamW m + v (fp32)", optimizer_bytes);
  line("activations", activation_bytes);
  line("activation gradients", activation_grad_bytes);
  line("total", total_bytes());
  return s;
}

}  // namespace lote::engine

namespace lote::engine {

MemoryPlan PlanRankMemory(const LlamaConfig& config, int64_t batch, int64_t seq_len, int threads,
                          const ParallelDims& dims) {
  const int tp = dims.tp(), dp = dims.dp();
  const LlamaConfig shard = ShardConfig(config, TensorParallel{0, tp});
  MemoryPlan p = PlanMemory(shard, batch, seq_len, threads, true);
  const int64_t local = ParamLayout(shard).total();
  const int64_t zero_shard = EvenSplit(local, dp, 0).size();
  p.optimizer_bytes = 2 * zero_shard * 4 + (dp > 1 ? zero_shard * 4 : 0);
  if (tp > 1) p.activation_bytes += 2 * batch * seq_len * 4;
  return p;
}

}  // namespace lote::engine
