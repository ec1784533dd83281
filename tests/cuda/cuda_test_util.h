// Helpers of the CUDA parity suites (tests/cuda/): every CUDA kernel is run on the same
// random, non-zero inputs as the CPU backend (contiguous, non-contiguous, broadcast,
// empty and odd-sized) in each dtype it supports, and the results compared with the
// per-dtype tolerance table (tests/test_util.h).
//
// The suites use only core's public API and the Backend interface, so they compile in
// every build; without a GPU each test skips with the reason (KILN_REQUIRE_CUDA).
//
// Note [Poisoned outputs]: a kernel that forgets to write some elements would pass if its
// output happened to hold the right values already. So kernels are called through the
// Backend interface with an output made by poisoned(): NaN for floating dtypes, a value
// no test produces for integers, and for bool each test runs twice, with true and with
// false. A non-contiguous output is a strided view into a poisoned buffer, and
// expect_gaps_untouched() checks that the elements between the view's elements are
// still poison afterwards, so a kernel that writes outside its view fails too.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "core/flags.h"
#include "core/ops.h"
#include "tests/test_util.h"

// Skips the current test, with the reason, when CUDA cannot be used here.
#define KILN_REQUIRE_CUDA()                                                                  \
  do {                                                                                       \
    if (!::kiln::cuda_is_available()) {                                                      \
      GTEST_SKIP() << "CUDA is not available: " << ::kiln::cuda_unavailable_reason();        \
    }                                                                                        \
  } while (0)

namespace kiln::testing {

inline const Device kCuda = Device::cuda(0);

inline const std::vector<DType> kFloatingDTypes = {DType::Float32, DType::Float64, DType::Float16,
                                                   DType::BFloat16};
inline const std::vector<DType> kIntegralDTypes = {DType::Int64, DType::Int32, DType::UInt8};
inline const std::vector<DType> kNumericDTypes = {DType::Float32, DType::Float64, DType::Float16,
                                                  DType::BFloat16, DType::Int64, DType::Int32,
                                                  DType::UInt8};
inline const std::vector<DType> kAllDTypes = {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16,
                                              DType::Int64,   DType::Int32,   DType::UInt8,   DType::Bool};

// The poison value of Note [Poisoned outputs] (`variant` 1 for bool's second run).
Scalar poison_value(DType dtype, int variant = 0);
// A contiguous tensor full of poison on `device`.
Tensor poisoned(const std::vector<int64_t>& sizes, DType dtype, Device device, int variant = 0);

// A poisoned, non-contiguous output: a view taking every other element of the last dim
// of a poisoned buffer (`buffer` receives the whole buffer, for expect_gaps_untouched).
Tensor poisoned_strided(const std::vector<int64_t>& sizes, DType dtype, Device device, Tensor* buffer,
                        int variant = 0);
// The elements of `buffer` that poisoned_strided()'s view does not cover are still poison.
::testing::AssertionResult gaps_untouched(const Tensor& buffer, int variant = 0);

// `t` (any device) on `device` with the same values, laid out as `t` is laid out when it
// is contiguous, or non-contiguously (non_contiguous() in test_util.h) when `strided`.
Tensor on_device(const Tensor& t, Device device, bool strided = false);

// How a parity test lays its input out: contiguous, non-contiguous (non_contiguous() in
// test_util.h), transposed (first and last dims swapped in memory), or broadcast (the
// first dim expanded from size 1, stride 0). Rank 0 is always contiguous; rank 1 cannot
// be transposed and is contiguous then.
enum class Layout { Contiguous, Strided, Transposed, Broadcast };
inline const std::vector<Layout> kLayouts = {Layout::Contiguous, Layout::Strided, Layout::Transposed,
                                             Layout::Broadcast};
const char* layout_name(Layout layout);

// The same random_for() values on the CPU and on `kCuda`, laid out as `layout` says.
std::pair<Tensor, Tensor> parity_input(const std::vector<int64_t>& sizes, DType dtype, Layout layout,
                                       uint64_t seed);

// all_close between a CUDA result and the CPU result with `dtype`'s tolerance scaled by
// `slack` (kernels that sum in a different order or use the GPU's exp/log may differ by
// more than one rounding).
::testing::AssertionResult matches_cpu(const Tensor& cuda_result, const Tensor& cpu_result, double slack = 1.0);

// Shapes every parity test covers: scalar-like, odd sizes, one that is not a multiple of
// any vector width, a large one that needs many blocks, and an empty one.
inline const std::vector<std::vector<int64_t>> kParityShapes = {
    {}, {1}, {7}, {3, 5}, {2, 3, 4}, {1, 17, 1, 3}, {129, 65}, {4, 3, 1031}, {0, 5}, {3, 0, 2}};

}  // namespace kiln::testing
