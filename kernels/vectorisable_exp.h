// exp for float32 written as plain branch-free arithmetic, so that a loop calling it
// vectorises (std::exp is a libm call the compiler cannot vectorise without -ffast-math).
//
// Note [Vectorisable exp]: exp(x) = 2^k exp(r), with k = round(x log2(e)) and
// r = x - k ln 2 in [-ln2/2, ln2/2]:
//   - k comes from the 1.5 x 2^23 trick: adding it to x log2(e) leaves the rounded
//     integer in the low mantissa bits;
//   - r is computed in two steps (Cody and Waite): ln 2 = kLn2Hi + kLn2Lo, where kLn2Hi
//     has few enough bits that k kLn2Hi is exact;
//   - exp(r) is its Taylor polynomial of degree 7 (the remainder, r^8/8! < 6e-9, is far
//     below float32's half ulp) in Horner form;
//   - 2^k is built from exponent bits, as 2^(k/2) 2^(k - k/2) so that both factors stay
//     normal numbers down to k = -150: results in the subnormal range come out right
//     instead of flushing to zero.
// Within 2 ulp of the correctly rounded exp for normal results (tests/core/test_softmax.cpp
// sweeps it against std::exp), exactly 1 at 0, 0 at -inf and below -103.97, +inf above
// ln(FLT_MAX), NaN for NaN. Used by the CPU softmax kernels (cpu/softmax.cpp) and, on the
// host, by the elementwise functors (exp_of in elementwise_functors.h).
#pragma once

#include <bit>
#include <cstdint>
#include <limits>

namespace kiln {

inline float vectorisable_exp(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693145751953125f;  // 16 significant bits
  constexpr float kLn2Lo = 1.42860676533018672e-06f;
  constexpr float kRound = 12582912.0f;          // 1.5 x 2^23
  constexpr float kMax = 88.72283935546875f;     // ln(FLT_MAX) rounded up: above it, +inf
  constexpr float kMin = -103.972084045410156f;  // below: exp rounds to 0
  const float clamped = x < kMin ? kMin : (x > kMax ? kMax : x);
  const float shifted = clamped * kLog2e + kRound;
  const float kf = shifted - kRound;
  const int32_t k = std::bit_cast<int32_t>(shifted) - std::bit_cast<int32_t>(kRound);
  const float r = (clamped - kf * kLn2Hi) - kf * kLn2Lo;
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const int32_t k1 = k >> 1, k2 = k - k1;
  const float result = p * std::bit_cast<float>((k1 + 127) << 23) * std::bit_cast<float>((k2 + 127) << 23);
  const float saturated = x > kMax ? std::numeric_limits<float>::infinity() : result;
  return x != x ? x : saturated;
}

}  // namespace kiln
