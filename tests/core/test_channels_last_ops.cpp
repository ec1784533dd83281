// Every op of a ResNet/DenseNet step on channels-last tensors (CPU backend): the same
// values and gradients as on NCDHW, in every float dtype, the result and the gradients
// laid out channels-last (PyTorch's propagation rules), from dense and from strided
// channels-last inputs; float64 gradient checks with channels-last inputs; and no layout
// conversion anywhere in a chain of them (Note [Layout conversions]). The CUDA kernels'
// twin is tests/cuda/test_cuda_channels_last.cpp.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "core/flags.h"
#include "core/memory_format.h"
#include "core/ops.h"
#include "kernels/cpu/conv_onednn.h"
#include "tests/gradcheck.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

using namespace kiln::testing;

constexpr MemoryFormat kCl = MemoryFormat::ChannelsLast3d;

// An op under test: its inputs [0] is the activation; the rest are parameters (weights,
// biases) that stay row-major in both runs unless `cl_params` lays them out channels-last.
struct OpCase {
  std::string name;
  std::vector<std::vector<int64_t>> sizes;  // of every input
  std::function<Tensor(const std::vector<Tensor>&)> op;
  bool cl_params = false;  // 5-d parameters laid out channels-last too (a converted model)
};

std::vector<OpCase> op_cases() {
  const std::vector<int64_t> x = {2, 6, 5, 6, 7};
  return {
      {"conv3d", {x, {4, 6, 3, 3, 3}, {4}}, [](const auto& t) { return conv3d(t[0], t[1], t[2], {1}, {1}); }},
      {"conv3d_channels_last_weight",
       {x, {4, 6, 3, 3, 3}},
       [](const auto& t) { return conv3d(t[0], t[1], {}, {2}, {1}); },
       true},
      {"conv3d_grouped_1x1",
       {x, {6, 3, 1, 1, 1}},
       [](const auto& t) { return conv3d(t[0], t[1], {}, {1}, {0}, {1}, 2); },
       true},
      // A one-class head's output is dense in both layouts: oneDNN's channels-last
      // kernels still take it (Note [oneDNN and channels-last] in
      // kernels/cpu/conv_onednn.cpp). A one-channel input is the same case at a stem, run
      // by every model in tests/nn/models/test_channels_last_training.cpp.
      {"conv3d_one_output_channel",
       {x, {1, 6, 1, 1, 1}, {1}},
       [](const auto& t) { return conv3d(t[0], t[1], t[2]); },
       true},
      {"conv3d_dilated_strided",
       {x, {4, 6, 3, 2, 3}},
       [](const auto& t) {
         return conv3d(t[0], t[1], {}, {2, 1, 2}, {2, 1, 0}, {2, 1, 1});
       },
       true},
      {"conv_transpose3d",
       {x, {6, 3, 2, 2, 2}},
       [](const auto& t) { return conv_transpose3d(t[0], t[1], {}, {2}); },
       true},
      {"batch_norm_train",
       {x, {6}, {6}},
       [](const auto& t) {
         return batch_norm(t[0], zeros({6}), ones({6}), t[1], t[2], /*training=*/true, 0.1, 1e-5);
       }},
      {"batch_norm_eval",
       {x, {6}, {6}},
       [](const auto& t) {
         return batch_norm(t[0], full({6}, 0.25), full({6}, 1.5), t[1], t[2], /*training=*/false, 0.1, 1e-5);
       }},
      {"batch_norm_relu",
       {x, {6}, {6}},
       [](const auto& t) {
         return batch_norm_relu(t[0], zeros({6}), ones({6}), t[1], t[2], /*training=*/true, 0.1, 1e-5);
       }},
      {"batch_norm_add_relu",
       {x, x, {6}, {6}},
       [](const auto& t) {
         return batch_norm_add_relu(t[0], t[1], zeros({6}), ones({6}), t[2], t[3], /*training=*/true, 0.1,
                                    1e-5);
       },
       true},
      {"batch_norm_add_relu_row_major_residual",
       {x, x, {6}, {6}},
       [](const auto& t) {
         return batch_norm_add_relu(t[0], t[1], zeros({6}), ones({6}), t[2], t[3], /*training=*/true, 0.1,
                                    1e-5);
       }},
      {"max_pool3d", {x}, [](const auto& t) { return max_pool3d(t[0], {3}, {2}, {1}); }},
      {"max_pool3d_ceil_dilated",
       {x},
       [](const auto& t) { return max_pool3d(t[0], {2}, {2}, {0}, {2}, true); }},
      {"avg_pool3d", {x}, [](const auto& t) { return avg_pool3d(t[0], {3}, {2}, {1}, false, false); }},
      {"avg_pool3d_ceil", {x}, [](const auto& t) { return avg_pool3d(t[0], {2}, {2}, {1}, true, true); }},
      {"adaptive_avg_pool3d",
       {x},
       [](const auto& t) {
         return adaptive_avg_pool3d(t[0], {2, 3, 4});
       }},
      {"global_avg_pool3d", {x}, [](const auto& t) { return adaptive_avg_pool3d(t[0], {1}); }},
      {"relu_add", {x, x}, [](const auto& t) { return relu(add(t[0], t[1])); }, true},
      {"cat_channels",
       {x},
       [](const auto& t) {
         return cat({t[0], mul(t[0], 2.0)}, 1);
       }},
      {"interpolate_trilinear",
       {x},
       [](const auto& t) {
         return interpolate(t[0], {.size = {7, 9, 8}, .mode = InterpolateMode::Linear});
       }},
      {"interpolate_nearest", {x}, [](const auto& t) { return interpolate(t[0], {.scale_factor = {2.0}}); }},
  };
}

std::vector<Tensor> leaves(const OpCase& c, DType dtype, bool channels_last, bool strided) {
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < c.sizes.size(); ++i) {
    Tensor t = random_for(c.sizes[i], dtype, 11 + i);
    if (channels_last && t.dim() == 5 && (i == 0 || c.cl_params)) {
      if (strided && i == 0) {  // channels-last strides with gaps: every other element of a wider volume
        std::vector<int64_t> wide = c.sizes[i];
        wide[4] *= 2;
        Tensor big = zeros(wide, {.dtype = dtype}).contiguous(kCl);
        big.slice(4, 0, wide[4], 2).copy_(t);
        t = big.slice(4, 0, wide[4], 2);
        EXPECT_EQ(t.suggest_memory_format(), kCl);
        EXPECT_FALSE(t.is_contiguous(kCl));
      } else {
        t = t.contiguous(kCl);
      }
    }
    inputs.push_back(t.requires_grad_(true));
  }
  return inputs;
}

// Forward and backward, returning the output and every input's gradient.
std::vector<Tensor> run(const OpCase& c, const std::vector<Tensor>& inputs, const Tensor& upstream) {
  const Tensor out = c.op(inputs);
  out.backward(upstream.to(out.dtype()).contiguous(out.suggest_memory_format()));
  std::vector<Tensor> results = {out.detach()};
  for (const Tensor& t : inputs) results.push_back(t.grad());
  return results;
}

class ChannelsLastOps : public ::testing::TestWithParam<DType> {};

TEST_P(ChannelsLastOps, MatchNcdhwAndStayChannelsLast) {
  const DType dtype = GetParam();
  const Tolerance tol = tolerance_for(dtype);
  for (const OpCase& c : op_cases()) {
    for (const bool strided : {false, true}) {
      SCOPED_TRACE(c.name + (strided ? " (strided channels-last input)" : ""));
      const Tensor out_shape = c.op(leaves(c, dtype, false, false)).detach();
      const Tensor upstream = random_for(out_shape.sizes(), DType::Float64, 99);
      const std::vector<Tensor> expected = run(c, leaves(c, dtype, false, false), upstream);
      const std::vector<Tensor> inputs = leaves(c, dtype, true, strided);
      const std::vector<Tensor> actual = run(c, inputs, upstream);
      EXPECT_TRUE(all_close(actual[0], expected[0], tol)) << "output";
      EXPECT_TRUE(actual[0].is_contiguous(kCl))
          << "the output keeps the input's layout, strides " << actual[0].strides();
      for (size_t i = 1; i < actual.size(); ++i) {
        ASSERT_TRUE(actual[i].defined() && expected[i].defined()) << "gradient of input " << i - 1;
        EXPECT_TRUE(all_close(actual[i], expected[i], tol)) << "gradient of input " << i - 1;
        const Tensor& leaf = inputs[i - 1];
        if (leaf.dim() == 5 && is_non_overlapping_and_dense(leaf.sizes(), leaf.strides())) {
          EXPECT_TRUE(same_strides_where_it_matters(leaf.sizes(), actual[i].strides(), leaf.strides()))
              << "gradient of input " << i - 1 << " laid out as the leaf (Note [Gradient layout])";
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, ChannelsLastOps,
                         ::testing::Values(DType::Float32, DType::Float64, DType::BFloat16, DType::Float16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// The reference convolution path (float64, or oneDNN off) converts channels-last operands
// and says so (Note [Reference convolution layout]); oneDNN's float32 path takes them as
// they are.
TEST(ChannelsLastConv, OneDnnTakesChannelsLastAsItIsAndTheReferencePathCountsItsConversions) {
  const Tensor x = random_for({2, 8, 6, 6, 6}, DType::Float32, 3).contiguous(kCl);
  const Tensor w = random_for({8, 8, 3, 3, 3}, DType::Float32, 4).contiguous(kCl);
  const size_t channels_last_plans = cpu::onednn::cached_channels_last_plans();
  const Tensor expected = conv3d(x.contiguous(), w.contiguous(), {}, {1}, {1});
  EXPECT_EQ(cpu::onednn::cached_channels_last_plans(), channels_last_plans) << "NCDHW runs blocked";
  int64_t before = layout_conversions();
  const Tensor y = conv3d(x, w, {}, {1}, {1});
  if (onednn_enabled()) {
    EXPECT_EQ(layout_conversions(), before) << "oneDNN reads and writes NDHWC itself";
    EXPECT_EQ(cpu::onednn::cached_channels_last_plans(), channels_last_plans + 1)
        << "on its channels-last kernels (Note [oneDNN and channels-last])";
  }
  EXPECT_TRUE(y.is_contiguous(kCl));
  EXPECT_TRUE(all_close(y, expected, tolerance_for(DType::Float32)));
  const bool was_enabled = onednn_enabled();
  set_onednn_enabled(false);
  before = layout_conversions();
  const Tensor reference = conv3d(x, w, {}, {1}, {1});
  set_onednn_enabled(was_enabled);
  EXPECT_EQ(layout_conversions() - before, 3) << "input, weight and output converted for vol2col";
  EXPECT_TRUE(reference.is_contiguous(kCl));
  EXPECT_TRUE(all_close(reference, expected, tolerance_for(DType::Float32)));
}

// A 2-D convolution in NHWC (MemoryFormat::ChannelsLast) runs on oneDNN's channels-last
// kernels as the 3-D ones do: the same values and gradients as NCHW, the results NHWC.
TEST(ChannelsLastConv, TwoDimensionalNhwcMatchesNchw) {
  constexpr MemoryFormat kNhwc = MemoryFormat::ChannelsLast;
  const Tensor x = random_for({2, 5, 9, 8}, DType::Float32, 5);
  const Tensor w = random_for({6, 5, 3, 3}, DType::Float32, 6);
  const Tensor dy = random_for({2, 6, 5, 4}, DType::Float32, 7);
  const auto run = [&](bool nhwc) {
    const Tensor xs = (nhwc ? x.contiguous(kNhwc) : x.clone()).requires_grad_(true);
    const Tensor ws = (nhwc ? w.contiguous(kNhwc) : w.clone()).requires_grad_(true);
    const Tensor y = conv2d(xs, ws, {}, {2}, {1});
    y.backward(nhwc ? dy.contiguous(kNhwc) : dy);
    return std::vector<Tensor>{y, xs.grad(), ws.grad()};
  };
  const std::vector<Tensor> nchw = run(false), nhwc = run(true);
  for (size_t i = 0; i < nchw.size(); ++i) {
    EXPECT_TRUE(nhwc[i].is_contiguous(kNhwc)) << i;
    EXPECT_TRUE(all_close(nhwc[i], nchw[i], tolerance_for(DType::Float32))) << i;
  }
}

// Gradient checks with channels-last inputs (float64, central differences).
TEST(ChannelsLastGradcheck, Conv3d) {
  const Tensor x = grad_leaf({2, 3, 4, 4, 3}, 1).detach().contiguous(kCl).requires_grad_(true);
  const Tensor w = grad_leaf({4, 3, 2, 3, 2}, 2).detach().contiguous(kCl).requires_grad_(true);
  const Tensor b = grad_leaf({4}, 3);
  EXPECT_TRUE(gradcheck(
      [](const auto& t) {
        return conv3d(t[0], t[1], t[2], {1, 2, 1}, {1, 0, 1});
      },
      {x, w, b}));
}

TEST(ChannelsLastGradcheck, BatchNormTrainingWithRelu) {
  const Tensor x = grad_leaf({3, 4, 3, 2, 3}, 4).detach().contiguous(kCl).requires_grad_(true);
  const Tensor w = grad_leaf({4}, 5), b = grad_leaf({4}, 6);
  EXPECT_TRUE(gradcheck(
      [](const auto& t) {
        return batch_norm(t[0], Tensor(), Tensor(), t[1], t[2], /*training=*/true, 0.1, 1e-5);
      },
      {x, w, b}));
  // ReLU's kink: values of y at 0 are measure-zero for these random inputs.
  EXPECT_TRUE(gradcheck(
      [](const auto& t) {
        return batch_norm_relu(t[0], Tensor(), Tensor(), t[1], t[2], /*training=*/true, 0.1, 1e-5);
      },
      {x, w, b}));
}

TEST(ChannelsLastGradcheck, BatchNormAddRelu) {
  const Tensor x = grad_leaf({2, 4, 3, 2, 3}, 8).detach().contiguous(kCl).requires_grad_(true);
  const Tensor r = grad_leaf({2, 4, 3, 2, 3}, 9).detach().contiguous(kCl).requires_grad_(true);
  const Tensor w = grad_leaf({4}, 10), b = grad_leaf({4}, 11);
  EXPECT_TRUE(gradcheck(
      [](const auto& t) {
        return batch_norm_add_relu(t[0], t[1], Tensor(), Tensor(), t[2], t[3], /*training=*/true, 0.1, 1e-5);
      },
      {x, r, w, b}));
}

TEST(ChannelsLastGradcheck, Pooling) {
  const Tensor x = grad_leaf({2, 3, 5, 4, 5}, 7).detach().contiguous(kCl).requires_grad_(true);
  EXPECT_TRUE(gradcheck([](const auto& t) { return max_pool3d(t[0], {3}, {2}, {1}); }, {x}));
  EXPECT_TRUE(gradcheck([](const auto& t) { return avg_pool3d(t[0], {3}, {2}, {1}, true, false); }, {x}));
  EXPECT_TRUE(gradcheck([](const auto& t) { return adaptive_avg_pool3d(t[0], {2, 3, 2}); }, {x}));
}

// A batch of one is channels-last whatever its batch stride, so the gradient reaching a
// max pool may have another batch stride than the pool's indices (a U-Net's decoder gave
// one): the backward takes it, and its result is the contiguous batch's.
TEST(ChannelsLastOps, MaxPoolBackwardTakesAGradientOfAnyBatchStride) {
  const Tensor x = random_for({1, 4, 4, 6, 4}, DType::Float32, 3).contiguous(kCl).requires_grad_(true);
  const Tensor y = max_pool3d(x, {2}, {2});
  const Tensor g_dense = random_for({1, 4, 2, 3, 2}, DType::Float32, 4).contiguous(kCl);
  Tensor g = empty_strided({1, 4, 2, 3, 2}, {1, 1, 24, 8, 4});  // NDHWC with a batch stride of 1
  g.copy_(g_dense);
  ASSERT_TRUE(g.is_contiguous(kCl));
  ASSERT_NE(g.strides(), g_dense.strides());
  y.backward(g);
  const Tensor x2 = x.detach().clone().requires_grad_(true);
  max_pool3d(x2, {2}, {2}).backward(g_dense);
  EXPECT_TRUE(all_equal(x.grad(), x2.grad()));
}

// A residual block's chain on channels-last tensors, forward and backward: convolutions,
// batch norms, ReLUs, the residual add (apart and fused), pooling, concatenation. Not one
// layout conversion.
TEST(ChannelsLastOps, AResidualBlockMakesNoLayoutConversion) {
  if (!onednn_enabled()) GTEST_SKIP() << "the reference convolution path converts by design (oneDNN is off)";
  const Tensor x = random_for({2, 8, 8, 8, 8}, DType::Float32, 1).contiguous(kCl).requires_grad_(true);
  const Tensor w1 = random_for({8, 8, 3, 3, 3}, DType::Float32, 2).contiguous(kCl).requires_grad_(true);
  const Tensor w2 = random_for({8, 8, 3, 3, 3}, DType::Float32, 3).contiguous(kCl).requires_grad_(true);
  const Tensor gamma = ones({8}).requires_grad_(true), beta = zeros({8}).requires_grad_(true);
  const Tensor mean = zeros({8}), var = ones({8});
  const int64_t before = layout_conversions();
  Tensor h = batch_norm_relu(conv3d(x, w1, {}, {1}, {1}), mean, var, gamma, beta, true, 0.1, 1e-5);
  const Tensor tail = batch_norm(conv3d(h, w2, {}, {1}, {1}), mean, var, gamma, beta, true, 0.1, 1e-5);
  h = relu(add(tail, x));
  h = batch_norm_add_relu(conv3d(h, w2, {}, {1}, {1}), h, mean, var, gamma, beta, true, 0.1, 1e-5);
  h = cat({max_pool3d(h, {3}, {2}, {1}), avg_pool3d(h, {2}, {2})}, 1);
  const Tensor loss = adaptive_avg_pool3d(h, {1}).sum();
  loss.backward();
  EXPECT_EQ(layout_conversions() - before, 0);
  EXPECT_TRUE(w1.grad().is_contiguous(kCl));
  EXPECT_TRUE(x.grad().is_contiguous(kCl));
}

// The counter counts a conversion and nothing else.
TEST(LayoutConversions, CountCopiesBetweenTwoDenseLayoutsOnly) {
  const Tensor x = random_for({2, 3, 4, 4, 4}, DType::Float32, 1);
  int64_t before = layout_conversions();
  const Tensor cl = x.contiguous(kCl);
  EXPECT_EQ(layout_conversions() - before, 1) << "row-major to channels-last";
  before = layout_conversions();
  (void)cl.clone();                        // keeps the layout
  (void)x.slice(4, 0, 4, 2).contiguous();  // a gather from a strided view
  (void)cl.contiguous(kCl);                // already so: no copy at all
  EXPECT_EQ(layout_conversions() - before, 0);
  (void)cl.contiguous();
  EXPECT_EQ(layout_conversions() - before, 1) << "channels-last to row-major";
}

// Dropout's mask is laid out as its input (its numbers drawn in memory order), so the
// product runs in one order and keeps the layout; every value is 0 or x / (1 - p).
TEST(ChannelsLastOps, DropoutKeepsTheLayout) {
  const Tensor x = random_for({2, 4, 3, 5, 6}, DType::Float32, 5).contiguous(kCl);
  manual_seed(3);
  const Tensor y = dropout(x, 0.25, /*training=*/true);
  EXPECT_TRUE(y.is_contiguous(kCl));
  const Tensor kept = ne(y, 0.0);
  EXPECT_TRUE(all_close(where(kept, div(y, x), 1.0 / 0.75), full(y.sizes(), 1.0 / 0.75)));
  const double fraction = kept.to(DType::Float64).mean().item<double>();
  EXPECT_GT(fraction, 0.65);
  EXPECT_LT(fraction, 0.85);
}

}  // namespace
}  // namespace kiln
