// The bundled models' shared factories, initialisation schemes and I3D inflation
// (layers.h).
#include "nn/models/layers.h"

#include <cmath>
#include <map>
#include <string>

#include "core/autograd/grad_mode.h"
#include "core/error.h"
#include "core/ops/elementwise.h"
#include "core/ops/factory.h"
#include "nn/flatten.h"
#include "nn/init.h"
#include "nn/linear.h"
#include "nn/pooling.h"

namespace kiln::nn::models {

std::shared_ptr<Conv3d> conv3d_no_bias(int64_t in_channels, int64_t out_channels,
                                       std::vector<int64_t> kernel_size, std::vector<int64_t> stride,
                                       std::vector<int64_t> padding, std::vector<int64_t> dilation,
                                       int64_t groups) {
  return std::make_shared<Conv3d>(Conv3dOptions{.in_channels = in_channels,
                                                .out_channels = out_channels,
                                                .kernel_size = std::move(kernel_size),
                                                .stride = std::move(stride),
                                                .padding = std::move(padding),
                                                .dilation = std::move(dilation),
                                                .groups = groups,
                                                .bias = false});
}

std::shared_ptr<Sequential> pool_flatten_linear(int64_t in_features, int64_t classes) {
  return std::make_shared<Sequential>(std::initializer_list<std::shared_ptr<Layer>>{
      std::make_shared<AdaptiveAvgPool3d>(AdaptiveAvgPool3dOptions{.output_size = {1}}),
      std::make_shared<Flatten>(),
      std::make_shared<Linear>(LinearOptions{.in_features = in_features, .out_features = classes})});
}

std::shared_ptr<BatchNorm3d> batch_norm3d(int64_t channels, bool fused_relu) {
  return std::make_shared<BatchNorm3d>(BatchNorm3dOptions{.num_features = channels, .relu = fused_relu});
}

Tensor inflate_2d(const Tensor& kernel, int64_t depth) {
  KILN_CHECK(kernel.defined() && kernel.dim() == 4,
             "inflate_2d: expected a 2D kernel [O, I, h, w], got shape ",
             sizes_or_none(kernel));
  KILN_CHECK(depth > 0, "inflate_2d: depth must be positive, got ", depth);
  const std::vector<int64_t> sizes = {kernel.size(0), kernel.size(1), depth, kernel.size(2), kernel.size(3)};
  return div(kernel.unsqueeze(2).expand(sizes), static_cast<double>(depth));
}

namespace {

// PyTorch's Conv2d default for a [O, I, h, w] kernel (Note [Default layer initialisation]
// in nn/linear.cpp), inflated.
void inflate_default_2d_init(Tensor& weight, Generator* generator) {
  Tensor kernel = empty({weight.size(0), weight.size(1), weight.size(3), weight.size(4)},
                        {.dtype = weight.dtype(), .device = weight.device()});
  init::kaiming_uniform_(kernel, std::sqrt(5.0), init::FanMode::FanIn, "leaky_relu", generator);
  NoGradGuard no_grad;
  weight.copy_(inflate_2d(kernel, weight.size(2)));
}

void initialise_conv(Conv3d& conv, ConvInit init, Generator* generator) {
  switch (init) {
    case ConvInit::KaimingNormalFanOut:
      init::kaiming_normal_(conv.weight, 0.0, init::FanMode::FanOut, "relu", generator);
      break;
    case ConvInit::KaimingNormalFanIn:
      init::kaiming_normal_(conv.weight, 0.0, init::FanMode::FanIn, "relu", generator);
      break;
    case ConvInit::PyTorchDefault:
      conv.reset_parameters(generator);
      return;
    case ConvInit::I3dInflation:
      inflate_default_2d_init(conv.weight, generator);
      break;
  }
  if (conv.bias.defined()) init::zeros_(conv.bias);
}

}  // namespace

void initialise(Module& model, ConvInit init, bool zero_linear_bias, Generator* generator) {
  for (const auto& [name, module] : model.named_modules()) {
    if (auto* conv = dynamic_cast<Conv3d*>(module.get())) {
      initialise_conv(*conv, init, generator);
    } else if (auto* norm = dynamic_cast<BatchNormNd*>(module.get())) {
      if (norm->weight.defined()) init::ones_(norm->weight);
      if (norm->bias.defined()) init::zeros_(norm->bias);
    } else if (auto* linear = dynamic_cast<Linear*>(module.get()); linear && zero_linear_bias) {
      if (linear->bias.defined()) init::zeros_(linear->bias);
    }
  }
}

StateDict inflate_state_dict(const StateDict& weights_2d, const Module& model) {
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const auto& [name, tensor] : model.state_dict()) shapes[name] = tensor.sizes();
  StateDict out;
  for (const auto& [name, tensor] : weights_2d) {
    const auto it = shapes.find(name);
    const bool inflate = it != shapes.end() && tensor.dim() == 4 && it->second.size() == 5;
    out.emplace_back(name, inflate ? inflate_2d(tensor, it->second[2]) : tensor);
  }
  return out;
}

}  // namespace kiln::nn::models
