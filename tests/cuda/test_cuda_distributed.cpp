// The distributed layer on a GPU: the ring backend's staging of GPU tensors through
// pinned memory (2 ranks as threads sharing the GPU) against the CPU result, including
// strided tensors and work queued on a side stream; the NCCL backend with a world of one
// (every collective, strided tensors, a CPU tensor refused); DDP training on the GPU
// equal to the CPU. Each test skips, with the reason, without a GPU or without NCCL.
#include <gtest/gtest.h>

#include "core/stream.h"
#include "dist/ddp.h"
#include "dist/process_group_nccl.h"
#include "nn/nn.h"
#include "optim/optim.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/dist/ranks_in_threads.h"

namespace kiln {
namespace {

using namespace std::chrono_literals;
using testing::handle;
using testing::kCuda;


TEST(CudaDistributed, RingBackendStagesGpuTensorsThroughPinnedMemory) {
  KILN_REQUIRE_CUDA();
  testing::with_watchdog(120s, [] {
    const auto errors = testing::run_ranks_in_threads(2, [](dist::ProcessGroupRing& group) {
      for (const int64_t numel : {int64_t{5}, int64_t{300000}}) {  // direct and ring
        for (const DType dtype : {DType::Float32, DType::Float16, DType::Int64}) {
          const Tensor mine = testing::random_for({numel}, dtype, 10 + static_cast<uint64_t>(group.rank()));
          Tensor expected = testing::random_for({numel}, dtype, 10).to(DType::Float64);
          expected = expected.add(testing::random_for({numel}, dtype, 11).to(DType::Float64));
          // Produced on a side stream: the collective must wait for it.
          const Stream side = Stream::create(kCuda);
          Tensor on_gpu;
          {
            StreamGuard on(side);
            on_gpu = mine.to(kCuda, /*non_blocking=*/false)
                         .mul(scalar_tensor(1, {.dtype = dtype, .device = kCuda}));
            group.all_reduce(on_gpu)->wait();
          }
          EXPECT_TRUE(
              testing::all_close(on_gpu.cpu().to(DType::Float64), expected, testing::tolerance_for(dtype)))
              << numel << " " << dtype;
        }
      }
      Tensor strided = testing::random_for({64, 64}, DType::Float32, 3).to(kCuda).t();
      group.broadcast(strided, 0)->wait();
      EXPECT_TRUE(
          testing::bitwise_equal(strided.cpu(), testing::random_for({64, 64}, DType::Float32, 3).t()));
    });
    for (const std::string& e : errors) EXPECT_EQ(e, "");
  });
}

TEST(CudaDistributed, NcclWorldOfOneRunsEveryCollective) {
  KILN_REQUIRE_CUDA();
  if (!dist::built_with_nccl()) GTEST_SKIP() << "this build has no NCCL backend";
  testing::with_watchdog(120s, [] {
    const auto store = std::make_shared<dist::TCPStore>(dist::TCPStoreOptions{.port = 0, .is_master = true});
    const auto group = dist::make_nccl_process_group(store, 0, 1, {.timeout = 60s}, "nccl-test/", 0);
    EXPECT_EQ(group->backend(), "nccl");
    const Tensor x = testing::random_for({1000}, DType::Float32, 1);
    for (const dist::ReduceOp op : {dist::ReduceOp::Sum, dist::ReduceOp::Avg, dist::ReduceOp::Max}) {
      Tensor t = x.to(kCuda);
      group->all_reduce(t, op)->wait();
      EXPECT_TRUE(testing::bitwise_equal(t.cpu(), x));
    }
    Tensor strided = testing::random_for({40, 30}, DType::BFloat16, 2).to(kCuda).t();
    group->broadcast(strided, 0)->wait();
    EXPECT_TRUE(testing::bitwise_equal(strided.cpu(), testing::random_for({40, 30}, DType::BFloat16, 2).t()));
    Tensor gathered = empty({1000}, {.dtype = DType::Float32, .device = kCuda});
    group->all_gather_into_tensor(gathered, x.to(kCuda))->wait();
    EXPECT_TRUE(testing::bitwise_equal(gathered.cpu(), x));
    Tensor scattered = empty({1000}, {.dtype = DType::Float32, .device = kCuda});
    group->reduce_scatter_tensor(scattered, x.to(kCuda))->wait();
    EXPECT_TRUE(testing::bitwise_equal(scattered.cpu(), x));
    group->barrier()->wait();
    EXPECT_KILN_ERROR(group->all_reduce(x), "needs tensors on cuda:0");
  });
}

TEST(CudaDistributed, DdpTrainingOnTheGpuMatchesTheCpu) {
  KILN_REQUIRE_CUDA();
  testing::with_watchdog(180s, [] {
    const auto make = [] {
      manual_seed(8);
      return std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Layer>>{
          std::make_shared<nn::Conv3d>(
              nn::Conv3dOptions{.in_channels = 1, .out_channels = 4, .kernel_size = {3}, .padding = {1}}),
          std::make_shared<nn::ReLU>(), std::make_shared<nn::Flatten>(),
          std::make_shared<nn::Linear>(nn::LinearOptions{.in_features = 4 * 64, .out_features = 2})});
    };
    std::vector<std::shared_ptr<nn::Sequential>> cpu = {make(), make()}, gpu = {make(), make()};
    for (auto& net : gpu) net->to(kCuda);
    for (const bool on_gpu : {false, true}) {
      const auto errors = testing::run_ranks_in_threads(2, [&](dist::ProcessGroupRing& group) {
        const auto r = static_cast<size_t>(group.rank());
        auto net = on_gpu ? gpu[r] : cpu[r];
        const Device device = on_gpu ? kCuda : Device::cpu();
        dist::DistributedDataParallel ddp(net, {.group = handle(group)});
        optim::SGD sgd(ddp.parameters(), {.lr = 0.1});
        for (int step = 0; step < 3; ++step) {
          const Tensor x = testing::random_uniform({4, 1, 4, 4, 4}, -1, 1, DType::Float32, 50 + step);
          const Tensor y = testing::random_uniform({4, 2}, -1, 1, DType::Float32, 60 + step);
          sgd.zero_grad();
          const Tensor part = x.narrow(0, group.rank() * 2, 2).to(device);
          mse_loss(ddp.forward(part), y.narrow(0, group.rank() * 2, 2).to(device)).backward();
          sgd.step();
        }
      });
      for (const std::string& e : errors) EXPECT_EQ(e, "");
    }
    const auto expected = cpu[0]->named_parameters();
    for (const auto& net : gpu) {
      const auto got = net->named_parameters();
      for (size_t i = 0; i < got.size(); ++i)
        EXPECT_TRUE(testing::all_close(got[i].second.cpu(), expected[i].second, {1e-5, 1e-4}))
            << got[i].first;
    }
  });
}

}  // namespace
}  // namespace kiln
