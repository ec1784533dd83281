// Shared pieces of Kiln's CUDA benchmarks (STYLE 12): their registration (only when a GPU
// is there), an RAII CUDA-event timer, an L2 flush outside the timed region, the device
// copy peak measured in the same run, and the counters every benchmark reports.
//
// Roofline on the GPU: elementwise ops, reductions and softmax move a few bytes per flop,
// so their ceiling is the DRAM bandwidth that a device-to-device cudaMemcpyAsync reaches
// (read + write counted): about 3 TB/s on an H100 SXM, 4.8 TB/s on an H200. Each such
// benchmark reports bytes/s and `of_peak`, its fraction of that copy peak. GEMMs report
// FLOP/s and their fraction of the best cuBLAS rate of the same dtype in the same run.
//
// Timing: Google Benchmark's manual time (UseManualTime), measured with CUDA events
// around the body on the current stream; before each timed iteration the L2 cache is
// flushed by writing a buffer twice its size, so every iteration reads from DRAM.
#pragma once

#include <benchmark/benchmark.h>

#include <functional>
#include <string>

#include "core/ops.h"

namespace kiln::bench {

// Registers every CUDA benchmark (one register_cuda_<family>_benchmarks() per file of
// bench/cuda/). bench_main.cpp calls it only when CUDA is available: without a GPU the
// CUDA benchmarks do not exist, so the run says why in one line instead of failing each
// case, and --benchmark_filter / --benchmark_list_tests see only what can run.
void register_cuda_benchmarks();
void register_cuda_batch_norm_benchmarks();
void register_cuda_conv_benchmarks();
void register_cuda_copy_benchmarks();
void register_cuda_elementwise_benchmarks();
void register_cuda_matmul_benchmarks();
void register_cuda_index_benchmarks();
void register_cuda_optim_benchmarks();
void register_cuda_pool_benchmarks();
void register_cuda_random_benchmarks();
void register_cuda_reduce_benchmarks();
void register_cuda_softmax_benchmarks();

// Bytes per second of a 512 MiB device-to-device copy (read + write counted), best of
// ten, measured once per process on cuda:0.
double cuda_copy_peak_bytes_per_second();

// Overwrites a buffer of twice the L2 size on cuda:0 (and waits for it).
void flush_l2();

// Milliseconds that `body` takes on cuda:0's current stream, from CUDA events.
double time_cuda_ms(const std::function<void()>& body);

// Runs `body` once per iteration (L2 flushed before each, not timed), sets the manual
// time, and reports `rate_name` (amount_per_iteration / second, e.g. "bytes/s" or
// "FLOP/s") and `of_peak` = rate / peak (peak <= 0: not reported).
void run_cuda_benchmark(benchmark::State& state, double amount_per_iteration, const std::string& rate_name,
                        double peak, const std::function<void()>& body);

}  // namespace kiln::bench
