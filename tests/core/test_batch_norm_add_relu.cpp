// batch_norm_add_relu, the fused tail of a residual block (Note [Batch norm, add and ReLU]
// in core/backend.h), on the CPU backend: against the unfused composition relu(bn(x) + r)
// in every float dtype, both layouts, training and eval, affine or not (values, running
// statistics and the gradients of input, weight, bias and residual); float64 gradient
// checks; NaN propagation; residuals in another layout; and the argument errors. The
// CUDA kernels' twin is in tests/cuda/test_cuda_batch_norm.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/memory_format.h"
#include "core/ops.h"
#include "tests/gradcheck.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

using namespace kiln::testing;

// Channels with their own offsets and scales, so that normalising changes every value.
Tensor channel_input(const std::vector<int64_t>& sizes, uint64_t seed) {
  std::vector<int64_t> per_channel(sizes.size(), 1);
  per_channel[1] = sizes[1];
  const Tensor offset = random_uniform(per_channel, -3, 3, DType::Float64, seed + 100);
  const Tensor scale = random_uniform(per_channel, 0.5, 4, DType::Float64, seed + 200);
  return add(mul(random_nonzero(sizes, DType::Float64, seed), scale), offset);
}

const std::vector<std::vector<int64_t>> kShapes = {
    {6, 3}, {4, 3, 5}, {2, 3, 4, 5}, {2, 3, 2, 3, 4}, {2, 3, 5, 4, 6}};

// One forward and backward, fused or composed, and what it produced.
struct Outcome {
  Tensor y{}, running_mean{}, running_var{}, grad_x{}, grad_r{}, grad_w{}, grad_b{};
};

struct Case {
  DType dtype;
  std::vector<int64_t> sizes;
  bool training, affine, channels_last;
};

Outcome run_case(const Case& c, bool fused, DType compute) {
  const DType stats = compute == DType::Float64 ? DType::Float64 : DType::Float32;
  const MemoryFormat format =
      c.channels_last ? channels_last_format(static_cast<int64_t>(c.sizes.size())) : MemoryFormat::Contiguous;
  // Inputs rounded to the case's dtype first, so that every run sees the same values.
  const auto input = [&](const Tensor& t) {
    return t.to(c.dtype).to(compute).contiguous(format).detach().requires_grad_(true);
  };
  const Tensor x = input(channel_input(c.sizes, 1));
  // A residual of the activations' size: it flips the sign of many y, so the mask matters.
  const Tensor r = input(random_uniform(c.sizes, -1.5, 1.5, DType::Float64, 2));
  // Per-channel tensors rounded to the case's statistics dtype, then held in the run's.
  const DType case_stats = c.dtype == DType::Float64 ? DType::Float64 : DType::Float32;
  const auto per_channel = [&](const Tensor& t) { return t.to(case_stats).to(stats); };
  const int64_t channels = c.sizes[1];
  const Tensor w =
      c.affine ? per_channel(random_nonzero({channels}, DType::Float64, 3)).requires_grad_(true) : Tensor();
  const Tensor b =
      c.affine ? per_channel(random_nonzero({channels}, DType::Float64, 4)).requires_grad_(true) : Tensor();
  const Tensor upstream =
      random_nonzero(c.sizes, DType::Float64, 5).to(c.dtype).to(compute).contiguous(format);
  Outcome out;
  out.running_mean = per_channel(random_uniform({channels}, -1, 1, DType::Float64, 6));
  out.running_var = per_channel(random_uniform({channels}, 0.5, 2, DType::Float64, 7));
  out.y = fused ? batch_norm_add_relu(x, r, out.running_mean, out.running_var, w, b, c.training)
                : relu(add(batch_norm(x, out.running_mean, out.running_var, w, b, c.training), r));
  out.y.backward(upstream);
  out.grad_x = x.grad();
  out.grad_r = r.grad();
  if (c.affine) {
    out.grad_w = w.grad();
    out.grad_b = b.grad();
  }
  return out;
}

std::vector<Case> cases() {
  std::vector<Case> all;
  for (DType dtype : {DType::Float64, DType::Float32, DType::Float16, DType::BFloat16}) {
    for (const auto& sizes : kShapes) {
      for (bool training : {true, false}) {
        for (bool affine : {true, false}) {
          for (bool channels_last : {false, true}) {
            if (channels_last && sizes.size() < 4) continue;  // no channels-last format below 4-d
            all.push_back({dtype, sizes, training, affine, channels_last});
          }
        }
      }
    }
  }
  return all;
}

std::string describe(const Case& c) {
  return ::testing::PrintToString(c.sizes) + " " + std::string(dtype_name(c.dtype)) +
         (c.training ? " training" : " eval") + (c.affine ? " affine" : "") +
         (c.channels_last ? " channels-last" : "");
}

// Against the float64 composition: every dtype within its tolerance. In float32 and
// float64 bn's output is already in the compute type, so the fused forward is the
// composition's bit for bit, and so is the residual's gradient (the same mask of the
// same output); the other gradients differ only in the order of the per-channel sums.
TEST(BatchNormAddRelu, MatchesTheComposition) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(describe(c));
    const Outcome fused = run_case(c, true, c.dtype);
    const Outcome reference = run_case(c, false, DType::Float64);
    const Tolerance tol = tolerance_for(c.dtype);
    const Tolerance grad_tol = c.dtype == DType::Float32 ? Tolerance{1e-4, 1e-4} : tol;
    EXPECT_GT(eq(reference.y, 0.0).sum().item<int64_t>(), 0) << "the mask blocks some values";
    EXPECT_TRUE(fused.y.is_contiguous(fused.y.suggest_memory_format()));
    EXPECT_EQ(fused.y.suggest_memory_format(), reference.y.suggest_memory_format())
        << "laid out as the input";
    EXPECT_TRUE(all_close(fused.y, reference.y, tol)) << "output";
    EXPECT_TRUE(all_close(fused.running_mean, reference.running_mean, tol));
    EXPECT_TRUE(all_close(fused.running_var, reference.running_var, tol));
    EXPECT_TRUE(all_close(fused.grad_x, reference.grad_x, grad_tol)) << "input gradient";
    EXPECT_TRUE(all_close(fused.grad_r, reference.grad_r, tol)) << "residual gradient";
    if (c.affine) {
      EXPECT_TRUE(all_close(fused.grad_w, reference.grad_w, grad_tol)) << "weight gradient";
      EXPECT_TRUE(all_close(fused.grad_b, reference.grad_b, grad_tol)) << "bias gradient";
    }
    if (c.dtype == DType::Float32 || c.dtype == DType::Float64) {
      const Outcome composed = run_case(c, false, c.dtype);
      EXPECT_TRUE(all_equal(fused.y, composed.y)) << "the same arithmetic as the composition";
      EXPECT_TRUE(all_equal(fused.grad_r, composed.grad_r)) << "the same mask";
    }
  }
}

// A NaN stays NaN through the add and the ReLU, as in the composition.
TEST(BatchNormAddRelu, PropagatesNaNAsTheComposition) {
  for (bool training : {true, false}) {
    Tensor x = channel_input({4, 2, 3}, 8);
    const Tensor r = random_uniform({4, 2, 3}, -1, 1, DType::Float64, 9);
    Tensor r_nan = r.clone();
    r_nan.select(0, 2).select(0, 1).select(0, 0).fill_(std::nan(""));
    const Tensor mean = zeros({2}, {.dtype = DType::Float64}), var = ones({2}, {.dtype = DType::Float64});
    const Tensor fused = batch_norm_add_relu(x, r_nan, mean, var, Tensor(), Tensor(), training);
    const Tensor composed = relu(add(batch_norm(x, mean, var, Tensor(), Tensor(), training), r_nan));
    EXPECT_TRUE(std::isnan(fused.select(0, 2).select(0, 1).select(0, 0).item<double>()))
        << "training " << training;
    EXPECT_TRUE(all_equal(isnan(fused), isnan(composed))) << "training " << training;
  }
}

// The residual may be laid out otherwise than the input (it is read in the input's
// layout), may be the input itself, and may be the only operand that needs a gradient.
TEST(BatchNormAddRelu, ResidualInAnyLayoutOrTheInputItself) {
  const Tensor x = channel_input({2, 3, 4, 3, 5}, 10).to(DType::Float32);
  const Tensor r = random_uniform({2, 3, 4, 3, 5}, -1, 1, DType::Float32, 11);
  const Tensor mean = zeros({3}), var = ones({3});
  const Tensor expected = relu(add(batch_norm(x, mean.clone(), var.clone(), Tensor(), Tensor(), true), r));
  const Tensor cl_residual = r.contiguous(MemoryFormat::ChannelsLast3d);
  EXPECT_TRUE(all_equal(
      batch_norm_add_relu(x, cl_residual, mean.clone(), var.clone(), Tensor(), Tensor(), true), expected));
  const Tensor transposed = r.transpose(2, 4).contiguous().transpose(2, 4);  // strided
  EXPECT_TRUE(all_equal(
      batch_norm_add_relu(x, transposed, mean.clone(), var.clone(), Tensor(), Tensor(), true), expected));
  const Tensor cl_x = x.contiguous(MemoryFormat::ChannelsLast3d);
  const Tensor cl_out = batch_norm_add_relu(cl_x, r, mean.clone(), var.clone(), Tensor(), Tensor(), true);
  EXPECT_TRUE(cl_out.is_contiguous(MemoryFormat::ChannelsLast3d)) << "the output is laid out as the input";
  EXPECT_TRUE(all_close(cl_out, expected, tolerance_for(DType::Float32)));

  const Tensor residual_only = r.detach().requires_grad_(true);
  batch_norm_add_relu(x, residual_only, mean.clone(), var.clone(), Tensor(), Tensor(), true).sum().backward();
  EXPECT_TRUE(all_equal(residual_only.grad(), gt(expected, 0.0).to(DType::Float32))) << "relu's mask, alone";

  const Tensor self = x.detach().requires_grad_(true), self_ref = x.detach().requires_grad_(true);
  const Tensor upstream = random_nonzero(x.sizes(), DType::Float32, 12);
  batch_norm_add_relu(self, self, mean.clone(), var.clone(), Tensor(), Tensor(), true).backward(upstream);
  relu(add(batch_norm(self_ref, mean.clone(), var.clone(), Tensor(), Tensor(), true), self_ref))
      .backward(upstream);
  EXPECT_TRUE(all_close(self.grad(), self_ref.grad(), {1e-4, 1e-4})) << "both paths of one input add up";
}

TEST(BatchNormAddRelu, BadResidualsAreErrors) {
  const Tensor x = random_nonzero({2, 3, 4}), mean = zeros({3}), var = ones({3});
  EXPECT_KILN_ERROR(batch_norm_add_relu(x, Tensor(), mean, var, Tensor(), Tensor(), true),
                    "batch_norm_add_relu", "undefined residual");
  EXPECT_KILN_ERROR(batch_norm_add_relu(x, random_nonzero({2, 3, 5}), mean, var, Tensor(), Tensor(), true),
                    "batch_norm_add_relu", "shape", "[2, 3, 4]", "[2, 3, 5]");
  EXPECT_KILN_ERROR(batch_norm_add_relu(x.to(DType::Float32), x, mean, var, Tensor(), Tensor(), true),
                    "batch_norm_add_relu", "dtype", "float32", "float64");
  EXPECT_KILN_ERROR(batch_norm_add_relu(random_nonzero({2, 3}), random_nonzero({2, 3}), mean, var, Tensor(),
                                        Tensor(), true, 0.1, -1.0),
                    "batch_norm_add_relu", "eps");
}

// ---- gradient checks ------------------------------------------------------------------------

using Inputs = std::vector<Tensor>;

Tensor leaf(const std::vector<int64_t>& sizes, uint64_t seed) {
  return random_uniform(sizes, -2, 2, DType::Float64, seed).requires_grad_(true);
}

// Training and eval, affine or not, strided and channels-last inputs, the residual being
// the input. The ReLU's kink: values of y + r at 0 are measure-zero for random inputs.
KILN_GRADCHECK_TEST(batch_norm_add_relu) {
  for (const auto& sizes : std::vector<std::vector<int64_t>>{{5, 3}, {3, 3, 4}, {2, 3, 2, 3, 2}}) {
    for (bool training : {true, false}) {
      SCOPED_TRACE(::testing::Message() << ::testing::PrintToString(sizes) << " training " << training);
      const Tensor running_mean = random_uniform({3}, -1, 1, DType::Float64, 20);
      const Tensor running_var = random_uniform({3}, 0.5, 2, DType::Float64, 21);
      EXPECT_TRUE(gradcheck(
          [&](const Inputs& v) {
            return batch_norm_add_relu(v[0], v[1], running_mean, running_var, v[2], v[3], training, 0.1,
                                       1e-3);
          },
          {leaf(sizes, 22), leaf(sizes, 23), leaf({3}, 24), leaf({3}, 25)}))
          << "affine";
      const Tensor x =
          non_contiguous(random_uniform(sizes, -2, 2, DType::Float64, 26)).detach().requires_grad_(true);
      const Tensor r =
          non_contiguous(random_uniform(sizes, -2, 2, DType::Float64, 27)).detach().requires_grad_(true);
      EXPECT_TRUE(gradcheck(
          [&](const Inputs& v) {
            return batch_norm_add_relu(v[0], v[1], running_mean, running_var, Tensor(), Tensor(), training,
                                       0.1, 1e-5);
          },
          {x, r}))
          << "strided, not affine";
      EXPECT_TRUE(gradcheck(
          [&](const Inputs& v) {
            return batch_norm_add_relu(v[0], v[0], running_mean, running_var, v[1], v[2], training, 0.1,
                                       1e-5);
          },
          {leaf(sizes, 28), leaf({3}, 29), leaf({3}, 30)}))
          << "the input as its own residual";
    }
  }
  const Tensor x =
      leaf({2, 3, 3, 2, 3}, 31).detach().contiguous(MemoryFormat::ChannelsLast3d).requires_grad_(true);
  const Tensor r =
      leaf({2, 3, 3, 2, 3}, 32).detach().contiguous(MemoryFormat::ChannelsLast3d).requires_grad_(true);
  EXPECT_TRUE(gradcheck(
      [](const Inputs& v) {
        return batch_norm_add_relu(v[0], v[1], Tensor(), Tensor(), v[2], v[3], /*training=*/true, 0.1, 1e-5);
      },
      {x, r, leaf({3}, 33), leaf({3}, 34)}))
      << "channels-last";
}

}  // namespace
}  // namespace kiln
