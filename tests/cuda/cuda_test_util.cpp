// Helpers of the CUDA parity suites (see cuda_test_util.h).
#include "tests/cuda/cuda_test_util.h"

#include <cmath>
#include <limits>
#include <utility>

namespace kiln::testing {

Scalar poison_value(DType dtype, int variant) {
  switch (dtype) {
    case DType::Bool: return Scalar(variant == 0);
    case DType::UInt8: return Scalar(int64_t{251});
    case DType::Int32: return Scalar(int64_t{-1234567891});
    case DType::Int64: return Scalar(int64_t{-1234567890123456789});
    default: return Scalar(std::numeric_limits<double>::quiet_NaN());
  }
}

Tensor poisoned(const std::vector<int64_t>& sizes, DType dtype, Device device, int variant) {
  return full(sizes, poison_value(dtype, variant), {.dtype = dtype, .device = device});
}

Tensor poisoned_strided(const std::vector<int64_t>& sizes, DType dtype, Device device, Tensor* buffer,
                        int variant) {
  std::vector<int64_t> big = sizes;
  if (big.empty()) big.push_back(1);
  big.back() *= 2;
  *buffer = poisoned(big, dtype, device, variant);
  Tensor view = buffer->slice(-1, 0, std::nullopt, 2);
  return sizes.empty() ? view.reshape({}) : view;
}

::testing::AssertionResult gaps_untouched(const Tensor& buffer, int variant) {
  const Tensor gaps = buffer.slice(-1, 1, std::nullopt, 2);
  const Tensor expected = poisoned(gaps.sizes(), gaps.dtype(), Device::cpu(), variant);
  const ::testing::AssertionResult same = all_equal(gaps.to(Device::cpu()), expected);
  if (!same) return ::testing::AssertionFailure() << "a kernel wrote outside its output view: " << same.message();
  return same;
}

Tensor on_device(const Tensor& t, Device device, bool strided) {
  Tensor moved = t.to(device);
  return strided ? non_contiguous(moved) : moved;
}

const char* layout_name(Layout layout) {
  switch (layout) {
    case Layout::Contiguous: return "contiguous";
    case Layout::Strided: return "strided";
    case Layout::Transposed: return "transposed";
    case Layout::Broadcast: return "broadcast";
  }
  return "?";
}

std::pair<Tensor, Tensor> parity_input(const std::vector<int64_t>& sizes, DType dtype, Layout layout,
                                       uint64_t seed) {
  const int64_t rank = static_cast<int64_t>(sizes.size());
  if (layout == Layout::Transposed && rank >= 2) {
    std::vector<int64_t> swapped = sizes;
    std::swap(swapped.front(), swapped.back());
    const Tensor base = random_for(swapped, dtype, seed);
    return {base.transpose(0, rank - 1), base.to(kCuda).transpose(0, rank - 1)};
  }
  if (layout == Layout::Broadcast && rank >= 1) {
    std::vector<int64_t> one = sizes;
    one.front() = 1;
    const Tensor base = random_for(one, dtype, seed);
    return {base.expand(sizes), base.to(kCuda).expand(sizes)};
  }
  const Tensor x = random_for(sizes, dtype, seed);
  return {x, on_device(x, kCuda, layout == Layout::Strided)};
}

::testing::AssertionResult matches_cpu(const Tensor& cuda_result, const Tensor& cpu_result, double slack) {
  if (cuda_result.dtype() != cpu_result.dtype()) {
    return ::testing::AssertionFailure() << "dtype " << cuda_result.dtype() << " on CUDA vs " << cpu_result.dtype()
                                         << " on the CPU";
  }
  Tolerance tol = tolerance_for(cpu_result.dtype());
  tol.atol *= slack;
  tol.rtol *= slack;
  return all_close(cuda_result.to(Device::cpu()), cpu_result, tol);
}

}  // namespace kiln::testing
