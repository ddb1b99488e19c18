#include "engine/memory_plan.h"

#include <gtest/gtest.h>

#include "engine/cpu_kernels.h"
#include "engine/llama_model.h"

namespace lote::engine {
namespace {

LlamaConfig Small(int64_t heads, int64_t kv_heads, bool tied) {
  LlamaConfig c;
  c.hidden_size = 32;
  c.intermediate_size = 48;
  c.num_hidden_layers = 2;
  c.num_attention_heads = heads;
  c.num_key_value_heads = kv_heads;
  c.vocab_size = 101;
  c.max_position_embeddings = 512;
  c.tie_word_embeddings = tied;
  return c;
}

LlamaConfig Llama2_7B() {
  LlamaConfig c;
  c.hidden_size = 4096;
  c.intermediate_size = 11008;
  c.num_hidden_layers = 32;
  c.num_attention_heads = 32;
  c.num_key_value_heads = 32;
  c.vocab_size = 32000;
  c.max_position_embeddings = 4096;
  return c;
}

// The model allocates exactly the plan: everything but the AdamW moments, which the
// optimizer owns (2 fp32 buffers of the parameter layout).
TEST(MemoryPlanTest, ModelAllocatesExactlyThePlan) {
  InitCpuBackend(0);
  struct Case {
    LlamaConfig config;
    int64_t batch, seq;
  };
  const Case cases[] = {
      {Small(4, 2, false), 2, 7},    // GQA, shorter than an attention block
      {Small(4, 1, true), 3, 130},   // MQA, tied head, one block + 2 rows
      {Small(2, 2, false), 1, 300},  // MHA, 2 blocks + a partial one
      {Small(8, 4, false), 2, 512},  // 4 blocks, N = 1024 > the head chunk
  };
  for (const Case& k : cases) {
    for (bool training : {false, true}) {
      for (int mode_and_precision = 0; mode_and_precision < 6; ++mode_and_precision) {
        const Recompute mode = static_cast<Recompute>(mode_and_precision % 3);
        const Precision precision =
            mode_and_precision < 3 ? Precision::kFp32 : Precision::kBf16Mixed;
        SCOPED_TRACE(testing::Message() << "heads " << k.config.num_attention_heads << "/"
                                        << k.config.num_key_value_heads << " B=" << k.batch << " T="
                                        << k.seq << " training=" << training << " recompute "
                                        << RecomputeName(mode) << " " << PrecisionName(precision));
        const ActivationOptions options{mode, 1, precision};
        auto model =
            LlamaModel::Create(k.config, k.batch, k.seq, training, {}, nullptr, options).value();
        const MemoryPlan plan =
            PlanMemory(k.config, k.batch, k.seq, CpuThreads(), training, options);
        EXPECT_EQ(plan.optimizer_bytes, training ? 2 * 4 * model->num_params() : 0);
        EXPECT_EQ(model->allocated_bytes() + plan.optimizer_bytes, plan.total_bytes());
        EXPECT_EQ(plan.params_bytes, 4 * model->num_params());
        EXPECT_EQ(plan.activation_grad_bytes > 0, training);
        EXPECT_EQ(plan.weight_copy_bytes > 0, precision == Precision::kBf16Mixed);
      }
    }
  }
}

// Llama 2 7B at T = 4096 (every buffer a multiple of 16 floats, so no padding): selective
// recomputation keeps one layer's attention output [T, C] and log-sum-exp [nh, T] instead
// of 32; full keeps of each layer only its input [T, C], plus one layer's worth of the rest.
TEST(MemoryPlanTest, RecomputationKeepsOneLayerOfWhatItRecomputes) {
  const LlamaConfig c = Llama2_7B();
  const int64_t T = 4096, C = 4096, I = 11008, nh = 32, L = 32;
  auto acts = [&](Recompute mode) {
    return PlanMemory(c, 1, T, 2, true, {mode, 1}).activation_bytes;
  };
  const int64_t none = acts(Recompute::kNone);
  EXPECT_EQ(none - acts(Recompute::kSelective), (L - 1) * T * (C + nh) * 4);
  // A layer keeps res, rstd1, qkv, lse, att, res_mid, rstd2, gate/up and act.
  const int64_t per_layer = T * (6 * C + 3 * I + 2 + nh) * 4;
  EXPECT_EQ(none - acts(Recompute::kFull), (L - 1) * (per_layer - T * C * 4));
  // Activation gradients do not change: one layer's, shared.
  EXPECT_EQ(PlanMemory(c, 1, T, 2, true, {Recompute::kFull, 1}).activation_grad_bytes,
            PlanMemory(c, 1, T, 2, true).activation_grad_bytes);
}

// bf16-mixed (Llama 2 7B, T = 4096, no padding): each layer keeps its activations as
// bf16, half of fp32's bytes, and one fp32 layer is shared by all (what the kernels read
// and write); rstd and lse stay fp32. The weights in use are one layer's (larger than
// the LM head here) plus the final norm, in fp32 values; the fp32 master is unchanged.
TEST(MemoryPlanTest, Bf16MixedKeepsActivationsInHalfTheBytes) {
  const LlamaConfig c = Llama2_7B();
  const int64_t T = 4096, C = 4096, I = 11008, L = 32, V = 32000;
  const int64_t per_layer_values = T * (6 * C + 3 * I);
  for (Recompute mode : {Recompute::kNone, Recompute::kFull}) {
    SCOPED_TRACE(RecomputeName(mode));
    const MemoryPlan fp32 = PlanMemory(c, 1, T, 2, true, {mode, 1, Precision::kFp32});
    const MemoryPlan bf16 = PlanMemory(c, 1, T, 2, true, {mode, 1, Precision::kBf16Mixed});
    EXPECT_EQ(bf16.params_bytes, fp32.params_bytes);
    EXPECT_EQ(bf16.grads_bytes, fp32.grads_bytes);
    EXPECT_EQ(bf16.optimizer_bytes, fp32.optimizer_bytes);
    EXPECT_EQ(bf16.activation_grad_bytes, fp32.activation_grad_bytes);
    const int64_t layer_weights = 2 * C + 4 * C * C + 3 * I * C;
    ASSERT_GT(layer_weights, V * C);
    EXPECT_EQ(bf16.weight_copy_bytes, (layer_weights + C) * 4);
    EXPECT_EQ(fp32.weight_copy_bytes, 0);
    if (mode == Recompute::kNone) {
      // L layers at 2 bytes instead of 4, plus the shared fp32 layer.
      EXPECT_EQ(fp32.activation_bytes - bf16.activation_bytes,
                L * per_layer_values * 2 - per_layer_values * 4);
    } else {
      // Full: each layer keeps its input [T, C] (bf16), and one layer is shared in both.
      EXPECT_EQ(fp32.activation_bytes - bf16.activation_bytes, L * T * C * 2 - T * C * 4);
    }
  }
}

// No [T, T] term anywhere: doubling T from 2048 to 4096 adds exactly twice what doubling
// from 1024 to 2048 added (Llama 2 7B, batch 1, 2 threads; a pure function, nothing
// allocated).
TEST(MemoryPlanTest, ActivationsAreLinearInSequenceLength) {
  const LlamaConfig c = Llama2_7B();
  const MemoryPlan p1 = PlanMemory(c, 1, 1024, 2, true);
  const MemoryPlan p2 = PlanMemory(c, 1, 2048, 2, true);
  const MemoryPlan p4 = PlanMemory(c, 1, 4096, 2, true);
  EXPECT_EQ(p4.activation_bytes - p2.activation_bytes,
            2 * (p2.activation_bytes - p1.activation_bytes));
  EXPECT_EQ(p4.activation_grad_bytes - p2.activation_grad_bytes,
            2 * (p2.activation_grad_bytes - p1.activation_grad_bytes));
  // Per layer at T = 4096: residual, qkv, attention output, mid residual (C + 3C + C + C),
  // gate/up and SwiGLU output (2I + I) per token, plus [N] rstds and the [nh, T] lse.
  const int64_t T = 4096, C = 4096, I = 11008;
  const int64_t per_layer = T * (6 * C + 3 * I) + 2 * T + 32 * T;
  const int64_t layers = 32 * per_layer * 4;
  EXPECT_GE(p4.activation_bytes, layers);
  // What is not per layer: final residual and the shared norm output (2 x [T, C]), a
  // logits chunk [512, V], rope tables and the attention scratch, about 197 MiB.
  EXPECT_LT(p4.activation_bytes - layers, int64_t{256} << 20);
  // The attention probabilities alone used to be 32 x 32 x 4096^2 x 4 bytes = 64 GiB.
  EXPECT_LT(p4.activation_bytes, int64_t{29} << 30);
}

TEST(MemoryPlanTest, ScratchScalesWithThreads) {
  const LlamaConfig c = Small(4, 2, false);
  const ActivationLayout one = PlanActivations(c, 2, 300, 1);
  const ActivationLayout four = PlanActivations(c, 2, 300, 4);
  const auto aligned = [](int64_t n) { return (n + 15) / 16 * 16; };  // the plan's sub-buffers
  const int64_t fwd = AttentionForwardScratch(300, c.head_dim());
  const int64_t bwd = AttentionBackwardScratch(300, c.head_dim());
  EXPECT_EQ(four.total - one.total, aligned(4 * fwd) - aligned(fwd));
  EXPECT_EQ(four.grad_total - one.grad_total, aligned(4 * bwd) - aligned(bwd));
}

}  // namespace
}  // namespace lote::engine
