// CUDA batch-norm pieces and the batch_norm op against the CPU backend: each of the four
// Backend kernels (stats, apply, backward_reduce, backward_input; the last three also with
// the fused ReLU; apply and backward_reduce with the fused residual add) in f32/f64/f16/bf16 on
// shapes with few and many channels, spatial sizes that are and are not multiples of the
// vector width, misaligned inputs (the scalar path), N = 1, S = 1, one big enough for the
// split-channel grid, into poisoned outputs (Note [Poisoned outputs]); then the public ops
// (batch_norm, batch_norm_relu, batch_norm_add_relu) in training and eval, forward, running statistics and
// gradients, on non-contiguous inputs. Skips without a GPU.
//
// Tolerance: the CPU accumulates in double, the GPU in float (double for double input)
// and in another order; per-channel values go through a few more roundings: the dtype's
// tolerance (the statistics dtype's for per-channel results) times kSlack.
#include "core/backend.h"
#include "tests/cuda/cuda_test_util.h"

namespace kiln {
namespace {

using testing::kCuda;
constexpr double kSlack = 8.0;

const std::vector<std::vector<int64_t>> kShapes = {
    {2, 3, 5},  {1, 4, 7},       {5, 7},   {3, 70, 3}, {2, 5, 1030}, {1, 2, 33, 17}, {8, 3, 4096},
    {4, 300, 8}, {2, 2, 64, 64, 8}, {1, 3, 8}, {6, 1, 1},
    {7, 2, 2050},  // split over rows with a short last split (3 + 3 + 1 rows), scalar path
    {1, 1, 40000}};  // split over columns only, unequal column ranges (8 x 1112 + 1104 vectors)

DType stats_dtype(DType dtype) { return dtype == DType::Float64 ? DType::Float64 : DType::Float32; }

// `t`'s values on the GPU, contiguous, starting one element past a 16-byte boundary when
// `misaligned` (so the kernels cannot use vector loads).
Tensor on_gpu(const Tensor& t, bool misaligned) {
  if (!misaligned) return t.to(kCuda);
  const Tensor buffer = zeros({t.numel() + 1}, {.dtype = t.dtype(), .device = kCuda});
  Tensor view = buffer.narrow(0, 1, t.numel()).view(t.sizes());
  view.copy_(t.to(kCuda));
  return view;
}

// Per-channel values in the statistics dtype, positive when `positive`.
Tensor channel_values(int64_t channels, DType dtype, uint64_t seed, bool positive = false) {
  return positive ? testing::random_uniform({channels}, 0.5, 2, stats_dtype(dtype), seed)
                  : testing::random_for({channels}, stats_dtype(dtype), seed);
}

// The normalisation of the elementwise and backward tests: mean, positive invstd, and
// weight and bias when affine (seeds seed..seed+3), with or without the fused ReLU.
BatchNormCoefficients coefficients(int64_t channels, DType dtype, bool affine, bool relu, uint64_t seed) {
  return {.mean = channel_values(channels, dtype, seed),
          .invstd = channel_values(channels, dtype, seed + 1, /*positive=*/true),
          .weight = affine ? channel_values(channels, dtype, seed + 2) : Tensor(),
          .bias = affine ? channel_values(channels, dtype, seed + 3) : Tensor(),
          .relu = relu};
}

BatchNormCoefficients on_gpu(const BatchNormCoefficients& norm, bool misaligned = false) {
  const auto moved = [](const Tensor& t) { return t.defined() ? t.to(kCuda) : t; };
  const auto big = [&](const Tensor& t) { return t.defined() ? on_gpu(t, misaligned) : t; };
  return {.mean = moved(norm.mean),
          .invstd = moved(norm.invstd),
          .weight = moved(norm.weight),
          .bias = moved(norm.bias),
          .relu = norm.relu,
          .residual = big(norm.residual),
          .output = big(norm.output)};
}

// (affine, relu) and (misaligned, relu) pairs the kernel tests loop over. With the fused
// ReLU a value y within an ulp of 0 could take another side of the mask on the GPU (an
// FMA) than on the CPU; the random inputs make that a ~1e-7 chance per value.
constexpr std::pair<bool, bool> kAffineRelu[] = {{true, false}, {false, false}, {true, true}, {false, true}};
constexpr std::pair<bool, bool> kMisalignedRelu[] = {{false, false}, {true, false}, {false, true}, {true, true}};

std::string trace(DType dtype, const std::vector<int64_t>& sizes, bool misaligned) {
  return (::testing::Message() << dtype << " sizes " << ::testing::PrintToString(sizes)
                               << (misaligned ? " misaligned" : ""))
      .GetString();
}

TEST(CudaBatchNorm, StatsMatchCpu) {
  KILN_REQUIRE_CUDA();
  for (DType dtype : testing::kFloatingDTypes) {
    for (const auto& sizes : kShapes) {
      for (bool misaligned : {false, true}) {
        SCOPED_TRACE(trace(dtype, sizes, misaligned));
        const Tensor x = testing::random_for(sizes, dtype, 1);
        const int64_t c = sizes[1];
        const Tensor mean = empty({c}, {.dtype = stats_dtype(dtype)}), var = empty({c}, {.dtype = stats_dtype(dtype)});
        backend(Device::cpu()).batch_norm_stats(x, mean, var);
        const Tensor gpu_mean = testing::poisoned({c}, stats_dtype(dtype), kCuda);
        const Tensor gpu_var = testing::poisoned({c}, stats_dtype(dtype), kCuda);
        backend(kCuda).batch_norm_stats(on_gpu(x, misaligned), gpu_mean, gpu_var);
        EXPECT_TRUE(testing::matches_cpu(gpu_mean, mean, kSlack));
        EXPECT_TRUE(testing::matches_cpu(gpu_var, var, kSlack));
      }
    }
  }
}

// N * S == 0: every channel is still written, with NaN statistics (0 / 0, as the CPU)
// and zero gradient sums. The outputs start finite (the poison may be NaN itself), so an
// output left unwritten fails; the elementwise passes have nothing to do.
TEST(CudaBatchNorm, AnEmptyBatchOrVolumeWritesEveryChannel) {
  KILN_REQUIRE_CUDA();
  for (DType dtype : testing::kFloatingDTypes) {
    for (const std::vector<int64_t>& sizes : {std::vector<int64_t>{0, 3, 5}, std::vector<int64_t>{2, 3, 0}}) {
      SCOPED_TRACE(trace(dtype, sizes, false));
      const DType sd = stats_dtype(dtype);
      const Tensor x = empty(sizes, {.dtype = dtype, .device = kCuda});
      const Tensor mean = full({3}, 7.0, {.dtype = sd, .device = kCuda});
      const Tensor var = full({3}, 7.0, {.dtype = sd, .device = kCuda});
      backend(kCuda).batch_norm_stats(x, mean, var);
      EXPECT_TRUE(all(isnan(mean)).item<bool>()) << mean.cpu();
      EXPECT_TRUE(all(isnan(var)).item<bool>()) << var.cpu();
      const Tensor sum_dy = full({3}, 7.0, {.dtype = sd, .device = kCuda});
      const Tensor sum_dy_xmu = full({3}, 7.0, {.dtype = sd, .device = kCuda});
      backend(kCuda).batch_norm_backward_reduce(x, x, {.mean = zeros({3}, {.dtype = sd, .device = kCuda})},
                                                sum_dy, sum_dy_xmu, Tensor());
      EXPECT_EQ(sum_dy.abs().max().item<double>(), 0.0);
      EXPECT_EQ(sum_dy_xmu.abs().max().item<double>(), 0.0);
      const Tensor ones_c = ones({3}, {.dtype = sd, .device = kCuda});
      const Tensor out = empty(sizes, {.dtype = dtype, .device = kCuda});
      backend(kCuda).batch_norm_apply(x, {.mean = mean, .invstd = ones_c}, out);
      backend(kCuda).batch_norm_backward_input(x, x, {.mean = mean, .invstd = ones_c}, sum_dy, sum_dy_xmu, 1, out);
    }
  }
}

TEST(CudaBatchNorm, ApplyMatchesCpu) {
  KILN_REQUIRE_CUDA();
  for (DType dtype : testing::kFloatingDTypes) {
    for (const auto& sizes : kShapes) {
      for (bool misaligned : {false, true}) {
        for (const auto& [affine, relu] : kAffineRelu) {
          SCOPED_TRACE(trace(dtype, sizes, misaligned) + (affine ? " affine" : "") + (relu ? " relu" : ""));
          const int64_t c = sizes[1];
          const Tensor x = testing::random_for(sizes, dtype, 2);
          const BatchNormCoefficients norm = coefficients(c, dtype, affine, relu, 3);
          const Tensor expected = empty(sizes, {.dtype = dtype});
          backend(Device::cpu()).batch_norm_apply(x, norm, expected);
          const Tensor actual = on_gpu(testing::poisoned(sizes, dtype, Device::cpu()), misaligned);
          backend(kCuda).batch_norm_apply(on_gpu(x, misaligned), on_gpu(norm), actual);
          EXPECT_TRUE(testing::matches_cpu(actual, expected, kSlack));
        }
      }
    }
  }
}

TEST(CudaBatchNorm, BackwardReduceMatchesCpu) {
  KILN_REQUIRE_CUDA();
  for (DType dtype : testing::kFloatingDTypes) {
    for (const auto& sizes : kShapes) {
      for (const auto& [misaligned, relu] : kMisalignedRelu) {
        SCOPED_TRACE(trace(dtype, sizes, misaligned) + (relu ? " relu" : ""));
        const int64_t c = sizes[1];
        const DType sd = stats_dtype(dtype);
        const Tensor dy = testing::random_for(sizes, dtype, 7), x = testing::random_for(sizes, dtype, 8);
        const BatchNormCoefficients norm = coefficients(c, dtype, /*affine=*/true, relu, 9);
        const Tensor sum_dy = empty({c}, {.dtype = sd}), sum_dy_xmu = empty({c}, {.dtype = sd});
        backend(Device::cpu()).batch_norm_backward_reduce(dy, x, norm, sum_dy, sum_dy_xmu, Tensor());
        const Tensor gpu_sum_dy = testing::poisoned({c}, sd, kCuda), gpu_sum_dy_xmu = testing::poisoned({c}, sd, kCuda);
        backend(kCuda).batch_norm_backward_reduce(on_gpu(dy, misaligned), on_gpu(x, misaligned), on_gpu(norm),
                                                  gpu_sum_dy, gpu_sum_dy_xmu, Tensor());
        // sums of N * S terms of size ~1: compare with an absolute tolerance that grows with them
        const double count = static_cast<double>(x.numel() / c);
        const testing::Tolerance tol = testing::tolerance_for(sd);
        const testing::Tolerance scaled{tol.atol * kSlack * count, tol.rtol * kSlack};
        EXPECT_TRUE(testing::all_close(gpu_sum_dy.to(Device::cpu()), sum_dy, scaled));
        EXPECT_TRUE(testing::all_close(gpu_sum_dy_xmu.to(Device::cpu()), sum_dy_xmu, scaled));
      }
    }
  }
}

TEST(CudaBatchNorm, BackwardInputMatchesCpu) {
  KILN_REQUIRE_CUDA();
  for (DType dtype : testing::kFloatingDTypes) {
    for (const auto& sizes : kShapes) {
      for (bool misaligned : {false, true}) {
        for (const auto& [affine, relu] : kAffineRelu) {
          SCOPED_TRACE(trace(dtype, sizes, misaligned) + (affine ? " affine" : "") + (relu ? " relu" : ""));
          const int64_t c = sizes[1], count = 11;
          const Tensor dy = testing::random_for(sizes, dtype, 10), x = testing::random_for(sizes, dtype, 11);
          const BatchNormCoefficients norm = coefficients(c, dtype, affine, relu, 12);
          const Tensor sum_dy = channel_values(c, dtype, 16), sum_dy_xmu = channel_values(c, dtype, 17);
          const Tensor expected = empty(sizes, {.dtype = dtype});
          backend(Device::cpu()).batch_norm_backward_input(dy, x, norm, sum_dy, sum_dy_xmu, count, expected);
          const Tensor actual = on_gpu(testing::poisoned(sizes, dtype, Device::cpu()), misaligned);
          backend(kCuda).batch_norm_backward_input(on_gpu(dy, misaligned), on_gpu(x, misaligned), on_gpu(norm),
                                                   sum_dy.to(kCuda), sum_dy_xmu.to(kCuda), count, actual);
          EXPECT_TRUE(testing::matches_cpu(actual, expected, kSlack));
        }
      }
    }
  }
}

// The fused residual add (Note [Batch norm, add and ReLU]): apply adds the residual before
// the ReLU; backward_reduce masks by the forward's output and writes the masked gradient,
// which must be exact (a copy or a zero of each grad_out value).
TEST(CudaBatchNorm, FusedAddApplyAndBackwardReduceMatchCpu) {
  KILN_REQUIRE_CUDA();
  for (DType dtype : testing::kFloatingDTypes) {
    for (const auto& sizes : kShapes) {
      for (bool misaligned : {false, true}) {
        SCOPED_TRACE(trace(dtype, sizes, misaligned));
        const int64_t c = sizes[1];
        const DType sd = stats_dtype(dtype);
        BatchNormCoefficients norm = coefficients(c, dtype, /*affine=*/true, /*relu=*/true, 30);
        norm.residual = testing::random_for(sizes, dtype, 34);
        const Tensor x = testing::random_for(sizes, dtype, 35);
        const Tensor out = empty(sizes, {.dtype = dtype});
        backend(Device::cpu()).batch_norm_apply(x, norm, out);
        const Tensor gpu_out = on_gpu(testing::poisoned(sizes, dtype, Device::cpu()), misaligned);
        backend(kCuda).batch_norm_apply(on_gpu(x, misaligned), on_gpu(norm, misaligned), gpu_out);
        EXPECT_TRUE(testing::matches_cpu(gpu_out, out, kSlack)) << "apply";

        BatchNormCoefficients masked = coefficients(c, dtype, /*affine=*/true, /*relu=*/true, 30);
        masked.output = out;
        const Tensor dy = testing::random_for(sizes, dtype, 36);
        const Tensor sum_dy = empty({c}, {.dtype = sd}), sum_dy_xmu = empty({c}, {.dtype = sd});
        const Tensor grad_y = empty(sizes, {.dtype = dtype});
        backend(Device::cpu()).batch_norm_backward_reduce(dy, x, masked, sum_dy, sum_dy_xmu, grad_y);
        const Tensor gpu_sum_dy = testing::poisoned({c}, sd, kCuda),
                     gpu_sum_dy_xmu = testing::poisoned({c}, sd, kCuda);
        const Tensor gpu_grad_y = on_gpu(testing::poisoned(sizes, dtype, Device::cpu()), misaligned);
        BatchNormCoefficients gpu_masked = on_gpu(masked, misaligned);
        gpu_masked.output = on_gpu(out, misaligned);  // the CPU's output: the same mask on both
        backend(kCuda).batch_norm_backward_reduce(on_gpu(dy, misaligned), on_gpu(x, misaligned), gpu_masked,
                                                  gpu_sum_dy, gpu_sum_dy_xmu, gpu_grad_y);
        EXPECT_TRUE(testing::all_equal(gpu_grad_y.to(Device::cpu()), grad_y)) << "the masked gradient";
        const double count = static_cast<double>(x.numel() / c);
        const testing::Tolerance tol = testing::tolerance_for(sd);
        const testing::Tolerance scaled{tol.atol * kSlack * count, tol.rtol * kSlack};
        EXPECT_TRUE(testing::all_close(gpu_sum_dy.to(Device::cpu()), sum_dy, scaled));
        EXPECT_TRUE(testing::all_close(gpu_sum_dy_xmu.to(Device::cpu()), sum_dy_xmu, scaled));
      }
    }
  }
}

// The public ops (batch_norm, batch_norm_relu) on both devices: outputs, running
// statistics, and gradients.
constexpr std::pair<bool, bool> kTrainingRelu[] = {{true, false}, {false, false}, {true, true}, {false, true}};

TEST(CudaBatchNorm, OpForwardBackwardAndRunningStatsMatchCpu) {
  KILN_REQUIRE_CUDA();
  const std::vector<std::vector<int64_t>> shapes = {{6, 3}, {4, 5, 9}, {2, 4, 6, 5}, {2, 3, 4, 4, 4}, {1, 2, 3, 3, 3}};
  for (DType dtype : testing::kFloatingDTypes) {
    for (const auto& sizes : shapes) {
      for (const auto& [training, relu] : kTrainingRelu) {
        SCOPED_TRACE(trace(dtype, sizes, false) + (training ? " training" : " eval") + (relu ? " relu" : ""));
        const auto normalize = relu ? batch_norm_relu : batch_norm;
        const int64_t c = sizes[1];
        const Tensor x = testing::non_contiguous(testing::random_for(sizes, dtype, 20));
        const Tensor g = testing::random_for(sizes, dtype, 21);
        const Tensor w = testing::random_for({c}, DType::Float32, 22), b = testing::random_for({c}, DType::Float32, 23);
        Tensor rm = testing::random_for({c}, DType::Float32, 24);
        Tensor rv = testing::random_uniform({c}, 0.5, 2, DType::Float32, 25);
        Tensor gpu_rm = rm.to(kCuda), gpu_rv = rv.to(kCuda);
        const Tensor cx = x.detach().requires_grad_(true), cw = w.detach().requires_grad_(true);
        const Tensor cb = b.detach().requires_grad_(true);
        const Tensor gx = testing::on_device(x, kCuda, true).detach().requires_grad_(true);
        const Tensor gw = w.to(kCuda).requires_grad_(true), gb = b.to(kCuda).requires_grad_(true);
        const Tensor cpu_y = normalize(cx, rm, rv, cw, cb, training, 0.2, 1e-5);
        const Tensor gpu_y = normalize(gx, gpu_rm, gpu_rv, gw, gb, training, 0.2, 1e-5);
        EXPECT_TRUE(testing::matches_cpu(gpu_y, cpu_y, kSlack));
        EXPECT_TRUE(testing::matches_cpu(gpu_rm, rm, kSlack));
        EXPECT_TRUE(testing::matches_cpu(gpu_rv, rv, kSlack));
        cpu_y.backward(g);
        gpu_y.backward(g.to(kCuda));
        EXPECT_TRUE(testing::matches_cpu(gx.grad(), cx.grad(), kSlack));
        const testing::Tolerance tol{1e-3 * static_cast<double>(x.numel() / c), 1e-3};  // sums over N * S
        EXPECT_TRUE(testing::all_close(gw.grad().to(Device::cpu()), cw.grad(), tol));
        EXPECT_TRUE(testing::all_close(gb.grad().to(Device::cpu()), cb.grad(), tol));
      }
    }
  }
}

// batch_norm_add_relu on both devices, both layouts: outputs, running statistics and the
// gradients of input, weight, bias and residual.
TEST(CudaBatchNorm, AddReluOpMatchesCpu) {
  KILN_REQUIRE_CUDA();
  for (DType dtype : testing::kFloatingDTypes) {
    for (bool channels_last : {false, true}) {
      for (bool training : {true, false}) {
        const std::vector<int64_t> sizes = {2, 8, 4, 5, 6};
        SCOPED_TRACE(trace(dtype, sizes, false) + (training ? " training" : " eval") +
                     (channels_last ? " channels-last" : ""));
        const MemoryFormat format = channels_last ? MemoryFormat::ChannelsLast3d : MemoryFormat::Contiguous;
        const int64_t c = sizes[1];
        const Tensor x = testing::random_for(sizes, dtype, 40), r = testing::random_for(sizes, dtype, 41);
        const Tensor g = testing::random_for(sizes, dtype, 42);
        const Tensor w = testing::random_for({c}, DType::Float32, 43),
                     b = testing::random_for({c}, DType::Float32, 44);
        Tensor rm = testing::random_for({c}, DType::Float32, 45);
        Tensor rv = testing::random_uniform({c}, 0.5, 2, DType::Float32, 46);
        Tensor gpu_rm = rm.to(kCuda), gpu_rv = rv.to(kCuda);
        const auto leaf = [&](const Tensor& t, Device device) {
          return t.to(device).contiguous(format).detach().requires_grad_(true);
        };
        const Tensor cx = leaf(x, Device::cpu()), cr = leaf(r, Device::cpu());
        const Tensor gx = leaf(x, kCuda), gr = leaf(r, kCuda);
        const Tensor cw = w.detach().requires_grad_(true), cb = b.detach().requires_grad_(true);
        const Tensor gw = w.to(kCuda).requires_grad_(true), gb = b.to(kCuda).requires_grad_(true);
        const Tensor cpu_y = batch_norm_add_relu(cx, cr, rm, rv, cw, cb, training, 0.2, 1e-5);
        const Tensor gpu_y = batch_norm_add_relu(gx, gr, gpu_rm, gpu_rv, gw, gb, training, 0.2, 1e-5);
        EXPECT_TRUE(testing::matches_cpu(gpu_y, cpu_y, kSlack));
        EXPECT_EQ(gpu_y.is_contiguous(format), true);
        EXPECT_TRUE(testing::matches_cpu(gpu_rm, rm, kSlack));
        EXPECT_TRUE(testing::matches_cpu(gpu_rv, rv, kSlack));
        cpu_y.backward(g.contiguous(format));
        gpu_y.backward(g.to(kCuda).contiguous(format));
        EXPECT_TRUE(testing::matches_cpu(gx.grad(), cx.grad(), kSlack));
        EXPECT_TRUE(testing::matches_cpu(gr.grad(), cr.grad(), kSlack));
        const testing::Tolerance tol{1e-3 * static_cast<double>(x.numel() / c), 1e-3};  // sums over N * S
        EXPECT_TRUE(testing::all_close(gw.grad().to(Device::cpu()), cw.grad(), tol));
        EXPECT_TRUE(testing::all_close(gb.grad().to(Device::cpu()), cb.grad(), tol));
      }
    }
  }
}

}  // namespace
}  // namespace kiln
