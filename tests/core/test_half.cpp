// Half and BFloat16 conversions (core/half.h) against an independent reference.
//
// The reference knows nothing of bit tricks: it lists every finite non-negative value
// of the 16-bit type as a double, in increasing order (their bit patterns are ordered
// the same way), plus the value the next bit pattern would have (2^16 for half, 2^128
// for bfloat16: that pattern is Inf, and rounding up to it is overflow). A float is
// rounded by finding its two neighbours in that list and comparing it with their
// midpoint, which is exact in double; a tie goes to the even bit pattern. So the rule
// ">= 65520 overflows to Inf" of IEEE round-to-nearest-even falls out on its own.
//
// Checked: all 65536 patterns of each type decode to the right value and round-trip
// exactly (NaNs stay NaN); millions of random floats over all exponents and over the
// type's own range; every exact tie and its two float neighbours; hand-picked
// subnormals, signed zeros, overflow, Inf and NaN payloads (bfloat16 must never turn a
// NaN into Inf by rounding).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/half.h"

namespace kiln {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// The format of a 16-bit float: 1 sign bit, `exponent_bits`, `mantissa_bits`.
struct Format16 {
  int exponent_bits;
  int mantissa_bits;
  int bias() const { return (1 << (exponent_bits - 1)) - 1; }
  uint16_t inf_bits() const { return static_cast<uint16_t>(((1u << exponent_bits) - 1) << mantissa_bits); }
};

constexpr Format16 kHalfFormat{5, 10};
constexpr Format16 kBFloat16Format{8, 7};

// The value of a pattern, from the IEEE definition (not from half.h).
double decode(Format16 fmt, uint16_t bits) {
  const bool negative = bits & 0x8000u;
  const uint32_t exponent = (bits >> fmt.mantissa_bits) & ((1u << fmt.exponent_bits) - 1);
  const uint32_t mantissa = bits & ((1u << fmt.mantissa_bits) - 1);
  double magnitude;
  if (exponent == (1u << fmt.exponent_bits) - 1) {
    magnitude = mantissa == 0 ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
  } else if (exponent == 0) {
    magnitude = std::ldexp(static_cast<double>(mantissa), 1 - fmt.bias() - fmt.mantissa_bits);
  } else {
    magnitude = std::ldexp(static_cast<double>(mantissa + (1u << fmt.mantissa_bits)),
                           static_cast<int>(exponent) - fmt.bias() - fmt.mantissa_bits);
  }
  return negative ? -magnitude : magnitude;
}

// Rounds floats to a Format16 by searching the sorted list of its values.
class ReferenceRounder {
 public:
  explicit ReferenceRounder(Format16 fmt) : fmt_(fmt) {
    const uint16_t inf = fmt.inf_bits();
    for (uint32_t b = 0; b < inf; ++b) values_.push_back(decode(fmt, static_cast<uint16_t>(b)));
    // The pattern after the largest finite one, valued as if the exponent went on.
    values_.push_back(std::ldexp(1.0, (1 << fmt.exponent_bits) - 1 - fmt.bias()));
  }

  // The bit pattern nearest to f (ties to even); NaN gives the canonical NaN pattern.
  uint16_t round(float f) const {
    if (std::isnan(f)) return static_cast<uint16_t>(fmt_.inf_bits() | (1u << (fmt_.mantissa_bits - 1)));
    const uint16_t sign = std::signbit(f) ? 0x8000u : 0u;
    const double a = std::fabs(static_cast<double>(f));
    if (a >= values_.back()) return static_cast<uint16_t>(sign | fmt_.inf_bits());
    const size_t hi = static_cast<size_t>(std::lower_bound(values_.begin(), values_.end(), a) - values_.begin());
    size_t pick = hi;
    if (values_[hi] != a) {
      const size_t lo = hi - 1;  // hi > 0: values_[0] == 0 <= a
      const double mid = (values_[lo] + values_[hi]) / 2;  // exact: one more bit than either
      pick = a < mid ? lo : a > mid ? hi : (lo % 2 == 0 ? lo : hi);
    }
    return static_cast<uint16_t>(sign | pick);
  }

  // Midpoints between consecutive non-negative patterns (the exact ties).
  std::vector<double> midpoints() const {
    std::vector<double> mids;
    for (size_t i = 0; i + 1 < values_.size(); ++i) mids.push_back((values_[i] + values_[i + 1]) / 2);
    return mids;
  }

 private:
  Format16 fmt_;
  std::vector<double> values_;
};

const ReferenceRounder& half_reference() {
  static const ReferenceRounder r(kHalfFormat);
  return r;
}
const ReferenceRounder& bfloat16_reference() {
  static const ReferenceRounder r(kBFloat16Format);
  return r;
}

bool is_nan_pattern(Format16 fmt, uint16_t bits) {
  return (bits & fmt.inf_bits()) == fmt.inf_bits() && (bits & ((1u << fmt.mantissa_bits) - 1)) != 0;
}

uint16_t half_bits(float f) { return Half(f).bits; }
uint16_t bfloat16_bits(float f) { return BFloat16(f).bits; }

// Checks one float against the reference; NaN only needs to stay NaN (payloads differ).
template <typename Convert>
::testing::AssertionResult rounds_like_reference(Format16 fmt, const ReferenceRounder& ref, Convert convert,
                                                 float f) {
  const uint16_t got = convert(f);
  if (std::isnan(f)) {
    if (is_nan_pattern(fmt, got)) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "NaN 0x" << std::hex << bits_of(f) << " became 0x" << got;
  }
  const uint16_t want = ref.round(f);
  if (got == want) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "float " << f << " (0x" << std::hex << bits_of(f) << ") gave 0x" << got
                                       << ", expected 0x" << want;
}

// Every float whose exponent is in [min_exp, max_exp], random mantissa and sign.
float random_float_in_exponents(std::mt19937& rng, int min_exp, int max_exp) {
  std::uniform_int_distribution<int> exponent(min_exp + 127, max_exp + 127);
  const uint32_t mantissa = rng() & 0x7fffffu;
  const uint32_t sign = (rng() & 1u) << 31;
  return float_of(sign | (static_cast<uint32_t>(exponent(rng)) << 23) | mantissa);
}

// ---- Half -----------------------------------------------------------------------------

TEST(Half, EveryPatternDecodesToItsIeeeValue) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const float got = Half::from_bits(static_cast<uint16_t>(b));
    const double want = decode(kHalfFormat, static_cast<uint16_t>(b));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << std::hex << b;
    } else {
      ASSERT_EQ(static_cast<double>(got), want) << std::hex << b;
      EXPECT_EQ(std::signbit(got), (b & 0x8000u) != 0) << std::hex << b;
    }
  }
}

TEST(Half, EveryPatternRoundTripsThroughFloat) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const uint16_t bits = static_cast<uint16_t>(b);
    const uint16_t back = Half(static_cast<float>(Half::from_bits(bits))).bits;
    if (is_nan_pattern(kHalfFormat, bits)) {
      EXPECT_TRUE(is_nan_pattern(kHalfFormat, back)) << std::hex << b << " -> " << back;
      EXPECT_EQ(back & 0x8000u, bits & 0x8000u) << "NaN sign " << std::hex << b;
    } else {
      ASSERT_EQ(back, bits) << std::hex << b;
    }
  }
}

TEST(Half, RandomFloatsOfEveryExponentMatchTheReference) {
  std::mt19937 rng(1234);
  for (int i = 0; i < 2'000'000; ++i) {
    const float f = float_of(static_cast<uint32_t>(rng()));
    ASSERT_TRUE(rounds_like_reference(kHalfFormat, half_reference(), half_bits, f));
  }
}

TEST(Half, RandomFloatsInTheHalfRangeMatchTheReference) {
  std::mt19937 rng(99);
  // 2^-26 (rounds to 0 or the smallest subnormal) up to 2^16 (overflow).
  for (int i = 0; i < 3'000'000; ++i) {
    const float f = random_float_in_exponents(rng, -26, 16);
    ASSERT_TRUE(rounds_like_reference(kHalfFormat, half_reference(), half_bits, f));
  }
}

// Every exact tie between two consecutive halves, and the floats just either side.
TEST(Half, EveryTieAndItsNeighboursMatchTheReference) {
  for (double mid : half_reference().midpoints()) {
    const float tie = static_cast<float>(mid);
    ASSERT_EQ(static_cast<double>(tie), mid) << "ties are floats";
    for (float f : {tie, std::nextafter(tie, 0.0f), std::nextafter(tie, kInf)}) {
      ASSERT_TRUE(rounds_like_reference(kHalfFormat, half_reference(), half_bits, f));
      ASSERT_TRUE(rounds_like_reference(kHalfFormat, half_reference(), half_bits, -f));
    }
  }
}

TEST(Half, HandPickedValues) {
  EXPECT_EQ(half_bits(0.0f), 0x0000);
  EXPECT_EQ(half_bits(-0.0f), 0x8000);
  EXPECT_EQ(half_bits(1.0f), 0x3c00);
  EXPECT_EQ(half_bits(-2.0f), 0xc000);
  EXPECT_EQ(half_bits(65504.0f), 0x7bff);             // largest finite
  EXPECT_EQ(half_bits(65519.996f), 0x7bff);           // just below the overflow tie
  EXPECT_EQ(half_bits(65520.0f), 0x7c00);             // the tie goes to the even pattern: Inf
  EXPECT_EQ(half_bits(-65520.0f), 0xfc00);
  EXPECT_EQ(half_bits(1e10f), 0x7c00);
  EXPECT_EQ(half_bits(std::numeric_limits<float>::max()), 0x7c00);
  EXPECT_EQ(half_bits(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(half_bits(-std::numeric_limits<float>::infinity()), 0xfc00);
  // Ties in the normal range: 1 + 2^-11 lies halfway between 1 and 1 + 2^-10.
  EXPECT_EQ(half_bits(1.0f + 0x1p-11f), 0x3c00);       // to the even 0x3c00
  EXPECT_EQ(half_bits(1.0f + 3 * 0x1p-11f), 0x3c02);   // to the even 0x3c02
  EXPECT_EQ(half_bits(std::nextafter(1.0f + 0x1p-11f, 2.0f)), 0x3c01);
  // Subnormals: multiples of 2^-24.
  EXPECT_EQ(half_bits(0x1p-24f), 0x0001);
  EXPECT_EQ(half_bits(0x1p-25f), 0x0000);               // tie: to even (zero)
  EXPECT_EQ(half_bits(std::nextafter(0x1p-25f, 1.0f)), 0x0001);
  EXPECT_EQ(half_bits(-0x1p-25f), 0x8000);              // keeps the sign
  EXPECT_EQ(half_bits(1.5f * 0x1p-24f), 0x0002);        // tie between 1 and 2: even
  EXPECT_EQ(half_bits(2.5f * 0x1p-24f), 0x0002);        // tie between 2 and 3: even
  EXPECT_EQ(half_bits(1023 * 0x1p-24f), 0x03ff);        // largest subnormal
  EXPECT_EQ(half_bits(1023.5f * 0x1p-24f), 0x0400);     // rounds up into the normals
  EXPECT_EQ(half_bits(0x1p-14f), 0x0400);               // smallest normal
  EXPECT_EQ(half_bits(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(half_bits(-std::numeric_limits<float>::denorm_min()), 0x8000);
  // NaN stays NaN, quiet or signalling, whatever its payload and sign.
  for (uint32_t nan : {0x7fc00000u, 0x7f800001u, 0x7fbfffffu, 0xffc00000u, 0xff800001u, 0x7fffffffu}) {
    const uint16_t h = half_bits(float_of(nan));
    EXPECT_TRUE(is_nan_pattern(kHalfFormat, h)) << std::hex << nan << " -> " << h;
    EXPECT_EQ(h & 0x8000u, (nan >> 16) & 0x8000u) << std::hex << nan;
  }
}

// ---- BFloat16 -------------------------------------------------------------------------

TEST(BFloat16, EveryPatternDecodesToItsIeeeValue) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const float got = BFloat16::from_bits(static_cast<uint16_t>(b));
    const double want = decode(kBFloat16Format, static_cast<uint16_t>(b));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << std::hex << b;
    } else {
      ASSERT_EQ(static_cast<double>(got), want) << std::hex << b;
    }
  }
}

TEST(BFloat16, EveryPatternRoundTripsThroughFloat) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const uint16_t bits = static_cast<uint16_t>(b);
    const uint16_t back = BFloat16(static_cast<float>(BFloat16::from_bits(bits))).bits;
    if (is_nan_pattern(kBFloat16Format, bits)) {
      EXPECT_TRUE(is_nan_pattern(kBFloat16Format, back)) << std::hex << b << " -> " << back;
      EXPECT_EQ(back & 0x8000u, bits & 0x8000u) << "NaN sign " << std::hex << b;
    } else {
      ASSERT_EQ(back, bits) << std::hex << b;
    }
  }
}

TEST(BFloat16, RandomFloatsOfEveryExponentMatchTheReference) {
  std::mt19937 rng(4321);
  for (int i = 0; i < 3'000'000; ++i) {
    const float f = float_of(static_cast<uint32_t>(rng()));
    ASSERT_TRUE(rounds_like_reference(kBFloat16Format, bfloat16_reference(), bfloat16_bits, f));
  }
}

TEST(BFloat16, EveryTieAndItsNeighboursMatchTheReference) {
  for (double mid : bfloat16_reference().midpoints()) {
    const float tie = static_cast<float>(mid);
    ASSERT_EQ(static_cast<double>(tie), mid) << "ties are floats";
    for (float f : {tie, std::nextafter(tie, 0.0f), std::nextafter(tie, kInf)}) {
      ASSERT_TRUE(rounds_like_reference(kBFloat16Format, bfloat16_reference(), bfloat16_bits, f));
      ASSERT_TRUE(rounds_like_reference(kBFloat16Format, bfloat16_reference(), bfloat16_bits, -f));
    }
  }
}

TEST(BFloat16, HandPickedValues) {
  EXPECT_EQ(bfloat16_bits(0.0f), 0x0000);
  EXPECT_EQ(bfloat16_bits(-0.0f), 0x8000);
  EXPECT_EQ(bfloat16_bits(1.0f), 0x3f80);
  EXPECT_EQ(bfloat16_bits(1.0f + 0x1p-8f), 0x3f80);      // tie: to even
  EXPECT_EQ(bfloat16_bits(1.0f + 3 * 0x1p-8f), 0x3f82);  // tie: to even
  EXPECT_EQ(bfloat16_bits(std::nextafter(1.0f + 0x1p-8f, 2.0f)), 0x3f81);
  EXPECT_EQ(bfloat16_bits(std::numeric_limits<float>::max()), 0x7f80);   // overflows
  EXPECT_EQ(bfloat16_bits(-std::numeric_limits<float>::max()), 0xff80);
  EXPECT_EQ(bfloat16_bits(float_of(0x7f7f7fffu)), 0x7f7f);                // just below the tie
  EXPECT_EQ(bfloat16_bits(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(bfloat16_bits(-std::numeric_limits<float>::infinity()), 0xff80);
  EXPECT_EQ(bfloat16_bits(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(bfloat16_bits(float_of(0x00008000u)), 0x0000);  // subnormal tie: to even
  EXPECT_EQ(bfloat16_bits(float_of(0x00018000u)), 0x0002);  // subnormal tie: to even
  EXPECT_EQ(bfloat16_bits(float_of(0x00008001u)), 0x0001);
  // NaNs whose payload sits only in the dropped bits: rounding them as numbers would
  // carry into the exponent and give Inf (0x7f800001) or wrap to zero (0xffffffff).
  for (uint32_t nan : {0x7f800001u, 0x7f807fffu, 0x7f808000u, 0x7fffffffu, 0xff800001u, 0xffffffffu, 0x7fc00000u}) {
    const uint16_t b = bfloat16_bits(float_of(nan));
    EXPECT_TRUE(is_nan_pattern(kBFloat16Format, b)) << std::hex << nan << " -> " << b;
    EXPECT_EQ(b & 0x8000u, (nan >> 16) & 0x8000u) << std::hex << nan;
  }
}

// The storage types convert implicitly both ways, as kernels use them.
TEST(Half, ImplicitConversionsRoundTrip) {
  const Half h = 0.333333f;
  const float back = h;
  EXPECT_EQ(back, 0.333251953125f);  // the nearest half to 1/3
  const BFloat16 b = 0.333333f;
  const float bback = b;
  EXPECT_EQ(bback, 0.333984375f);  // the nearest bfloat16 to 1/3
  EXPECT_EQ(sizeof(Half), 2u);
  EXPECT_EQ(sizeof(BFloat16), 2u);
}

}  // namespace
}  // namespace kiln
