// Host (and later device) 16-bit float types: Half (IEEE binary16) and BFloat16.
//
// Both are storage types: arithmetic converts to float, computes, and rounds back on
// store (Note [Opmath]: half-precision data is computed in float32). Conversions from
// float round to nearest, ties to even, exactly as hardware converters do:
//   - Half: normal values add the rounding bias 0xfff plus the lowest kept mantissa bit
//     (so ties go to even) before dropping 13 bits; subnormals use the FPU's own
//     round-to-nearest-even by adding 0.5f, whose ulp (2^-24) is the half subnormal step;
//     values >= 65520 overflow to Inf; NaN stays a quiet NaN with its top payload bits.
//   - BFloat16: the upper 16 bits of a float, rounded with bias 0x7fff plus the lowest
//     kept bit; NaN is quieted so rounding can never turn it into Inf.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define KILN_HOST_DEVICE __host__ __device__
#else
#define KILN_HOST_DEVICE
#endif

namespace kiln {
namespace detail {

KILN_HOST_DEVICE inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

KILN_HOST_DEVICE inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

KILN_HOST_DEVICE inline uint16_t float_to_half_bits(float f) {
  const uint32_t x = float_bits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520 -> Inf
  if (abs < 0x38800000u) {  // below 2^-14: subnormal half (or zero)
    const float rounded = bits_float(abs) + 0.5f;
    return static_cast<uint16_t>(sign | (float_bits(rounded) - 0x3f000000u));
  }
  const uint32_t lowest_kept_bit = (abs >> 13) & 1u;
  abs += 0xc8000fffu + lowest_kept_bit;  // rebias exponent by -112, add the rounding bias
  return static_cast<uint16_t>(sign | (abs >> 13));
}

KILN_HOST_DEVICE inline float half_bits_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1f) return bits_float(sign | 0x7f800000u | (mantissa << 13));
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24, exact in float
    const float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-8f;
    return sign ? -magnitude : magnitude;
  }
  return bits_float(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

KILN_HOST_DEVICE inline uint16_t float_to_bfloat16_bits(float f) {
  uint32_t x = float_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

KILN_HOST_DEVICE inline float bfloat16_bits_to_float(uint16_t b) {
  return bits_float(static_cast<uint32_t>(b) << 16);
}

}  // namespace detail

struct Half {
  uint16_t bits = 0;

  Half() = default;
  KILN_HOST_DEVICE Half(float f) : bits(detail::float_to_half_bits(f)) {}
  KILN_HOST_DEVICE operator float() const { return detail::half_bits_to_float(bits); }
  KILN_HOST_DEVICE static Half from_bits(uint16_t b) {
    Half h;
    h.bits = b;
    return h;
  }
};

struct BFloat16 {
  uint16_t bits = 0;

  BFloat16() = default;
  KILN_HOST_DEVICE BFloat16(float f) : bits(detail::float_to_bfloat16_bits(f)) {}
  KILN_HOST_DEVICE operator float() const { return detail::bfloat16_bits_to_float(bits); }
  KILN_HOST_DEVICE static BFloat16 from_bits(uint16_t b) {
    BFloat16 h;
    h.bits = b;
    return h;
  }
};

static_assert(sizeof(Half) == 2 && sizeof(BFloat16) == 2);

}  // namespace kiln
