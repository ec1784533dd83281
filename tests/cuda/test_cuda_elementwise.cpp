// CUDA parity of the elementwise engine's users (unary, binary, where) against the CPU
// backend: every UnaryOp and BinaryOp code of the op table (core/op_table.h, so a new code
// is tested without editing a list) in every dtype, on kParityShapes, with contiguous,
// non-contiguous, broadcast (stride 0), misaligned (offset 1 into the storage, so the
// vector path must fall back) and in-place operands, into poisoned and
// poisoned-strided outputs (Note [Poisoned outputs]). Which dtypes an op supports is
// asked of the CPU backend: an unsupported dtype must give the same kiln::Error on CUDA.
// A > 2^31-byte tensor exercises the 32-bit index splitting (Note [32-bit indexing]).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <sstream>

#include "core/backend.h"
#include "tests/cuda/cuda_test_util.h"

namespace kiln::testing {
namespace {

// GPU transcendental functions differ from the host's by a few ulp.
constexpr double kSlack = 4.0;

const ElementwiseParams kParams{.alpha = 0.7, .beta = 3.0, .lower = -1.0, .upper = 1.25};

enum class Layout { Contiguous, Strided, Broadcast, Misaligned };
const Layout kLayouts[] = {Layout::Contiguous, Layout::Strided, Layout::Broadcast, Layout::Misaligned};

// `cpu` on the GPU in `layout`: Broadcast expands the last dim's values along the others.
Tensor operand(const std::vector<int64_t>& sizes, DType dtype, uint64_t seed, Layout layout) {
  int64_t n = 1;
  for (int64_t size : sizes) n *= size;
  switch (layout) {
    case Layout::Contiguous: return on_device(random_for(sizes, dtype, seed), kCuda);
    case Layout::Strided: return on_device(random_for(sizes, dtype, seed), kCuda, /*strided=*/true);
    case Layout::Broadcast: {
      if (sizes.empty()) return on_device(random_for(sizes, dtype, seed), kCuda);
      return on_device(random_for({sizes.back()}, dtype, seed), kCuda).expand(sizes);
    }
    case Layout::Misaligned: {
      const Tensor storage = on_device(random_for({n + 1}, dtype, seed), kCuda);
      return storage.slice(0, 1, n + 1).reshape(sizes);
    }
  }
  return {};
}

// The CPU's answer, or the message of the kiln::Error it gives.
struct CpuAnswer {
  Tensor out;
  std::optional<std::string> error;
};

CpuAnswer cpu_answer(const std::function<void(const Tensor& out)>& kernel, const std::vector<int64_t>& sizes,
                     DType out_dtype) {
  Tensor out = empty(sizes, {.dtype = out_dtype});
  try {
    kernel(out);
  } catch (const Error& e) {
    return {Tensor(), std::string(e.what())};
  }
  return {out, std::nullopt};
}

// Runs `cuda_kernel` into a poisoned and a poisoned-strided output (both bool variants)
// and compares with `expected`, or expects the same error.
void check_outputs(const std::function<void(const Tensor& out)>& cuda_kernel, const CpuAnswer& expected,
                   const std::vector<int64_t>& sizes, DType out_dtype, const std::string& what) {
  SCOPED_TRACE(what);
  if (expected.error) {
    EXPECT_KILN_ERROR(cuda_kernel(poisoned(sizes, out_dtype, kCuda)), *expected.error);
    return;
  }
  const int variants = out_dtype == DType::Bool ? 2 : 1;
  for (int variant = 0; variant < variants; ++variant) {
    const Tensor out = poisoned(sizes, out_dtype, kCuda, variant);
    cuda_kernel(out);
    EXPECT_TRUE(matches_cpu(out, expected.out, kSlack));
    Tensor buffer;
    const Tensor strided = poisoned_strided(sizes, out_dtype, kCuda, &buffer, variant);
    cuda_kernel(strided);
    EXPECT_TRUE(matches_cpu(strided, expected.out, kSlack));
    EXPECT_TRUE(gaps_untouched(buffer, variant));
  }
}

std::string describe(const char* op, DType dtype, const std::vector<int64_t>& sizes, Layout layout) {
  std::ostringstream s;
  s << op << " " << dtype << " [";
  for (int64_t size : sizes) s << size << " ";
  s << "] layout " << static_cast<int>(layout);
  return s.str();
}

void check_unary(UnaryOp op, DType dtype, const std::vector<int64_t>& sizes, Layout layout,
                 const ElementwiseParams& params) {
  const DType out_dtype = op_info(op).bool_result ? DType::Bool : dtype;
  const Tensor in = operand(sizes, dtype, 11, layout);
  const Tensor in_cpu = in.to(Device::cpu());
  const CpuAnswer expected = cpu_answer(
      [&](const Tensor& out) { backend(Device::cpu()).unary(op, in_cpu, out, params); }, sizes, out_dtype);
  check_outputs([&](const Tensor& out) { backend(kCuda).unary(op, in, out, params); }, expected, sizes, out_dtype,
                describe(op_name(op), dtype, sizes, layout));
}

void check_binary(BinaryOp op, DType dtype, const std::vector<int64_t>& sizes, Layout layout) {
  const DType out_dtype = op_info(op).bool_result ? DType::Bool : dtype;
  const Tensor a = operand(sizes, dtype, 21, layout);
  const Tensor b = operand(sizes, dtype, 22, layout == Layout::Broadcast ? Layout::Contiguous : layout);
  const Tensor a_cpu = a.to(Device::cpu()), b_cpu = b.to(Device::cpu());
  const CpuAnswer expected = cpu_answer(
      [&](const Tensor& out) { backend(Device::cpu()).binary(op, a_cpu, b_cpu, out, kParams); }, sizes, out_dtype);
  check_outputs([&](const Tensor& out) { backend(kCuda).binary(op, a, b, out, kParams); }, expected, sizes,
                out_dtype, describe(op_name(op), dtype, sizes, layout));
}

TEST(CudaElementwise, EveryUnaryOpMatchesTheCpu) {
  KILN_REQUIRE_CUDA();
  for (int code = 0; code < kNumUnaryOps; ++code)
    for (DType dtype : kAllDTypes)
      for (const auto& sizes : kParityShapes)
        for (Layout layout : kLayouts) check_unary(static_cast<UnaryOp>(code), dtype, sizes, layout, kParams);
}

TEST(CudaElementwise, EveryBinaryOpMatchesTheCpu) {
  KILN_REQUIRE_CUDA();
  for (int code = 0; code < kNumBinaryOps; ++code)
    for (DType dtype : kAllDTypes)
      for (const auto& sizes : kParityShapes)
        for (Layout layout : kLayouts) check_binary(static_cast<BinaryOp>(code), dtype, sizes, layout);
}

// Channels-last operands and outputs (Note [Memory formats], Note [Loops in memory
// order]): all channels-last (one flat run, the vector path), channels-last beside
// contiguous, and a per-channel broadcast, into channels-last and contiguous outputs.
TEST(CudaElementwise, ChannelsLastOperandsAndOutputsMatchTheCpu) {
  KILN_REQUIRE_CUDA();
  const std::vector<std::pair<std::vector<int64_t>, MemoryFormat>> shapes = {
      {{2, 3, 4, 5, 6}, MemoryFormat::ChannelsLast3d}, {{2, 17, 3, 5}, MemoryFormat::ChannelsLast}};
  for (const auto& [sizes, format] : shapes) {
    std::vector<int64_t> per_channel(sizes.size(), 1);
    per_channel[1] = sizes[1];
    for (int code = 0; code < kNumBinaryOps; ++code) {
      const auto op = static_cast<BinaryOp>(code);
      for (DType dtype : kAllDTypes) {
        const DType out_dtype = op_info(op).bool_result ? DType::Bool : dtype;
        const Tensor a = on_device(random_for(sizes, dtype, 31), kCuda).contiguous(format);
        const Tensor b_dense = on_device(random_for(sizes, dtype, 32), kCuda);
        const Tensor bias = on_device(random_for(per_channel, dtype, 33), kCuda).expand(sizes);
        for (const Tensor& b : {b_dense.contiguous(format), b_dense, bias}) {
          const Tensor a_cpu = a.to(Device::cpu()), b_cpu = b.to(Device::cpu());
          const CpuAnswer expected = cpu_answer(
              [&](const Tensor& out) { backend(Device::cpu()).binary(op, a_cpu, b_cpu, out, kParams); }, sizes,
              out_dtype);
          if (expected.error) continue;  // the dtype's refusal is compared by EveryBinaryOpMatchesTheCpu
          for (MemoryFormat out_format : {format, MemoryFormat::Contiguous}) {
            SCOPED_TRACE(describe(op_name(op), dtype, sizes, Layout::Contiguous) + " b strides " +
                         ::testing::PrintToString(b.strides()) + " out " + memory_format_name(out_format));
            const Tensor out = poisoned(sizes, out_dtype, kCuda).contiguous(out_format);
            backend(kCuda).binary(op, a, b, out, kParams);
            EXPECT_TRUE(matches_cpu(out, expected.out, kSlack));
          }
        }
      }
    }
  }
}

// Integer clamp with infinite bounds saturates them to the dtype's range (no UB).
TEST(CudaElementwise, IntegerClampWithInfiniteBoundsIsTheIdentity) {
  KILN_REQUIRE_CUDA();
  const double inf = std::numeric_limits<double>::infinity();
  for (DType dtype : kNumericDTypes)
    check_unary(UnaryOp::Clamp, dtype, {129, 65}, Layout::Contiguous,
                ElementwiseParams{.lower = -inf, .upper = inf});
}

TEST(CudaElementwise, InPlaceOpsMatchTheCpu) {
  KILN_REQUIRE_CUDA();
  for (DType dtype : kFloatingDTypes) {
    for (bool strided : {false, true}) {
      const Tensor x_cpu = random_for({4, 3, 1031}, dtype, 5), y_cpu = random_for({4, 3, 1031}, dtype, 6);
      Tensor x = on_device(x_cpu, kCuda, strided);
      const Tensor y = on_device(y_cpu, kCuda, strided);
      backend(kCuda).binary(BinaryOp::Mul, x, y, x, kParams);
      backend(kCuda).unary(UnaryOp::Exp, x, x, kParams);
      backend(kCuda).binary(BinaryOp::Add, x, x, x, kParams);  // both inputs are the output
      const Tensor e = exp(mul(x_cpu, y_cpu));
      const Tensor expected = add(e, e, kParams.alpha);
      EXPECT_TRUE(matches_cpu(x, expected, kSlack)) << dtype << " strided " << strided;
    }
  }
}

TEST(CudaElementwise, WhereMatchesTheCpu) {
  KILN_REQUIRE_CUDA();
  for (DType dtype : kAllDTypes) {
    for (const auto& sizes : kParityShapes) {
      for (Layout layout : kLayouts) {
        const Tensor cond = operand(sizes, DType::Bool, 31, layout);
        const Tensor a = operand(sizes, dtype, 32, layout == Layout::Broadcast ? Layout::Contiguous : layout);
        const Tensor b = operand(sizes, dtype, 33, layout);
        const Tensor cond_cpu = cond.to(Device::cpu()), a_cpu = a.to(Device::cpu()), b_cpu = b.to(Device::cpu());
        const CpuAnswer expected = cpu_answer(
            [&](const Tensor& out) { backend(Device::cpu()).where(cond_cpu, a_cpu, b_cpu, out); }, sizes, dtype);
        check_outputs([&](const Tensor& out) { backend(kCuda).where(cond, a, b, out); }, expected, sizes, dtype,
                      describe("where", dtype, sizes, layout));
      }
    }
  }
}

// The public ops route through the same kernels (broadcasting and promotion in core).
TEST(CudaElementwise, PublicOpsMatchTheCpu) {
  KILN_REQUIRE_CUDA();
  for (DType dtype : kFloatingDTypes) {
    const Tensor a_cpu = random_for({7, 1, 33}, dtype, 41), b_cpu = random_for({5, 33}, dtype, 42);
    const Tensor a = on_device(a_cpu, kCuda), b = on_device(b_cpu, kCuda);
    EXPECT_TRUE(matches_cpu(add(a, b, 0.5), add(a_cpu, b_cpu, 0.5)));
    EXPECT_TRUE(matches_cpu(div(a, b), div(a_cpu, b_cpu)));
    EXPECT_TRUE(matches_cpu(gt(a, b), gt(a_cpu, b_cpu)));
    EXPECT_TRUE(matches_cpu(exp(a), exp(a_cpu), kSlack));
    EXPECT_TRUE(matches_cpu(clamp(b, -0.75, 0.75), clamp(b_cpu, -0.75, 0.75)));
    EXPECT_TRUE(matches_cpu(where(gt(a, b), a, b), where(gt(a_cpu, b_cpu), a_cpu, b_cpu)));
  }
}

// More 16-byte vectors than the vector kernel's grid has threads (it is sized to the
// GPU, about 10^6 threads on an H100), so each thread goes round its grid-stride loop
// several times; the odd size leaves a scalar tail.
TEST(CudaElementwise, VectorKernelLoopsOverTheGrid) {
  KILN_REQUIRE_CUDA();
  const int64_t n = (int64_t{1} << 25) + 5;
  for (DType dtype : {DType::Float32, DType::Float16, DType::UInt8}) {
    const Tensor a_cpu = random_for({n}, dtype, 51), b_cpu = random_for({n}, dtype, 52);
    const Tensor a = on_device(a_cpu, kCuda), b = on_device(b_cpu, kCuda);
    const Tensor out = poisoned({n}, dtype, kCuda);
    backend(kCuda).binary(BinaryOp::Add, a, b, out, ElementwiseParams{});
    const Tensor expected = empty({n}, {.dtype = dtype});
    backend(Device::cpu()).binary(BinaryOp::Add, a_cpu, b_cpu, expected, ElementwiseParams{});
    EXPECT_TRUE(matches_cpu(out, expected)) << dtype;
  }
}

// 2^31 + 4097 bytes: more elements than a 32-bit index reaches, so the engine splits the
// launch (Note [32-bit indexing]); every element, both ends and the split point included,
// must be written exactly as the others.
TEST(CudaElementwise, TensorLargerThanTwoGigabytesIsSplit) {
  KILN_REQUIRE_CUDA();
  const int64_t n = (int64_t{1} << 31) + 4097;
  const Tensor a = full({n}, 3, {.dtype = DType::UInt8, .device = kCuda});
  const Tensor b = full({n}, 4, {.dtype = DType::UInt8, .device = kCuda});
  const Tensor out = poisoned({n}, DType::UInt8, kCuda);
  backend(kCuda).binary(BinaryOp::Add, a, b, out, ElementwiseParams{});
  const Tensor host = out.to(Device::cpu());
  const uint8_t* values = static_cast<const uint8_t*>(host.data_ptr());
  int64_t wrong = 0;
  for (int64_t i = 0; i < n; ++i) wrong += values[i] != 7;
  EXPECT_EQ(wrong, 0);
  // The same bytes through the strided kernel: a misaligned view (offset 1) of them.
  const Tensor shifted = out.slice(0, 1, n);
  const Tensor copy = poisoned({n - 1}, DType::UInt8, kCuda);
  backend(kCuda).unary(UnaryOp::Neg, shifted, copy, ElementwiseParams{});
  const Tensor copy_host = copy.to(Device::cpu());
  const uint8_t* negated = static_cast<const uint8_t*>(copy_host.data_ptr());
  wrong = 0;
  for (int64_t i = 0; i < n - 1; ++i) wrong += negated[i] != static_cast<uint8_t>(-7);
  EXPECT_EQ(wrong, 0);
}

}  // namespace
}  // namespace kiln::testing
