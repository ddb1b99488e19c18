#include "engine/llama_config.h"

#include <gtest/gtest.h>

#include "engine/memory_plan.h"
#include "engine/param_layout.h"

namespace lote::engine {
namespace {

Json Llama2_7B() {
  return ParseJson(R"({"hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
    "num_attention_heads": 32, "num_key_value_heads": 32, "vocab_size": 32000,
    "rms_norm_eps": 1e-05, "max_position_embeddings": 4096, "tie_word_embeddings": false,
    "initializer_range": 0.02, "hidden_act": "silu"})")
      .value();
}

TEST(LlamaConfigTest, Llama2_7BHasItsParameterCount) {
  auto c = LlamaConfig::FromJson(Llama2_7B());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->NumParameters(), 6738415616);
  EXPECT_EQ(c->rope_theta, 10000.0);
  EXPECT_EQ(ParamLayout(*c).total(), c->NumParameters());
  EXPECT_EQ(HumanCount(static_cast<double>(c->NumParameters())), "6.74 B");
  const MemoryPlan plan = PlanMemory(*c, 1, 4096, 2, true);
  EXPECT_EQ(plan.params_bytes, 6738415616LL * 4);
  EXPECT_EQ(plan.optimizer_bytes, 2 * plan.params_bytes);
  EXPECT_GT(plan.activation_bytes, 0);
}

TEST(LlamaConfigTest, GqaAndTiedLayout) {
  Json j = Llama2_7B();
  j["num_key_value_heads"] = 8;
  j["tie_word_embeddings"] = true;
  auto c = LlamaConfig::FromJson(j);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->kv_dim(), 1024);
  const ParamLayout layout(*c);
  EXPECT_EQ(layout.lm_head(), layout.embed());
  EXPECT_EQ(layout.Find("lm_head.weight"), nullptr);
  const TensorSpec* k = layout.Find("model.layers.0.self_attn.k_proj.weight");
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->shape, (std::vector<int64_t>{1024, 4096}));
  // q, k, v are adjacent so one GEMM computes them.
  EXPECT_EQ(k->offset, layout.layer(0).wqkv + 4096 * 4096);
  EXPECT_EQ(layout.total(), c->NumParameters());
}

TEST(LlamaConfigTest, InconsistentShapesAreNamed) {
  Json j = Llama2_7B();
  j["num_key_value_heads"] = 5;
  auto c = LlamaConfig::FromJson(j);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("num_key_value_heads"), std::string::npos);

  j = Llama2_7B();
  j["hidden_size"] = 4100;
  c = LlamaConfig::FromJson(j);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("not divisible"), std::string::npos);

  j = Llama2_7B();
  j.erase("vocab_size");
  c = LlamaConfig::FromJson(j);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("vocab_size"), std::string::npos);
}

TEST(LlamaConfigTest, RoundTripsThroughJson) {
  auto c = LlamaConfig::FromJson(Llama2_7B());
  ASSERT_TRUE(c.ok());
  auto again = LlamaConfig::FromJson(c->ToJson());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->NumParameters(), c->NumParameters());
  EXPECT_EQ(again->rms_norm_eps, 1e-5);
}

}  // namespace
}  // namespace lote::engine
