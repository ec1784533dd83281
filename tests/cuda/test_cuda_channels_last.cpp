// The CUDA backend on channels-last operands against the CPU backend: batch norm (the
// channels-last kernels of kernels/cuda/batch_norm_channels_last.cu: training and eval,
// with and without the fused ReLU, channel counts on and off the vector width, enough
// rows for the split grid), max / average / adaptive pooling (Note [Pooling in either
// layout]) and cuDNN convolutions in NDHWC (Note [cuDNN layouts]), forward and backward,
// in every float dtype, from dense and strided channels-last inputs. Every result and
// gradient must come back channels-last, and a chain of them must make no layout
// conversion. Skips without a GPU.
#include <functional>
#include <string>
#include <vector>

#include "core/memory_format.h"
#include "core/ops.h"
#include "tests/cuda/cuda_test_util.h"

namespace kiln {
namespace {

using testing::kCuda;
constexpr MemoryFormat kCl = MemoryFormat::ChannelsLast3d;
constexpr double kSlack = 8.0;  // the GPU sums in float and in another order than the CPU

struct Case {
  std::string name;
  std::vector<std::vector<int64_t>> sizes;
  std::function<Tensor(const std::vector<Tensor>&)> op;
};

std::vector<Case> cases() {
  const std::vector<int64_t> odd = {2, 6, 5, 6, 7};      // C = 6: the scalar (unvectorised) path
  const std::vector<int64_t> wide = {4, 32, 9, 10, 11};  // C = 32: vectors; 3960 rows: split grid
  std::vector<Case> out;
  for (const auto& x : {odd, wide}) {
    const int64_t c = x[1];
    const std::string tag = "_c" + std::to_string(c);
    out.push_back({"batch_norm_train" + tag, {x, {c}, {c}}, [c](const auto& t) {
                     return batch_norm(t[0], zeros({c}, {.dtype = DType::Float32, .device = t[0].device()}),
                                       ones({c}, {.dtype = DType::Float32, .device = t[0].device()}), t[1],
                                       t[2], true, 0.1, 1e-5);
                   }});
    out.push_back({"batch_norm_relu_train" + tag, {x, {c}, {c}}, [c](const auto& t) {
                     return batch_norm_relu(t[0],
                                            zeros({c}, {.dtype = DType::Float32, .device = t[0].device()}),
                                            ones({c}, {.dtype = DType::Float32, .device = t[0].device()}),
                                            t[1], t[2], true, 0.1, 1e-5);
                   }});
    out.push_back({"batch_norm_add_relu_train" + tag, {x, x, {c}, {c}}, [c](const auto& t) {
                     return batch_norm_add_relu(
                         t[0], t[1], zeros({c}, {.dtype = DType::Float32, .device = t[0].device()}),
                         ones({c}, {.dtype = DType::Float32, .device = t[0].device()}), t[2], t[3], true, 0.1,
                         1e-5);
                   }});
    out.push_back({"batch_norm_eval" + tag, {x, {c}, {c}}, [c](const auto& t) {
                     return batch_norm(t[0],
                                       full({c}, 0.25, {.dtype = DType::Float32, .device = t[0].device()}),
                                       full({c}, 1.5, {.dtype = DType::Float32, .device = t[0].device()}),
                                       t[1], t[2], false, 0.1, 1e-5);
                   }});
    out.push_back({"max_pool3d" + tag, {x}, [](const auto& t) { return max_pool3d(t[0], {3}, {2}, {1}); }});
    out.push_back({"avg_pool3d" + tag, {x}, [](const auto& t) {
                     return avg_pool3d(t[0], {3}, {2}, {1}, true, false);
                   }});
    out.push_back({"adaptive_avg_pool3d" + tag, {x}, [](const auto& t) {
                     return adaptive_avg_pool3d(t[0], {2, 3, 4});
                   }});
    out.push_back(
        {"global_avg_pool3d" + tag, {x}, [](const auto& t) { return adaptive_avg_pool3d(t[0], {1}); }});
    out.push_back({"conv3d" + tag, {x, {8, c, 3, 3, 3}}, [](const auto& t) {
                     return conv3d(t[0], t[1], {}, {1}, {1});
                   }});
    out.push_back({"conv3d_stride2" + tag, {x, {8, c, 3, 3, 3}}, [](const auto& t) {
                     return conv3d(t[0], t[1], {}, {2}, {1});
                   }});
  }
  return out;
}

// The case's inputs on `device`: the activation (and 5-d weights) channels-last on the
// GPU, contiguous on the CPU reference; `strided` gives the GPU activation gaps.
std::vector<Tensor> inputs_for(const Case& c, DType dtype, Device device, bool strided) {
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < c.sizes.size(); ++i) {
    Tensor t = testing::random_for(c.sizes[i], dtype, 21 + i).to(device);
    if (device.is_cuda() && t.dim() == 5) {
      if (strided && i == 0) {
        std::vector<int64_t> wide = c.sizes[i];
        wide[4] *= 2;
        Tensor big = zeros(wide, {.dtype = dtype, .device = device}).contiguous(kCl);
        big.slice(4, 0, wide[4], 2).copy_(t);
        t = big.slice(4, 0, wide[4], 2);
      } else {
        t = t.contiguous(kCl);
      }
    }
    inputs.push_back(t.requires_grad_(true));
  }
  return inputs;
}

class CudaChannelsLast : public ::testing::TestWithParam<DType> {};

TEST_P(CudaChannelsLast, OpsMatchTheCpuAndStayChannelsLast) {
  KILN_REQUIRE_CUDA();
  const DType dtype = GetParam();
  testing::Tolerance tol = testing::tolerance_for(dtype);
  tol.atol *= kSlack;
  tol.rtol *= kSlack;
  for (const Case& c : cases()) {
    for (const bool strided : {false, true}) {
      SCOPED_TRACE(c.name + (strided ? " (strided input)" : ""));
      const std::vector<Tensor> cpu_in = inputs_for(c, dtype, Device::cpu(), false);
      const Tensor cpu_out = c.op(cpu_in);
      const Tensor upstream = testing::random_for(cpu_out.sizes(), dtype, 77);
      cpu_out.backward(upstream);
      const std::vector<Tensor> gpu_in = inputs_for(c, dtype, kCuda, strided);
      const Tensor gpu_out = c.op(gpu_in);
      gpu_out.backward(upstream.to(kCuda).contiguous(kCl));
      EXPECT_TRUE(gpu_out.is_contiguous(kCl)) << "strides " << gpu_out.strides();
      EXPECT_TRUE(testing::all_close(gpu_out.to(Device::cpu()), cpu_out.detach(), tol)) << "output";
      for (size_t i = 0; i < cpu_in.size(); ++i) {
        ASSERT_TRUE(gpu_in[i].grad().defined()) << "gradient of input " << i;
        EXPECT_TRUE(testing::all_close(gpu_in[i].grad().to(Device::cpu()), cpu_in[i].grad(), tol))
            << "gradient of input " << i;
        if (gpu_in[i].dim() == 5 && gpu_in[i].is_contiguous(kCl)) {
          EXPECT_TRUE(gpu_in[i].grad().is_contiguous(kCl)) << "gradient of input " << i << " laid out as it";
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaChannelsLast,
                         ::testing::Values(DType::Float32, DType::Float64, DType::BFloat16, DType::Float16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// A residual block in NDHWC on the GPU, forward and backward: not one layout conversion
// (cuDNN reads and writes the layout itself; batch norm, pooling and the add keep it).
TEST(CudaChannelsLastChain, AResidualBlockMakesNoLayoutConversion) {
  KILN_REQUIRE_CUDA();
  const TensorOptions on_gpu{.dtype = DType::Float32, .device = kCuda};
  const Tensor x =
      testing::random_for({2, 16, 8, 8, 8}, DType::Float32, 1).to(kCuda).contiguous(kCl).requires_grad_(true);
  const Tensor w = testing::random_for({16, 16, 3, 3, 3}, DType::Float32, 2)
                       .to(kCuda)
                       .contiguous(kCl)
                       .requires_grad_(true);
  const Tensor gamma = ones({16}, on_gpu).requires_grad_(true),
               beta = zeros({16}, on_gpu).requires_grad_(true);
  const int64_t before = layout_conversions();
  Tensor h = batch_norm_relu(conv3d(x, w, {}, {1}, {1}), Tensor(), Tensor(), gamma, beta, true, 0.1, 1e-5);
  h = relu(add(batch_norm(conv3d(h, w, {}, {1}, {1}), Tensor(), Tensor(), gamma, beta, true, 0.1, 1e-5), x));
  h = batch_norm_add_relu(conv3d(h, w, {}, {1}, {1}), h, Tensor(), Tensor(), gamma, beta, true, 0.1, 1e-5);
  h = cat({max_pool3d(h, {3}, {2}, {1}), avg_pool3d(h, {2}, {2})}, 1);
  adaptive_avg_pool3d(h, {1}).sum().backward();
  EXPECT_EQ(layout_conversions() - before, 0);
  EXPECT_TRUE(w.grad().is_contiguous(kCl));
  EXPECT_TRUE(x.grad().is_contiguous(kCl));
}

}  // namespace
}  // namespace kiln
