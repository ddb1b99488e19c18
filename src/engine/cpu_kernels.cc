#include "engine/cpu_kernels.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <vector>

#include "engine/bf16_gemm.h"

namespace lote::engine {
namespace {

void SerialGemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {
    for (int64_t i = 0; i < M; ++i) {
      for (int64_t j = 0; j < N; ++j) C[i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[i * ldc + j];
    }
    return;
  }
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              static_cast<blasint>(M), static_cast<blasint>(N), static_cast<blasint>(K), alpha, A,
              static_cast<blasint>(lda), B, static_cast<blasint>(ldb), beta, C,
              static_cast<blasint>(ldc));
}

}  // namespace

void InitCpuBackend(int threads) {
  openblas_set_num_threads(1);
  if (threads > 0) omp_set_num_threads(threads);
}

int CpuThreads() { return omp_get_max_threads(); }

std::string BlasCoreName() {
  const char* name = openblas_get_corename();
  return name != nullptr ? name : "";
}

void Gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
          int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  const double work = static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K);
  if (threads <= 1 || work < 2e6) {
    SerialGemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    return;
  }
  const bool split_m = M >= N;
  const int64_t dim = split_m ? M : N;
  // Chunks are multiples of 16 rows/columns so each thread gets whole SIMD panels.
  const int64_t per = ((dim + threads - 1) / threads + 15) / 16 * 16;
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int t = 0; t < threads; ++t) {
    const int64_t lo = static_cast<int64_t>(t) * per;
    const int64_t hi = std::min(dim, lo + per);
    if (lo >= hi) continue;
    if (split_m) {
      const float* a = ta ? A + lo : A + lo * lda;
      SerialGemm(ta, tb, hi - lo, N, K, alpha, a, lda, B, ldb, beta, C + lo * ldc, ldc);
    } else {
      const float* b = tb ? B + lo * ldb : B + lo;
      SerialGemm(ta, tb, M, hi - lo, K, alpha, A, lda, b, ldb, beta, C + lo, ldc);
    }
  }
}

void EmbeddingForward(float* out, const int32_t* tokens, const float* wte, int64_t N, int64_t C) {
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    std::memcpy(out + n * C, wte + static_cast<int64_t>(tokens[n]) * C, sizeof(float) * C);
  }
}

void EmbeddingBackward(float* dwte, const float* dout, const int32_t* tokens, int64_t N, int64_t C,
                       int64_t V) {
  // Each thread owns a range of vocabulary rows, so no two threads write the same row.
#pragma omp parallel
  {
    const int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t lo = V * t / threads, hi = V * (t + 1) / threads;
    for (int64_t n = 0; n < N; ++n) {
      const int64_t tok = tokens[n];
      if (tok < lo || tok >= hi) continue;
      float* d = dwte + tok * C;
      const float* g = dout + n * C;
      for (int64_t c = 0; c < C; ++c) d[c] += g[c];
    }
  }
}

void RmsNormForward(float* out, float* rstd, const float* inp, const float* weight, int64_t N,
                    int64_t C, float eps) {
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const float* x = inp + n * C;
    float* y = out + n * C;
    float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
    for (int64_t c = 0; c < C; ++c) ss += x[c] * x[c];
    const float r = 1.0f / std::sqrt(ss / static_cast<float>(C) + eps);
    rstd[n] = r;
    for (int64_t c = 0; c < C; ++c) y[c] = x[c] * r * weight[c];
  }
}

void AddRmsNormForward(float* out, float* rstd, float* res, const float* add, const float* weight,
                       int64_t N, int64_t C, float eps) {
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    float* x = res + n * C;
    const float* a = add + n * C;
    float* y = out + n * C;
    float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
    for (int64_t c = 0; c < C; ++c) {
      x[c] += a[c];
      ss += x[c] * x[c];
    }
    const float r = 1.0f / std::sqrt(ss / static_cast<float>(C) + eps);
    rstd[n] = r;
    for (int64_t c = 0; c < C; ++c) y[c] = x[c] * r * weight[c];
  }
}

void RmsNormApply(float* out, const float* inp, const float* weight, const float* rstd, int64_t N,
                  int64_t C) {
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const float* x = inp + n * C;
    float* y = out + n * C;
    const float r = rstd[n];
    for (int64_t c = 0; c < C; ++c) y[c] = x[c] * r * weight[c];  // as RmsNormForward
  }
}

void RmsNormBackward(float* dinp, float* dweight, const float* dout, const float* inp,
                     const float* weight, const float* rstd, int64_t N, int64_t C) {
  // The weight's gradient: a partial sum per thread, then added up in thread order, so
  // the result does not depend on which thread finishes first (bit-reproducible).
  std::vector<float> partial(static_cast<size_t>(omp_get_max_threads() * C), 0.0f);
  int threads = 1;
#pragma omp parallel
  {
#pragma omp single
    threads = omp_get_num_threads();
    float* dw = partial.data() + static_cast<int64_t>(omp_get_thread_num()) * C;
#pragma omp for schedule(static)
    for (int64_t n = 0; n < N; ++n) {
      const float* x = inp + n * C;
      const float* dy = dout + n * C;
      float* dx = dinp + n * C;
      const float r = rstd[n];
      float dot = 0.0f;  // sum_c dy*w*x
#pragma omp simd reduction(+ : dot)
      for (int64_t c = 0; c < C; ++c) {
        dot += dy[c] * weight[c] * x[c];
        dw[c] += dy[c] * x[c] * r;
      }
      const float k = dot * r * r * r / static_cast<float>(C);
      for (int64_t c = 0; c < C; ++c) dx[c] += dy[c] * weight[c] * r - x[c] * k;
    }
#pragma omp for schedule(static)
    for (int64_t c = 0; c < C; ++c) {
      float sum = 0.0f;
      for (int t = 0; t < threads; ++t) sum += partial[static_cast<size_t>(t * C + c)];
      dweight[c] += sum;
    }
  }
}

void GemmOf(GemmOperands operands, bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
            const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
            int64_t ldc) {
  if (operands == GemmOperands::kBf16) {
    Bf16Gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  } else {
    Gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  }
}

void MatmulForward(float* out, const float* inp, const float* weight, int64_t N, int64_t I,
                   int64_t O, GemmOperands operands) {
  GemmOf(operands, false, true, N, O, I, 1.0f, inp, I, weight, I, 0.0f, out, O);
}

void MatmulBackward(float* dinp, float* dweight, const float* dout, const float* inp,
                    const float* weight, int64_t N, int64_t I, int64_t O, bool overwrite_dinp,
                    GemmOperands operands) {
  if (dinp != nullptr) {
    GemmOf(operands, false, false, N, I, O, 1.0f, dout, O, weight, I, overwrite_dinp ? 0.0f : 1.0f,
           dinp, I);
  }
  GemmOf(operands, true, false, O, I, N, 1.0f, dout, O, inp, I, 1.0f, dweight, I);
}

void RopeTables(float* cos_t, float* sin_t, int64_t T, int64_t hd, double theta) {
  const int64_t half = hd / 2;
  std::vector<float> inv_freq(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(hd);
    inv_freq[static_cast<size_t>(i)] = 1.0f / std::pow(static_cast<float>(theta), exponent);
  }
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t i = 0; i < half; ++i) {
      const float angle = static_cast<float>(t) * inv_freq[static_cast<size_t>(i)];
      cos_t[t * half + i] = static_cast<float>(std::cos(static_cast<double>(angle)));
      sin_t[t * half + i] = static_cast<float>(std::sin(static_cast<double>(angle)));
    }
  }
}

namespace {

// Rotates heads [0, heads) of each row of x by +angle (sign = 1) or -angle (sign = -1).
void RopeApply(float* x, const float* cos_t, const float* sin_t, int64_t B, int64_t T,
               int64_t heads, int64_t hd, int64_t row_stride, float sign) {
  const int64_t half = hd / 2;
#pragma omp parallel for schedule(static)
  for (int64_t bt = 0; bt < B * T; ++bt) {
    const int64_t t = bt % T;
    const float* cs = cos_t + t * half;
    const float* sn = sin_t + t * half;
    float* row = x + bt * row_stride;
    for (int64_t h = 0; h < heads; ++h) {
      float* v = row + h * hd;
      for (int64_t i = 0; i < half; ++i) {
        const float a = v[i], b = v[i + half];
        const float s = sign * sn[i];
        v[i] = a * cs[i] - b * s;
        v[i + half] = b * cs[i] + a * s;
      }
    }
  }
}

}  // namespace

void RopeForward(float* qkv, const float* cos_t, const float* sin_t, int64_t B, int64_t T,
                 int64_t nh, int64_t nkv, int64_t hd) {
  // q heads and k heads are adjacent: nh + nkv rotated heads per row.
  RopeApply(qkv, cos_t, sin_t, B, T, nh + nkv, hd, (nh + 2 * nkv) * hd, 1.0f);
}

void RopeBackward(float* dqkv, const float* cos_t, const float* sin_t, int64_t B, int64_t T,
                  int64_t nh, int64_t nkv, int64_t hd) {
  RopeApply(dqkv, cos_t, sin_t, B, T, nh + nkv, hd, (nh + 2 * nkv) * hd, -1.0f);
}

void SwiGluForward(float* out, const float* gate_up, int64_t N, int64_t I) {
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const float* g = gate_up + n * 2 * I;
    const float* u = g + I;
    float* o = out + n * I;
    for (int64_t i = 0; i < I; ++i) {
      const float s = 1.0f / (1.0f + FastExp(-g[i]));
      o[i] = g[i] * s * u[i];
    }
  }
}

void SwiGluBackward(float* dgate_up, const float* dout, const float* gate_up, int64_t N,
                    int64_t I) {
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const float* g = gate_up + n * 2 * I;
    const float* u = g + I;
    const float* d = dout + n * I;
    float* dg = dgate_up + n * 2 * I;
    float* du = dg + I;
    for (int64_t i = 0; i < I; ++i) {
      const float s = 1.0f / (1.0f + FastExp(-g[i]));
      const float silu = g[i] * s;
      du[i] = d[i] * silu;
      dg[i] = d[i] * u[i] * (s + silu * (1.0f - s));
    }
  }
}

}  // namespace lote::engine

#include <chrono>

namespace lote::engine {

double MeasureGemmPeakGflops(int64_t n, int repeats) {
  std::vector<float> a(static_cast<size_t>(n * n), 0.5f), b(static_cast<size_t>(n * n), 0.25f),
      c(static_cast<size_t>(n * n), 0.0f);
  double best = 0.0;
  for (int r = 0; r < repeats + 1; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    Gemm(false, true, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (r > 0) best = std::max(best, 2.0 * static_cast<double>(n) * n * n / s / 1e9);
  }
  return best;
}

}  // namespace lote::engine
