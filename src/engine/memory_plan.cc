#include "engine/memory_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "engine/communicator.h"
#include "engine/cpu_kernels.h"
#include "engine/lm_head_loss.h"
#include "engine/param_layout.h"

namespace lote::engine {

const char* PrecisionName(Precision p) {
  return p == Precision::kBf16Mixed ? "bf16-mixed" : "fp32";
}

const char* RecomputeName(Recompute r) {
  switch (r) {
    case Recompute::kNone:
      return "none";
    case Recompute::kSelective:
      return "selective";
    case Recompute::kFull:
      return "full";
  }
  return "?";
}

namespace {

// Hands out 64-byte aligned sub-buffers of one buffer, in floats.
class Taker {
 public:
  int64_t operator()(int64_t n) {
    const int64_t at = off_;
    off_ += (n + 15) / 16 * 16;
    return at;
  }
  int64_t total() const { return off_; }

 private:
  int64_t off_ = 0;
};

// The attention core of a layer: its output and log-sum-exp.
void TakeAttentionCore(Taker& take, LayerActs& la, const LlamaConfig& c, int64_t B, int64_t T) {
  la.lse = take(B * c.num_attention_heads * T);
  la.att = take(B * T * c.q_dim());
}

// Everything of a layer but its input and its attention core.
void TakeLayerRest(Taker& take, LayerActs& la, const LlamaConfig& c, int64_t N, int64_t Nl) {
  const int64_t C = c.hidden_size, I = c.intermediate_size;
  la.rstd1 = take(Nl);
  la.qkv = take(N * c.qkv_dim());
  la.res_mid = take(Nl * C);
  la.rstd2 = take(Nl);
  la.gate_up = take(N * 2 * I);
  la.act = take(N * I);
}

// bf16-mixed: every [N,*] / [Nl,*] field is one fp32 layer shared by all layers (what
// the kernels read and write); each layer keeps bf16 copies of what its backward reads
// and does not recompute. The small per-row statistics (rstd, lse) stay fp32 per layer.
void PlanBf16Layers(Taker& take, ActivationLayout& a, const LlamaConfig& c, int64_t B, int64_t T,
                    const ActivationOptions& o) {
  const int64_t N = B * T, C = c.hidden_size, I = c.intermediate_size;
  const int64_t Nl = LocalRows(N, o.sequence_parts);
  const bool keep_core = o.recompute == Recompute::kNone;
  const bool keep_rest = o.recompute != Recompute::kFull;
  LayerActs shared{};
  shared.res = take(Nl * C);
  shared.qkv = take(N * c.qkv_dim());
  shared.att = take(N * c.q_dim());
  shared.res_mid = take(Nl * C);
  shared.gate_up = take(N * 2 * I);
  shared.act = take(N * I);
  if (!keep_core) shared.lse = take(B * c.num_attention_heads * T);
  if (!keep_rest) {
    shared.rstd1 = take(Nl);
    shared.rstd2 = take(Nl);
  }
  Taker kept;  // bf16 elements
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    LayerActs la = shared;
    la.kept.res = kept(Nl * C);
    if (keep_rest) {
      la.rstd1 = take(Nl);
      la.rstd2 = take(Nl);
      la.kept.qkv = kept(N * c.qkv_dim());
      la.kept.res_mid = kept(Nl * C);
      la.kept.gate_up = kept(N * 2 * I);
      la.kept.act = kept(N * I);
    }
    if (keep_core) {
      la.lse = take(B * c.num_attention_heads * T);
      la.kept.att = kept(N * c.q_dim());
    }
    a.layers.push_back(la);
  }
  a.kept_total = kept.total();
  // The weights the kernels read: one layer's tensors, or the LM head, then the final norm.
  const ParamLayout layout(c);
  int64_t largest = c.vocab_size * C;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const int64_t end =
        l + 1 < c.num_hidden_layers ? layout.layer(l + 1).input_norm : layout.final_norm();
    largest = std::max(largest, end - layout.layer(l).input_norm);
  }
  a.weight_copy_floats = largest + C;
  a.weight_copy = take(a.weight_copy_floats);
}

}  // namespace

ActivationLayout PlanActivations(const LlamaConfig& c, int64_t B, int64_t T, int threads,
                                 const ActivationOptions& o) {
  ActivationLayout a;
  const int64_t N = B * T, C = c.hidden_size, I = c.intermediate_size;
  const int64_t Nl = LocalRows(N, o.sequence_parts);
  const bool keep_core = o.recompute == Recompute::kNone;
  const bool keep_rest = o.recompute != Recompute::kFull;
  Taker take;
  if (o.precision == Precision::kBf16Mixed) {
    PlanBf16Layers(take, a, c, B, T, o);
  } else {
    // One layer's worth of what backward recomputes, shared by every layer.
    LayerActs shared{};
    if (!keep_core) TakeAttentionCore(take, shared, c, B, T);
    if (!keep_rest) TakeLayerRest(take, shared, c, N, Nl);
    for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
      LayerActs la = shared;
      la.res = take(Nl * C);
      if (keep_rest) TakeLayerRest(take, la, c, N, Nl);
      if (keep_core) TakeAttentionCore(take, la, c, B, T);
      a.layers.push_back(la);
    }
  }
  const int64_t nthreads = std::max(threads, 1);
  a.res_final = take(Nl * C);
  a.rstdf = take(Nl);
  a.ln = take(N * C);
  a.logits = take(std::min(N, kHeadChunkRows) * c.vocab_size);
  a.head_stats = take(HeadStatsFloats(std::min(N, kHeadChunkRows), c.vocab_size));
  a.logprob = take(N);
  a.rope_cos = take(T * c.head_dim() / 2);
  a.rope_sin = take(T * c.head_dim() / 2);
  a.attn_scratch = take(nthreads * AttentionForwardScratch(T, c.head_dim()));
  a.total = take.total();
  Taker gtake;
  a.dres = gtake(Nl * C);
  a.dln = gtake(N * C);
  a.dqkv = gtake(N * c.qkv_dim());
  a.datt = gtake(N * c.q_dim());
  a.dgate_up = gtake(N * 2 * I);
  a.dact = gtake(N * I);
  a.attn_grad_scratch = gtake(nthreads * AttentionBackwardScratch(T, c.head_dim()));
  if (o.sequence_parts > 1) a.dnorm = gtake(C);
  a.grad_total = gtake.total();
  return a;
}

MemoryPlan PlanMemory(const LlamaConfig& config, int64_t batch, int64_t seq_len, int threads,
                      bool training, const ActivationOptions& options) {
  MemoryPlan p;
  const ParamLayout layout(config);
  const ActivationLayout acts = PlanActivations(config, batch, seq_len, threads, options);
  p.precision = options.precision;
  p.params_bytes = layout.total() * 4;
  p.weight_copy_bytes = acts.weight_copy_floats * 4;
  p.activation_bytes = (acts.total - acts.weight_copy_floats) * 4 + acts.kept_total * 2;
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
  const bool bf16 = precision == Precision::kBf16Mixed;
  line(bf16 ? "parameters (fp32 master)" : "parameters (fp32)", params_bytes);
  if (bf16) line("bf16 weights in use", weight_copy_bytes);
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
                          const ParallelDims& dims, const ActivationOptions& options) {
  const int tp = dims.tp(), dp = dims.dp();
  const LlamaConfig shard = ShardConfig(config, TensorParallel{0, tp});
  MemoryPlan p = PlanMemory(shard, batch, seq_len, threads, true, options);
  const int64_t local = ParamLayout(shard).total();
  const int64_t zero_shard = EvenSplit(local, dp, 0).size();
  p.optimizer_bytes = 2 * zero_shard * 4 + (dp > 1 ? zero_shard * 4 : 0);
  if (tp > 1) p.activation_bytes += 2 * batch * seq_len * 4;
  return p;
}

}  // namespace lote::engine

namespace lote::engine {

namespace {

// The rows of a side-by-side table of plans, one column per (name, plan).
std::string PlanTable(const std::vector<std::string>& names, const std::vector<MemoryPlan>& plans) {
  std::string s = fmt::format("  {:<22}", "");
  for (const std::string& name : names) s += fmt::format(" {:>13}", name);
  s += "\n";
  auto row = [&](const char* what, auto value) {
    s += fmt::format("  {:<22}", what);
    for (const MemoryPlan& p : plans) {
      s += fmt::format(" {:>13}", HumanBytes(static_cast<double>(value(p))));
    }
    s += "\n";
  };
  bool bf16 = false;
  for (const MemoryPlan& p : plans) bf16 = bf16 || p.precision == Precision::kBf16Mixed;
  row(bf16 ? "master weights (fp32)" : "parameters (fp32)",
      [](const MemoryPlan& p) { return p.params_bytes; });
  if (bf16) row("bf16 weights in use", [](const MemoryPlan& p) { return p.weight_copy_bytes; });
  row("gradients (fp32)", [](const MemoryPlan& p) { return p.grads_bytes; });
  row("AdamW m + v (fp32)", [](const MemoryPlan& p) { return p.optimizer_bytes; });
  row("activations", [](const MemoryPlan& p) { return p.activation_bytes; });
  row("activation gradients", [](const MemoryPlan& p) { return p.activation_grad_bytes; });
  row("total", [](const MemoryPlan& p) { return p.total_bytes(); });
  return s;
}

}  // namespace

std::string CompareActivationOptions(const LlamaConfig& config, int64_t batch, int64_t seq_len,
                                     int threads, const ParallelDims& dims, Precision precision) {
  std::vector<std::string> names;
  std::vector<MemoryPlan> plans;
  for (int parts : {1, dims.tp()}) {
    if (parts == 1 && !names.empty()) break;  // TP 1: no sequence-parallel columns
    for (Recompute r : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
      std::string name = parts > 1 ? std::string("SP+") + RecomputeName(r) : RecomputeName(r);
      if (parts > 1 && r == Recompute::kNone) name = "SP";
      names.push_back(name);
      plans.push_back(PlanRankMemory(config, batch, seq_len, threads, dims,
                                     ActivationOptions{r, parts, precision}));
    }
  }
  return PlanTable(names, plans);
}

std::string ComparePrecisions(const LlamaConfig& config, int64_t batch, int64_t seq_len,
                              int threads, const ParallelDims& dims, ActivationOptions options) {
  std::vector<std::string> names;
  std::vector<MemoryPlan> plans;
  for (Precision p : {Precision::kFp32, Precision::kBf16Mixed}) {
    options.precision = p;
    names.push_back(PrecisionName(p));
    plans.push_back(PlanRankMemory(config, batch, seq_len, threads, dims, options));
  }
  std::string s = PlanTable(names, plans);
  return s + fmt::format("  {:<22} {:>27.2f}x\n", "bf16-mixed / fp32",
                         static_cast<double>(plans[1].total_bytes()) /
                             static_cast<double>(plans[0].total_bytes()));
}

}  // namespace lote::engine
