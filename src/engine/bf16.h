// bfloat16: the upper 16 bits of an IEEE fp32 (sign, the same 8-bit exponent, 7 mantissa
// bits). Conversions from fp32 round to nearest, ties to even (no stochastic rounding),
// as torch's `tensor.to(torch.bfloat16)` does:
//   - a finite value whose rounding exceeds bf16's largest finite (3.3895e38) becomes
//     ±Inf, as IEEE rounding does; ±Inf stays ±Inf;
//   - NaN stays NaN (its sign and top payload bits kept, the quiet bit set, so a NaN
//     whose payload lies only in the dropped bits does not turn into Inf);
//   - subnormals round like any other value (bf16 has fp32's exponent range, so an fp32
//     subnormal becomes a bf16 subnormal or zero, or the smallest normal by a carry);
//     nothing is flushed to zero.
// bf16 -> fp32 is exact. The array functions are vectorized (AVX2 where targeted) and
// threaded; they are pure, and in-place use (dst == src for the rounding) is allowed.
#pragma once

#include <bit>
#include <cstdint>

namespace lote::engine {

inline uint16_t FloatToBf16(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);
  // Adding 0x7FFF plus the kept part's lowest bit rounds to nearest, ties to even; a
  // carry out of the mantissa goes into the exponent (up to Inf), as it should.
  return static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

inline float Bf16ToFloat(uint16_t h) {
  return std::bit_cast<float>(static_cast<uint32_t>(h) << 16);
}

// The fp32 value of FloatToBf16(f): f rounded to the nearest bf16.
inline float RoundToBf16(float f) { return Bf16ToFloat(FloatToBf16(f)); }

// dst[i] = FloatToBf16(src[i]).
void FloatsToBf16(uint16_t* dst, const float* src, int64_t n);
// dst[i] = Bf16ToFloat(src[i]).
void Bf16ToFloats(float* dst, const uint16_t* src, int64_t n);
// dst[i] = RoundToBf16(src[i]); dst may be src.
void RoundToBf16(float* dst, const float* src, int64_t n);
// Both at once: kept[i] = FloatToBf16(x[i]) and x[i] rounded in place to the same value,
// so what is computed next from x and what is kept are the same numbers.
void RoundAndKeepBf16(float* x, uint16_t* kept, int64_t n);

}  // namespace lote::engine
