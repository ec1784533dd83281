// The pooling geometry helpers of core/pool_geometry.h, which both backends' kernels
// call (the CUDA ones on the device, so a wrong range there shows up nowhere without a
// GPU), checked on the host against brute force over every small geometry the op layer
// accepts (padding <= kernel / 2, an output size >= 1): the taps of a max window, the
// outputs whose windows hold an input element (the gather backward's loop bounds), the
// average windows and the adaptive windows.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>

#include "core/pool_geometry.h"

namespace kiln {
namespace {

// One dim of a geometry the op layer accepts, seen as a PoolGeometry's last slot.
struct Dim {
  int64_t size, kernel, stride, pad, dilation;
  bool ceil_mode;
};

PoolGeometry geometry_of(const Dim& d, int64_t out) {
  PoolGeometry g;
  g.in[2] = d.size;
  g.out[2] = out;
  g.kernel[2] = d.kernel;
  g.stride[2] = d.stride;
  g.pad[2] = d.pad;
  g.dilation[2] = d.dilation;
  return g;
}

// Calls fn(dim, output size) for every accepted geometry with sizes up to 11, kernels up
// to 5, strides up to 4 and dilations up to 3, both ceil modes.
template <typename Fn>
void for_each_dim(const Fn& fn) {
  for (int64_t size = 1; size <= 11; ++size) {
    for (int64_t kernel = 1; kernel <= 5; ++kernel) {
      for (int64_t stride = 1; stride <= 4; ++stride) {
        for (int64_t pad = 0; pad <= kernel / 2; ++pad) {
          for (int64_t dilation = 1; dilation <= 3; ++dilation) {
            for (bool ceil_mode : {false, true}) {
              const Dim d{size, kernel, stride, pad, dilation, ceil_mode};
              const int64_t out = pool_output_size(size, kernel, stride, pad, dilation, ceil_mode).value();
              if (out >= 1) fn(d, out);
            }
          }
        }
      }
    }
  }
}

::testing::Message describe(const Dim& d, int64_t out) {
  return ::testing::Message() << "size " << d.size << " kernel " << d.kernel << " stride " << d.stride << " pad "
                              << d.pad << " dilation " << d.dilation << " ceil " << d.ceil_mode << " out " << out;
}

TEST(PoolGeometry, WindowsStartInsideTheInputOrItsLeftPadding) {
  for_each_dim([](const Dim& d, int64_t out) {
    SCOPED_TRACE(describe(d, out));
    const int64_t span = d.dilation * (d.kernel - 1) + 1;
    for (int64_t o = 0; o < out; ++o) EXPECT_LT(o * d.stride - d.pad, d.size);
    if (!d.ceil_mode) {
      // Every window lies inside the padded input, and one more would not.
      EXPECT_LE((out - 1) * d.stride - d.pad + span, d.size + d.pad);
      EXPECT_GT(out * d.stride - d.pad + span, d.size + d.pad);
    } else {
      // One more window would start in the right padding or past the padded input's
      // coverage by the last window.
      const bool next_starts_outside = out * d.stride - d.pad >= d.size;
      const bool last_reaches_the_end = (out - 1) * d.stride - d.pad + span >= d.size + d.pad;
      EXPECT_TRUE(next_starts_outside || last_reaches_the_end);
    }
  });
}

TEST(PoolGeometry, ValidTapsAreExactlyTheTapsInsideTheInput) {
  for_each_dim([](const Dim& d, int64_t out) {
    SCOPED_TRACE(describe(d, out));
    for (int64_t o = 0; o < out; ++o) {
      const int64_t start = o * d.stride - d.pad;
      int64_t first = 0, last = 0;
      valid_taps(start, d.kernel, d.dilation, d.size, &first, &last);
      for (int64_t j = 0; j < d.kernel; ++j) {
        const int64_t x = start + j * d.dilation;
        EXPECT_EQ(j >= first && j < last, x >= 0 && x < d.size) << "output " << o << " tap " << j;
      }
    }
  });
}

// The gather backward visits, for input x, the outputs [first, last): it must include
// every output with a tap on x (else a gradient is lost) and only outputs whose window
// span [start, start + dilation (kernel - 1)] holds x (so the loop is as short as it can
// be without knowing the taps), each once.
TEST(PoolGeometry, OutputsCoveringIsEveryWindowThatCanHoldTheElement) {
  for_each_dim([](const Dim& d, int64_t out) {
    SCOPED_TRACE(describe(d, out));
    const PoolGeometry g = geometry_of(d, out);
    for (int64_t x = 0; x < d.size; ++x) {
      int64_t first = 0, last = 0;
      outputs_covering(g, 2, x, &first, &last);
      for (int64_t o = 0; o < out; ++o) {
        const int64_t start = o * d.stride - d.pad;
        const bool in_span = start <= x && x <= start + d.dilation * (d.kernel - 1);
        const bool on_tap = in_span && (x - start) % d.dilation == 0;
        const bool visited = o >= first && o < last;
        EXPECT_EQ(visited, in_span) << "input " << x << " output " << o;
        if (on_tap) {
          EXPECT_TRUE(visited) << "input " << x << " output " << o;
        }
      }
    }
  });
}

TEST(PoolGeometry, AverageWindowsAreClippedAndNeverEmpty) {
  for_each_dim([](const Dim& d, int64_t out) {
    if (d.dilation != 1) return;  // average pooling has none
    SCOPED_TRACE(describe(d, out));
    const PoolGeometry g = geometry_of(d, out);
    for (int64_t o = 0; o < out; ++o) {
      const PoolRange r = avg_pool_range(g, 2, o);
      const int64_t start = o * d.stride - d.pad;
      EXPECT_EQ(r.begin, std::max<int64_t>(start, 0)) << "output " << o;
      EXPECT_EQ(r.end, std::min(start + d.kernel, d.size)) << "output " << o;
      EXPECT_LT(r.begin, r.end) << "output " << o;
      EXPECT_EQ(r.padded, std::min(start + d.kernel, d.size + d.pad) - start) << "output " << o;
      EXPECT_GE(r.padded, r.end - r.begin) << "output " << o;
    }
  });
}

TEST(PoolGeometry, AdaptiveWindowsAndTheirCoveringOutputsAgree) {
  for (int64_t s = 1; s <= 13; ++s) {
    for (int64_t o = 1; o <= 13; ++o) {
      SCOPED_TRACE(::testing::Message() << "size " << s << " output " << o);
      PoolGeometry g;
      g.in[2] = s;
      g.out[2] = o;
      std::vector<int> hits(static_cast<size_t>(s), 0);
      for (int64_t i = 0; i < o; ++i) {
        const PoolRange r = adaptive_pool_range(g, 2, i);
        EXPECT_LT(r.begin, r.end);
        EXPECT_EQ(r.padded, r.end - r.begin);
        EXPECT_GE(r.begin, 0);
        EXPECT_LE(r.end, s);
        for (int64_t x = r.begin; x < r.end; ++x) ++hits[static_cast<size_t>(x)];
      }
      for (int64_t x = 0; x < s; ++x) {
        EXPECT_GE(hits[static_cast<size_t>(x)], 1) << "input " << x << " is in no window";
        int64_t first = 0, last = 0;
        adaptive_outputs_covering(g, 2, x, &first, &last);
        for (int64_t i = 0; i < o; ++i) {
          const PoolRange r = adaptive_pool_range(g, 2, i);
          EXPECT_EQ(i >= first && i < last, r.begin <= x && x < r.end) << "input " << x << " output " << i;
        }
      }
    }
  }
}

}  // namespace
}  // namespace kiln
