#include "engine/bf16.h"

namespace lote::engine {

// Plain loops over the inline scalar conversions: GCC vectorizes them (the NaN test
// becomes a blend), and the results are the scalar functions' bits by construction.

void FloatsToBf16(uint16_t* dst, const float* src, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) dst[i] = FloatToBf16(src[i]);
}

void Bf16ToFloats(float* dst, const uint16_t* src, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) dst[i] = Bf16ToFloat(src[i]);
}

void RoundToBf16(float* dst, const float* src, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) dst[i] = RoundToBf16(src[i]);
}

void RoundAndKeepBf16(float* x, uint16_t* kept, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t h = FloatToBf16(x[i]);
    kept[i] = h;
    x[i] = Bf16ToFloat(h);
  }
}

}  // namespace lote::engine
