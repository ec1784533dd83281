// What the bundled 3D models (nn/models/) share: bias-free Conv3d and BatchNorm3d
// factories (a conv feeding a batch norm has no bias: the norm's shift makes it
// redundant), the initialisation schemes of the reference implementations, and I3D
// inflation of 2D weights into 3D.
//
// Note [I3D inflation] (Carreira & Zisserman, "Quo Vadis, Action Recognition?", as the
// MedMNIST v2 benchmark's ACSConv converter does for its "ResNet-18 + 3D"): a 2D kernel
// w [O, I, h, w] becomes the 3D kernel [O, I, d, h, w] that repeats it d times along the
// new depth axis and divides by d, so a volume that is constant along depth gives exactly
// the 2D network's response. ConvInit::I3dInflation draws each 2D kernel with PyTorch's
// default Conv2d initialisation and inflates it (training from scratch as MedMNIST's 3D
// baselines do); inflate_state_dict inflates real 2D weights (an ImageNet ResNet's) for
// load_state_dict.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/generator.h"
#include "nn/batchnorm.h"
#include "nn/container.h"
#include "nn/conv.h"
#include "nn/module.h"

namespace kiln::nn::models {

// Conv3d without bias; padding, stride and dilation one value for all dims or one per dim.
std::shared_ptr<Conv3d> conv3d_no_bias(int64_t in_channels, int64_t out_channels,
                                       std::vector<int64_t> kernel_size, std::vector<int64_t> stride = {1},
                                       std::vector<int64_t> padding = {0},
                                       std::vector<int64_t> dilation = {1}, int64_t groups = 1);
// AdaptiveAvgPool3d(1), Flatten, Linear(in_features, classes): the classifier the guides
// put in place of a segmentation head (ResNet3d::replace_head).
std::shared_ptr<Sequential> pool_flatten_linear(int64_t in_features, int64_t classes);
// BatchNorm3d with PyTorch's defaults; fused_relu: relu(bn(x)) in one kernel (Kiln's
// BatchNormOptions::relu), the same parameters and names.
std::shared_ptr<BatchNorm3d> batch_norm3d(int64_t channels, bool fused_relu = false);

enum class ConvInit {
  KaimingNormalFanOut,  // N(0, 2 / fan_out): MedicalNet, torchvision's ResNets
  KaimingNormalFanIn,   // N(0, 2 / fan_in): MONAI's DenseNet
  PyTorchDefault,       // each layer's own reset_parameters (kuangliu's / MedMNIST's 2D code)
  I3dInflation,         // Note [I3D inflation]
};

// Every Conv3d weight in `model` by `init`; every BatchNorm3d weight 1, bias 0; every
// Linear bias 0 when zero_linear_bias (MONAI) — the other layers keep theirs.
void initialise(Module& model, ConvInit init, bool zero_linear_bias = false, Generator* generator = nullptr);

// kernel [O, I, h, w] -> [O, I, depth, h, w], repeated along depth and divided by depth.
Tensor inflate_2d(const Tensor& kernel, int64_t depth);

// `weights_2d` with every 4-d entry whose namesake in `model` is 5-d inflated to that
// depth (Note [I3D inflation]); every other entry as it is. Load it with load_state_dict.
StateDict inflate_state_dict(const StateDict& weights_2d, const Module& model);

}  // namespace kiln::nn::models
