// The register-tile GEMM of the attention kernels (attention.cc): one micro-tile of at
// most kTileRows x kTileCols outputs, C (=|+=) alpha * sum_k A(i, k) * B[k, j], with A
// read through strides (so A, or its transpose, is read in place: q, dS^T, P^T need no
// copy) and B row-major. The attention's GEMMs are too small (K = 64, or 64-wide
// outputs) for a packing GEMM to pay for its packing; this one packs nothing, and the
// caller chooses each tile's K range, so causally masked work is skipped at the tile's
// granularity. AVX2 + FMA where the compiler targets it (12 accumulator registers, two
// B vectors, one broadcast of A), a plain loop elsewhere. Each output is one sum over k
// in order, then scaled by alpha, then added to C. Never allocates, never fails.
#pragma once

#include <cstdint>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#endif

namespace lote::engine::tile {

inline constexpr int kTileRows = 6;
inline constexpr int kTileCols = 16;

#if defined(__AVX2__) && defined(__FMA__)

// Lane masks for a tile of `cols` < 16 columns: table[16 - cols ..] and table[24 - cols ..].
alignas(64) inline constexpr int32_t kLaneMask[32] = {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
                                                      -1, -1, -1, -1, -1, 0,  0,  0,  0,  0,  0,
                                                      0,  0,  0,  0,  0,  0,  0,  0,  0,  0};

template <int Rows, bool Full>
inline void MicroTile(int cols, int64_t K, float alpha, const float* a, int64_t a_rs, int64_t a_cs,
                      const float* b, int64_t ldb, float* c, int64_t ldc, bool accumulate) {
  __m256i m0 = _mm256_set1_epi32(-1), m1 = m0;
  if (!Full) {
    m0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kLaneMask + 16 - cols));
    m1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kLaneMask + 24 - cols));
  }
  __m256 c0[Rows], c1[Rows];
  const float* ar[Rows];
  for (int i = 0; i < Rows; ++i) {
    c0[i] = _mm256_setzero_ps();
    c1[i] = _mm256_setzero_ps();
    ar[i] = a + i * a_rs;
  }
  for (int64_t k = 0; k < K; ++k) {
    const float* bk = b + k * ldb;
    const __m256 b0 = Full ? _mm256_loadu_ps(bk) : _mm256_maskload_ps(bk, m0);
    const __m256 b1 = Full ? _mm256_loadu_ps(bk + 8) : _mm256_maskload_ps(bk + 8, m1);
    const int64_t ak = k * a_cs;
    for (int i = 0; i < Rows; ++i) {
      const __m256 ai = _mm256_broadcast_ss(ar[i] + ak);
      c0[i] = _mm256_fmadd_ps(ai, b0, c0[i]);
      c1[i] = _mm256_fmadd_ps(ai, b1, c1[i]);
    }
  }
  const __m256 al = _mm256_set1_ps(alpha);
  for (int i = 0; i < Rows; ++i) {
    float* ci = c + i * ldc;
    __m256 r0 = _mm256_mul_ps(c0[i], al), r1 = _mm256_mul_ps(c1[i], al);
    if (Full) {
      if (accumulate) {
        r0 = _mm256_add_ps(_mm256_loadu_ps(ci), r0);
        r1 = _mm256_add_ps(_mm256_loadu_ps(ci + 8), r1);
      }
      _mm256_storeu_ps(ci, r0);
      _mm256_storeu_ps(ci + 8, r1);
    } else {
      if (accumulate) {
        r0 = _mm256_add_ps(_mm256_maskload_ps(ci, m0), r0);
        r1 = _mm256_add_ps(_mm256_maskload_ps(ci + 8, m1), r1);
      }
      _mm256_maskstore_ps(ci, m0, r0);
      _mm256_maskstore_ps(ci + 8, m1, r1);
    }
  }
}

template <bool Full>
inline void MicroTileRows(int rows, int cols, int64_t K, float alpha, const float* a, int64_t a_rs,
                          int64_t a_cs, const float* b, int64_t ldb, float* c, int64_t ldc,
                          bool accumulate) {
  switch (rows) {
    case 6:
      return MicroTile<6, Full>(cols, K, alpha, a, a_rs, a_cs, b, ldb, c, ldc, accumulate);
    case 5:
      return MicroTile<5, Full>(cols, K, alpha, a, a_rs, a_cs, b, ldb, c, ldc, accumulate);
    case 4:
      return MicroTile<4, Full>(cols, K, alpha, a, a_rs, a_cs, b, ldb, c, ldc, accumulate);
    case 3:
      return MicroTile<3, Full>(cols, K, alpha, a, a_rs, a_cs, b, ldb, c, ldc, accumulate);
    case 2:
      return MicroTile<2, Full>(cols, K, alpha, a, a_rs, a_cs, b, ldb, c, ldc, accumulate);
    default:
      return MicroTile<1, Full>(cols, K, alpha, a, a_rs, a_cs, b, ldb, c, ldc, accumulate);
  }
}

#endif

// One micro-tile: rows <= kTileRows, cols <= kTileCols; C[i, j] = alpha * sum_{k<K}
// a[i*a_rs + k*a_cs] * b[k*ldb + j] (+ C[i, j] when accumulate). K = 0 writes alpha * 0.
inline void Tile(int rows, int cols, int64_t K, float alpha, const float* a, int64_t a_rs,
                 int64_t a_cs, const float* b, int64_t ldb, float* c, int64_t ldc,
                 bool accumulate) {
#if defined(__AVX2__) && defined(__FMA__)
  if (cols == kTileCols) {
    MicroTileRows<true>(rows, cols, K, alpha, a, a_rs, a_cs, b, ldb, c, ldc, accumulate);
  } else {
    MicroTileRows<false>(rows, cols, K, alpha, a, a_rs, a_cs, b, ldb, c, ldc, accumulate);
  }
#else
  float acc[kTileRows][kTileCols] = {};
  for (int64_t k = 0; k < K; ++k) {
    for (int i = 0; i < rows; ++i) {
      const float ai = a[i * a_rs + k * a_cs];
      for (int j = 0; j < cols; ++j) acc[i][j] += ai * b[k * ldb + j];
    }
  }
  for (int i = 0; i < rows; ++i) {
    for (int j = 0; j < cols; ++j) {
      const float r = acc[i][j] * alpha;
      c[i * ldc + j] = accumulate ? c[i * ldc + j] + r : r;
    }
  }
#endif
}

// C[M, N] (=|+=) alpha * A(M x K) * B[K, N] in micro-tiles (rows outer, so a row strip
// of A stays in L1 while B's columns pass).
inline void TileGemm(int64_t M, int64_t N, int64_t K, float alpha, const float* a, int64_t a_rs,
                     int64_t a_cs, const float* b, int64_t ldb, float* c, int64_t ldc,
                     bool accumulate) {
  for (int64_t i = 0; i < M; i += kTileRows) {
    const int rows = static_cast<int>(M - i < kTileRows ? M - i : kTileRows);
    for (int64_t j = 0; j < N; j += kTileCols) {
      const int cols = static_cast<int>(N - j < kTileCols ? N - j : kTileCols);
      Tile(rows, cols, K, alpha, a + i * a_rs, a_rs, a_cs, b + j, ldb, c + i * ldc + j, ldc,
           accumulate);
    }
  }
}

}  // namespace lote::engine::tile
