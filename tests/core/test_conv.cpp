// conv1d/conv2d/conv3d and convolution against a naive direct convolution written here in
// float64 loops: forward and the gradients of input, weight and bias, over odd sizes,
// stride, padding, dilation, groups, depthwise, 1x1 kernels, kernels as large as the
// input, batch 1, shapes big enough to split the column matrix into tiles, non-contiguous
// inputs, with and without bias, in every float dtype. Also: unbatched inputs, an empty
// batch, bit-identical repeated runs, every thread count, every argument error, and
// float64 gradient checks.
#include <gtest/gtest.h>
#include <omp.h>

#include <array>
#include <chrono>
#include <cmath>
#include <memory>
#include <string>
#include <thread>

#include "core/flags.h"
#include "core/ops.h"
#include "kernels/cpu/conv_onednn.h"
#include "tests/gradcheck.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

using testing::all_close;
using testing::all_equal;
using testing::gradcheck;
using testing::random_nonzero;
using testing::Tolerance;
using testing::tolerance_for;

struct ConvCase {
  std::string name;
  std::vector<int64_t> input;   // [N, C_in, s...]
  std::vector<int64_t> weight;  // [C_out, C_in / groups, k...]
  std::vector<int64_t> stride = {1}, padding = {0}, dilation = {1};
  int64_t groups = 1;
  bool bias = true;

  size_t spatial() const { return input.size() - 2; }
  int64_t value(const std::vector<int64_t>& v, size_t i) const { return v.size() == 1 ? v[0] : v[i]; }
};

const std::vector<ConvCase>& conv_cases() {
  static const std::vector<ConvCase> cases = {
      {"1d", {2, 3, 11}, {4, 3, 3}},
      {"1d_stride_padding_dilation_groups", {2, 4, 13}, {6, 2, 3}, {2}, {2}, {2}, 2},
      {"1d_kernel_as_large_as_input_no_bias", {1, 2, 5}, {3, 2, 5}, {1}, {0}, {1}, 1, false},
      {"2d_odd_sizes", {2, 3, 7, 9}, {5, 3, 3, 2}, {1}, {1}},
      {"2d_stride_per_dim_padding_per_dim", {3, 4, 8, 7}, {6, 4, 3, 3}, {2, 1}, {1, 2}},
      {"2d_dilation_batch_1", {1, 2, 9, 10}, {3, 2, 3, 3}, {1}, {2}, {2, 3}},
      {"2d_groups", {2, 6, 6, 5}, {4, 3, 3, 3}, {1}, {1}, {1}, 2},
      {"2d_depthwise_multiplier_2", {2, 4, 7, 7}, {8, 1, 3, 3}, {2}, {1}, {1}, 4},
      {"2d_1x1", {2, 5, 6, 7}, {3, 5, 1, 1}},
      {"2d_1x1_batch_1_no_bias", {1, 5, 6, 7}, {3, 5, 1, 1}, {1}, {0}, {1}, 1, false},
      {"2d_1x1_stride_2", {2, 5, 6, 7}, {3, 5, 1, 1}, {2}},
      {"2d_1x1_padding", {2, 3, 4, 5}, {2, 3, 1, 1}, {1}, {1}},
      {"2d_1x1_groups", {2, 6, 4, 4}, {9, 2, 1, 1}, {1}, {0}, {1}, 3},
      {"2d_kernel_as_large_as_input", {2, 3, 5, 4}, {2, 3, 5, 4}},
      {"2d_stride_larger_than_kernel", {2, 2, 9, 8}, {3, 2, 2, 2}, {3}, {1}},
      {"3d", {2, 2, 5, 6, 7}, {3, 2, 3, 3, 3}, {1}, {1}},
      {"3d_stem_like_batch_1", {1, 1, 9, 9, 9}, {4, 1, 7, 7, 7}, {2}, {3}},
      {"3d_everything_per_dim", {2, 4, 6, 7, 5}, {4, 2, 2, 3, 2}, {1, 2, 1}, {1, 0, 2}, {2, 1, 1}, 2},
      {"3d_1x1x1_stride_2_downsample", {2, 4, 5, 5, 5}, {6, 4, 1, 1, 1}, {2}, {0}, {1}, 1, false},
      {"3d_depthwise", {3, 3, 4, 5, 4}, {3, 1, 3, 3, 3}, {1}, {1}, {1}, 3},
      // R = 256 x 27 rows: a column tile holds ~300 of the 504 output positions, so the
      // forward splits each sample and backward-weight's tiles straddle the two samples.
      {"3d_column_tiles", {2, 256, 9, 7, 8}, {3, 256, 3, 3, 3}, {1}, {1}},
      // Channels in multiples of 16: oneDNN's blocked AVX-512 kernels and their reorders
      // (Note [oneDNN convolutions]), as in a 3D ResNet: 3x3x3, stride 2, 1x1x1 stride-2
      // projection, grouped.
      {"3d_blocked_channels", {2, 32, 6, 5, 6}, {32, 32, 3, 3, 3}, {1}, {1}, {1}, 1, false},
      {"3d_blocked_channels_stride_2", {2, 16, 7, 6, 7}, {32, 16, 3, 3, 3}, {2}, {1}, {1}, 1, false},
      {"3d_blocked_projection", {2, 16, 6, 6, 5}, {32, 16, 1, 1, 1}, {2}, {0}, {1}, 1, false},
      {"3d_blocked_groups", {1, 32, 5, 5, 5}, {32, 16, 3, 3, 3}, {1}, {1}, {1}, 2},
  };
  return cases;
}

// ---- the naive reference ------------------------------------------------------------------

// A case's sizes right-aligned in 3 spatial dims (leading dims of size 1), as the reference
// loops want them.
struct Dims {
  int64_t n, c_in, c_out, groups;
  std::vector<int64_t> out_sizes;
  std::array<int64_t, 3> in{1, 1, 1}, k{1, 1, 1}, out{1, 1, 1}, stride{1, 1, 1}, pad{0, 0, 0}, dil{1, 1, 1};
};

Dims dims_of(const ConvCase& c) {
  Dims d{.n = c.input[0],
         .c_in = c.input[1],
         .c_out = c.weight[0],
         .groups = c.groups,
         .out_sizes = {c.input[0], c.weight[0]}};
  const size_t lead = 3 - c.spatial();
  for (size_t i = 0; i < c.spatial(); ++i) {
    const size_t j = lead + i;
    d.in[j] = c.input[2 + i];
    d.k[j] = c.weight[2 + i];
    d.stride[j] = c.value(c.stride, i);
    d.pad[j] = c.value(c.padding, i);
    d.dil[j] = c.value(c.dilation, i);
    d.out[j] = (d.in[j] + 2 * d.pad[j] - d.dil[j] * (d.k[j] - 1) - 1) / d.stride[j] + 1;
    d.out_sizes.push_back(d.out[j]);
  }
  return d;
}

// Calls fn(output index, input index, weight index) for every product the convolution
// sums (flat row-major indices; taps that land in the padding are skipped).
template <typename Fn>
void for_each_product(const Dims& d, const Fn& fn) {
  const int64_t cin_g = d.c_in / d.groups, cout_g = d.c_out / d.groups;
  for (int64_t n = 0; n < d.n; ++n)
    for (int64_t co = 0; co < d.c_out; ++co)
      for (int64_t od = 0; od < d.out[0]; ++od)
        for (int64_t oh = 0; oh < d.out[1]; ++oh)
          for (int64_t ow = 0; ow < d.out[2]; ++ow) {
            const int64_t y = (((n * d.c_out + co) * d.out[0] + od) * d.out[1] + oh) * d.out[2] + ow;
            for (int64_t cl = 0; cl < cin_g; ++cl)
              for (int64_t kd = 0; kd < d.k[0]; ++kd)
                for (int64_t kh = 0; kh < d.k[1]; ++kh)
                  for (int64_t kw = 0; kw < d.k[2]; ++kw) {
                    const int64_t id = od * d.stride[0] - d.pad[0] + kd * d.dil[0];
                    const int64_t ih = oh * d.stride[1] - d.pad[1] + kh * d.dil[1];
                    const int64_t iw = ow * d.stride[2] - d.pad[2] + kw * d.dil[2];
                    if (id < 0 || id >= d.in[0] || ih < 0 || ih >= d.in[1] || iw < 0 || iw >= d.in[2])
                      continue;
                    const int64_t ci = (co / cout_g) * cin_g + cl;
                    const int64_t x = (((n * d.c_in + ci) * d.in[0] + id) * d.in[1] + ih) * d.in[2] + iw;
                    const int64_t w = (((co * cin_g + cl) * d.k[0] + kd) * d.k[1] + kh) * d.k[2] + kw;
                    fn(y, x, w);
                  }
          }
}

int64_t volume(const std::vector<int64_t>& sizes) {
  int64_t v = 1;
  for (int64_t s : sizes) v *= s;
  return v;
}

// Forward in float64: out = sum of products + bias[c_out].
Tensor reference_forward(const ConvCase& c, const Tensor& x, const Tensor& w, const Tensor& b) {
  const Dims d = dims_of(c);
  const std::vector<double> xv = x.to_vector<double>(), wv = w.to_vector<double>();
  std::vector<double> out(static_cast<size_t>(volume(d.out_sizes)), 0.0);
  for_each_product(d, [&](int64_t yi, int64_t xi, int64_t wi) { out[yi] += xv[xi] * wv[wi]; });
  if (b.defined()) {
    const std::vector<double> bv = b.to_vector<double>();
    const int64_t per_channel = volume(d.out_sizes) / (d.n * d.c_out);
    for (size_t i = 0; i < out.size(); ++i) out[i] += bv[(static_cast<int64_t>(i) / per_channel) % d.c_out];
  }
  return tensor(out, d.out_sizes);
}

struct Grads {
  Tensor input, weight, bias;
};

// The gradients of sum(grad_out * conv(x, w) + bias) in float64.
Grads reference_backward(const ConvCase& c, const Tensor& x, const Tensor& w, const Tensor& grad_out) {
  const Dims d = dims_of(c);
  const std::vector<double> xv = x.to_vector<double>(), wv = w.to_vector<double>(),
                            gv = grad_out.to_vector<double>();
  std::vector<double> gx(xv.size(), 0.0), gw(wv.size(), 0.0), gb(static_cast<size_t>(d.c_out), 0.0);
  for_each_product(d, [&](int64_t yi, int64_t xi, int64_t wi) {
    gx[xi] += gv[yi] * wv[wi];
    gw[wi] += gv[yi] * xv[xi];
  });
  const int64_t per_channel = volume(d.out_sizes) / (d.n * d.c_out);
  for (size_t i = 0; i < gv.size(); ++i) gb[(static_cast<int64_t>(i) / per_channel) % d.c_out] += gv[i];
  return {tensor(gx, c.input), tensor(gw, c.weight), tensor(gb, {d.c_out})};
}

// ---- running the op -----------------------------------------------------------------------

Tensor run_conv(const ConvCase& c, const Tensor& x, const Tensor& w, const Tensor& b) {
  switch (c.spatial()) {
    case 1:
      return conv1d(x, w, b, c.stride, c.padding, c.dilation, c.groups);
    case 2:
      return conv2d(x, w, b, c.stride, c.padding, c.dilation, c.groups);
    default:
      return conv3d(x, w, b, c.stride, c.padding, c.dilation, c.groups);
  }
}

// Sums of many products lose more than one rounding: the absolute tolerance grows with the
// square root of the number of terms (random signs), the relative one is the table's.
Tolerance conv_tolerance(DType dtype, const ConvCase& c) {
  const Dims d = dims_of(c);
  const int64_t terms =
      std::max({volume(c.weight) / d.c_out, volume(d.out_sizes) / d.c_out, volume(c.weight)});
  const Tolerance table = tolerance_for(dtype);
  return {table.atol * std::sqrt(static_cast<double>(terms)), table.rtol};
}

struct Operands {
  Tensor x, w, b;
};

Operands operands(const ConvCase& c, DType dtype, uint64_t seed) {
  return {random_nonzero(c.input, dtype, seed), random_nonzero(c.weight, dtype, seed + 1),
          c.bias ? random_nonzero({c.weight[0]}, dtype, seed + 2) : Tensor()};
}

// The same values laid out transposed (strides of the last two dims swapped).
Tensor transposed_layout(const Tensor& t) { return t.transpose(-1, -2).contiguous().transpose(-1, -2); }

const DType kFloatTypes[] = {DType::Float64, DType::Float32, DType::Float16, DType::BFloat16};

// Float32 convolutions run on oneDNN when the build has it (Note [oneDNN convolutions] in
// kernels/cpu/conv_onednn.h) and on the vol2col + Eigen path otherwise: the tests that
// compare with the naive reference run with oneDNN enabled and disabled, so both paths
// are checked in every build that has both.
TEST(Conv, ForwardMatchesNaiveReferenceInEveryDtype) {
  for (bool onednn : {true, false}) {
    const testing::ScopedFlag setting(set_onednn_enabled, onednn_enabled, onednn);
    for (const ConvCase& c : conv_cases()) {
      for (DType dtype : kFloatTypes) {
        SCOPED_TRACE(c.name + " " + std::string(dtype_name(dtype)) + (onednn ? " oneDNN on" : " oneDNN off"));
        const Operands op = operands(c, dtype, 10);
        const Tensor got = run_conv(c, op.x, op.w, op.b);
        ASSERT_EQ(got.dtype(), dtype);
        EXPECT_TRUE(all_close(got, reference_forward(c, op.x, op.w, op.b).to(dtype), conv_tolerance(dtype, c)));
      }
    }
  }
}

TEST(Conv, NonContiguousOperandsGiveTheSameResult) {
  for (const ConvCase& c : conv_cases()) {
    SCOPED_TRACE(c.name);
    const Operands op = operands(c, DType::Float64, 20);
    const Tensor expected = reference_forward(c, op.x, op.w, op.b);
    const Tensor strided_bias = op.b.defined() ? testing::non_contiguous(op.b) : Tensor();
    EXPECT_TRUE(all_close(run_conv(c, testing::non_contiguous(op.x), op.w, strided_bias), expected));
    EXPECT_TRUE(all_close(run_conv(c, transposed_layout(op.x), transposed_layout(op.w), op.b), expected));
  }
}

TEST(Conv, GradientsMatchNaiveReference) {
  for (bool onednn : {true, false}) {
    const testing::ScopedFlag setting(set_onednn_enabled, onednn_enabled, onednn);
    for (const ConvCase& c : conv_cases()) {
      for (DType dtype : {DType::Float64, DType::Float32, DType::BFloat16}) {
        SCOPED_TRACE(c.name + " " + std::string(dtype_name(dtype)) + (onednn ? " oneDNN on" : " oneDNN off"));
        Operands op = operands(c, dtype, 30);
        op.x.requires_grad_(true);
        op.w.requires_grad_(true);
        if (op.b.defined()) op.b.requires_grad_(true);
        const Tensor out = run_conv(c, op.x, op.w, op.b);
        const Tensor grad_out = random_nonzero(out.sizes(), dtype, 33);
        out.backward(grad_out);
        const Grads expected = reference_backward(c, op.x.detach(), op.w.detach(), grad_out);
        const Tolerance tol = conv_tolerance(dtype, c);
        EXPECT_TRUE(all_close(op.x.grad(), expected.input.to(dtype), tol)) << "grad input";
        EXPECT_TRUE(all_close(op.w.grad(), expected.weight.to(dtype), tol)) << "grad weight";
        if (op.b.defined()) {
          EXPECT_TRUE(all_close(op.b.grad(), expected.bias.to(dtype), tol)) << "grad bias";
        }
      }
    }
  }
}

TEST(Conv, OnlyTheGradientsThatAreNeededAreComputed) {
  const ConvCase& c = conv_cases()[6];  // 2d_groups
  Operands op = operands(c, DType::Float64, 40);
  op.w.requires_grad_(true);
  run_conv(c, op.x, op.w, op.b).sum().backward();
  EXPECT_TRUE(op.w.grad().defined());
  EXPECT_FALSE(op.x.grad().defined());
  EXPECT_FALSE(op.b.grad().defined());
}

TEST(Conv, ConvolutionIsTheFrontDoorsOp) {
  for (const ConvCase& c : conv_cases()) {
    SCOPED_TRACE(c.name);
    const Operands op = operands(c, DType::Float64, 50);
    EXPECT_TRUE(all_equal(convolution(op.x, op.w, op.b, c.stride, c.padding, c.dilation, c.groups),
                          run_conv(c, op.x, op.w, op.b)));
  }
}

TEST(Conv, UnbatchedInputIsABatchOfOne) {
  const Tensor x = random_nonzero({3, 6, 5}, DType::Float64, 60).requires_grad_(true);
  const Tensor w = random_nonzero({4, 3, 3, 2}, DType::Float64, 61);
  const Tensor b = random_nonzero({4}, DType::Float64, 62);
  const Tensor out = conv2d(x, w, b, {2}, {1});
  EXPECT_TRUE(all_equal(out, conv2d(x.detach().unsqueeze(0), w, b, {2}, {1}).squeeze(0)));
  out.sum().backward();
  EXPECT_EQ(x.grad().sizes(), x.sizes());
  const Tensor y = random_nonzero({2, 9}, DType::Float64, 63);
  EXPECT_EQ(conv1d(y, random_nonzero({5, 2, 4}), {}, {1}, {0}).sizes(), (std::vector<int64_t>{5, 6}));
}

TEST(Conv, EmptyBatchGivesEmptyOutputAndZeroGradients) {
  const Tensor x = zeros({0, 2, 5, 5, 5}, {.dtype = DType::Float64}).requires_grad_(true);
  const Tensor w = random_nonzero({3, 2, 3, 3, 3}).requires_grad_(true);
  const Tensor b = random_nonzero({3}).requires_grad_(true);
  const Tensor out = conv3d(x, w, b, {1}, {1});
  EXPECT_EQ(out.sizes(), (std::vector<int64_t>{0, 3, 5, 5, 5}));
  out.sum().backward();
  EXPECT_EQ(x.grad().sizes(), x.sizes());
  EXPECT_TRUE(all_equal(w.grad(), zeros(w.sizes(), {.dtype = DType::Float64})));
  EXPECT_TRUE(all_equal(b.grad(), zeros({3}, {.dtype = DType::Float64})));
}

// Same inputs, same thread count: bit-identical outputs and gradients, both when threads
// split the batch and when they split the column build (batch 1).
TEST(Conv, RepeatedRunsAreBitIdentical) {
  for (int64_t batch : {1, 4}) {
    const ConvCase c{"3d", {batch, 8, 9, 8, 7}, {16, 8, 3, 3, 3}, {2}, {1}};
    const Operands op = operands(c, DType::Float32, 70);
    const auto run = [&] {
      const Tensor x = op.x.detach().requires_grad_(true), w = op.w.detach().requires_grad_(true);
      const Tensor out = run_conv(c, x, w, op.b);
      out.backward(random_nonzero(out.sizes(), DType::Float32, 71));
      return std::array<Tensor, 3>{out.detach(), x.grad(), w.grad()};
    };
    const std::array<Tensor, 3> first = run(), second = run();
    for (size_t i = 0; i < 3; ++i)
      EXPECT_TRUE(all_equal(first[i], second[i])) << "batch " << batch << " tensor " << i;
  }
}

// The CPU backend cuts each pass into work items by the thread count (Note [Convolution
// work items] in kernels/cpu/conv.cpp): every count must give the reference's answer.
TEST(Conv, EveryThreadCountMatchesTheReference) {
  const ConvCase c{"3d_groups", {1, 6, 12, 11, 10}, {8, 3, 3, 3, 3}, {1}, {1}, {1}, 2};
  const Operands op = operands(c, DType::Float64, 80);
  const Tensor grad_out = random_nonzero(dims_of(c).out_sizes, DType::Float64, 81);
  const Tensor expected = reference_forward(c, op.x, op.w, op.b);
  const Grads expected_grads = reference_backward(c, op.x, op.w, grad_out);
  const int saved_threads = omp_get_max_threads();
  // Float64 runs the vol2col path; float32 runs oneDNN where the build has it, whose plans
  // are keyed by the thread count (Note [oneDNN convolutions]).
  for (DType dtype : {DType::Float64, DType::Float32}) {
    const Tolerance tol = conv_tolerance(dtype, c);
    for (int threads : {1, 2, 3, 5, 8}) {
      SCOPED_TRACE("threads " + std::to_string(threads) + " " + std::string(dtype_name(dtype)));
      omp_set_num_threads(threads);
      const Tensor x = op.x.detach().to(dtype).requires_grad_(true);
      const Tensor w = op.w.detach().to(dtype).requires_grad_(true);
      const Tensor out = run_conv(c, x, w, op.b.to(dtype));
      out.backward(grad_out.to(dtype));
      EXPECT_TRUE(all_close(out, expected.to(dtype), tol));
      EXPECT_TRUE(all_close(x.grad(), expected_grads.input.to(dtype), tol)) << "grad input";
      EXPECT_TRUE(all_close(w.grad(), expected_grads.weight.to(dtype), tol)) << "grad weight";
    }
  }
  omp_set_num_threads(saved_threads);
}

// With oneDNN built and enabled, a float32 convolution really runs there: its plans appear
// in the cache (a regression of handles() would otherwise test the vol2col path twice).
TEST(Conv, Float32RunsOnOnednnWhenTheBuildHasIt) {
  if (std::string(cpu::onednn::version()) == "not built") GTEST_SKIP() << "this build has no oneDNN (KILN_ONEDNN)";
  const ConvCase c{"3d", {1, 16, 5, 5, 5}, {16, 16, 3, 3, 3}, {1}, {1}, {1}, 1, false};
  const Operands op = operands(c, DType::Float32, 95);
  const size_t before = cpu::onednn::cached_plans();
  run_conv(c, op.x, op.w, Tensor());
  EXPECT_EQ(cpu::onednn::cached_plans(), before + 1);
  // A shape oneDNN has no plan for yet: disabled, or in float64, it must not get one.
  const ConvCase other{"3d", {1, 16, 6, 5, 4}, {16, 16, 3, 3, 3}, {1}, {1}, {1}, 1, false};
  const Operands other_op = operands(other, DType::Float32, 96);
  {
    const testing::ScopedFlag off(set_onednn_enabled, onednn_enabled, false);
    run_conv(other, other_op.x, other_op.w, Tensor());
  }
  run_conv(other, other_op.x.to(DType::Float64), other_op.w.to(DType::Float64), Tensor());
  EXPECT_EQ(cpu::onednn::cached_plans(), before + 1);
  run_conv(other, other_op.x, other_op.w, Tensor());  // and enabled, float32, it does
  EXPECT_EQ(cpu::onednn::cached_plans(), before + 2);
}

// Note [oneDNN calls without allocations]: each thread keeps its own memories per plan, so
// threads running the same plans at once (a small plan, whose blocked copies are kept, and
// a large one, whose buffers are taken per call) each get the single-thread answer. Under a
// watchdog, as every multi-threaded test.
TEST(Conv, ThreadsRunningTheSamePlansAtOnceEachGetTheAnswer) {
  const std::vector<ConvCase> cases = {ConvCase{"3d", {1, 2, 4, 4, 4}, {3, 2, 3, 3, 3}, {1}, {1}},
                                       ConvCase{"3d", {2, 16, 12, 12, 12}, {16, 16, 3, 3, 3}, {1}, {1}}};
  for (const ConvCase& c : cases) {
    const Operands op = operands(c, DType::Float32, 97);
    const Tensor grad_out = random_nonzero(dims_of(c).out_sizes, DType::Float32, 98);
    const auto run = [&] {
      const Tensor x = op.x.detach().requires_grad_(true), w = op.w.detach().requires_grad_(true);
      const Tensor out = run_conv(c, x, w, op.b);
      out.backward(grad_out);
      return std::array<Tensor, 3>{out.detach(), x.grad(), w.grad()};
    };
    const std::array<Tensor, 3> expected = run();
    std::array<std::array<Tensor, 3>, 4> got;
    testing::with_watchdog(std::chrono::seconds(120), [&] {
      std::vector<std::thread> threads;
      for (size_t t = 0; t < got.size(); ++t) {
        threads.emplace_back([&, t] {
          omp_set_num_threads(1);
          for (int repeat = 0; repeat < 5; ++repeat) got[t] = run();
        });
      }
      for (std::thread& thread : threads) thread.join();
    });
    // Plans are keyed by the thread count: compare with one thread's answer, within the
    // dtype's tolerance (the work split may differ from the main thread's).
    const Tolerance tol = conv_tolerance(DType::Float32, c);
    for (size_t t = 0; t < got.size(); ++t) {
      for (size_t i = 0; i < 3; ++i) EXPECT_TRUE(all_close(got[t][i], expected[i], tol)) << "thread " << t << " tensor " << i;
      for (size_t i = 0; i < 3; ++i) EXPECT_TRUE(all_equal(got[t][i], got[0][i])) << "thread " << t << " tensor " << i;
    }
  }
}

// A float32 convolution and its backward called from inside the caller's own OpenMP
// parallel region finish and give the same result as outside it (oneDNN's backward-weight
// waited forever for threads there; handles() in kernels/cpu/conv_onednn.cpp). The work
// runs under a 120 s watchdog (testing::with_watchdog), so a regression fails instead of hanging.
TEST(Conv, InsideAnOpenMpParallelRegionFinishesAndMatches) {
  const ConvCase c{"3d", {2, 16, 6, 6, 6}, {16, 16, 3, 3, 3}, {1}, {1}, {1}, 1, false};
  const Operands op = operands(c, DType::Float32, 90);
  const Tensor grad_out = random_nonzero(dims_of(c).out_sizes, DType::Float32, 91);
  // Captures by value: after a timeout the detached thread may outlive this test's locals.
  const auto run = [c, op, grad_out] {
    const Tensor x = op.x.detach().requires_grad_(true), w = op.w.detach().requires_grad_(true);
    const Tensor out = run_conv(c, x, w, Tensor());
    out.backward(grad_out);
    return std::array<Tensor, 3>{out.detach(), x.grad(), w.grad()};
  };
  const std::array<Tensor, 3> outside = run();
  auto got = std::make_shared<std::array<Tensor, 3>>();  // shared: a hung body may outlive the test
  testing::with_watchdog(std::chrono::seconds(120), [got, run] {
#pragma omp parallel num_threads(2)
    {
#pragma omp single
      *got = run();
    }
  });
  if (!(*got)[0].defined()) return;  // the watchdog reported the hang
  for (size_t i = 0; i < 3; ++i) EXPECT_TRUE(all_close((*got)[i], outside[i], conv_tolerance(DType::Float32, c))) << i;
}

// ---- errors -------------------------------------------------------------------------------

TEST(Conv, ArgumentErrorsNameTheOpAndTheOffendingValues) {
  const Tensor x = random_nonzero({2, 4, 6, 6}, DType::Float32);
  const Tensor w = random_nonzero({6, 2, 3, 3}, DType::Float32);
  EXPECT_KILN_ERROR(conv2d(x, random_nonzero({6, 4, 3}, DType::Float32)), "conv2d", "4-d weight",
                    "[6, 4, 3]");
  EXPECT_KILN_ERROR(conv2d(random_nonzero({4, 6}, DType::Float32), w, {}, {1}, {0}, {1}, 2), "conv2d",
                    "3-d (unbatched) or 4-d (batched)", "[4, 6]");
  EXPECT_KILN_ERROR(convolution(x, random_nonzero({6, 4}, DType::Float32), {}, {1}, {0}, {1}, 1),
                    "convolution", "1-3 spatial dims", "[6, 4]");
  EXPECT_KILN_ERROR(conv2d(x, w, {}, {1}, {0}, {1}, 3), "conv2d", "C_in = 4", "divisible by groups = 3");
  EXPECT_KILN_ERROR(conv2d(x, w), "conv2d", "expects C_in = 2", "has 4");
  EXPECT_KILN_ERROR(conv2d(x, random_nonzero({5, 2, 3, 3}, DType::Float32), {}, {1}, {0}, {1}, 2), "conv2d",
                    "C_out = 5", "divisible by groups = 2");
  EXPECT_KILN_ERROR(conv2d(x, w, {}, {1}, {0}, {1}, 0), "conv2d", "groups must be positive, got 0");
  EXPECT_KILN_ERROR(conv2d(x, w, {}, {1, 0}, {0}, {1}, 2), "conv2d", "stride must be positive", "[1, 0]");
  EXPECT_KILN_ERROR(conv2d(x, w, {}, {1}, {0}, {-1}, 2), "conv2d", "dilation must be positive", "[-1, -1]");
  EXPECT_KILN_ERROR(conv2d(x, w, {}, {1}, {-1, 0}, {1}, 2), "conv2d", "padding must be non-negative",
                    "[-1, 0]");
  EXPECT_KILN_ERROR(conv2d(x, w, {}, {1, 1, 1}, {0}, {1}, 2), "conv2d", "stride", "1 or 2 values",
                    "[1, 1, 1]");
  EXPECT_KILN_ERROR(conv2d(x, w, {}, {1}, {0}, {4}, 2), "conv2d", "smaller than the dilated kernel",
                    "[9, 9]");
  EXPECT_KILN_ERROR(conv2d(x, random_nonzero({6, 2, 7, 3}, DType::Float32), {}, {1}, {0}, {1}, 2), "conv2d",
                    "padded input's spatial size [6, 6]", "[7, 3]");
  EXPECT_KILN_ERROR(conv2d(x, w.to(DType::Float64), {}, {1}, {0}, {1}, 2), "conv2d", "same dtype", "float32",
                    "float64");
  EXPECT_KILN_ERROR(conv2d(x.to(DType::Int64), w.to(DType::Int64), {}, {1}, {0}, {1}, 2), "conv2d",
                    "floating-point", "int64");
  EXPECT_KILN_ERROR(conv2d(x, w, random_nonzero({5}, DType::Float32), {1}, {0}, {1}, 2), "conv2d",
                    "bias must have shape [6]", "[5]");
  EXPECT_KILN_ERROR(conv2d(x, w, random_nonzero({6}, DType::Float64), {1}, {0}, {1}, 2), "conv2d",
                    "bias must have the input's dtype", "float64");
  EXPECT_KILN_ERROR(conv2d(zeros({2, 4, 0, 6}), w, {}, {1}, {1}, {1}, 2), "conv2d", "non-zero",
                    "[2, 4, 0, 6]");
  EXPECT_KILN_ERROR(conv2d(x, zeros({6, 2, 0, 3}), {}, {1}, {1}, {1}, 2), "conv2d", "non-zero",
                    "[6, 2, 0, 3]");
  EXPECT_KILN_ERROR(conv1d(x, w), "conv1d", "3-d weight");
  EXPECT_KILN_ERROR(conv3d(x, w), "conv3d", "5-d weight");
  EXPECT_KILN_ERROR(conv2d(Tensor(), w), "conv2d", "undefined");
}

TEST(Conv, DevicesMustMatch) {
  const Tensor x = random_nonzero({1, 2, 4, 4}, DType::Float32);
  const Tensor w = random_nonzero({2, 2, 3, 3}, DType::Float32);
  if (cuda_is_available()) {
    EXPECT_KILN_ERROR(conv2d(x, w.to(Device::cuda())), "conv2d", "same device");
    EXPECT_KILN_ERROR(conv2d(x, w, random_nonzero({2}, DType::Float32).to(Device::cuda())), "conv2d",
                      "device");
  } else {
    EXPECT_KILN_ERROR(conv2d(x, w.to(Device::cuda())), "CUDA is not available");
  }
}

// ---- gradient checks (float64, central differences) -----------------------------------

using Inputs = std::vector<Tensor>;
using testing::grad_leaf;
using testing::strided_grad_leaf;

KILN_GRADCHECK_TEST(conv1d) {
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return conv1d(v[0], v[1], v[2], {2}, {1}, {2}, 2); },
                        {grad_leaf({2, 4, 9}, 1), grad_leaf({6, 2, 3}, 2), grad_leaf({6}, 3)}));
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return conv1d(v[0], v[1]); },
                        {strided_grad_leaf({3, 7}, 4), strided_grad_leaf({2, 3, 2}, 5)}));
}

KILN_GRADCHECK_TEST(conv2d) {
  EXPECT_TRUE(gradcheck(
      [](const Inputs& v) {
        return conv2d(v[0], v[1], v[2], {2, 1}, {1, 2}, {1, 2}, 2);
      },
      {grad_leaf({2, 4, 5, 6}, 6), grad_leaf({4, 2, 3, 2}, 7), grad_leaf({4}, 8)}));
  EXPECT_TRUE(
      gradcheck([](const Inputs& v) { return conv2d(v[0], v[1], v[2], {1}, {0}, {1}, 3); },
                {strided_grad_leaf({2, 3, 3, 4}, 9), grad_leaf({6, 1, 1, 1}, 10), grad_leaf({6}, 11)}));
}

KILN_GRADCHECK_TEST(conv3d) {
  EXPECT_TRUE(gradcheck(
      [](const Inputs& v) {
        return conv3d(v[0], v[1], v[2], {2, 1, 2}, {1}, {1, 2, 1}, 2);
      },
      {grad_leaf({2, 4, 4, 5, 4}, 12), grad_leaf({2, 2, 2, 2, 3}, 13), grad_leaf({2}, 14)}));
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return conv3d(v[0], v[1], {}, {2}, {0}); },
                        {strided_grad_leaf({2, 3, 3, 3}, 15), grad_leaf({3, 2, 1, 1, 1}, 16)}));
}

KILN_GRADCHECK_TEST(convolution) {
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return convolution(v[0], v[1], v[2], {1}, {1}, {1}, 2); },
                        {grad_leaf({1, 2, 4, 3}, 17), grad_leaf({4, 1, 2, 2}, 18), grad_leaf({4}, 19)}));
}

}  // namespace
}  // namespace kiln
