// CUDA softmax / log_softmax, forward and backward, against the CPU backend: every
// floating dtype; dim innermost (warp-per-row rows of 1..1024 and block-per-row rows past
// 1024, aligned and not), dim not innermost (channel softmax of NCDHW) and any strides;
// broadcast inputs (rank 1 too); NaN/inf rows; out aliasing in; poisoned outputs through the Backend
// interface and the public ops with their gradients. Skips without a GPU.
//
// Tolerance: the GPU sums exp() in float where the CPU sums in double, and the GPU's
// expf/logf may differ from the host's by an ulp: the dtype's tolerance times 8.
#include <cmath>
#include <limits>

#include "core/backend.h"
#include "tests/cuda/cuda_test_util.h"

namespace kiln {
namespace {

using testing::kCuda;
using testing::Layout;
constexpr double kSlack = 8.0;

struct Case {
  std::vector<int64_t> sizes;
  int64_t dim;
};

const std::vector<Case> kCases = {
    {{7}, 0},            {{3, 5}, 1},         {{3, 5}, 0},           {{129, 65}, 1},       {{4, 1000}, 1},
    {{5, 1024}, 1},      {{3, 1025}, 1},      {{2, 32000}, 1},       {{3, 4099}, 1},       {{2, 3, 4}, 1},
    {{2, 7, 3, 4, 5}, 1}, {{1, 17, 1, 3}, 1}, {{1000, 33}, 1},       {{0, 5}, 1},          {{3, 0}, 1},
    {{2, 1, 5}, 1},      {{4, 1 << 16}, 1},   {{1 << 12, 8}, 0}};

void check_forward(const Tensor& cpu_in, const Tensor& cuda_in, int64_t dim, bool log, bool strided_out) {
  const Tensor expected = zeros(cpu_in.sizes(), {.dtype = cpu_in.dtype()});
  backend(Device::cpu()).softmax(cpu_in, dim, log, expected);
  Tensor buffer;
  const Tensor actual = strided_out ? testing::poisoned_strided(cpu_in.sizes(), cpu_in.dtype(), kCuda, &buffer)
                                    : testing::poisoned(cpu_in.sizes(), cpu_in.dtype(), kCuda);
  backend(kCuda).softmax(cuda_in, dim, log, actual);
  EXPECT_TRUE(testing::matches_cpu(actual, expected, kSlack));
  if (strided_out) {
    EXPECT_TRUE(testing::gaps_untouched(buffer));
  }
}

TEST(CudaSoftmax, ForwardMatchesCpuOnEveryLayoutAndDtype) {
  KILN_REQUIRE_CUDA();
  for (bool log : {false, true}) {
    for (DType dtype : testing::kFloatingDTypes) {
      for (const Case& c : kCases) {
        for (Layout layout : testing::kLayouts) {
          for (bool strided_out : {false, true}) {
            SCOPED_TRACE(::testing::Message() << (log ? "log_softmax " : "softmax ") << dtype << " sizes "
                                              << ::testing::PrintToString(c.sizes) << " dim " << c.dim
                                              << " " << testing::layout_name(layout)
                                              << (strided_out ? " strided out" : ""));
            const auto [cpu_in, cuda_in] = testing::parity_input(c.sizes, dtype, layout, 11);
            check_forward(cpu_in, cuda_in, c.dim, log, strided_out);
          }
        }
      }
    }
  }
}

TEST(CudaSoftmax, BackwardMatchesCpuOnEveryLayoutAndDtype) {
  KILN_REQUIRE_CUDA();
  for (bool log : {false, true}) {
    for (DType dtype : testing::kFloatingDTypes) {
      for (const Case& c : kCases) {
        for (Layout layout : {Layout::Contiguous, Layout::Strided, Layout::Transposed}) {
          SCOPED_TRACE(::testing::Message() << (log ? "log_softmax_backward " : "softmax_backward ") << dtype
                                            << " sizes " << ::testing::PrintToString(c.sizes) << " dim " << c.dim
                                            << " " << testing::layout_name(layout));
          const auto [cpu_g, cuda_g] = testing::parity_input(c.sizes, dtype, layout, 12);
          // A real softmax output as y.
          const Tensor cpu_y = zeros(c.sizes, {.dtype = dtype});
          backend(Device::cpu()).softmax(testing::random_for(c.sizes, dtype, 13), c.dim, log, cpu_y);
          const Tensor cuda_y = testing::on_device(cpu_y, kCuda, layout == Layout::Strided);
          const Tensor expected = zeros(c.sizes, {.dtype = dtype});
          backend(Device::cpu()).softmax_backward(cpu_g, cpu_y, c.dim, log, expected);
          Tensor buffer;
          const Tensor actual = testing::poisoned_strided(c.sizes, dtype, kCuda, &buffer);
          backend(kCuda).softmax_backward(cuda_g, cuda_y, c.dim, log, actual);
          EXPECT_TRUE(testing::matches_cpu(actual, expected, kSlack));
          EXPECT_TRUE(testing::gaps_untouched(buffer));
        }
      }
    }
  }
}

TEST(CudaSoftmax, OutputMayAliasTheInput) {
  KILN_REQUIRE_CUDA();
  for (const Case& c : {Case{{6, 100}, 1}, Case{{3, 5000}, 1}, Case{{2, 9, 4, 4}, 1}}) {
    for (bool log : {false, true}) {
      const Tensor x = testing::random_for(c.sizes, DType::Float32, 21);
      const Tensor expected = zeros(c.sizes);
      backend(Device::cpu()).softmax(x, c.dim, log, expected);
      const Tensor in_place = x.to(kCuda);
      backend(kCuda).softmax(in_place, c.dim, log, in_place);
      EXPECT_TRUE(testing::matches_cpu(in_place, expected, kSlack));
      // Backward in place over grad_out.
      const Tensor g = testing::random_for(c.sizes, DType::Float32, 22);
      const Tensor expected_grad = zeros(c.sizes);
      backend(Device::cpu()).softmax_backward(g, expected, c.dim, log, expected_grad);
      const Tensor grad = g.to(kCuda);
      backend(kCuda).softmax_backward(grad, in_place, c.dim, log, grad);
      EXPECT_TRUE(testing::matches_cpu(grad, expected_grad, kSlack));
    }
  }
}

// Rows that are all -inf, hold one +inf, a NaN, or -inf mixed with finite values.
TEST(CudaSoftmax, NanAndInfRowsFollowTheCpu) {
  KILN_REQUIRE_CUDA();
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (int64_t n : {5, 300, 3000}) {
    Tensor x = testing::random_for({5, n}, DType::Float64, 31);
    Tensor row_kind = zeros({5, n}, {.dtype = DType::Int64});
    // Row 0 all -inf; row 1 has +inf at n/2; row 2 NaN at 1; row 3 -inf in its first half.
    const Tensor col = arange(n, {.dtype = DType::Int64}).reshape({1, n}).expand({5, n});
    const Tensor row = arange(5, {.dtype = DType::Int64}).reshape({5, 1}).expand({5, n});
    x = where(eq(row, 0), full({5, n}, -inf, {.dtype = DType::Float64}), x);
    x = where(logical_and(eq(row, 1), eq(col, n / 2)), full({5, n}, inf, {.dtype = DType::Float64}), x);
    x = where(logical_and(eq(row, 2), eq(col, 1)), full({5, n}, nan, {.dtype = DType::Float64}), x);
    x = where(logical_and(eq(row, 3), lt(col, n / 2)), full({5, n}, -inf, {.dtype = DType::Float64}), x);
    for (DType dtype : testing::kFloatingDTypes) {
      for (bool log : {false, true}) {
        SCOPED_TRACE(::testing::Message() << dtype << " n " << n << (log ? " log" : ""));
        const Tensor xd = x.to(dtype);
        check_forward(xd, xd.to(kCuda), 1, log, false);
        const Tensor channels = xd.reshape({5, n, 1}).expand({5, n, 3}).contiguous();
        check_forward(channels, channels.to(kCuda), 1, log, false);
      }
    }
  }
}

TEST(CudaSoftmax, PublicOpsAndTheirGradientsMatchCpu) {
  KILN_REQUIRE_CUDA();
  for (DType dtype : {DType::Float32, DType::Float64}) {
    for (const Case& c : {Case{{8, 1000}, 1}, Case{{2, 5000}, -1}, Case{{2, 6, 3, 4, 5}, 1}, Case{{7, 9}, 0}}) {
      for (bool log : {false, true}) {
        SCOPED_TRACE(::testing::Message() << dtype << " sizes " << ::testing::PrintToString(c.sizes) << " dim "
                                          << c.dim << (log ? " log_softmax" : " softmax"));
        const Tensor x = testing::random_for(c.sizes, dtype, 41);
        const Tensor a = x.detach().requires_grad_(true);
        const Tensor b = x.to(kCuda).detach().requires_grad_(true);
        const Tensor ya = log ? log_softmax(a, c.dim) : softmax(a, c.dim);
        const Tensor yb = log ? log_softmax(b, c.dim) : softmax(b, c.dim);
        EXPECT_TRUE(testing::matches_cpu(yb, ya, kSlack));
        const Tensor g = testing::random_for(c.sizes, dtype, 42);
        ya.backward(g);
        yb.backward(g.to(kCuda));
        EXPECT_TRUE(testing::matches_cpu(b.grad(), a.grad(), kSlack));
      }
    }
  }
}

}  // namespace
}  // namespace kiln
