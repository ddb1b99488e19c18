#include "engine/bf16_gemm.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "engine/bf16.h"
#include "engine/cpu_kernels.h"

namespace lote::engine {
namespace {

struct Shape {
  bool ta, tb;
  int64_t M, N, K;
};

// Every kernel path: the four transposes, odd K, K over one k block (256), N over one
// column block (1024), partial micro-tiles, and the engine's shapes (the GEMMs of
// MatmulForward / MatmulBackward at hidden 512, MLP 1536 on 1024 tokens) made smaller.
const Shape kShapes[] = {
    {false, true, 37, 45, 33},    {true, false, 50, 70, 13},     {false, false, 29, 100, 77},
    {true, true, 40, 1050, 517},  {false, true, 30, 1100, 600},  {false, false, 150, 70, 700},
    {false, true, 256, 384, 128}, {false, false, 256, 128, 384}, {true, false, 384, 128, 256},
    {false, true, 1, 1, 1},       {false, false, 13, 33, 2},
};

struct Operands {
  std::vector<float> a, b;
  int64_t lda, ldb;
};

// Normal(0, 1) values, not bf16 values: the GEMM must round them.
Operands MakeOperands(const Shape& s, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal;
  Operands o{.a = std::vector<float>(static_cast<size_t>(s.M * s.K)),
             .b = std::vector<float>(static_cast<size_t>(s.K * s.N)),
             .lda = s.ta ? s.M : s.K,
             .ldb = s.tb ? s.K : s.N};
  for (float& x : o.a) x = normal(gen);
  for (float& x : o.b) x = normal(gen);
  return o;
}

float At(const std::vector<float>& m, bool trans, int64_t ld, int64_t r, int64_t c) {
  return trans ? m[static_cast<size_t>(c * ld + r)] : m[static_cast<size_t>(r * ld + c)];
}

// The scalar reference: each input rounded to bf16, products and sums in double; and the
// bound of an fp32 sum of K + 2 terms (the products, alpha's and beta's) in any order.
void Reference(const Shape& s, const Operands& o, float alpha, float beta, const float* c0,
               std::vector<double>* ref, std::vector<double>* bound) {
  ref->assign(static_cast<size_t>(s.M * s.N), 0.0);
  bound->assign(ref->size(), 0.0);
  const double u = std::ldexp(1.0, -24);
  for (int64_t i = 0; i < s.M; ++i) {
    for (int64_t j = 0; j < s.N; ++j) {
      double sum = 0.0, abs_sum = 0.0;
      for (int64_t k = 0; k < s.K; ++k) {
        const double p = static_cast<double>(RoundToBf16(At(o.a, s.ta, o.lda, i, k))) *
                         static_cast<double>(RoundToBf16(At(o.b, s.tb, o.ldb, k, j)));
        sum += p;
        abs_sum += std::fabs(p);
      }
      const size_t at = static_cast<size_t>(i * s.N + j);
      const double c = beta != 0.0f ? static_cast<double>(beta) * c0[at] : 0.0;
      (*ref)[at] = alpha * sum + c;
      (*bound)[at] =
          (static_cast<double>(s.K) + 3.0) * u * (std::fabs(alpha) * abs_sum + std::fabs(c)) +
          1e-30;
    }
  }
}

void ExpectMatchesReference(const Shape& s, float alpha, float beta) {
  const Operands o = MakeOperands(s, static_cast<uint32_t>(s.M * 131 + s.N * 7 + s.K));
  std::vector<float> c(static_cast<size_t>(s.M * s.N));
  for (size_t i = 0; i < c.size(); ++i) c[i] = static_cast<float>(i % 7) - 3.0f;
  std::vector<double> ref, bound;
  Reference(s, o, alpha, beta, c.data(), &ref, &bound);
  Bf16Gemm(s.ta, s.tb, s.M, s.N, s.K, alpha, o.a.data(), o.lda, o.b.data(), o.ldb, beta, c.data(),
           s.N);
  for (size_t i = 0; i < c.size(); ++i) {
    ASSERT_LE(std::fabs(static_cast<double>(c[i]) - ref[i]), bound[i])
        << "ta " << s.ta << " tb " << s.tb << " " << s.M << "x" << s.N << "x" << s.K << " at " << i
        << ": " << c[i] << " vs " << ref[i];
  }
}

// Runs a test body on the avx512_bf16 kernel (skipped where the CPU lacks it).
class Bf16GemmKernelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!CpuHasAvx512Bf16()) GTEST_SKIP() << "this CPU has no avx512_bf16";
    ForceBf16GemmFallback(false);
    ASSERT_EQ(ActiveBf16GemmKernel(), Bf16GemmKernel::kAvx512Bf16);
  }
  void TearDown() override { ForceBf16GemmFallback(false); }
};

TEST_F(Bf16GemmKernelTest, EqualsTheRoundedScalarReference) {
  for (const Shape& s : kShapes) {
    ExpectMatchesReference(s, 1.0f, 0.0f);
    ExpectMatchesReference(s, 1.0f, 1.0f);  // accumulate, as the weight gradients do
    ExpectMatchesReference(s, 0.5f, -2.0f);
  }
}

TEST_F(Bf16GemmKernelTest, ResultDoesNotDependOnThreadsOrRepeats) {
  const int threads = CpuThreads();
  for (const Shape& s : kShapes) {
    const Operands o = MakeOperands(s, 7);
    std::vector<std::vector<uint32_t>> runs;
    for (int t : {1, 2, 3, 1}) {
      InitCpuBackend(t);
      std::vector<float> c(static_cast<size_t>(s.M * s.N), 1.0f);
      Bf16Gemm(s.ta, s.tb, s.M, s.N, s.K, 1.0f, o.a.data(), o.lda, o.b.data(), o.ldb, 1.0f,
               c.data(), s.N);
      std::vector<uint32_t> bits(c.size());
      for (size_t i = 0; i < c.size(); ++i) bits[i] = std::bit_cast<uint32_t>(c[i]);
      runs.push_back(std::move(bits));
    }
    for (size_t r = 1; r < runs.size(); ++r) EXPECT_EQ(runs[r], runs[0]) << s.M << "x" << s.N;
  }
  InitCpuBackend(threads);
}

TEST_F(Bf16GemmKernelTest, ZeroBetaDoesNotReadC) {
  const Shape s{false, true, 20, 40, 30};
  const Operands o = MakeOperands(s, 3);
  std::vector<float> c(static_cast<size_t>(s.M * s.N), std::nanf(""));
  Bf16Gemm(s.ta, s.tb, s.M, s.N, s.K, 1.0f, o.a.data(), o.lda, o.b.data(), o.ldb, 0.0f, c.data(),
           s.N);
  for (float x : c) ASSERT_FALSE(std::isnan(x));
}

// The fallback (forced here; what a CPU without avx512_bf16 runs) is Gemm on the operands
// as given: the same bits as Gemm, and for bf16 operands (as the engine passes) within the
// reference's bound.
TEST(Bf16GemmFallbackTest, IsGemmOnTheOperands) {
  ForceBf16GemmFallback(true);
  EXPECT_EQ(ActiveBf16GemmKernel(), Bf16GemmKernel::kFp32);
  for (const Shape& s : kShapes) {
    Operands o = MakeOperands(s, 11);
    RoundToBf16(o.a.data(), o.a.data(), static_cast<int64_t>(o.a.size()));
    RoundToBf16(o.b.data(), o.b.data(), static_cast<int64_t>(o.b.size()));
    std::vector<float> c(static_cast<size_t>(s.M * s.N)), g(c.size());
    Bf16Gemm(s.ta, s.tb, s.M, s.N, s.K, 1.0f, o.a.data(), o.lda, o.b.data(), o.ldb, 0.0f, c.data(),
             s.N);
    Gemm(s.ta, s.tb, s.M, s.N, s.K, 1.0f, o.a.data(), o.lda, o.b.data(), o.ldb, 0.0f, g.data(),
         s.N);
    std::vector<double> ref, bound;
    Reference(s, o, 1.0f, 0.0f, c.data(), &ref, &bound);
    for (size_t i = 0; i < c.size(); ++i) {
      ASSERT_EQ(std::bit_cast<uint32_t>(c[i]), std::bit_cast<uint32_t>(g[i]));
      ASSERT_LE(std::fabs(static_cast<double>(c[i]) - ref[i]), bound[i]);
    }
  }
  ForceBf16GemmFallback(false);
  EXPECT_EQ(ActiveBf16GemmKernel(),
            CpuHasAvx512Bf16() ? Bf16GemmKernel::kAvx512Bf16 : Bf16GemmKernel::kFp32);
}

// MatmulForward / MatmulBackward with bf16 operands go through Bf16Gemm and agree with
// their fp32 form on bf16 values within the summation bound (here: a loose 1e-4 relative).
TEST(Bf16GemmFallbackTest, MatmulsWithBf16OperandsAgreeWithFp32OnBf16Values) {
  const int64_t N = 64, I = 96, O = 80;
  std::mt19937 gen(5);
  std::normal_distribution<float> normal;
  auto make = [&](int64_t n) {
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = RoundToBf16(normal(gen));
    return v;
  };
  const std::vector<float> inp = make(N * I), w = make(O * I), dout = make(N * O);
  for (GemmOperands g : {GemmOperands::kFp32, GemmOperands::kBf16}) {
    std::vector<float> out(static_cast<size_t>(N * O)), ref(out.size());
    MatmulForward(out.data(), inp.data(), w.data(), N, I, O, g);
    MatmulForward(ref.data(), inp.data(), w.data(), N, I, O);
    for (size_t i = 0; i < out.size(); ++i)
      ASSERT_NEAR(out[i], ref[i], 1e-4f * (1 + std::fabs(ref[i])));
    std::vector<float> dinp(static_cast<size_t>(N * I)), dw(static_cast<size_t>(O * I), 0.5f);
    std::vector<float> rdinp(dinp.size()), rdw(dw.size(), 0.5f);
    MatmulBackward(dinp.data(), dw.data(), dout.data(), inp.data(), w.data(), N, I, O, true, g);
    MatmulBackward(rdinp.data(), rdw.data(), dout.data(), inp.data(), w.data(), N, I, O, true);
    for (size_t i = 0; i < dinp.size(); ++i) {
      ASSERT_NEAR(dinp[i], rdinp[i], 1e-4f * (1 + std::fabs(rdinp[i])));
    }
    for (size_t i = 0; i < dw.size(); ++i)
      ASSERT_NEAR(dw[i], rdw[i], 1e-4f * (1 + std::fabs(rdw[i])));
  }
}

}  // namespace
}  // namespace lote::engine
