#include "engine/cpu_kernels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

namespace lote::engine {
namespace {

// Uniform in [-a, a] from a fixed LCG, so the inputs are the same everywhere.
std::vector<float> Uniform(int64_t n, float a, uint64_t seed) {
  std::vector<float> v(static_cast<size_t>(n));
  uint64_t s = seed * 6364136223846793005ull + 1442695040888963407ull;
  for (float& x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    const double u = static_cast<double>(s >> 11) * 0x1.0p-53;  // [0, 1)
    x = static_cast<float>((2.0 * u - 1.0) * a);
  }
  return v;
}

struct AttnShape {
  int64_t B, T, nh, nkv, hd;
  int64_t D() const { return (nh + 2 * nkv) * hd; }
  int64_t Da() const { return nh * hd; }
};

// The textbook computation in double: full [T, T] causal softmax per (batch, head).
struct Reference {
  std::vector<double> out, lse, dqkv;
};

Reference NaiveAttention(const AttnShape& s, const std::vector<float>& qkv,
                         const std::vector<float>& dout) {
  const int64_t B = s.B, T = s.T, nh = s.nh, nkv = s.nkv, hd = s.hd, D = s.D(), Da = s.Da();
  const int64_t group = nh / nkv;
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  Reference r;
  r.out.assign(static_cast<size_t>(B * T * Da), 0.0);
  r.lse.assign(static_cast<size_t>(B * nh * T), 0.0);
  r.dqkv.assign(static_cast<size_t>(B * T * D), 0.0);
  auto at = [&](int64_t b, int64_t t, int64_t col) {
    return static_cast<double>(qkv[static_cast<size_t>(b * T * D + t * D + col)]);
  };
  std::vector<double> P(static_cast<size_t>(T * T)), dP(static_cast<size_t>(T * T));
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < nh; ++h) {
      const int64_t qc = h * hd, kc = Da + (h / group) * hd, vc = Da + nkv * hd + (h / group) * hd;
      for (int64_t i = 0; i < T; ++i) {
        double mx = -1e300;
        for (int64_t j = 0; j <= i; ++j) {
          double dot = 0;
          for (int64_t c = 0; c < hd; ++c) dot += at(b, i, qc + c) * at(b, j, kc + c);
          P[static_cast<size_t>(i * T + j)] = dot * scale;
          mx = std::max(mx, dot * scale);
        }
        double z = 0;
        for (int64_t j = 0; j <= i; ++j) z += std::exp(P[static_cast<size_t>(i * T + j)] - mx);
        r.lse[static_cast<size_t>((b * nh + h) * T + i)] = mx + std::log(z);
        for (int64_t j = 0; j < T; ++j) {
          double& p = P[static_cast<size_t>(i * T + j)];
          p = j <= i ? std::exp(p - mx) / z : 0.0;
        }
        for (int64_t c = 0; c < hd; ++c) {
          double o = 0;
          for (int64_t j = 0; j <= i; ++j)
            o += P[static_cast<size_t>(i * T + j)] * at(b, j, vc + c);
          r.out[static_cast<size_t>(b * T * Da + i * Da + qc + c)] = o;
        }
      }
      // Backward: dV = P^T dO, dP = dO V^T, dS = P (dP - rowsum(P dP)), dQ = s dS K,
      // dK = s dS^T Q.
      auto g = [&](int64_t t, int64_t c) {
        return static_cast<double>(dout[static_cast<size_t>(b * T * Da + t * Da + qc + c)]);
      };
      auto grad = [&](int64_t t, int64_t col) -> double& {
        return r.dqkv[static_cast<size_t>(b * T * D + t * D + col)];
      };
      for (int64_t i = 0; i < T; ++i) {
        double rowdot = 0;
        for (int64_t j = 0; j <= i; ++j) {
          double d = 0;
          for (int64_t c = 0; c < hd; ++c) d += g(i, c) * at(b, j, vc + c);
          dP[static_cast<size_t>(i * T + j)] = d;
          rowdot += P[static_cast<size_t>(i * T + j)] * d;
        }
        for (int64_t j = 0; j <= i; ++j) {
          const double p = P[static_cast<size_t>(i * T + j)];
          const double ds = p * (dP[static_cast<size_t>(i * T + j)] - rowdot);
          for (int64_t c = 0; c < hd; ++c) {
            grad(j, vc + c) += p * g(i, c);
            grad(i, qc + c) += scale * ds * at(b, j, kc + c);
            grad(j, kc + c) += scale * ds * at(b, i, qc + c);
          }
        }
      }
    }
  }
  return r;
}

// max |got - want| / max |want| over the elements selected by keep(index).
template <typename Keep>
double MaxRelError(const std::vector<float>& got, const std::vector<double>& want, float offset,
                   Keep keep) {
  double err = 0, scale = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (!keep(static_cast<int64_t>(i))) continue;
    err = std::max(err, std::abs(static_cast<double>(got[i]) - offset - want[i]));
    scale = std::max(scale, std::abs(want[i]));
  }
  return scale > 0 ? err / scale : err;
}

// The kernels' documented accuracy against the double reference: fp32 GEMMs and a
// ~3e-7 exp, so errors are ~1e-6 of each tensor's largest entry; 2e-5 leaves margin.
constexpr double kMaxRelError = 2e-5;

void CheckAttention(const AttnShape& s, int64_t block = kAttnBlock) {
  SCOPED_TRACE(testing::Message() << "B=" << s.B << " T=" << s.T << " nh=" << s.nh
                                  << " nkv=" << s.nkv << " hd=" << s.hd << " block=" << block);
  InitCpuBackend(0);
  const int64_t threads = CpuThreads();
  const int64_t D = s.D(), Da = s.Da();
  const std::vector<float> qkv = Uniform(s.B * s.T * D, 2.5f, 1);
  const std::vector<float> dout = Uniform(s.B * s.T * Da, 1.0f, 2);
  const Reference ref = NaiveAttention(s, qkv, dout);

  // Scratch followed by a guard region the kernels must not touch.
  constexpr int64_t kGuard = 4096;
  constexpr float kSentinel = 12345.0f;
  const int64_t fwd_scratch = threads * AttentionForwardScratch(s.T, s.hd);
  const int64_t bwd_scratch = threads * AttentionBackwardScratch(s.T, s.hd, block);
  std::vector<float> scratch(static_cast<size_t>(std::max(fwd_scratch, bwd_scratch) + kGuard),
                             kSentinel);
  auto guard_intact = [&](int64_t from) {
    return std::all_of(scratch.begin() + from, scratch.end(),
                       [](float x) { return x == kSentinel; });
  };

  std::vector<float> out(static_cast<size_t>(s.B * s.T * Da), -7.0f);
  std::vector<float> lse(static_cast<size_t>(s.B * s.nh * s.T), -7.0f);
  AttentionForward(out.data(), lse.data(), scratch.data(), qkv.data(), s.B, s.T, s.nh, s.nkv, s.hd);
  EXPECT_TRUE(guard_intact(fwd_scratch)) << "forward wrote past its scratch";
  const auto all = [](int64_t) { return true; };
  const double out_err = MaxRelError(out, ref.out, 0.0f, all);
  const double lse_err = MaxRelError(lse, ref.lse, 0.0f, all);

  // Backward accumulates: start from 0.5 everywhere and subtract it when comparing.
  std::fill(scratch.begin(), scratch.end(), kSentinel);
  std::vector<float> dqkv(static_cast<size_t>(s.B * s.T * D), 0.5f);
  AttentionBackward(dqkv.data(), scratch.data(), dout.data(), qkv.data(), out.data(), lse.data(),
                    s.B, s.T, s.nh, s.nkv, s.hd, block);
  EXPECT_TRUE(guard_intact(bwd_scratch)) << "backward wrote past its scratch";
  const auto part = [&](int64_t lo, int64_t hi) {
    return [=](int64_t i) { return i % D >= lo && i % D < hi; };
  };
  const double dq_err = MaxRelError(dqkv, ref.dqkv, 0.5f, part(0, Da));
  const double dk_err = MaxRelError(dqkv, ref.dqkv, 0.5f, part(Da, Da + s.nkv * s.hd));
  const double dv_err = MaxRelError(dqkv, ref.dqkv, 0.5f, part(Da + s.nkv * s.hd, D));
  std::printf(
      "attention B=%lld T=%lld nh=%lld nkv=%lld hd=%lld, %lld threads: max relative error out "
      "%.2e lse %.2e dq %.2e dk %.2e dv %.2e\n",
      static_cast<long long>(s.B), static_cast<long long>(s.T), static_cast<long long>(s.nh),
      static_cast<long long>(s.nkv), static_cast<long long>(s.hd), static_cast<long long>(threads),
      out_err, lse_err, dq_err, dk_err, dv_err);
  EXPECT_LT(out_err, kMaxRelError);
  EXPECT_LT(lse_err, kMaxRelError);
  EXPECT_LT(dq_err, kMaxRelError);
  EXPECT_LT(dk_err, kMaxRelError);
  EXPECT_LT(dv_err, kMaxRelError);
}

// T = 300: row tiles of 6 and backward blocks that do not divide T (a partial last one).
TEST(CpuKernelsTest, AttentionMatchesNaiveSoftmaxGqa) { CheckAttention({2, 300, 4, 2, 16}); }

// One key/value head shared by every query head; T = 257 = 2 blocks + 1 row, head dim 8
// (half a register tile's columns: the masked-lane path).
TEST(CpuKernelsTest, AttentionMatchesNaiveSoftmaxMqa) { CheckAttention({1, 257, 3, 1, 8}); }

// Sequences shorter than one row tile, plain multi-head.
TEST(CpuKernelsTest, AttentionMatchesNaiveSoftmaxShort) { CheckAttention({3, 5, 2, 2, 4}); }

// The 60 M-class model's shape (8 heads of 64, T = 256) at every backward block size the
// bench sweeps, including blocks that are not multiples of the row tile (7, 100) and one
// longer than T.
TEST(CpuKernelsTest, AttentionMatchesNaiveSoftmaxEveryBlock) {
  for (int64_t block : {1, 7, 48, 96, 100, 192, 512}) CheckAttention({1, 256, 2, 2, 64}, block);
}

// Head dim 40: two full 16-column tiles and a partial one.
TEST(CpuKernelsTest, AttentionMatchesNaiveSoftmaxOddHeadDim) {
  CheckAttention({2, 61, 4, 4, 40}, 24);
}

TEST(CpuKernelsTest, AttentionScratchIsLinearInT) {
  // k^T (and v^T) in panels of 16 keys: T = 5 takes one panel of 16.
  EXPECT_EQ(AttentionForwardScratch(5, 4), 4 * 16 + (2 * 4 + kAttnTileRows) * 5);
  EXPECT_EQ(AttentionForwardScratch(8192, 128), 2 * AttentionForwardScratch(4096, 128));
  EXPECT_EQ(AttentionBackwardScratch(4096, 128), (5 * 128 + 2 * kAttnBlock) * 4096 + kAttnBlock);
  EXPECT_EQ(AttentionBackwardScratch(5, 4, 96), 2 * 4 * 16 + (3 * 4 + 2 * 5) * 5 + 5);
  EXPECT_LT(AttentionBackwardScratch(8192, 128), 2 * AttentionBackwardScratch(4096, 128));
}

TEST(CpuKernelsTest, RmsNormApplyReproducesForwardExactly) {
  InitCpuBackend(0);
  const int64_t N = 9, C = 37;
  const std::vector<float> x = Uniform(N * C, 3.0f, 3), w = Uniform(C, 1.5f, 4);
  std::vector<float> y(static_cast<size_t>(N * C)), rstd(static_cast<size_t>(N));
  std::vector<float> y2(static_cast<size_t>(N * C), -1.0f);
  RmsNormForward(y.data(), rstd.data(), x.data(), w.data(), N, C, 1e-5f);
  RmsNormApply(y2.data(), x.data(), w.data(), rstd.data(), N, C);
  EXPECT_EQ(0, std::memcmp(y.data(), y2.data(), sizeof(float) * y.size()));
  // And it is the norm: row 0 by hand.
  double ss = 0;
  for (int64_t c = 0; c < C; ++c) ss += static_cast<double>(x[c]) * x[c];
  const double r = 1.0 / std::sqrt(ss / C + 1e-5);
  for (int64_t c = 0; c < C; ++c) EXPECT_NEAR(y2[c], x[c] * r * w[c], 1e-5);
}

// The fused residual add + RMSNorm leaves the stream, the norm and rstd exactly as the
// add followed by RmsNormForward (C = 512 as the bench model, and an odd width).
TEST(CpuKernelsTest, AddRmsNormEqualsAddThenRmsNorm) {
  InitCpuBackend(0);
  for (const int64_t C : {int64_t{512}, int64_t{37}}) {
    const int64_t N = 9;
    const std::vector<float> res = Uniform(N * C, 3.0f, 5), add = Uniform(N * C, 2.0f, 6);
    const std::vector<float> w = Uniform(C, 1.5f, 7);
    std::vector<float> sum = res, fused = res;
    for (size_t i = 0; i < sum.size(); ++i) sum[i] += add[i];
    std::vector<float> y(static_cast<size_t>(N * C)), y2(y.size(), -1.0f);
    std::vector<float> rstd(static_cast<size_t>(N)), rstd2(rstd.size(), -1.0f);
    RmsNormForward(y.data(), rstd.data(), sum.data(), w.data(), N, C, 1e-5f);
    AddRmsNormForward(y2.data(), rstd2.data(), fused.data(), add.data(), w.data(), N, C, 1e-5f);
    EXPECT_EQ(0, std::memcmp(sum.data(), fused.data(), sizeof(float) * sum.size())) << C;
    EXPECT_EQ(0, std::memcmp(y.data(), y2.data(), sizeof(float) * y.size())) << C;
    EXPECT_EQ(0, std::memcmp(rstd.data(), rstd2.data(), sizeof(float) * rstd.size())) << C;
  }
}

}  // namespace
}  // namespace lote::engine
