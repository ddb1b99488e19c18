#include "engine/bf16.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <vector>

namespace lote::engine {
namespace {

float F(uint32_t bits) { return std::bit_cast<float>(bits); }
uint32_t Bits(float f) { return std::bit_cast<uint32_t>(f); }

// The reference: pick the nearer of the two bf16 neighbours by exact comparison in
// double, the even one on a tie (no bit tricks).
uint16_t NearestEvenReference(float f) {
  const uint32_t u = Bits(f);
  const uint16_t down = static_cast<uint16_t>(u >> 16);  // toward zero
  if ((u & 0xFFFFu) == 0) return down;
  const uint16_t up = static_cast<uint16_t>(down + 1);  // away from zero (may become Inf)
  const double x = std::fabs(static_cast<double>(f));
  const double lo = std::fabs(static_cast<double>(Bf16ToFloat(down)));
  const double hi = std::fabs(static_cast<double>(Bf16ToFloat(up)));
  if (x - lo < hi - x) return down;
  if (hi - x < x - lo) return up;
  return (down & 1u) == 0 ? down : up;
}

TEST(Bf16Test, RoundsToNearestTiesToEven) {
  // 1 + 2^-8 lies exactly between 1 and 1 + 2^-7: the tie goes to 1 (even mantissa).
  EXPECT_EQ(FloatToBf16(F(0x3F808000u)), 0x3F80u);
  // 1 + 3*2^-8 lies between 1 + 2^-7 (odd) and 1 + 2^-6: the tie goes up to the even one.
  EXPECT_EQ(FloatToBf16(F(0x3F818000u)), 0x3F82u);
  // Just above and below a tie go to the nearer neighbour.
  EXPECT_EQ(FloatToBf16(F(0x3F808001u)), 0x3F81u);
  EXPECT_EQ(FloatToBf16(F(0x3F807FFFu)), 0x3F80u);
  // Negative values round on magnitude, sign kept.
  EXPECT_EQ(FloatToBf16(F(0xBF808001u)), 0xBF81u);
  EXPECT_EQ(FloatToBf16(F(0xBF818000u)), 0xBF82u);
  // A carry out of the mantissa moves the exponent: 2 - 2^-23 rounds to 2.
  EXPECT_EQ(FloatToBf16(F(0x3FFFFFFFu)), 0x4000u);
  // Exactly representable values are unchanged.
  for (float v : {0.0f, -0.0f, 1.0f, -2.5f, 0.15625f, 65536.0f}) {
    EXPECT_EQ(Bits(RoundToBf16(v)), Bits(v)) << v;
  }
  EXPECT_EQ(FloatToBf16(-0.0f), 0x8000u);
}

TEST(Bf16Test, MatchesTheExactReferenceOverManyValues) {
  // Every 16-bit low half is visited for a spread of high halves: normals, subnormals,
  // the largest finite values and both signs.
  int64_t checked = 0;
  for (uint32_t hi : {0x0000u, 0x0001u, 0x007Fu, 0x0080u, 0x3F80u, 0x4049u, 0x7F7Eu, 0x8000u,
                      0x807Fu, 0xBF80u, 0xC2F6u}) {
    for (uint32_t lo = 0; lo <= 0xFFFFu; ++lo) {
      const float f = F((hi << 16) | lo);
      ASSERT_EQ(FloatToBf16(f), NearestEvenReference(f)) << std::hex << ((hi << 16) | lo);
      ++checked;
    }
  }
  EXPECT_EQ(checked, 11 * 65536);
}

TEST(Bf16Test, InfinityOverflowAndNaN) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(FloatToBf16(inf), 0x7F80u);
  EXPECT_EQ(FloatToBf16(-inf), 0xFF80u);
  // bf16's largest finite is 0x7F7F (3.3895e38); fp32's largest rounds past it to Inf,
  // as does anything at or above the halfway point 0x7F7F8000; below it stays finite.
  EXPECT_EQ(FloatToBf16(std::numeric_limits<float>::max()), 0x7F80u);
  EXPECT_EQ(FloatToBf16(F(0x7F7F8000u)), 0x7F80u);
  EXPECT_EQ(FloatToBf16(F(0x7F7F7FFFu)), 0x7F7Fu);
  EXPECT_EQ(FloatToBf16(F(0xFF7F8000u)), 0xFF80u);
  // NaNs stay NaN with their sign, including one whose payload is only in the low bits
  // (truncation would make it Inf).
  for (uint32_t nan : {0x7FC00000u, 0x7F800001u, 0x7FBF0000u, 0xFF800001u, 0xFFFFFFFFu}) {
    const uint16_t h = FloatToBf16(F(nan));
    EXPECT_TRUE(std::isnan(Bf16ToFloat(h))) << std::hex << nan;
    EXPECT_EQ(h & 0x8000u, (nan >> 16) & 0x8000u) << std::hex << nan;
  }
  EXPECT_TRUE(std::isnan(RoundToBf16(std::numeric_limits<float>::quiet_NaN())));
}

TEST(Bf16Test, Subnormals) {
  // fp32's smallest subnormal (2^-149) is below half of bf16's smallest (2^-133): zero.
  EXPECT_EQ(FloatToBf16(F(0x00000001u)), 0x0000u);
  EXPECT_EQ(FloatToBf16(F(0x80000001u)), 0x8000u);
  // bf16's smallest subnormal 2^-133 is 0x00010000; half of it (a tie) goes to even (0),
  // just above half goes up.
  EXPECT_EQ(FloatToBf16(F(0x00010000u)), 0x0001u);
  EXPECT_EQ(FloatToBf16(F(0x00008000u)), 0x0000u);
  EXPECT_EQ(FloatToBf16(F(0x00008001u)), 0x0001u);
  EXPECT_EQ(FloatToBf16(F(0x00018000u)), 0x0002u);  // 1.5 ulp: tie to even (2)
  // The largest subnormal rounds up into the smallest normal by a carry.
  EXPECT_EQ(FloatToBf16(F(0x007FFFFFu)), 0x0080u);
  // bf16 subnormals convert back exactly (no flush to zero).
  EXPECT_EQ(Bits(Bf16ToFloat(0x0001u)), 0x00010000u);
  EXPECT_GT(Bf16ToFloat(0x0001u), 0.0f);
}

TEST(Bf16Test, ArrayFunctionsEqualTheScalarOnes) {
  // Long enough for the vector loops and their remainders, with specials mixed in.
  std::vector<float> x(1037);
  uint32_t state = 12345;
  for (float& v : x) {
    state = state * 1664525u + 1013904223u;
    v = F(state);
  }
  x[3] = std::numeric_limits<float>::infinity();
  x[17] = F(0x7F800001u);
  x[100] = F(0x00000003u);
  std::vector<uint16_t> h(x.size());
  FloatsToBf16(h.data(), x.data(), static_cast<int64_t>(x.size()));
  std::vector<float> back(x.size()), rounded(x.size());
  Bf16ToFloats(back.data(), h.data(), static_cast<int64_t>(x.size()));
  RoundToBf16(rounded.data(), x.data(), static_cast<int64_t>(x.size()));
  std::vector<float> kept_x = x;
  std::vector<uint16_t> kept(x.size());
  RoundAndKeepBf16(kept_x.data(), kept.data(), static_cast<int64_t>(x.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(h[i], FloatToBf16(x[i])) << i;
    ASSERT_EQ(Bits(back[i]), static_cast<uint32_t>(h[i]) << 16) << i;
    ASSERT_EQ(Bits(rounded[i]), Bits(back[i])) << i;
    ASSERT_EQ(kept[i], h[i]) << i;
    ASSERT_EQ(Bits(kept_x[i]), Bits(back[i])) << i;
  }
  // In place.
  RoundToBf16(x.data(), x.data(), static_cast<int64_t>(x.size()));
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(Bits(x[i]), Bits(back[i])) << i;
}

}  // namespace
}  // namespace lote::engine
