#include "engine/compile_cache.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

namespace lote::engine {
namespace {

LlamaConfig Tiny() {
  LlamaConfig c;
  c.hidden_size = 64;
  c.intermediate_size = 128;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.vocab_size = 256;
  c.max_position_embeddings = 64;
  return c;
}

TEST(CompileCacheTest, RecordsAndFindsThePlanOfOneShapeOnly) {
  char tmpl[] = "/tmp/lote_compile_cache_XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  const std::string uri = "file://" + dir;
  const Json shape = CompileShape(Tiny(), 2, 2, 4, 64, 1);
  auto none = LookupCompilePlan(uri, shape);
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_FALSE(none->has_value());

  CompilePlan p;
  p.shape = shape;
  p.gemm_peak_gflops = 42.5;
  p.memory_plan = Json{{"total_bytes", 1234}};
  p.recorded_by = "job-1";
  auto at = RecordCompilePlan(uri, p);
  ASSERT_TRUE(at.ok()) << at.status().ToString();
  auto found = LookupCompilePlan(uri, shape);
  ASSERT_TRUE(found.ok());
  ASSERT_TRUE(found->has_value());
  EXPECT_DOUBLE_EQ((*found)->gemm_peak_gflops, 42.5);
  EXPECT_EQ((*found)->recorded_by, "job-1");
  EXPECT_EQ((*found)->uri, *at);
  EXPECT_FALSE((*found)->created_at.empty());

  // Another layout, batch or thread count is another entry.
  for (const Json& other :
       {CompileShape(Tiny(), 1, 4, 4, 64, 1), CompileShape(Tiny(), 2, 2, 8, 64, 1),
        CompileShape(Tiny(), 2, 2, 4, 64, 2)}) {
    auto miss = LookupCompilePlan(uri, other);
    ASSERT_TRUE(miss.ok());
    EXPECT_FALSE(miss->has_value()) << other.dump();
  }

  // A damaged entry is an error naming it, not a silent miss.
  { std::ofstream(at->substr(7)) << "{not json"; }
  auto damaged = LookupCompilePlan(uri, shape);
  ASSERT_FALSE(damaged.ok());
  EXPECT_EQ(damaged.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(damaged.status().message().find("plan.json"), std::string::npos);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace lote::engine
