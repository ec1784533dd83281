// Per-step values on the device: small numbers written into device memory in stream order.
//
// Note [Per-step values on the device]: a CUDA graph replays its kernels with the
// arguments they were captured with, so a number that changes from step to step cannot
// be a kernel argument of the captured step: the learning rate a scheduler sets (Note
// [Scheduled options on the device], optim/optimizer.h), the seed and offset random ops
// draw from (Note [Philox under capture], core/generator.h). Such a number lives in a
// small device tensor that the captured kernels read as they run, and the host writes
// it before each replay with write_words_: one launch whose arguments carry the values,
// queued on the current stream ahead of the replay. Nothing is staged in a host buffer,
// so nothing can be overwritten before the copy has read it, and writing the same
// tensor again at once (the next step's value) is safe.
//
//   Tensor lr = empty({1}, {.dtype = DType::Float64, .device = Device::cuda()});
//   write_doubles_(lr, {{scheduler.lr()}});   // before each replay
//   graph.replay();                           // its kernels read lr[0]
#pragma once

#include <cstdint>
#include <span>

#include "core/tensor.h"

namespace kiln {

// dst = words: `dst` contiguous, of an 8-byte dtype (Int64, Float64), with exactly
// words.size() elements, at most kMaxWrittenWords (16, core/backend.h). Not
// differentiable; allowed during a capture (the write is then part of the graph).
void write_words_(const Tensor& dst, std::span<const uint64_t> words);
// The same for doubles, bit for bit (dst Float64).
void write_doubles_(const Tensor& dst, std::span<const double> values);

}  // namespace kiln
