// Note [Blocking host copies] (kernels/cuda/copy_transfer.cpp) on a real GPU; skips
// without one. A copy with non_blocking returns before its stream has run it only when
// the host side is pinned memory of ours, and the pinned block then stays out of the
// allocator's hands until the copy is done (record_host_use); every other host copy,
// pageable or staged through a host temporary, waits for its stream. The copy's stream
// is held busy (busy_stream.h), so "returned early" and "has not run yet" are certain
// whatever the GPU's speed.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <thread>
#include <vector>

#include "core/backend.h"
#include "kernels/cuda/stream.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/cuda/internal/busy_stream.h"

namespace kiln::cuda {
namespace {

using testing::BusyStream;
const Device kCuda = kiln::testing::kCuda;

constexpr int64_t kElements = int64_t{1} << 18;  // 1 MiB of float32

TensorOptions pinned_floats() { return {.dtype = DType::Float32, .pin_memory = true}; }
TensorOptions device_floats() { return {.dtype = DType::Float32, .device = kCuda}; }

TEST(CudaCopyRules, PinnedNonBlockingCopiesReturnAtOnceAndKeepTheirBlocks) {
  KILN_REQUIRE_CUDA();
  OwnedStream stream(0);
  StreamGuard on_stream(stream);
  const Tensor device_values = full({kElements}, 1.5, device_floats());
  const Tensor landed = empty({kElements}, device_floats());
  Tensor pinned_src = full({kElements}, 2.5, pinned_floats());
  Tensor pinned_dst = empty({kElements}, pinned_floats());
  const void* src_block = pinned_src.data_ptr();
  const void* dst_block = pinned_dst.data_ptr();
  std::vector<Tensor> while_busy;  // held to the end, so each allocation is a new candidate
  {
    BusyStream busy(stream.stream().handle());
    const auto start = std::chrono::steady_clock::now();
    backend(kCuda).copy(pinned_src, landed, /*non_blocking=*/true);
    backend(kCuda).copy(device_values, pinned_dst, /*non_blocking=*/true);
    const std::chrono::duration<double> waited = std::chrono::steady_clock::now() - start;
    EXPECT_LT(waited.count(), 5.0) << "a non_blocking copy with pinned memory waited for its stream";
    pinned_src = Tensor();  // both freed before their copies have even started
    pinned_dst = Tensor();
    for (int i = 0; i < 3; ++i) {
      while_busy.push_back(empty({kElements}, pinned_floats()));
      EXPECT_NE(while_busy.back().data_ptr(), src_block) << "the H2D copy's source block was handed out again";
      EXPECT_NE(while_busy.back().data_ptr(), dst_block) << "the D2H copy's destination block was handed out again";
    }
  }  // releases the stream and waits for both copies
  EXPECT_TRUE(kiln::testing::all_equal(landed.to(Device::cpu()), full({kElements}, 2.5, {.dtype = DType::Float32})));
}

// Runs `copy` while `stream` is busy until a helper thread releases it 200 ms later, and
// says whether the copy returned only after the release (that is, it waited).
bool copy_waits_for_the_stream(const OwnedStream& stream, const std::function<void()>& copy) {
  BusyStream busy(stream.stream().handle());
  std::atomic<bool> released{false};
  std::thread releaser([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    released = true;
    busy.release();
  });
  copy();
  const bool waited = released.load();
  releaser.join();
  return waited;
}

TEST(CudaCopyRules, PageableOrStagedNonBlockingCopiesWaitForTheStream) {
  KILN_REQUIRE_CUDA();
  OwnedStream stream(0);
  StreamGuard on_stream(stream);
  const Tensor device_values = full({kElements}, 1.5, device_floats());
  const Tensor landed = empty({kElements}, device_floats());
  const Tensor pageable = full({kElements}, 2.5, {.dtype = DType::Float32});
  // Pinned, but strided: packed into a (pageable) host temporary first.
  const Tensor pinned_strided = full({2 * kElements}, 3.5, pinned_floats()).slice(0, 0, std::nullopt, 2);
  const Tensor host_dst = empty({kElements}, {.dtype = DType::Float32});
  EXPECT_TRUE(copy_waits_for_the_stream(stream, [&] { backend(kCuda).copy(pageable, landed, true); }))
      << "pageable -> device";
  EXPECT_TRUE(kiln::testing::all_equal(landed.to(Device::cpu()), pageable));
  EXPECT_TRUE(copy_waits_for_the_stream(stream, [&] { backend(kCuda).copy(device_values, host_dst, true); }))
      << "device -> pageable";
  EXPECT_TRUE(kiln::testing::all_equal(host_dst, full({kElements}, 1.5, {.dtype = DType::Float32})));
  EXPECT_TRUE(copy_waits_for_the_stream(stream, [&] { backend(kCuda).copy(pinned_strided, landed, true); }))
      << "strided pinned -> device (staged)";
  EXPECT_TRUE(kiln::testing::all_equal(landed.to(Device::cpu()), pinned_strided.contiguous()));
}

}  // namespace
}  // namespace kiln::cuda
