// CUDA copies, fill and arange against the CPU backend: every dtype pair host->device,
// device->host and device->device, contiguous or strided on either side, pageable and
// pinned with non_blocking; the values must equal the CPU backend's cast exactly.
#include <gtest/gtest.h>

#include "core/backend.h"
#include "tests/cuda/cuda_test_util.h"

namespace kiln::testing {
namespace {

const std::vector<int64_t> kSizes = {5, 1031};

// A destination on `device` of `dtype`, contiguous or a strided view of a poisoned buffer.
Tensor destination(DType dtype, Device device, bool strided, Tensor* buffer) {
  if (strided) return poisoned_strided(kSizes, dtype, device, buffer);
  *buffer = poisoned(kSizes, dtype, device);
  return *buffer;
}

// The CPU backend's cast of `src_cpu` into `dtype`.
Tensor cpu_cast(const Tensor& src_cpu, DType dtype) {
  const Tensor out = empty(src_cpu.sizes(), {.dtype = dtype});
  backend(Device::cpu()).copy(src_cpu, out, false);
  return out;
}

void check_copy(Device from, Device to, DType src_dtype, DType dst_dtype, bool src_strided, bool dst_strided,
                bool pinned, bool non_blocking) {
  SCOPED_TRACE(::testing::Message() << from << " -> " << to << " " << src_dtype << " -> " << dst_dtype
                                    << " src_strided " << src_strided << " dst_strided " << dst_strided
                                    << " pinned " << pinned << " non_blocking " << non_blocking);
  const Tensor src_cpu = random_for(kSizes, src_dtype, 3);
  Tensor src = on_device(src_cpu, from, src_strided);
  if (pinned && from.is_cpu()) {
    src = empty(kSizes, {.dtype = src_dtype, .pin_memory = true});
    backend(Device::cpu()).copy(src_cpu, src, false);
  }
  Tensor buffer;
  Tensor dst;
  if (pinned && to.is_cpu()) {
    // Poisoned too (Note [Poisoned outputs]): the pinned allocator hands back the block
    // of the previous check_copy, which already holds the right values.
    dst = empty(kSizes, {.dtype = dst_dtype, .pin_memory = true});
    backend(Device::cpu()).fill(dst, poison_value(dst_dtype));
    buffer = dst;
  } else {
    dst = destination(dst_dtype, to, dst_strided, &buffer);
  }
  backend(from.is_cpu() ? to : from).copy(src, dst, non_blocking);
  synchronize(to.is_cpu() ? from : to);
  EXPECT_TRUE(all_equal(dst.to(Device::cpu()), cpu_cast(src_cpu, dst_dtype)));
  if (dst_strided && !pinned) {
    EXPECT_TRUE(gaps_untouched(buffer));
  }
}

TEST(CudaCopy, EveryDtypePairAndLayoutMatchesTheCpuCast) {
  KILN_REQUIRE_CUDA();
  const Device cpu = Device::cpu();
  for (DType src_dtype : kAllDTypes)
    for (DType dst_dtype : kAllDTypes)
      for (bool src_strided : {false, true})
        for (bool dst_strided : {false, true}) {
          check_copy(cpu, kCuda, src_dtype, dst_dtype, src_strided, dst_strided, false, false);
          check_copy(kCuda, cpu, src_dtype, dst_dtype, src_strided, dst_strided, false, false);
          check_copy(kCuda, kCuda, src_dtype, dst_dtype, src_strided, dst_strided, false, false);
        }
}

TEST(CudaCopy, PinnedNonBlockingAndPageableCopies) {
  KILN_REQUIRE_CUDA();
  const Device cpu = Device::cpu();
  for (DType dtype : {DType::Float32, DType::Float16, DType::Int64}) {
    for (bool non_blocking : {false, true}) {
      check_copy(cpu, kCuda, dtype, dtype, false, false, /*pinned=*/true, non_blocking);
      check_copy(kCuda, cpu, dtype, dtype, false, false, /*pinned=*/true, non_blocking);
      check_copy(cpu, kCuda, dtype, dtype, false, false, /*pinned=*/false, non_blocking);
      check_copy(kCuda, cpu, dtype, dtype, false, false, /*pinned=*/false, non_blocking);
      // Pinned memory, but a cast or a strided destination: staged, still exact.
      check_copy(cpu, kCuda, dtype, DType::Float64, false, true, /*pinned=*/true, non_blocking);
    }
  }
}

// to() keeps a channels-last tensor's layout (preserve_format), so host and device hold
// the same bytes and one memcpy moves them, both ways (a pinned copy is row-major).
TEST(CudaCopy, ChannelsLastTensorsMoveAsTheyAreLaidOut) {
  KILN_REQUIRE_CUDA();
  for (DType dtype : {DType::Float32, DType::BFloat16, DType::Int64}) {
    SCOPED_TRACE(dtype_name(dtype));
    const Tensor host = random_for({2, 3, 4, 5, 6}, dtype, 41).contiguous(MemoryFormat::ChannelsLast3d);
    for (const Tensor& source : {host, host.pin_memory()}) {
      const Tensor device = source.to(kCuda, /*non_blocking=*/source.is_pinned());
      EXPECT_EQ(device.strides(), source.strides());  // pin_memory() itself is row-major
      const Tensor back = device.to(Device::cpu());
      EXPECT_EQ(back.strides(), source.strides());
      EXPECT_TRUE(all_equal(back, host));
      EXPECT_TRUE(all_equal(device.contiguous().to(Device::cpu()), host.contiguous()));
    }
  }
}

TEST(CudaCopy, BetweenGpus) {
  KILN_REQUIRE_CUDA();
  if (cuda_device_count() < 2) GTEST_SKIP() << "needs two GPUs";
  for (DType src_dtype : {DType::Float32, DType::BFloat16})
    for (DType dst_dtype : {DType::Float32, DType::Float16})
      for (bool strided : {false, true})
        check_copy(kCuda, Device::cuda(1), src_dtype, dst_dtype, strided, strided, false, false);
}

TEST(CudaCopy, FillMatchesTheCpuInEveryDtypeAndLayout) {
  KILN_REQUIRE_CUDA();
  for (DType dtype : kAllDTypes) {
    for (const auto& sizes : kParityShapes) {
      const Tensor expected = empty(sizes, {.dtype = dtype});
      backend(Device::cpu()).fill(expected, Scalar(2.75));
      const Tensor out = poisoned(sizes, dtype, kCuda);
      backend(kCuda).fill(out, Scalar(2.75));
      EXPECT_TRUE(all_equal(out.to(Device::cpu()), expected)) << dtype;
      Tensor buffer;
      const Tensor strided = poisoned_strided(sizes, dtype, kCuda, &buffer);
      backend(kCuda).fill(strided, Scalar(2.75));
      EXPECT_TRUE(all_equal(strided.to(Device::cpu()), expected)) << dtype;
      EXPECT_TRUE(gaps_untouched(buffer));
    }
  }
  // The diagonal of a matrix (stride n + 1), as eye() fills it.
  const Tensor matrix = zeros({9, 9}, {.dtype = DType::Float32, .device = kCuda});
  backend(kCuda).fill(matrix.view({81}).slice(0, 0, 81, 10), Scalar(1.0));
  EXPECT_TRUE(all_equal(matrix.to(Device::cpu()), eye(9)));
}

TEST(CudaCopy, ArangeMatchesTheCpu) {
  KILN_REQUIRE_CUDA();
  for (DType dtype : kNumericDTypes) {
    for (int64_t n : {0, 1, 7, 1031, 100003}) {
      const Tensor expected = empty({n}, {.dtype = dtype});
      const Tensor out = poisoned({n}, dtype, kCuda);
      const bool integral = !is_floating(dtype);
      const Scalar start = integral ? Scalar(int64_t{-3}) : Scalar(-1.5);
      const Scalar step = integral ? Scalar(int64_t{2}) : Scalar(0.125);
      backend(Device::cpu()).arange(expected, start, step);
      backend(kCuda).arange(out, start, step);
      EXPECT_TRUE(all_equal(out.to(Device::cpu()), expected)) << dtype << " n " << n;
    }
  }
}

}  // namespace
}  // namespace kiln::testing
