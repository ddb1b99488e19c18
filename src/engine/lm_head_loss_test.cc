#include "engine/lm_head_loss.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "engine/communicator.h"
#include "engine/vocab_parallel.h"

namespace lote::engine {
namespace {

// The textbook computation in double: whole logits, log-softmax, its gradient.
struct Reference {
  std::vector<double> logits, logprob, dx, dw;
  double loss = 0;
};

Reference NaiveHead(const std::vector<float>& x, const std::vector<float>& w,
                    const std::vector<int32_t>& targets, int64_t m, int64_t C, int64_t V,
                    double scale) {
  Reference ref;
  ref.logits.assign(m * V, 0.0);
  ref.logprob.assign(m, 0.0);
  ref.dx.assign(m * C, 0.0);
  ref.dw.assign(V * C, 0.0);
  for (int64_t r = 0; r < m; ++r) {
    double mx = -INFINITY;
    for (int64_t v = 0; v < V; ++v) {
      double z = 0;
      for (int64_t c = 0; c < C; ++c) z += static_cast<double>(x[r * C + c]) * w[v * C + c];
      ref.logits[r * V + v] = z;
      mx = std::max(mx, z);
    }
    if (targets[r] < 0) continue;
    double sum = 0;
    for (int64_t v = 0; v < V; ++v) sum += std::exp(ref.logits[r * V + v] - mx);
    ref.logprob[r] = ref.logits[r * V + targets[r]] - mx - std::log(sum);
    ref.loss -= ref.logprob[r];
    for (int64_t v = 0; v < V; ++v) {
      const double g = (std::exp(ref.logits[r * V + v] - mx) / sum - (v == targets[r])) * scale;
      for (int64_t c = 0; c < C; ++c) {
        ref.dx[r * C + c] += g * w[v * C + c];
        ref.dw[v * C + c] += g * x[r * C + c];
      }
    }
  }
  return ref;
}

double MaxRelError(const std::vector<float>& got, const std::vector<double>& want, int64_t begin,
                   int64_t stride_want = 1) {
  double err = 0, peak = 1e-30;
  for (size_t i = 0; i < got.size(); ++i) {
    const double w = want[begin + i * stride_want];
    err = std::max(err, std::abs(got[i] - w));
    peak = std::max(peak, std::abs(w));
  }
  return err / peak;
}

struct Inputs {
  std::vector<float> x, w;
  std::vector<int32_t> targets;
};

Inputs MakeInputs(int64_t m, int64_t C, int64_t V) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Inputs in;
  for (int64_t i = 0; i < m * C; ++i) in.x.push_back(normal(rng));
  for (int64_t i = 0; i < V * C; ++i) in.w.push_back(0.5f * normal(rng));
  for (int64_t r = 0; r < m; ++r) in.targets.push_back(r % 5 == 2 ? -1 : (r * 7 + 3) % V);
  return in;
}

// One rank over the whole vocabulary: blocks of 8 columns (the last one partial), and
// the default block, against the double reference, plus the raw logits.
TEST(LmHeadLossTest, BlockedHeadEqualsTheWholeSoftmax) {
  const int64_t m = 13, C = 24, V = 37;
  const float scale = 0.25f;
  const Inputs in = MakeInputs(m, C, V);
  const Reference ref = NaiveHead(in.x, in.w, in.targets, m, C, V, scale);
  for (const int64_t block : {int64_t{8}, int64_t{37}, kHeadVocabBlock}) {
    std::vector<float> logits(m * V), raw(m * V), stats(HeadStatsFloats(m, V, block));
    std::vector<float> lp(m), dx(m * C, 7.0f), dw(V * C, 0.0f);
    const HeadStats s(stats.data(), m, V, block);
    LmHeadForward(logits.data(), s, in.x.data(), in.w.data(), in.targets.data(), m, C, V,
                  raw.data(), V);
    const double loss = LmHeadLoss(lp.data(), s, in.targets.data(), m);
    LmHeadBackward(dx.data(), dw.data(), logits.data(), s, in.x.data(), in.w.data(),
                   in.targets.data(), in.targets.data(), m, C, V, scale);
    EXPECT_LT(MaxRelError(raw, ref.logits, 0), 1e-5) << "block " << block;
    EXPECT_LT(MaxRelError(lp, ref.logprob, 0), 1e-5) << "block " << block;
    EXPECT_NEAR(loss, ref.loss, 1e-5 * ref.loss) << "block " << block;
    EXPECT_LT(MaxRelError(dx, ref.dx, 0), 1e-5) << "block " << block;
    EXPECT_LT(MaxRelError(dw, ref.dw, 0), 1e-5) << "block " << block;
    for (int64_t c = 0; c < C; ++c) EXPECT_EQ(dx[2 * C + c], 0.0f) << "ignored row 2";
  }
}

// Three vocabulary-parallel ranks, combined as the model's two all-reduces would.
TEST(LmHeadLossTest, VocabularyParallelEqualsOneRank) {
  const int64_t m = 11, C = 16, V = 41, block = 6;
  const int parts = 3;
  const float scale = 0.5f;
  const Inputs in = MakeInputs(m, C, V);
  const Reference ref = NaiveHead(in.x, in.w, in.targets, m, C, V, scale);
  std::vector<std::vector<float>> logits(parts), stats(parts);
  std::vector<std::vector<int32_t>> local(parts, std::vector<int32_t>(m));
  std::vector<HeadStats> s;
  for (int p = 0; p < parts; ++p) {
    const Range r = EvenSplit(V, parts, p);
    logits[p].resize(m * r.size());
    stats[p].resize(HeadStatsFloats(m, r.size(), block));
    s.emplace_back(stats[p].data(), m, r.size(), block);
    LocalTokens(local[p].data(), in.targets.data(), m, r.begin, r.size());
    LmHeadForward(logits[p].data(), s[p], in.x.data(), in.w.data() + r.begin * C, local[p].data(),
                  m, C, r.size(), nullptr, 0);
  }
  std::vector<float> row_max(m, -INFINITY), sums(2 * m, 0.0f);
  for (int p = 0; p < parts; ++p) {  // all-reduce max
    for (int64_t i = 0; i < m; ++i) row_max[i] = std::max(row_max[i], s[p].row_max[i]);
  }
  for (int p = 0; p < parts; ++p) {
    std::copy(row_max.begin(), row_max.end(), s[p].row_max);
    LmHeadRescaleSums(s[p], m);
    for (int64_t i = 0; i < 2 * m; ++i) sums[i] += s[p].sum_exp[i];  // all-reduce sum
  }
  std::vector<float> dx_total(m * C, 0.0f);
  for (int p = 0; p < parts; ++p) {
    const Range r = EvenSplit(V, parts, p);
    std::copy(sums.begin(), sums.end(), s[p].sum_exp);
    std::vector<float> lp(m), dx(m * C), dw(r.size() * C, 0.0f);
    const double loss = LmHeadLoss(lp.data(), s[p], in.targets.data(), m);
    EXPECT_NEAR(loss, ref.loss, 1e-5 * ref.loss) << "rank " << p;
    EXPECT_LT(MaxRelError(lp, ref.logprob, 0), 1e-5) << "rank " << p;
    LmHeadBackward(dx.data(), dw.data(), logits[p].data(), s[p], in.x.data(),
                   in.w.data() + r.begin * C, local[p].data(), in.targets.data(), m, C, r.size(),
                   scale);
    EXPECT_LT(MaxRelError(dw, ref.dw, r.begin * C), 1e-5) << "rank " << p;
    for (int64_t i = 0; i < m * C; ++i) dx_total[i] += dx[i];  // the model's all-reduce
  }
  EXPECT_LT(MaxRelError(dx_total, ref.dx, 0), 1e-5);
}

}  // namespace
}  // namespace lote::engine
