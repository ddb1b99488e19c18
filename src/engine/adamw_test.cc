#include "engine/adamw.h"

#include <gtest/gtest.h>

#include <cmath>

#include "engine/bf16.h"

namespace lote::engine {
namespace {

TEST(AdamWTest, ScheduleWarmsUpThenDecaysToZero) {
  EXPECT_DOUBLE_EQ(LearningRate(1, 10, 100, 1.0), 0.1);
  EXPECT_DOUBLE_EQ(LearningRate(10, 10, 100, 1.0), 1.0);
  EXPECT_DOUBLE_EQ(LearningRate(55, 10, 100, 1.0), 0.5);
  EXPECT_DOUBLE_EQ(LearningRate(100, 10, 100, 1.0), 0.0);
  EXPECT_DOUBLE_EQ(LearningRate(1, 0, 4, 2.0), 1.5);
}

TEST(AdamWTest, ClipsByGlobalNorm) {
  std::vector<float> g = {3.0f, 4.0f};
  EXPECT_DOUBLE_EQ(ClipGradNorm(g.data(), 2, 1.0), 5.0);
  EXPECT_NEAR(std::sqrt(g[0] * g[0] + g[1] * g[1]), 1.0, 1e-5);
  std::vector<float> small = {0.3f, 0.4f};
  ClipGradNorm(small.data(), 2, 1.0);
  EXPECT_EQ(small[0], 0.3f);
}

TEST(AdamWTest, MatchesHandComputedStepsAndSkipsDecayOnNorms) {
  LlamaConfig c;
  c.hidden_size = 2;
  c.intermediate_size = 2;
  c.num_hidden_layers = 1;
  c.num_attention_heads = 1;
  c.num_key_value_heads = 1;
  c.vocab_size = 3;
  c.max_position_embeddings = 4;
  const ParamLayout layout(c);
  std::vector<float> p(static_cast<size_t>(layout.total()), 1.0f), g(p.size(), 0.5f);
  AdamWOptions o;
  AdamW opt(layout, o);
  opt.Step(p.data(), g.data(), 0.1f);
  // Step 1: m/c1 = g, v/c2 = g^2, update = lr * g / (|g| + eps).
  const double adam = 0.1 * 0.5 / (0.5 + 1e-6);
  const float decayed = static_cast<float>(1.0 * (1 - 0.1 * 0.01) - adam);
  const float plain = static_cast<float>(1.0 - adam);
  EXPECT_NEAR(p[static_cast<size_t>(layout.embed())], decayed, 1e-6);
  EXPECT_NEAR(p[static_cast<size_t>(layout.final_norm())], plain, 1e-6);
  // Step 2 with the same gradient: bias-corrected moments are still g and g^2.
  opt.Step(p.data(), g.data(), 0.1f);
  EXPECT_NEAR(p[static_cast<size_t>(layout.final_norm())], plain - adam, 1e-6);
  EXPECT_EQ(opt.steps(), 2);
}

// bf16-mixed's update: AdamW steps the fp32 master weights, and the model reads them
// rounded to bf16. Steps far smaller than a bf16 step (here 1e-4 on weights of about 1,
// whose bf16 neighbours are 2^-7 apart) add up in the master and move the bf16 weights
// after enough of them; updating bf16 weights in place would lose every one of them.
TEST(AdamWTest, MasterWeightsKeepUpdatesBelowBf16Resolution) {
  LlamaConfig c;
  c.hidden_size = 2;
  c.intermediate_size = 2;
  c.num_hidden_layers = 1;
  c.num_attention_heads = 1;
  c.num_key_value_heads = 1;
  c.vocab_size = 3;
  c.max_position_embeddings = 4;
  const ParamLayout layout(c);
  AdamWOptions o;
  o.weight_decay = 0.0f;
  AdamW master_opt(layout, o), bf16_opt(layout, o);
  std::vector<float> master(static_cast<size_t>(layout.total()), 1.0f);
  std::vector<float> bf16_only = master;
  const std::vector<float> g(master.size(), -0.25f);  // every step: +lr (Adam's |update|)
  const float lr = 1e-4f;
  for (int step = 1; step <= 60; ++step) {
    master_opt.Step(master.data(), g.data(), lr);
    bf16_opt.Step(bf16_only.data(), g.data(), lr);
    RoundToBf16(bf16_only.data(), bf16_only.data(), static_cast<int64_t>(bf16_only.size()));
    if (step == 10) {
      // Ten steps (1e-3) are under half a bf16 step (2^-8 = 3.9e-3): the weights the
      // model reads have not moved yet, the master has.
      EXPECT_EQ(RoundToBf16(master[0]), 1.0f);
      EXPECT_NEAR(master[0], 1.0f + 10 * lr, 1e-6);
    }
  }
  for (size_t i = 0; i < master.size(); ++i) {
    EXPECT_NEAR(master[i], 1.0f + 60 * lr, 5e-6) << i;
    EXPECT_EQ(RoundToBf16(master[i]), 1.0078125f) << i;  // 1 + 2^-7: it moved by one step
    EXPECT_EQ(bf16_only[i], 1.0f) << i;                  // every update rounded away
  }
}

}  // namespace
}  // namespace lote::engine
