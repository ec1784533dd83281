// kiln_allreduce_bench: all-reduce bus bandwidth of a Kiln backend, one rank per process,
// as nccl-tests measure it; run under `kiln launch` (compare_allreduce.sh runs it beside
// Open MPI's MPI_Allreduce, mpi_allreduce.cpp, over the same sizes).
//
// For each size S from --min-bytes to --max-bytes (x4): warm-up, a barrier, then
// iterations of an in-place float32 sum all-reduce; the time is the mean per all-reduce.
//   algbw = S / time,   busbw = algbw * 2(N-1)/N
// busbw is comparable across rank counts and, for a bandwidth-optimal algorithm, reaches
// the link bandwidth (Note [Ring all-reduce] in dist/ring/algorithms.h). The iteration
// count depends on S only, so every rank runs the same collectives. Rank 0 prints one line
// per size: "bytes time_us algbw_GB/s busbw_GB/s".
//
// --ddp instead times DDP steps of a small 3D conv net (forward + backward + SGD step) with
// the all-reduces overlapping backward, and with backward first and then the same buckets
// all-reduced one after another (no overlap), --delay-ms per collective simulating a slower
// network.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>

#include "kiln/kiln.h"

namespace {

using namespace kiln;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

int64_t argument(int argc, char** argv, const std::string& name, int64_t fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (argv[i] == name) return std::stoll(argv[i + 1]);
  return fallback;
}

bool flag(int argc, char** argv, const std::string& name) {
  for (int i = 1; i < argc; ++i)
    if (argv[i] == name) return true;
  return false;
}

void all_reduce_sizes(dist::ProcessGroup& group, int64_t min_bytes, int64_t max_bytes) {
  const int64_t n = group.size();
  if (group.rank() == 0)
    std::printf("# kiln ring all-reduce, %lld ranks, float32 sum, in place\n", static_cast<long long>(n));
  for (int64_t bytes = min_bytes; bytes <= max_bytes; bytes *= 4) {
    const int64_t numel = bytes / 4;
    Tensor t = ones({numel});
    // About 1 GB of traffic per size, 5 to 200 iterations.
    const int64_t iterations = std::clamp<int64_t>((int64_t{1} << 30) / bytes, 5, 200);
    for (int i = 0; i < 3; ++i) group.all_reduce(t)->wait();
    group.barrier()->wait();
    const auto start = Clock::now();
    for (int64_t i = 0; i < iterations; ++i) group.all_reduce(t)->wait();
    const double per_op = seconds_since(start) / static_cast<double>(iterations);
    const double algbw = static_cast<double>(bytes) / per_op / 1e9;
    const double busbw = algbw * 2.0 * static_cast<double>(n - 1) / static_cast<double>(n);
    if (group.rank() == 0)
      std::printf("%lld %.1f %.3f %.3f\n", static_cast<long long>(bytes), per_op * 1e6, algbw, busbw);
  }
}

std::shared_ptr<nn::Sequential> conv_net() {
  manual_seed(1);
  const auto conv = [](int64_t in, int64_t out) {
    return std::make_shared<nn::Conv3d>(
        nn::Conv3dOptions{.in_channels = in, .out_channels = out, .kernel_size = {3}, .padding = {1}});
  };
  return std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Layer>>{
      conv(1, 32), std::make_shared<nn::ReLU>(), conv(32, 32), std::make_shared<nn::ReLU>(), conv(32, 32),
      std::make_shared<nn::ReLU>(), conv(32, 1)});
}

void ddp_steps(const std::shared_ptr<dist::ProcessGroup>& shared_group, int64_t steps) {
  dist::ProcessGroup& group = *shared_group;
  auto model = conv_net();
  dist::DistributedDataParallel ddp(
      model, {.group = shared_group, .bucket_cap_mb = 0.02, .first_bucket_cap_mb = 0.02});
  optim::SGD sgd(ddp.parameters(), {.lr = 0.01});
  const Tensor x = randn({4, 1, 32, 32, 32});
  const auto step = [&](bool overlap) {
    sgd.zero_grad();
    if (overlap) {
      ddp.forward(x).pow(2).mean().backward();
    } else {
      {
        auto no_sync = ddp.no_sync();
        ddp.forward(x).pow(2).mean().backward();
      }
      for (const auto& names : ddp.bucket_parameter_names()) {  // the same buckets, after backward
        std::vector<Tensor> grads;
        for (const auto& [name, p] : model->named_parameters())
          if (std::find(names.begin(), names.end(), name) != names.end())
            grads.push_back(p.grad().reshape({-1}));
        group.all_reduce(cat(grads), dist::ReduceOp::Avg)->wait();
      }
    }
    sgd.step();
  };
  for (const bool overlap : {true, false}) {
    step(overlap);  // warm-up
    group.barrier()->wait();
    const auto start = Clock::now();
    for (int64_t i = 0; i < steps; ++i) step(overlap);
    if (group.rank() == 0)
      std::printf("ddp %s: %.1f ms per step (%zu buckets)\n", overlap ? "with overlap" : "without overlap",
                  seconds_since(start) / static_cast<double>(steps) * 1e3,
                  ddp.bucket_parameter_names().size());
  }
}

}  // namespace

int main(int argc, char** argv) {
  try {
    kiln::init();
    // The ranks' group, made directly (not init_process_group) to pass the delay option.
    const dist::RendezvousInfo info = dist::resolve_rendezvous();
    const auto timeout = std::chrono::minutes(5);
    auto store = std::make_shared<dist::TCPStore>(dist::TCPStoreOptions{.host_name = info.master_addr,
                                                                        .port = info.master_port,
                                                                        .world_size = info.world_size,
                                                                        .is_master = info.rank == 0,
                                                                        .timeout = timeout});
    const auto group = std::make_shared<dist::ProcessGroupRing>(
        store, info.rank, info.world_size,
        dist::ProcessGroupOptions{
            .timeout = timeout,
            .delay_per_collective = std::chrono::milliseconds(argument(argc, argv, "--delay-ms", 0))});
    if (flag(argc, argv, "--ddp"))
      ddp_steps(group, argument(argc, argv, "--steps", 5));
    else
      all_reduce_sizes(*group, argument(argc, argv, "--min-bytes", 4096),
                       argument(argc, argv, "--max-bytes", 256 << 20));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kiln_allreduce_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
