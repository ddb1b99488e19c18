// Causal grouped-query attention on register tiles (cpu_kernels.h has the contract).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine/cpu_kernels.h"
#include "engine/tile_gemm.h"

namespace lote::engine {
namespace {

static_assert(kAttnTileRows == tile::kTileRows);
constexpr int64_t kRows = tile::kTileRows, kCols = tile::kTileCols;

// Rows [0, T) of x[T, hd] (contiguous) transposed into panels of kCols keys:
// xt[p][c][jj] = x[p*kCols + jj, c], so a score tile's B (one panel, hd x 16) is one
// contiguous 4 KiB run for hd 64. The last panel's missing keys are left as they are;
// no tile reads them.
void TransposePanels(float* xt, const float* x, int64_t T, int64_t hd) {
  for (int64_t j = 0; j < T; ++j) {
    float* panel = xt + (j / kCols) * hd * kCols + j % kCols;
    const float* row = x + j * hd;
    for (int64_t c = 0; c < hd; ++c) panel[c * kCols] = row[c];
  }
}

// xc[j, c] = x[j, c] for j < T, c < hd: one head's rows made contiguous. In place, a
// head's rows are D floats apart (6 KiB for the 60 M-class model's q/k/v), one page per
// row, so a tile walking down them missed the TLB and the prefetcher on every row.
void Compact(float* xc, const float* x, int64_t T, int64_t hd, int64_t D) {
  for (int64_t j = 0; j < T; ++j) std::memcpy(xc + j * hd, x + j * D, sizeof(float) * hd);
}

// S[rows, cols] = alpha * q[rows, hd] * x[0:cols, hd]^T for one row tile (q rows with
// stride lda, S with stride T), x^T as TransposePanels wrote it.
void ScoreTile(float* S, int64_t T, int rows, int64_t cols, float alpha, const float* q,
               int64_t lda, const float* xt, int64_t hd) {
  for (int64_t j = 0; j < cols; j += kCols) {
    const int n = static_cast<int>(std::min(kCols, cols - j));
    tile::Tile(rows, n, hd, alpha, q, lda, 1, xt + j * hd, kCols, S + j, T, false);
  }
}

// Rows [i0, i0+rows) of the output, hd wide: out (=|+=) alpha * P[rows, 0:K] * x[0:K, hd].
void OutputTile(float* out, int64_t ldo, int rows, int64_t K, float alpha, const float* P,
                int64_t T, const float* x, int64_t ldx, int64_t hd, bool accumulate) {
  for (int64_t c = 0; c < hd; c += kCols) {
    const int n = static_cast<int>(std::min(kCols, hd - c));
    tile::Tile(rows, n, K, alpha, P, T, 1, x + c, ldx, out + c, ldo, accumulate);
  }
}

// Row i of a tile's scores in place: p[0..i] = softmax, p(i, end) = 0; returns the lse.
float CausalSoftmaxRow(float* p, int64_t i, int64_t end) {
  float mx = p[0];
#pragma omp simd reduction(max : mx)
  for (int64_t j = 1; j <= i; ++j) mx = std::max(mx, p[j]);
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j <= i; ++j) {
    p[j] = FastExp(p[j] - mx);
    sum += p[j];
  }
  const float inv = 1.0f / sum;
#pragma omp simd
  for (int64_t j = 0; j <= i; ++j) p[j] *= inv;
  for (int64_t j = i + 1; j < end; ++j) p[j] = 0.0f;
  return mx + std::log(sum);
}

}  // namespace

void AttentionForward(float* out, float* lse, float* scratch, const float* qkv, int64_t B,
                      int64_t T, int64_t nh, int64_t nkv, int64_t hd) {
  const int64_t D = (nh + 2 * nkv) * hd, Da = nh * hd, group = nh / nkv;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const int64_t per_thread = AttentionForwardScratch(T, hd);
  const int64_t Tp = (T + kCols - 1) / kCols * kCols;  // k^T's keys, whole panels
#pragma omp parallel for collapse(2) schedule(dynamic, 1)
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t g = 0; g < nkv; ++g) {
      // The thread's scratch: k^T in panels [T/16][hd][16], v and q [T, hd], scores [6, T].
      float* kt = scratch + static_cast<int64_t>(omp_get_thread_num()) * per_thread;
      float* vc = kt + hd * Tp;
      float* qc = vc + hd * T;
      float* S = qc + hd * T;
      const float* k = qkv + b * T * D + Da + g * hd;
      const float* v = qkv + b * T * D + Da + nkv * hd + g * hd;
      Compact(qc, k, T, hd, D);  // qc holds k until the first head's q
      TransposePanels(kt, qc, T, hd);
      Compact(vc, v, T, hd, D);
      for (int64_t h = g * group; h < (g + 1) * group; ++h) {
        Compact(qc, qkv + b * T * D + h * hd, T, hd, D);
        float* o = out + b * T * Da + h * hd;
        float* L = lse + (b * nh + h) * T;
        // One row tile at a time: its rows see keys [0, end) only.
        for (int64_t i0 = 0; i0 < T; i0 += kRows) {
          const int rows = static_cast<int>(std::min(kRows, T - i0));
          const int64_t end = i0 + rows;
          ScoreTile(S, T, rows, end, scale, qc + i0 * hd, hd, kt, hd);
          for (int r = 0; r < rows; ++r) L[i0 + r] = CausalSoftmaxRow(S + r * T, i0 + r, end);
          OutputTile(o + i0 * Da, Da, rows, end, 1.0f, S, T, vc, hd, hd, false);
        }
      }
    }
  }
}

void AttentionBackward(float* dqkv, float* scratch, const float* dout, const float* qkv,
                       const float* out, const float* lse, int64_t B, int64_t T, int64_t nh,
                       int64_t nkv, int64_t hd, int64_t block) {
  const int64_t D = (nh + 2 * nkv) * hd, Da = nh * hd, group = nh / nkv;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const int64_t per_thread = AttentionBackwardScratch(T, hd, block);
  const int64_t Tp = (T + kCols - 1) / kCols * kCols;  // k^T's and v^T's keys, whole panels
  const int64_t bq = std::min(T, block);
  // One task per (batch, kv head): its query heads all add into the same dk/dv.
#pragma omp parallel for collapse(2) schedule(dynamic, 1)
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t g = 0; g < nkv; ++g) {
      // The thread's scratch: k^T and v^T in panels [T/16][hd][16], k, q and dO [T, hd],
      // the block's P and dS [bq, T] and rowsum(dO * O) [bq].
      float* kt = scratch + static_cast<int64_t>(omp_get_thread_num()) * per_thread;
      float* vt = kt + hd * Tp;
      float* kc = vt + hd * Tp;
      float* qc = kc + hd * T;
      float* dOc = qc + hd * T;
      float* P = dOc + hd * T;
      float* dS = P + bq * T;
      float* drows = dS + bq * T;
      const float* k = qkv + b * T * D + Da + g * hd;
      const float* v = qkv + b * T * D + Da + nkv * hd + g * hd;
      float* dk = dqkv + b * T * D + Da + g * hd;
      float* dv = dqkv + b * T * D + Da + nkv * hd + g * hd;
      Compact(kc, k, T, hd, D);
      TransposePanels(kt, kc, T, hd);
      Compact(qc, v, T, hd, D);  // qc holds v until the first head's q
      TransposePanels(vt, qc, T, hd);
      for (int64_t h = g * group; h < (g + 1) * group; ++h) {
        float* dq = dqkv + b * T * D + h * hd;
        const float* O = out + b * T * Da + h * hd;
        const float* dO = dout + b * T * Da + h * hd;
        Compact(qc, qkv + b * T * D + h * hd, T, hd, D);
        Compact(dOc, dO, T, hd, Da);
        const float* L = lse + (b * nh + h) * T;
        for (int64_t r0 = 0; r0 < T; r0 += bq) {
          const int64_t r1 = std::min(T, r0 + bq);
          // rowsum(dO * O) of the block's rows first, in one pass down the rows (the
          // rows' loads overlap; one at a time inside the tiles each waited for memory).
          for (int64_t i = r0; i < r1; ++i) {
            const float* oi = O + i * Da;
            const float* doi = dOc + i * hd;
            float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
            for (int64_t c = 0; c < hd; ++c) dot += doi[c] * oi[c];
            drows[i - r0] = dot;
          }
          // Per row tile: P = exp(scale q k^T - lse), dP = dO v^T, dS = P (dP - rowsum(dO O)),
          // zero past the diagonal up to r1 (the dk/dv tiles below read any column < r1),
          // then dq += scale dS k.
          for (int64_t i0 = r0; i0 < r1; i0 += kRows) {
            const int rows = static_cast<int>(std::min(kRows, r1 - i0));
            const int64_t end = i0 + rows;
            float* p = P + (i0 - r0) * T;
            float* d = dS + (i0 - r0) * T;
            ScoreTile(p, T, rows, end, scale, qc + i0 * hd, hd, kt, hd);
            ScoreTile(d, T, rows, end, 1.0f, dOc + i0 * hd, hd, vt, hd);
            for (int r = 0; r < rows; ++r) {
              const int64_t i = i0 + r;
              float* pi = p + r * T;
              float* di = d + r * T;
              const float drow = drows[i - r0], li = L[i];
#pragma omp simd
              for (int64_t j = 0; j <= i; ++j) {
                pi[j] = FastExp(pi[j] - li);
                di[j] = pi[j] * (di[j] - drow);
              }
              for (int64_t j = i + 1; j < r1; ++j) {
                pi[j] = 0.0f;
                di[j] = 0.0f;
              }
            }
            OutputTile(dq + i0 * D, D, rows, end, scale, d, T, kc, hd, hd, true);
          }
          // Keys [0, r1) against this block's queries: key j gets queries i >= max(r0, j).
          for (int64_t j0 = 0; j0 < r1; j0 += kRows) {
            const int rows = static_cast<int>(std::min(kRows, r1 - j0));
            const int64_t i_begin = std::max(r0, j0), n = r1 - i_begin;
            const float* dst = dS + (i_begin - r0) * T + j0;  // dS^T: (j, i) at j + i*T
            const float* pt = P + (i_begin - r0) * T + j0;
            for (int64_t c = 0; c < hd; c += kCols) {
              const int w = static_cast<int>(std::min(kCols, hd - c));
              tile::Tile(rows, w, n, scale, dst, 1, T, qc + i_begin * hd + c, hd, dk + j0 * D + c,
                         D, true);
              tile::Tile(rows, w, n, 1.0f, pt, 1, T, dOc + i_begin * hd + c, hd, dv + j0 * D + c, D,
                         true);
            }
          }
        }
      }
    }
  }
}

}  // namespace lote::engine
