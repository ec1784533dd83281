// Generator: the seed and position of a device's random stream (Philox4x32-10).
//
// Note [Philox streams]: a random op on n elements takes the generator's state
// (seed, offset) and advances the offset by ceil(n / 2). Element i uses the Philox block
// b = offset + i / 2: counter = (lo32(b), hi32(b), 0, 0), key = (lo32(seed), hi32(seed)),
// and the two 32-bit words r0 = out[2 * (i % 2)], r1 = out[2 * (i % 2) + 1]:
//   uniform float types:  u = (r0 >> (32 - d)) * 2^-d with d the type's significand
//                          bits (24 float32, 11 float16, 8 bfloat16: u is exact in the
//                          type, so rounding on store can never turn it into 1), or for
//                          float64 u = ((r0 << 32 | r1) >> 11) * 2^-53;
//                          x = low + u * (high - low) (in float, or double for float64)
//   normal:               Box-Muller in double, u1 = (r0 + 1) * 2^-32, u2 = r1 * 2^-32,
//                          x = mean + std * sqrt(-2 ln u1) * cos(2 pi u2)
//   randint:              low + (r0 << 32 | r1) mod (high - low)
//   bernoulli(p):         (r0 >> 8) * 2^-24 < p
//   randperm(n):          stable argsort of the 64-bit keys (r0 << 32 | r1)
// Every backend implements exactly this, so one seed gives the same numbers on every
// device. The helpers below are the shared definition (host and device).
//
// Note [Philox under capture]: a CUDA graph replays the arguments its kernels were
// captured with, so a seed and offset passed by value would make every replay draw the
// same numbers. So while a graph captures (core/cuda_graph.h), its generators hand out
// states that point at device memory: PhiloxState::base holds {seed, offset} there, and
// `offset` is relative to it, counting the blocks reserved since the capture began. A
// kernel resolves the state when it runs (philox_resolve). Before each replay the graph
// writes {seed, the generator's offset now} into base and advances the generator past the
// blocks the captured work draws, so replay k draws exactly what the k-th eager run of
// the same work would have drawn: random ops differ from step to step as in eager mode,
// and a replayed run equals an eager one bit for bit.
#pragma once

#include <cmath>
#include <cstdint>
#include <mutex>
#include <thread>

#include "core/device.h"
#include "core/philox.h"

namespace kiln {

struct PhiloxState {
  uint64_t seed = 0;
  uint64_t offset = 0;  // in Philox blocks
  // Note [Philox under capture]: when set, {seed, offset} are read from base[0], base[1]
  // as the kernel runs, and `offset` is added to base[1] (memory on the op's device).
  const uint64_t* base = nullptr;
};

// The seed and absolute offset of a state (reads base where it is set: call it where the
// state's device memory is readable, i.e. inside the kernel).
KILN_HOST_DEVICE inline PhiloxState philox_resolve(PhiloxState s) {
  if (s.base == nullptr) return s;
  return {s.base[0], s.base[1] + s.offset, nullptr};
}

// The two 32-bit words of element i (Note [Philox streams]) of a resolved state.
KILN_HOST_DEVICE inline void philox_words(PhiloxState s, uint64_t i, uint32_t& r0, uint32_t& r1) {
  const uint64_t block = s.offset + i / 2;
  const Philox4x32 counter = {{static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32), 0u, 0u}};
  const Philox4x32 out =
      philox4x32_10(counter, static_cast<uint32_t>(s.seed), static_cast<uint32_t>(s.seed >> 32));
  const int lane = static_cast<int>(i % 2) * 2;
  r0 = out.v[lane];
  r1 = out.v[lane + 1];
}

// Significand bits of a floating type: how many random bits its uniform draw keeps.
template <typename T> inline constexpr int kUniformDigits = 24;
template <> inline constexpr int kUniformDigits<Half> = 11;
template <> inline constexpr int kUniformDigits<BFloat16> = 8;

// u in [0, 1) from the top `digits` bits of r0 (a multiple of 2^-digits).
KILN_HOST_DEVICE inline float philox_uniform_float(uint32_t r0, int digits = 24) {
  return static_cast<float>(r0 >> (32 - digits)) / static_cast<float>(1u << digits);
}

KILN_HOST_DEVICE inline double philox_uniform_double(uint32_t r0, uint32_t r1) {
  const uint64_t bits = (static_cast<uint64_t>(r0) << 32 | r1) >> 11;
  return static_cast<double>(bits) * 1.1102230246251565e-16;  // 2^-53
}

KILN_HOST_DEVICE inline double philox_normal(uint32_t r0, uint32_t r1) {
  const double u1 = (static_cast<double>(r0) + 1.0) * 2.3283064365386963e-10;  // (0, 1]
  const double u2 = static_cast<double>(r1) * 2.3283064365386963e-10;          // [0, 1)
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

KILN_HOST_DEVICE inline uint64_t philox_u64(uint32_t r0, uint32_t r1) {
  return static_cast<uint64_t>(r0) << 32 | r1;
}

inline constexpr uint64_t kDefaultSeed = 67280421310721ull;

class Generator {
 public:
  explicit Generator(uint64_t seed = kDefaultSeed) : seed_(seed) {}

  // Restarts the stream: seed = `seed`, offset = 0.
  void manual_seed(uint64_t seed);
  uint64_t seed() const;
  uint64_t offset() const;
  void set_state(PhiloxState state);
  PhiloxState state() const;
  // The state a random op on `numel` elements starts from; advances past its blocks.
  // During a capture: relative to the capture's base (Note [Philox under capture]).
  PhiloxState reserve(uint64_t numel);
  // The state `blocks` Philox blocks start from, advancing past them (what a graph's
  // replay takes for the draws it replays). Not during a capture.
  PhiloxState advance(uint64_t blocks);

  // ---- CUDA graph capture (Note [Philox under capture]) -----------------------------------
  // From begin_capture to end_capture, on the thread that called begin_capture (a graph
  // captures that thread's work only), reserve() hands out states relative to `base` (two
  // uint64 words in the memory of `device`, written before each replay) and leaves the
  // generator's own offset alone, and state() and set_state() see the capture's relative
  // offset (so activation checkpointing rewinds within the capture); other threads draw
  // eagerly as ever. manual_seed is an error meanwhile. end_capture returns the blocks
  // reserved during the capture. One capture at a time.
  void begin_capture(Device device, const uint64_t* base);
  uint64_t end_capture();
  // Whether a capture on the calling thread draws from this generator.
  bool capturing() const;
  // The device of the capture under way (meaningful only while capturing()).
  Device capture_device() const;

 private:
  bool capturing_here() const;  // under mutex_

  mutable std::mutex mutex_;
  uint64_t seed_;
  uint64_t offset_ = 0;
  const uint64_t* capture_base_ = nullptr;  // set while capturing
  std::thread::id capture_thread_;
  Device capture_device_;
  uint64_t capture_offset_ = 0;  // blocks reserved since begin_capture
};

// The default generator of a device (one per device type and index).
Generator& default_generator(Device device);
// Seeds the default generators of every device (torch.manual_seed).
void manual_seed(uint64_t seed);

}  // namespace kiln
