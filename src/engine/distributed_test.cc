// The pieces of distributed training, in one process: the rendezvous store (waits,
// first abort wins, a launcher that disappears), ZeroComm over Gloo and over shared
// memory, the Gloo communicator over threads
// (all-reduce, uneven reduce-scatter and all-gather against sums computed here),
// tensor-parallel layouts (shards reassemble the whole tensor; initial weights are the
// single-process ones), the vocabulary-parallel cross-entropy against the fused
// single-shard kernel, and the per-rank memory plan against what is allocated.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>
#include <thread>
#include <vector>

#include "engine/adamw.h"
#include "engine/comm_test_group.h"
#include "engine/communicator.h"
#include "engine/cpu_kernels.h"
#include "engine/gloo_communicator.h"
#include "engine/llama_model.h"
#include "engine/memory_plan.h"
#include "engine/parallel_dims.h"
#include "engine/param_layout.h"
#include "engine/rendezvous_store.h"
#include "engine/vocab_parallel.h"
#include "engine/zero_comm.h"

namespace lote::engine {
namespace {

using std::chrono::milliseconds;

using comm_test::Connect;
using comm_test::OnGroup;
using comm_test::StartStore;
using comm_test::Transport;

TEST(RendezvousStoreTest, GetWaitsForSetAndTimesOut) {
  auto server = StartStore();
  auto a = Connect(server->port()), b = Connect(server->port());
  std::thread setter([&] { ASSERT_TRUE(b->Set("k", "v1").ok()); });
  auto v = a->Get("k", milliseconds(10000));  // returns as soon as the key is set
  setter.join();
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(*v, "v1");
  EXPECT_TRUE(a->Get("missing", milliseconds(50)).status().IsNotFound());
  auto c = a->Check("missing");
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->has_value());
  EXPECT_EQ(*a->Add("n", 2), 2);
  EXPECT_EQ(*b->Add("n", 3), 5);
}

TEST(RendezvousStoreTest, FirstAbortReasonWins) {
  auto server = StartStore();
  auto a = Connect(server->port());
  ASSERT_TRUE(a->Set(kAbortKey, "rank 2 died").ok());
  ASSERT_TRUE(a->Set(kAbortKey, "rank 0 lost a peer").ok());
  EXPECT_EQ(*a->Get(kAbortKey, milliseconds(10)), "rank 2 died");
}

TEST(RendezvousStoreTest, LauncherThatDisappearsAbortsTheJob) {
  auto server = StartStore();
  auto watcher = Connect(server->port());
  {
    auto node1 = Connect(server->port());
    ASSERT_TRUE(node1->Hello(1, "job-1").ok());
  }  // its connection closes without Done
  auto reason = watcher->Get(kAbortKey, milliseconds(10000));
  ASSERT_TRUE(reason.ok()) << reason.status().ToString();
  EXPECT_NE(reason->find("node 1's launcher closed its connection"), std::string::npos) << *reason;

  auto done = Connect(server->port());
  ASSERT_TRUE(done->Hello(0, "job-1").ok());
  ASSERT_TRUE(done->Done().ok());
  EXPECT_EQ(server->nodes_done(), 1);
}

TEST(RendezvousStoreTest, RefusesAnotherJobAndDuplicateNodes) {
  auto server = StartStore();
  auto a = Connect(server->port()), b = Connect(server->port()), c = Connect(server->port());
  Status other = a->Hello(0, "job-2");
  EXPECT_NE(other.message().find("serves job job-1, not job-2"), std::string::npos)
      << other.ToString();
  ASSERT_TRUE(b->Hello(0, "job-1").ok());
  EXPECT_NE(c->Hello(0, "job-1").message().find("already registered"), std::string::npos);
}

TEST(RendezvousStoreTest, ConnectTimesOutNamingTheAddress) {
  auto c = StoreClient::Connect("127.0.0.1", 1, milliseconds(300), nullptr);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("127.0.0.1:1"), std::string::npos) << c.status().ToString();
}

// ZeroComm over each transport (the launcher uses shared memory on one host, Gloo
// across hosts).
class ZeroCommTest : public ::testing::TestWithParam<Transport> {};
INSTANTIATE_TEST_SUITE_P(Transports, ZeroCommTest,
                         ::testing::Values(Transport::kGloo, Transport::kShm),
                         [](const auto& info) { return std::string(comm_test::Name(info.param)); });

// The bucketed reduce-scatter, fed suffixes as backward would, leaves every rank's
// shard bit-identical to one reduce-scatter of the whole buffer (3 ranks, so the ring
// order matters; values whose float sums depend on the order).
TEST_P(ZeroCommTest, BucketsEqualOneWholeReduceScatter) {
  const int n = 3;
  const int64_t total = 1000;
  const std::vector<int64_t> counts = EvenCounts(total, n);
  auto value = [](int rank, int64_t i) {
    return 1.0f / static_cast<float>(1 + i) + 1e-3f * static_cast<float>(rank * 7 + i % 13);
  };
  OnGroup(
      n,
      [&](int r, Communicator* comm) {
        std::vector<float> whole(total), bucketed(total);
        for (int64_t i = 0; i < total; ++i) whole[i] = bucketed[i] = value(r, i);
        ASSERT_TRUE(comm->ReduceScatter(whole.data(), counts).ok());
        ZeroComm reducer(comm, counts, 64);
        for (int step = 0; step < 2; ++step) {  // one object serves every step
          for (int64_t i = 0; i < total; ++i) bucketed[i] = value(r, i);
          reducer.BeginReduce(bucketed.data());
          for (int64_t begin : {990, 950, 900, 700, 333, 300, 10}) reducer.GradsReady(begin);
          ASSERT_TRUE(reducer.FinishReduce().ok());
          const Range mine = EvenSplit(total, n, r);
          for (int64_t i = mine.begin; i < mine.end; ++i) {
            ASSERT_EQ(bucketed[i], whole[i]) << "rank " << r << " element " << i;
          }
        }
        EXPECT_GT(reducer.comm_seconds(), 0.0);
      },
      GetParam());
}

// The embedding's rows that no rank touched are zero everywhere: sending only the listed
// rows (packed, cut at the same shard boundaries) leaves every shard bit-identical to
// one whole reduce-scatter, with the sparse range inside buckets and across shards.
TEST_P(ZeroCommTest, SparseRowsEqualOneWholeReduceScatter) {
  const int n = 3;
  const int64_t total = 1000, begin = 100, row = 12, nrows = 50;
  const std::vector<int64_t> counts = EvenCounts(total, n);
  const std::vector<int64_t> rows = {0, 3, 7, 8, 20, 27, 28, 33, 49};
  auto value = [&](int rank, int64_t i) {
    if (i >= begin && i < begin + nrows * row) {
      const int64_t r = (i - begin) / row;
      if (std::find(rows.begin(), rows.end(), r) == rows.end()) return 0.0f;
    }
    return 1.0f / static_cast<float>(1 + i) + 1e-3f * static_cast<float>(rank * 7 + i % 13);
  };
  OnGroup(
      n,
      [&](int r, Communicator* comm) {
        std::vector<float> whole(total), sparse(total);
        for (int64_t i = 0; i < total; ++i) whole[i] = value(r, i);
        ASSERT_TRUE(comm->ReduceScatter(whole.data(), counts).ok());
        ZeroComm reducer(comm, counts, 64);
        for (int step = 0; step < 2; ++step) {
          for (int64_t i = 0; i < total; ++i) sparse[i] = value(r, i);
          reducer.BeginReduce(sparse.data());
          reducer.SetSparseRows(begin, begin + nrows * row, row, rows);
          for (int64_t b : {990, 900, 650, 300, 50}) reducer.GradsReady(b);
          ASSERT_TRUE(reducer.FinishReduce().ok());
          const Range mine = EvenSplit(total, n, r);
          for (int64_t i = mine.begin; i < mine.end; ++i) {
            ASSERT_EQ(sparse[i], whole[i]) << "rank " << r << " element " << i;
          }
        }
      },
      GetParam());
}

// The bucketed all-gather of the parameters: each WaitParams(end) returns with [0, end)
// holding every rank's values, and the whole buffer ends as one all-gather leaves it,
// step after step (3 uneven shards, buckets crossing the shard boundaries).
TEST_P(ZeroCommTest, GatherInBucketsEqualsOneWholeAllGather) {
  const int n = 3;
  const int64_t total = 1001;
  const std::vector<int64_t> counts = EvenCounts(total, n);
  auto value = [](int step, int64_t i) { return static_cast<float>(step * 10000 + i) * 0.5f; };
  OnGroup(
      n,
      [&](int r, Communicator* comm) {
        const Range mine = EvenSplit(total, n, r);
        ZeroComm zero(comm, counts, 100);
        std::vector<float> params(total);
        ASSERT_TRUE(zero.WaitParams(total).ok());  // nothing under way: at once
        for (int step = 0; step < 2; ++step) {
          for (int64_t i = 0; i < total; ++i) {
            params[i] = i >= mine.begin && i < mine.end ? value(step, i) : -1.0f;  // stale
          }
          zero.StartGather(params.data());
          for (int64_t end : {1, 150, 333, 334, 700, 1001}) {
            ASSERT_TRUE(zero.WaitParams(end).ok());
            for (int64_t i = 0; i < end; ++i) {
              ASSERT_EQ(params[i], value(step, i)) << "rank " << r << " element " << i;
            }
          }
        }
        EXPECT_GT(zero.comm_seconds(), 0.0);
      },
      GetParam());
}

// The gather with first rows: the listed rows of the prefix (here 30 rows of 10 floats,
// crossing the first shard boundary at 334) arrive with the first wait, the buffer after
// the prefix in bucket order, and WaitParams(total) leaves the whole buffer as one
// all-gather would, the rest of the prefix included.
TEST_P(ZeroCommTest, GatherFirstRowsThenTheRest) {
  const int n = 3;
  const int64_t total = 1001, rows_end = 300 + 80, row_floats = 10;
  const std::vector<int64_t> counts = EvenCounts(total, n);
  const std::vector<int64_t> rows = {0, 3, 4, 17, 33, 37};  // row 33 holds [330, 340)
  auto value = [](int step, int64_t i) { return static_cast<float>(step * 10000 + i) * 0.5f; };
  OnGroup(
      n,
      [&](int r, Communicator* comm) {
        const Range mine = EvenSplit(total, n, r);
        ZeroComm zero(comm, counts, 100);
        std::vector<float> params(total);
        for (int step = 0; step < 2; ++step) {
          for (int64_t i = 0; i < total; ++i) {
            params[i] = i >= mine.begin && i < mine.end ? value(step, i) : -1.0f;  // stale
          }
          zero.StartGather(params.data(), rows_end, row_floats, rows);
          auto listed = [&](int64_t i) {
            return i >= rows_end ||
                   std::find(rows.begin(), rows.end(), i / row_floats) != rows.end();
          };
          for (int64_t end : {1, 200, 380, 381, 700, 1000}) {
            ASSERT_TRUE(zero.WaitParams(end).ok());
            for (int64_t i = 0; i < end; ++i) {
              if (!listed(i)) continue;
              ASSERT_EQ(params[i], value(step, i)) << "rank " << r << " element " << i;
            }
          }
          ASSERT_TRUE(zero.WaitParams(total).ok());
          for (int64_t i = 0; i < total; ++i) {
            ASSERT_EQ(params[i], value(step, i)) << "rank " << r << " element " << i;
          }
        }
      },
      GetParam());
}

TEST(GlooCommunicatorTest, CollectivesMatchSumsComputedHere) {
  const int n = 3;
  const std::vector<int64_t> counts = {5, 0, 7};  // uneven, one empty chunk
  const int64_t total = 12;
  auto value = [](int rank, int64_t i) { return static_cast<float>(rank * 100 + i); };
  OnGroup(n, [&](int r, Communicator* comm) {
    EXPECT_EQ(comm->rank(), r);
    EXPECT_EQ(comm->size(), n);
    std::vector<float> x(total);
    for (int64_t i = 0; i < total; ++i) x[i] = value(r, i);
    ASSERT_TRUE(comm->AllReduce(x.data(), total, ReduceOp::kSum).ok());
    for (int64_t i = 0; i < total; ++i) EXPECT_EQ(x[i], value(0, i) + value(1, i) + value(2, i));
    float m[2] = {static_cast<float>(r), static_cast<float>(-r)};
    ASSERT_TRUE(comm->AllReduce(m, 2, ReduceOp::kMax).ok());
    EXPECT_EQ(m[0], 2.0f);
    EXPECT_EQ(m[1], 0.0f);

    for (int64_t i = 0; i < total; ++i) x[i] = value(r, i);
    ASSERT_TRUE(comm->ReduceScatter(x.data(), counts).ok());
    int64_t begin = 0;
    for (int k = 0; k < r; ++k) begin += counts[k];
    for (int64_t i = begin; i < begin + counts[r]; ++i) {
      EXPECT_EQ(x[i], value(0, i) + value(1, i) + value(2, i)) << "rank " << r << " element " << i;
    }
    std::vector<float> g(total, -1.0f);
    for (int64_t i = begin; i < begin + counts[r]; ++i) g[i] = value(r, i);
    ASSERT_TRUE(comm->AllGather(g.data(), counts).ok());
    int64_t at = 0;
    for (int k = 0; k < n; ++k) {
      for (int64_t i = at; i < at + counts[k]; ++i) EXPECT_EQ(g[i], value(k, i));
      at += counts[k];
    }
    float b[3] = {0, 0, 0};
    if (r == 1) b[0] = b[1] = b[2] = 7.0f;
    ASSERT_TRUE(comm->Broadcast(b, 3, 1).ok());
    EXPECT_EQ(b[2], 7.0f);
    ASSERT_TRUE(comm->Barrier().ok());
  });
}

TEST(TensorParallelLayoutTest, ShardsReassembleEveryTensor) {
  LlamaConfig c;
  c.hidden_size = 16;
  c.intermediate_size = 23;  // uneven MLP split
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.vocab_size = 37;  // uneven vocabulary split
  c.max_position_embeddings = 16;
  ASSERT_TRUE(c.Validate().ok());
  const ParamLayout whole(c);
  std::vector<float> full(static_cast<size_t>(whole.total()));
  for (size_t i = 0; i < full.size(); ++i) full[i] = static_cast<float>(i);
  for (int tp : {2}) {
    std::vector<float> rebuilt(full.size(), -1.0f);
    int64_t sharded = 0;
    for (int r = 0; r < tp; ++r) {
      const ParamLayout part(c, {r, tp});
      for (const TensorSpec& t : part.tensors()) {
        const TensorSpec* g = whole.Find(t.name);
        ASSERT_NE(g, nullptr) << t.name;
        EXPECT_EQ(t.global_shape, g->shape);
        std::vector<float> shard(static_cast<size_t>(t.numel));
        SliceShard(t, full.data() + g->offset, shard.data());
        PlaceShard(t, shard.data(), rebuilt.data() + g->offset);
        if (!t.replicated()) sharded += t.numel;
      }
    }
    EXPECT_EQ(rebuilt, full);
    EXPECT_GT(sharded, 0);
  }
}

// A communicator that only knows its place (for allocation and initialisation tests).
class PlaceOnly final : public Communicator {
 public:
  PlaceOnly(int rank, int size) : rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Status AllReduce(float*, int64_t, ReduceOp) override { return Status::Ok(); }
  Status AllReduce(double*, int64_t, ReduceOp) override { return Status::Ok(); }
  Status ReduceScatter(float*, const std::vector<int64_t>&) override { return Status::Ok(); }
  Status AllGather(float*, const std::vector<int64_t>&) override { return Status::Ok(); }
  Status Broadcast(float*, int64_t, int) override { return Status::Ok(); }
  Status Barrier() override { return Status::Ok(); }
  Status status() const override { return Status::Ok(); }

 private:
  int rank_, size_;
};

LlamaConfig Small() {
  LlamaConfig c;
  c.hidden_size = 32;
  c.intermediate_size = 69;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.vocab_size = 101;
  c.max_position_embeddings = 64;
  return c;
}

// The one owner of the layout: rank -> (tp, dp) coordinates, the groups, the ZeRO-1
// shards, and every check of a layout against the model.
TEST(ParallelDimsTest, CoordinatesGroupsAndChecks) {
  LlamaConfig c = Small();  // 4 heads, 2 key/value heads
  ASSERT_TRUE(c.Validate().ok());
  for (int rank = 0; rank < 6; ++rank) {
    auto d = ParallelDims::Create(c, 6, 2, rank);
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    EXPECT_EQ(d->dp(), 3);
    EXPECT_EQ(d->tp_rank(), rank % 2);
    EXPECT_EQ(d->dp_rank(), rank / 2);
    EXPECT_EQ(d->dp_rank() * d->tp() + d->tp_rank(), rank);
    EXPECT_EQ(d->tp_group(), "tp" + std::to_string(rank / 2));
    EXPECT_EQ(d->dp_group(), "dp" + std::to_string(rank % 2));
    EXPECT_EQ(d->tensor_parallel().rank, rank % 2);
    EXPECT_EQ(d->ZeroShard(10).begin, EvenSplit(10, 3, rank / 2).begin);
  }
  const ParallelDims single;
  EXPECT_EQ(single.world(), 1);
  EXPECT_EQ(single.ZeroShard(7).size(), 7);
  EXPECT_NE(ParallelDims::Create(c, 6, 4, 0).status().message().find("does not divide the 6 ranks"),
            std::string::npos);
  EXPECT_NE(ParallelDims::Create(c, 4, 4, 0).status().message().find("4 heads, 2 key/value heads"),
            std::string::npos);
  EXPECT_FALSE(ParallelDims::Create(c, 2, 0, 0).ok());
  EXPECT_FALSE(ParallelDims::Create(c, 2, 1, 2).ok());
  c.vocab_size = 1;
  EXPECT_NE(ParallelDims::Create(c, 2, 2, 0).status().message().find("exceeds the vocabulary"),
            std::string::npos);
}

// A valid layout for these tests: `tp` ranks of one data-parallel group.
ParallelDims Dims(const LlamaConfig& c, int world, int tp, int rank) {
  auto d = ParallelDims::Create(c, world, tp, rank);
  LOTE_CHECK_MSG(d.ok(), d.status().ToString());
  return *d;
}

TEST(TensorParallelModelTest, InitialWeightsAreSlicesOfTheSingleProcessOnes) {
  InitCpuBackend(1);
  const LlamaConfig c = Small();
  auto single = LlamaModel::Create(c, 1, 8, false);
  ASSERT_TRUE(single.ok());
  (*single)->InitWeights(42);
  for (int r = 0; r < 2; ++r) {
    PlaceOnly comm(r, 2);
    auto part = LlamaModel::Create(c, 1, 8, false, Dims(c, 2, 2, r), &comm);
    ASSERT_TRUE(part.ok()) << part.status().ToString();
    (*part)->InitWeights(42);
    for (const TensorSpec& t : (*part)->layout().tensors()) {
      const TensorSpec* g = (*single)->layout().Find(t.name);
      std::vector<float> want(static_cast<size_t>(t.numel));
      SliceShard(t, (*single)->params() + g->offset, want.data());
      EXPECT_EQ(
          std::vector<float>((*part)->params() + t.offset, (*part)->params() + t.offset + t.numel),
          want)
          << t.name << " on rank " << r;
    }
  }
}

// Sequence parallel at TP = 2 over real collectives (ranks on threads), alone and with
// each recomputation: the loss and every rank's gradient shard equal the single-process
// model's (within summation-order rounding). 15 token rows over 2 ranks: uneven parts,
// one crossing a sequence boundary.
TEST(TensorParallelModelTest, SequenceParallelEqualsOneProcess) {
  InitCpuBackend(1);
  const LlamaConfig c = Small();
  const int64_t B = 3, T = 5;
  std::vector<int32_t> in, tg;
  for (int64_t i = 0; i < B * T; ++i) {
    in.push_back(static_cast<int32_t>((i * 37 + 11) % c.vocab_size));
    tg.push_back(static_cast<int32_t>((i * 53 + 7) % c.vocab_size));
  }
  auto single = LlamaModel::Create(c, B, T, true).value();
  single->InitWeights(42);
  single->ZeroGrad();
  const double want = single->ForwardBackward(in.data(), tg.data(), B, T, 1.0f);
  for (Recompute mode : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
    SCOPED_TRACE(RecomputeName(mode));
    OnGroup(2, [&](int r, Communicator* comm) {
      auto m = LlamaModel::Create(c, B, T, true, Dims(c, 2, 2, r), comm, {mode, 2});
      ASSERT_TRUE(m.ok()) << m.status().ToString();
      (*m)->InitWeights(42);
      (*m)->ZeroGrad();
      const double loss = (*m)->ForwardBackward(in.data(), tg.data(), B, T, 1.0f);
      ASSERT_TRUE((*m)->comm_status().ok());
      EXPECT_NEAR(loss, want, 1e-6 * want);
      for (const TensorSpec& t : (*m)->layout().tensors()) {
        const TensorSpec* g = single->layout().Find(t.name);
        std::vector<float> expect(static_cast<size_t>(t.numel));
        SliceShard(t, single->grads() + g->offset, expect.data());
        float scale = 0, worst = 0;
        for (int64_t i = 0; i < t.numel; ++i) {
          scale = std::max(scale, std::abs(expect[static_cast<size_t>(i)]));
          worst = std::max(worst,
                           std::abs((*m)->grads()[t.offset + i] - expect[static_cast<size_t>(i)]));
        }
        EXPECT_GT(scale, 0.0f) << t.name;
        EXPECT_LE(worst, 1e-5f * scale) << t.name << " on rank " << r;
      }
    });
  }
}

TEST(TensorParallelModelTest, SequenceParallelNeedsTensorParallelism) {
  const LlamaConfig c = Small();
  auto m = LlamaModel::Create(c, 1, 8, true, {}, nullptr, {Recompute::kNone, 2});
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("--tensor-parallel-size > 1"), std::string::npos);
}

TEST(TensorParallelModelTest, RankPlanMatchesWhatIsAllocated) {
  InitCpuBackend(1);
  const LlamaConfig c = Small();
  for (int tp : {1, 2}) {
    for (int dp : {1, 3}) {
      for (int sp_and_precision = 0; sp_and_precision < 4; ++sp_and_precision) {
        const bool sp = sp_and_precision % 2 == 1;
        const Precision precision = sp_and_precision < 2 ? Precision::kFp32 : Precision::kBf16Mixed;
        if (sp && tp == 1) continue;
        PlaceOnly comm(0, tp);
        const ParallelDims dims = Dims(c, tp * dp, tp, 0);
        const ActivationOptions options{Recompute::kSelective, sp ? tp : 1, precision};
        auto m = LlamaModel::Create(c, 2, 15, true, dims, tp > 1 ? &comm : nullptr, options);
        ASSERT_TRUE(m.ok()) << m.status().ToString();
        const MemoryPlan plan = PlanRankMemory(c, 2, 15, CpuThreads(), dims, options);
        const Range shard = dims.ZeroShard((*m)->num_params());
        AdamW adamw((*m)->layout(), {}, shard.begin, shard.end);
        const int64_t optimizer = 2 * shard.size() * 4 + (dp > 1 ? shard.size() * 4 : 0);
        EXPECT_EQ(plan.optimizer_bytes, optimizer) << tp << "x" << dp;
        EXPECT_EQ(plan.total_bytes() - plan.optimizer_bytes, (*m)->allocated_bytes())
            << tp << "x" << dp << " sp " << sp << " " << PrecisionName(precision);
      }
    }
  }
}

}  // namespace
}  // namespace lote::engine
