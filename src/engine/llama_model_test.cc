#include "engine/llama_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "engine/bf16.h"
#include "engine/bf16_gemm.h"
#include "engine/cpu_kernels.h"

namespace lote::engine {
namespace {

LlamaConfig Tiny() {
  LlamaConfig c;
  c.hidden_size = 16;
  c.intermediate_size = 24;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;  // GQA
  c.vocab_size = 37;
  c.max_position_embeddings = 64;
  c.rms_norm_eps = 1e-5;
  c.initializer_range = 0.2;
  return c;
}

struct Batch {
  int64_t B = 2, T = 7;
  std::vector<int32_t> in, tg;
  explicit Batch(int64_t vocab) {
    for (int64_t i = 0; i < B * T; ++i) {
      in.push_back(static_cast<int32_t>((i * 7 + 3) % vocab));
      tg.push_back(static_cast<int32_t>((i * 11 + 5) % vocab));
    }
    tg[3] = -1;  // an ignored target
  }
};

TEST(LlamaModelTest, GradientsMatchFiniteDifferences) {
  InitCpuBackend(0);
  const LlamaConfig c = Tiny();
  auto model = LlamaModel::Create(c, 2, 7, true).value();
  model->InitWeights(5);
  Batch batch(c.vocab_size);
  model->ZeroGrad();
  model->ForwardBackward(batch.in.data(), batch.tg.data(), batch.B, batch.T, 1.0f);
  std::vector<float> grads(model->grads(), model->grads() + model->num_params());
  int checked = 0;
  for (const TensorSpec& t : model->layout().tensors()) {
    // The two largest-magnitude entries of every tensor.
    std::vector<int64_t> idx(static_cast<size_t>(t.numel));
    for (int64_t i = 0; i < t.numel; ++i) idx[static_cast<size_t>(i)] = t.offset + i;
    std::partial_sort(idx.begin(), idx.begin() + 2, idx.end(), [&](int64_t a, int64_t b) {
      return std::abs(grads[static_cast<size_t>(a)]) > std::abs(grads[static_cast<size_t>(b)]);
    });
    for (int k = 0; k < 2; ++k) {
      const int64_t i = idx[static_cast<size_t>(k)];
      float& w = model->params()[i];
      const float saved = w, h = 1e-2f;
      w = saved + h;
      const double up =
          model->Forward(batch.in.data(), batch.tg.data(), batch.B, batch.T, nullptr, nullptr);
      w = saved - h;
      const double down =
          model->Forward(batch.in.data(), batch.tg.data(), batch.B, batch.T, nullptr, nullptr);
      w = saved;
      const double fd = (up - down) / (2.0 * static_cast<double>(h));
      const double g = grads[static_cast<size_t>(i)];
      EXPECT_NEAR(fd, g, 2e-2 * std::abs(g) + 3e-4) << t.name << " entry " << i - t.offset;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 2 * static_cast<int>(model->layout().tensors().size()));
}

TEST(LlamaModelTest, AccumulatedHalvesEqualOneBatch) {
  InitCpuBackend(0);
  LlamaConfig c = Tiny();
  c.tie_word_embeddings = true;
  auto model = LlamaModel::Create(c, 2, 7, true).value();
  model->InitWeights(9);
  Batch batch(c.vocab_size);
  for (auto& t : batch.tg) t = t < 0 ? 4 : t;  // equal target counts in both halves
  model->ZeroGrad();
  const double full = model->ForwardBackward(batch.in.data(), batch.tg.data(), 2, 7, 1.0f);
  std::vector<float> g_full(model->grads(), model->grads() + model->num_params());
  model->ZeroGrad();
  const double a = model->ForwardBackward(batch.in.data(), batch.tg.data(), 1, 7, 0.5f);
  const double b = model->ForwardBackward(batch.in.data() + 7, batch.tg.data() + 7, 1, 7, 0.5f);
  EXPECT_NEAR(full, (a + b) / 2, 1e-5);
  double max_err = 0, max_g = 0;
  for (int64_t i = 0; i < model->num_params(); ++i) {
    max_err = std::max(max_err, static_cast<double>(std::abs(g_full[i] - model->grads()[i])));
    max_g = std::max(max_g, static_cast<double>(std::abs(g_full[i])));
  }
  EXPECT_LT(max_err, 1e-5 * max_g);
  EXPECT_GT(max_g, 0);
}

TEST(LlamaModelTest, LogprobsAgreeWithLogitsAndLoss) {
  InitCpuBackend(0);
  const LlamaConfig c = Tiny();
  auto model = LlamaModel::Create(c, 2, 7, false).value();
  model->InitWeights(3);
  Batch batch(c.vocab_size);
  std::vector<float> lp(14), logits(14 * 37);
  const double loss =
      model->Forward(batch.in.data(), batch.tg.data(), 2, 7, lp.data(), logits.data());
  double sum = 0;
  for (int64_t r = 0; r < 14; ++r) {
    if (batch.tg[r] < 0) {
      EXPECT_EQ(lp[r], 0.0f);
      continue;
    }
    double mx = -1e30, z = 0;
    for (int v = 0; v < 37; ++v) mx = std::max(mx, static_cast<double>(logits[r * 37 + v]));
    for (int v = 0; v < 37; ++v) z += std::exp(logits[r * 37 + v] - mx);
    const double want = logits[r * 37 + batch.tg[r]] - mx - std::log(z);
    EXPECT_NEAR(lp[r], want, 1e-5);
    sum -= want;
  }
  EXPECT_NEAR(loss, sum / 13, 1e-5);
  // Causality: changing the last input token leaves earlier positions unchanged.
  batch.in[6] = (batch.in[6] + 1) % 37;
  std::vector<float> lp2(14);
  model->Forward(batch.in.data(), batch.tg.data(), 2, 7, lp2.data(), nullptr);
  for (int r = 0; r < 6; ++r) EXPECT_EQ(lp[r], lp2[r]);
  EXPECT_NE(lp[6], lp2[6]);
}

TEST(LlamaModelTest, InitIsDeterministicFromSeed) {
  const LlamaConfig c = Tiny();
  auto a = LlamaModel::Create(c, 1, 4, false).value();
  auto b = LlamaModel::Create(c, 1, 4, false).value();
  a->InitWeights(11);
  b->InitWeights(11);
  EXPECT_TRUE(std::equal(a->params(), a->params() + a->num_params(), b->params()));
  b->InitWeights(12);
  EXPECT_FALSE(std::equal(a->params(), a->params() + a->num_params(), b->params()));
  double ss = 0;
  const TensorSpec& e = a->layout().tensors()[0];
  for (int64_t i = 0; i < e.numel; ++i) ss += a->params()[e.offset + i] * a->params()[e.offset + i];
  EXPECT_NEAR(std::sqrt(ss / e.numel), 0.2, 0.03);
}

// What one mode of recomputation computes: two accumulated micro batches' losses and
// gradients (the second smaller than the model's maximum), then the loss after a step
// of plain gradient descent on them.
struct RecomputeRun {
  std::vector<double> losses;
  std::vector<float> grads;
  int64_t bytes = 0;
};

RecomputeRun RunWith(const LlamaConfig& c, Recompute mode, Precision precision = Precision::kFp32) {
  auto model = LlamaModel::Create(c, 2, 7, true, {}, nullptr, {mode, 1, precision}).value();
  model->InitWeights(5);
  Batch batch(c.vocab_size);
  RecomputeRun r;
  model->ZeroGrad();
  r.losses.push_back(model->ForwardBackward(batch.in.data(), batch.tg.data(), 2, 7, 0.5f));
  r.losses.push_back(model->ForwardBackward(batch.in.data() + 3, batch.tg.data() + 3, 1, 7, 0.5f));
  r.grads.assign(model->grads(), model->grads() + model->num_params());
  for (int64_t i = 0; i < model->num_params(); ++i) model->params()[i] -= 0.5f * r.grads[i];
  r.losses.push_back(model->Forward(batch.in.data(), batch.tg.data(), 2, 7, nullptr, nullptr));
  r.bytes = model->allocated_bytes();
  return r;
}

// Selective and full recomputation run the same kernels on the same inputs again, so
// losses and gradients are the same bits as keeping everything; and they keep less. In
// bf16-mixed too: the recomputed activations are rounded as the kept ones were.
TEST(LlamaModelTest, RecomputationGivesTheSameBits) {
  InitCpuBackend(0);
  for (bool tied : {false, true}) {
    for (Precision precision : {Precision::kFp32, Precision::kBf16Mixed}) {
      LlamaConfig c = Tiny();
      c.num_hidden_layers = 3;
      c.tie_word_embeddings = tied;
      const RecomputeRun none = RunWith(c, Recompute::kNone, precision);
      EXPECT_LT(none.losses[2], none.losses[0]);  // the step learned something
      int64_t bytes = none.bytes;
      for (Recompute mode : {Recompute::kSelective, Recompute::kFull}) {
        SCOPED_TRACE(testing::Message()
                     << RecomputeName(mode) << " tied=" << tied << " " << PrecisionName(precision));
        const RecomputeRun r = RunWith(c, mode, precision);
        EXPECT_EQ(r.losses, none.losses);
        ASSERT_EQ(r.grads.size(), none.grads.size());
        EXPECT_EQ(std::memcmp(r.grads.data(), none.grads.data(), r.grads.size() * sizeof(float)),
                  0);
        EXPECT_LT(r.bytes, bytes);
        bytes = r.bytes;
      }
    }
  }
}

// bf16-mixed reads the master weights rounded to bf16: moving every master weight by
// less than half a bf16 step changes nothing it computes (fp32 sees the change), and
// the master weights themselves are left as they are. Its loss and gradients stay close
// to fp32's (bf16 keeps 8 significant bits).
TEST(LlamaModelTest, Bf16MixedReadsRoundedWeightsAndStaysCloseToFp32) {
  InitCpuBackend(0);
  const LlamaConfig c = Tiny();
  Batch batch(c.vocab_size);
  auto run = [&](Precision precision, float nudge, std::vector<float>* grads) {
    auto m =
        LlamaModel::Create(c, 2, 7, true, {}, nullptr, {Recompute::kNone, 1, precision}).value();
    m->InitWeights(5);
    // Master weights that are bf16 values, then each moved up by 2^-10 of itself
    // (a quarter of the smallest relative bf16 step, 2^-8 = half of 2^-7).
    RoundToBf16(m->params(), m->params(), m->num_params());
    for (int64_t i = 0; i < m->num_params(); ++i) m->params()[i] *= 1.0f + nudge;
    const std::vector<float> master(m->params(), m->params() + m->num_params());
    m->ZeroGrad();
    const double loss = m->ForwardBackward(batch.in.data(), batch.tg.data(), 2, 7, 1.0f);
    EXPECT_EQ(std::memcmp(master.data(), m->params(), master.size() * sizeof(float)), 0);
    grads->assign(m->grads(), m->grads() + m->num_params());
    return loss;
  };
  std::vector<float> g_bf16, g_bf16_nudged, g_fp32, g_fp32_nudged;
  const double bf16 = run(Precision::kBf16Mixed, 0.0f, &g_bf16);
  const double bf16_nudged = run(Precision::kBf16Mixed, 0x1.0p-10f, &g_bf16_nudged);
  const double fp32 = run(Precision::kFp32, 0.0f, &g_fp32);
  const double fp32_nudged = run(Precision::kFp32, 0x1.0p-10f, &g_fp32_nudged);
  EXPECT_EQ(bf16, bf16_nudged);
  EXPECT_EQ(g_bf16, g_bf16_nudged);
  EXPECT_NE(fp32, fp32_nudged);
  // Close to fp32, but not the same numbers (activations are rounded too).
  EXPECT_NE(bf16, fp32);
  EXPECT_NEAR(bf16, fp32, 1e-2 * fp32);
  double dot = 0, n32 = 0, n16 = 0;
  for (size_t i = 0; i < g_fp32.size(); ++i) {
    dot += static_cast<double>(g_fp32[i]) * g_bf16[i];
    n32 += static_cast<double>(g_fp32[i]) * g_fp32[i];
    n16 += static_cast<double>(g_bf16[i]) * g_bf16[i];
  }
  EXPECT_GT(dot / std::sqrt(n32 * n16), 0.999);  // cosine of the two gradients
}

// bf16-mixed's GEMMs run on the CPU's bf16 kernel where it has one (Bf16Gemm) and on the
// fp32 fallback otherwise: the two agree within fp32 summation (the fallback also keeps
// the gradient operands unrounded), and each repeats its own bits exactly, so a resumed
// run on the same host is bit-exact.
TEST(LlamaModelTest, Bf16MixedOnTheBf16KernelAndTheFallbackAgree) {
  InitCpuBackend(0);
  LlamaConfig c = Tiny();
  c.hidden_size = 64;  // GEMMs with K over one pair block of the kernel's tiles
  c.intermediate_size = 96;
  Batch batch(c.vocab_size);
  auto run = [&](bool fallback, std::vector<float>* grads) {
    ForceBf16GemmFallback(fallback);
    auto m =
        LlamaModel::Create(c, 2, 7, true, {}, nullptr, {Recompute::kNone, 1, Precision::kBf16Mixed})
            .value();
    m->InitWeights(9);
    m->ZeroGrad();
    const double loss = m->ForwardBackward(batch.in.data(), batch.tg.data(), 2, 7, 1.0f);
    grads->assign(m->grads(), m->grads() + m->num_params());
    ForceBf16GemmFallback(false);
    return loss;
  };
  std::vector<float> g_cpu, g_cpu_again, g_fallback, g_fallback_again;
  const double cpu = run(false, &g_cpu);
  const double fallback = run(true, &g_fallback);
  EXPECT_EQ(run(false, &g_cpu_again), cpu);
  EXPECT_EQ(g_cpu_again, g_cpu);
  EXPECT_EQ(run(true, &g_fallback_again), fallback);
  EXPECT_EQ(g_fallback_again, g_fallback);
  EXPECT_NEAR(cpu, fallback, 1e-3 * fallback);
  double dot = 0, na = 0, nb = 0;
  for (size_t i = 0; i < g_cpu.size(); ++i) {
    dot += static_cast<double>(g_cpu[i]) * g_fallback[i];
    na += static_cast<double>(g_cpu[i]) * g_cpu[i];
    nb += static_cast<double>(g_fallback[i]) * g_fallback[i];
  }
  EXPECT_GT(dot / std::sqrt(na * nb), 0.9999);
}

TEST(CpuKernelsTest, FastExpIsAccurate) {
  for (float x = -80.0f; x < 80.0f; x += 0.37f) {
    EXPECT_NEAR(FastExp(x) / std::exp(x), 1.0f, 3e-7f) << x;
  }
}

}  // namespace
}  // namespace lote::engine
