// CUDA index kernels (kernels/cuda/index.cu): gather along the last dim, index_select of
// rows (an embedding lookup), and scatter_add (atomics), in bytes/s and of_peak.
//
// Roofline (H100 SXM ~3.0 TB/s copy peak; each call also pays one stream synchronize for
// the bounds flag, Note [Index bounds on the device], ~5-10 us, which dominates below
// ~1 MB of traffic):
//   gather f32 [R, C] -> [R, K] along dim 1: per out element 4 bytes written, 8 read from
//     the index and 4 read from the input row (rows are small enough for L1/L2, so the
//     random column order costs little): 16 bytes per element.
//   index_select f32 table [V, D], T tokens -> [T, D]: per out element 4 bytes read from
//     the table and 4 written (the token id is shared by the D threads of a row and comes
//     from cache): 8 bytes per element, a copy-shaped kernel; expect near the copy peak
//     once rows are long.
//   scatter_add f32 src [N, C] into out [M, C] along dim 0: per src element 4 bytes of src
//     and 8 of index read, and one atomic add whose read-modify-write of 4 bytes resolves
//     in L2 (out is small): 12 DRAM bytes per element; the atomics' L2 throughput, not
//     DRAM, is the likely limit when many land on the same lines.
#include "bench/cuda/bench_cuda_util.h"

namespace kiln::bench {
namespace {

Tensor random_index(int64_t high, const std::vector<int64_t>& sizes) {
  Generator gen(7);
  return randint(0, high, sizes, {.dtype = DType::Int64, .device = Device::cuda()}, &gen);
}

void BM_CudaGather_LastDim(benchmark::State& state) {
  const int64_t rows = state.range(0), cols = 1024, picks = 512;
  const Tensor in = rand({rows, cols}, {.dtype = DType::Float32, .device = Device::cuda()});
  const Tensor index = random_index(cols, {rows, picks});
  const double bytes = 16.0 * static_cast<double>(rows * picks);
  run_cuda_benchmark(state, bytes, "bytes/s", cuda_copy_peak_bytes_per_second(),
                     [&] { benchmark::DoNotOptimize(gather(in, 1, index)); });
}

void BM_CudaIndexSelect_EmbeddingRows(benchmark::State& state) {
  const int64_t vocabulary = 50000, width = state.range(1), tokens = state.range(0);
  const Tensor table = rand({vocabulary, width}, {.dtype = DType::Float32, .device = Device::cuda()});
  const Tensor ids = random_index(vocabulary, {tokens});
  const double bytes = 8.0 * static_cast<double>(tokens * width) + 8.0 * static_cast<double>(tokens);
  run_cuda_benchmark(state, bytes, "bytes/s", cuda_copy_peak_bytes_per_second(),
                     [&] { benchmark::DoNotOptimize(index_select(table, 0, ids)); });
}

void BM_CudaScatterAdd(benchmark::State& state) {
  const int64_t n = state.range(0), targets = 1024, cols = 256;
  const Tensor out = zeros({targets, cols}, {.dtype = DType::Float32, .device = Device::cuda()});
  const Tensor src = rand({n, cols}, {.dtype = DType::Float32, .device = Device::cuda()});
  const Tensor index = random_index(targets, {n, cols});
  const double bytes = 12.0 * static_cast<double>(n * cols);
  // scatter_add is out of place: it also clones `out` (4 * targets * cols bytes, small).
  run_cuda_benchmark(state, bytes, "bytes/s", cuda_copy_peak_bytes_per_second(),
                     [&] { benchmark::DoNotOptimize(scatter_add(out, 0, index, src)); });
}

}  // namespace

void register_cuda_index_benchmarks() {
  benchmark::RegisterBenchmark("BM_CudaGather_LastDim", BM_CudaGather_LastDim)
      ->RangeMultiplier(8)
      ->Range(64, 1 << 18)
      ->UseManualTime();
  benchmark::RegisterBenchmark("BM_CudaIndexSelect_EmbeddingRows", BM_CudaIndexSelect_EmbeddingRows)
      ->ArgsProduct({{1024, 16384, 131072}, {128, 1024}})
      ->UseManualTime();
  benchmark::RegisterBenchmark("BM_CudaScatterAdd", BM_CudaScatterAdd)
      ->RangeMultiplier(8)
      ->Range(1024, 1 << 18)
      ->UseManualTime();
}

}  // namespace kiln::bench
