// The conversion of a casting copy (dst = cast(src)), shared by the CPU and CUDA backends
// so both give the same bytes.
//
// Both engines load src in its opmath type (float for Half/BFloat16) and convert to the
// destination type on store, with static_cast. That is well defined except for a
// floating value out of the destination's range, and one case is common: floating ->
// uint8 of a negative value. A direct float -> uint8 conversion wraps on x86 (through a
// 32-bit integer) but saturates on AArch64 and on the GPU, so it goes through int64
// here: -1.5 -> -1 -> 255 everywhere, as in PyTorch.
#pragma once

#include <cstdint>
#include <type_traits>

#include "core/half.h"  // KILN_HOST_DEVICE

namespace kiln::functors {

// The identity in the source's opmath type M, except floating -> uint8 (D), see above.
template <typename M, typename D>
struct Cast {
  KILN_HOST_DEVICE auto operator()(M v) const {
    if constexpr (std::is_same_v<D, uint8_t> && std::is_floating_point_v<M>) {
      return static_cast<int64_t>(v);
    } else {
      return v;
    }
  }
};

}  // namespace kiln::functors
