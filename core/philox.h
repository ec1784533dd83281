// Philox4x32-10, the counter-based random number generator (Salmon et al., SC'11).
//
// A pure function of a 128-bit counter and a 64-bit key: ten rounds of two 32x32->64
// multiplies with xors, the key bumped by the Weyl constants between rounds. Being a
// function (no sequential state) it gives every element of a tensor its own numbers in
// parallel, identically on the CPU and in CUDA kernels (this header compiles for both).
// The mapping from elements to counters is Note [Philox streams] in core/generator.h.
#pragma once

#include <cstdint>

#include "core/half.h"  // KILN_HOST_DEVICE

namespace kiln {

struct Philox4x32 {
  uint32_t v[4];
};

KILN_HOST_DEVICE inline void philox_mulhilo(uint32_t a, uint32_t b, uint32_t& hi, uint32_t& lo) {
  const uint64_t product = static_cast<uint64_t>(a) * b;
  hi = static_cast<uint32_t>(product >> 32);
  lo = static_cast<uint32_t>(product);
}

KILN_HOST_DEVICE inline Philox4x32 philox4x32_10(Philox4x32 counter, uint32_t key0, uint32_t key1) {
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  uint32_t* c = counter.v;
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      key0 += kWeyl0;
      key1 += kWeyl1;
    }
    uint32_t hi0, lo0, hi1, lo1;
    philox_mulhilo(kMul0, c[0], hi0, lo0);
    philox_mulhilo(kMul1, c[2], hi1, lo1);
    const Philox4x32 next = {{hi1 ^ c[1] ^ key0, lo1, hi0 ^ c[3] ^ key1, lo0}};
    counter = next;
  }
  return counter;
}

}  // namespace kiln
