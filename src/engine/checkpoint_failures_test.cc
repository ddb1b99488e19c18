// A checkpoint whose upload fails does not end the run (checkpoint_failures.h):
// the failure policy, and the writer with an injected failing upload on a real
// file:// store, one writer per rank of a TP2 x DP2 layout (rank 0 last).
#include "engine/checkpoint_failures.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "engine/checkpoint.h"
#include "engine/llama_config.h"
#include "engine/parallel_dims.h"
#include "engine/param_layout.h"

namespace lote::engine {
namespace {

namespace fs = std::filesystem;

TEST(CheckpointFailuresTest, FailuresAreWarningsUntilTheLimitInARow) {
  CheckpointFailures f(3);
  std::string warning;
  ASSERT_TRUE(f.Record(2, "file:///c/j/step_2", Status::Ok(), &warning).ok());
  EXPECT_TRUE(warning.empty());
  const Status disk = Status::ResourceExhausted("No space left on device");
  ASSERT_TRUE(f.Record(4, "file:///c/j/step_4", disk, &warning).ok());
  EXPECT_NE(warning.find("checkpoint at step 4 failed"), std::string::npos) << warning;
  EXPECT_NE(warning.find("No space left on device"), std::string::npos) << warning;
  EXPECT_NE(warning.find("the latest checkpoint stays step_2"), std::string::npos) << warning;
  EXPECT_EQ(f.latest_step(), 2);
  ASSERT_TRUE(f.Record(6, "file:///c/j/step_6", disk, &warning).ok());
  ASSERT_TRUE(f.Record(8, "file:///c/j/step_8", Status::Ok(), &warning).ok());  // resets
  EXPECT_EQ(f.consecutive(), 0);
  EXPECT_EQ(f.latest_step(), 8);
  ASSERT_TRUE(f.Record(10, "u", disk, &warning).ok());
  ASSERT_TRUE(f.Record(12, "u", disk, &warning).ok());
  const Status end = f.Record(14, "u", disk, &warning);
  ASSERT_FALSE(end.ok());
  EXPECT_EQ(end.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(end.message().find("3 failed checkpoint(s) in a row"), std::string::npos)
      << end.ToString();
  EXPECT_NE(end.message().find("step_8"), std::string::npos) << end.ToString();
  EXPECT_EQ(f.failed_total(), 5);
}

TEST(CheckpointFailuresTest, ALimitOfOneEndsAtTheFirstFailure) {
  CheckpointFailures f(1);
  std::string warning;
  EXPECT_FALSE(f.Record(3, "u", Status::Unavailable("refused"), &warning).ok());
  EXPECT_NE(warning.find("none (no checkpoint has completed)"), std::string::npos) << warning;
  EXPECT_NE(warning.find("the run ends"), std::string::npos) << warning;
}

LlamaConfig Tiny() {
  auto c = LlamaConfig::FromJson(Json{{"architectures", {"LlamaForCausalLM"}},
                                      {"model_type", "llama"},
                                      {"hidden_size", 16},
                                      {"intermediate_size", 32},
                                      {"num_hidden_layers", 1},
                                      {"num_attention_heads", 4},
                                      {"num_key_value_heads", 2},
                                      {"vocab_size", 32},
                                      {"max_position_embeddings", 16},
                                      {"rms_norm_eps", 1e-5},
                                      {"rope_theta", 10000.0},
                                      {"tie_word_embeddings", false}});
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return *c;
}

TrainState StateFor(const LlamaConfig& c, const ParallelDims& d, int64_t step) {
  const ParamLayout local(c, d.tensor_parallel());
  const Range shard = d.ZeroShard(local.total());
  TrainState st;
  st.step = st.adam_step = step;
  st.params.assign(static_cast<size_t>(local.total()), static_cast<float>(step));
  st.exp_avg.assign(static_cast<size_t>(shard.end - shard.begin), 0.5f);
  st.exp_avg_sq = st.exp_avg;
  st.shard_begin = shard.begin;
  st.shard_end = shard.end;
  return st;
}

// Every rank saves `step`; `failing_rank` (-1: none) has an injected failure.
// Returns rank 0's result (rank 0 saves last: it waits for the others' markers).
Status SaveAll(const LlamaConfig& c, const std::string& base, int64_t step, int failing_rank) {
  Status last;
  for (int rank = 3; rank >= 0; --rank) {
    auto dims = ParallelDims::Create(c, 4, 2, rank);
    EXPECT_TRUE(dims.ok());
    CheckpointOptions o;
    o.uri = base;
    o.job_id = "j";
    o.wait_for_ranks = std::chrono::seconds(60);
    auto w = CheckpointWriter::Create(o, c, *dims);
    EXPECT_TRUE(w.ok()) << w.status().ToString();
    if (rank == failing_rank)
      (*w)->FailNextUpload("injected: refused", std::chrono::steady_clock::now());
    EXPECT_TRUE((*w)->Save(StateFor(c, *dims, step)).ok());
    last = (*w)->Wait();
    if (rank != 0) {
      EXPECT_EQ(last.ok(), rank != failing_rank) << rank << ": " << last.ToString();
    }
  }
  return last;
}

// A failed rank's upload (here rank 2's) makes rank 0 give the checkpoint up at
// once, without its manifest: the previous checkpoint stays the latest and loads;
// the next one lands, and the failed step's leftovers are pruned.
TEST(CheckpointWriterFailureTest, AFailedUploadNeverBecomesLatestAndTheNextLands) {
  const std::string root = fs::temp_directory_path() / ("ckfail-" + std::to_string(::getpid()));
  fs::remove_all(root);
  const std::string base = "file://" + root;
  const LlamaConfig c = Tiny();
  ASSERT_TRUE(SaveAll(c, base, 2, -1).ok());
  const Status failed = SaveAll(c, base, 4, 2);
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.message().find("rank 2 could not write its shards"), std::string::npos)
      << failed.ToString();
  EXPECT_NE(failed.message().find("injected: refused"), std::string::npos) << failed.ToString();
  EXPECT_FALSE(fs::exists(root + "/j/step_4/manifest.json"));
  auto latest = LatestCheckpoint(base, "j");
  ASSERT_TRUE(latest.ok()) << latest.status().ToString();
  EXPECT_EQ(*latest, base + "/j/step_2");

  // Rank 0's own failure: no manifest either.
  EXPECT_FALSE(SaveAll(c, base, 5, 0).ok());
  EXPECT_FALSE(fs::exists(root + "/j/step_5/manifest.json"));

  ASSERT_TRUE(SaveAll(c, base, 6, -1).ok());
  latest = LatestCheckpoint(base, "j");
  ASSERT_TRUE(latest.ok());
  EXPECT_EQ(*latest, base + "/j/step_6");
  auto dims = ParallelDims::Create(c, 4, 2, 3);
  auto loaded = LoadCheckpoint(*latest, c, *dims);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->step, 6);
  EXPECT_EQ(loaded->params.front(), 6.0f);
  for (const char* pruned : {"/j/step_4", "/j/step_5"}) {  // the failed ones' leftovers
    const std::string dir = root + pruned;
    EXPECT_TRUE(!fs::exists(dir) || fs::is_empty(dir)) << dir << " still holds files";
  }
  fs::remove_all(root);
}

}  // namespace
}  // namespace lote::engine
