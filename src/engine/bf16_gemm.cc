#include "engine/bf16_gemm.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "engine/bf16.h"
#include "engine/cpu_kernels.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define LOTE_HAVE_BF16_KERNEL 1
#define LOTE_AVX512_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))
#else
#define LOTE_HAVE_BF16_KERNEL 0
#endif

namespace lote::engine {
namespace {

// Blocking (Goto's): a kMc x kKc block of A and a kKc x kNc block of B are packed, as
// bf16 pairs along k, into micro-panels of kMr rows / kNr columns; the micro-kernel keeps
// a kMr x kNr tile of C in 24 zmm accumulators. A B micro-panel (kKc/2 x 32 pairs, 16 KiB)
// stays in L1 while the A micro-panels of the block (72 KiB) come from L2.
constexpr int kMr = 12;
constexpr int kNr = 32;
constexpr int64_t kKc = 256;
constexpr int64_t kKp = kKc / 2;  // k pairs per block
constexpr int64_t kMc = 12 * kMr;
constexpr int64_t kNc = 1024;
constexpr int64_t kPackAWords = kMc * kKp;
constexpr int64_t kPackBWords = kNc * kKp;

// 0: the CPU's choice, 1: forced to fp32. Set from LOTE_BF16_GEMM=fp32 on first use.
std::atomic<int>& ForcedFallback() {
  static std::atomic<int> forced{[] {
    const char* env = std::getenv("LOTE_BF16_GEMM");
    return env != nullptr && std::strcmp(env, "fp32") == 0 ? 1 : 0;
  }()};
  return forced;
}

#if LOTE_HAVE_BF16_KERNEL

// dst[p * W + x] = bf16(src(2p, x)) | bf16(src(2p + 1, x)) << 16 for p < ceil(kc / 2),
// x < W, with src(k, x) = src[k * sk + x * sx]; zero past kc and past `count` columns.
LOTE_AVX512_BF16 void PackPairs(uint32_t* dst, int W, const float* src, int64_t sk, int64_t sx,
                                int64_t kc, int count) {
  const int64_t kp = (kc + 1) / 2;
  auto pair = [](float lo, float hi) {
    return static_cast<uint32_t>(FloatToBf16(lo)) | (static_cast<uint32_t>(FloatToBf16(hi)) << 16);
  };
  if (sx == 1) {  // rows of src are contiguous along x: two rows make a row of pairs
    for (int64_t p = 0; p < kp; ++p) {
      const float* s0 = src + 2 * p * sk;
      uint32_t* d = dst + p * W;
      if (2 * p + 1 < kc) {
        const float* s1 = s0 + sk;
        for (int x = 0; x < count; ++x) d[x] = pair(s0[x], s1[x]);
      } else {
        for (int x = 0; x < count; ++x) d[x] = pair(s0[x], 0.0f);
      }
      for (int x = count; x < W; ++x) d[x] = 0;
    }
    return;
  }
  // Contiguous along k (sk == 1 in the engine's uses): a column at a time.
  for (int x = 0; x < count; ++x) {
    const float* s = src + x * sx;
    for (int64_t p = 0; p < kc / 2; ++p) dst[p * W + x] = pair(s[2 * p * sk], s[(2 * p + 1) * sk]);
    if (kc % 2 != 0) dst[(kp - 1) * W + x] = pair(s[(kc - 1) * sk], 0.0f);
  }
  for (int x = count; x < W; ++x) {
    for (int64_t p = 0; p < kp; ++p) dst[p * W + x] = 0;
  }
}

inline LOTE_AVX512_BF16 __m512bh AsBf16(__m512i v) {
  __m512bh r;
  std::memcpy(&r, &v, sizeof(r));
  return r;
}

// C[rows, cols] = alpha * (a-panel . b-panel) + beta * C (beta 0: C is not read), over kp
// k pairs; a: [kp][kMr] pairs, b: [kp][kNr] pairs. rows <= kMr, cols <= kNr.
LOTE_AVX512_BF16 void MicroKernel(int64_t kp, const uint32_t* a, const uint32_t* b, float* c,
                                  int64_t ldc, int rows, int cols, float alpha, float beta) {
  __m512 acc0[kMr], acc1[kMr];
#pragma GCC unroll 12
  for (int r = 0; r < kMr; ++r) {
    acc0[r] = _mm512_setzero_ps();
    acc1[r] = _mm512_setzero_ps();
  }
  for (int64_t p = 0; p < kp; ++p) {
    const __m512bh b0 = AsBf16(_mm512_loadu_si512(b + p * kNr));
    const __m512bh b1 = AsBf16(_mm512_loadu_si512(b + p * kNr + 16));
    const uint32_t* ap = a + p * kMr;
#pragma GCC unroll 12
    for (int r = 0; r < kMr; ++r) {
      const __m512bh ar = AsBf16(_mm512_set1_epi32(static_cast<int>(ap[r])));
      acc0[r] = _mm512_dpbf16_ps(acc0[r], ar, b0);
      acc1[r] = _mm512_dpbf16_ps(acc1[r], ar, b1);
    }
  }
  const __mmask16 m0 = cols >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << cols) - 1);
  const __mmask16 m1 = cols >= 32   ? 0xFFFF
                       : cols <= 16 ? 0
                                    : static_cast<__mmask16>((1u << (cols - 16)) - 1);
  const __m512 al = _mm512_set1_ps(alpha), be = _mm512_set1_ps(beta);
  for (int r = 0; r < rows; ++r) {
    float* cr = c + r * ldc;
    __m512 r0 = _mm512_mul_ps(acc0[r], al), r1 = _mm512_mul_ps(acc1[r], al);
    if (beta != 0.0f) {
      r0 = _mm512_add_ps(r0, _mm512_mul_ps(be, _mm512_maskz_loadu_ps(m0, cr)));
      r1 = _mm512_add_ps(r1, _mm512_mul_ps(be, _mm512_maskz_loadu_ps(m1, cr + 16)));
    }
    _mm512_mask_storeu_ps(cr, m0, r0);
    _mm512_mask_storeu_ps(cr + 16, m1, r1);
  }
}

// One thread's GEMM (see Bf16Gemm); pack_a: kPackAWords, pack_b: kPackBWords.
LOTE_AVX512_BF16 void SerialBf16Gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                                     const float* A, int64_t lda, const float* B, int64_t ldb,
                                     float beta, float* C, int64_t ldc, uint32_t* pack_a,
                                     uint32_t* pack_b) {
  const int64_t a_sk = ta ? lda : 1, a_sx = ta ? 1 : lda;
  const int64_t b_sk = tb ? 1 : ldb, b_sx = tb ? ldb : 1;
  for (int64_t jc = 0; jc < N; jc += kNc) {
    const int64_t nc = std::min(kNc, N - jc);
    for (int64_t pc = 0; pc < K; pc += kKc) {
      const int64_t kc = std::min(kKc, K - pc), kp = (kc + 1) / 2;
      const float block_beta = pc == 0 ? beta : 1.0f;  // later k blocks add to C
      for (int64_t jr = 0; jr < nc; jr += kNr) {
        const int64_t j = jc + jr;
        PackPairs(pack_b + jr * kp, kNr, B + (tb ? j * ldb + pc : pc * ldb + j), b_sk, b_sx, kc,
                  static_cast<int>(std::min<int64_t>(kNr, nc - jr)));
      }
      for (int64_t ic = 0; ic < M; ic += kMc) {
        const int64_t mc = std::min(kMc, M - ic);
        for (int64_t ir = 0; ir < mc; ir += kMr) {
          const int64_t i = ic + ir;
          PackPairs(pack_a + ir * kp, kMr, A + (ta ? pc * lda + i : i * lda + pc), a_sk, a_sx, kc,
                    static_cast<int>(std::min<int64_t>(kMr, mc - ir)));
        }
        for (int64_t jr = 0; jr < nc; jr += kNr) {
          const int cols = static_cast<int>(std::min<int64_t>(kNr, nc - jr));
          for (int64_t ir = 0; ir < mc; ir += kMr) {
            const int rows = static_cast<int>(std::min<int64_t>(kMr, mc - ir));
            MicroKernel(kp, pack_a + ir * kp, pack_b + jr * kp, C + (ic + ir) * ldc + jc + jr, ldc,
                        rows, cols, alpha, block_beta);
          }
        }
      }
    }
  }
}

#endif  // LOTE_HAVE_BF16_KERNEL

// This thread's packing buffers (kPackAWords then kPackBWords), allocated once.
uint32_t* ThreadPackBuffer() {
  thread_local std::vector<uint32_t> buffer;
  if (buffer.empty()) buffer.resize(static_cast<size_t>(kPackAWords + kPackBWords));
  return buffer.data();
}

void SerialGemmOnKernel(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                        const float* A, int64_t lda, const float* B, int64_t ldb, float beta,
                        float* C, int64_t ldc) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {
    for (int64_t i = 0; i < M; ++i) {
      for (int64_t j = 0; j < N; ++j) C[i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[i * ldc + j];
    }
    return;
  }
#if LOTE_HAVE_BF16_KERNEL
  uint32_t* pack = ThreadPackBuffer();
  SerialBf16Gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, pack, pack + kPackAWords);
#endif
}

}  // namespace

bool CpuHasAvx512Bf16() {
#if LOTE_HAVE_BF16_KERNEL
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl") &&
                          __builtin_cpu_supports("avx512bf16");
  return has;
#else
  return false;
#endif
}

Bf16GemmKernel ActiveBf16GemmKernel() {
  return CpuHasAvx512Bf16() && ForcedFallback().load(std::memory_order_relaxed) == 0
             ? Bf16GemmKernel::kAvx512Bf16
             : Bf16GemmKernel::kFp32;
}

const char* Bf16GemmKernelName(Bf16GemmKernel kernel) {
  return kernel == Bf16GemmKernel::kAvx512Bf16 ? "avx512_bf16 (vdpbf16ps)" : "fp32 sgemm";
}

void ForceBf16GemmFallback(bool force) {
  ForcedFallback().store(force ? 1 : 0, std::memory_order_relaxed);
}

int64_t Bf16GemmScratchBytes() {
  return static_cast<int64_t>(sizeof(uint32_t)) * (kPackAWords + kPackBWords);
}

void Bf16Gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
              int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (ActiveBf16GemmKernel() == Bf16GemmKernel::kFp32) {
    Gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    return;
  }
  const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  const double work = static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K);
  if (threads <= 1 || work < 2e6) {
    SerialGemmOnKernel(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    return;
  }
  // Each output's sum does not depend on the split, so neither does the result.
  const bool split_m = M >= N;
  const int64_t dim = split_m ? M : N, unit = split_m ? kMr : kNr;
  const int64_t per = ((dim + threads - 1) / threads + unit - 1) / unit * unit;
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int t = 0; t < threads; ++t) {
    const int64_t lo = static_cast<int64_t>(t) * per;
    const int64_t hi = std::min(dim, lo + per);
    if (lo >= hi) continue;
    if (split_m) {
      const float* a = ta ? A + lo : A + lo * lda;
      SerialGemmOnKernel(ta, tb, hi - lo, N, K, alpha, a, lda, B, ldb, beta, C + lo * ldc, ldc);
    } else {
      const float* b = tb ? B + lo * ldb : B + lo;
      SerialGemmOnKernel(ta, tb, M, hi - lo, K, alpha, A, lda, b, ldb, beta, C + lo, ldc);
    }
  }
}

}  // namespace lote::engine
