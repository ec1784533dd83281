// BasicUNet (basic_unet.h): conv blocks and the encoder as named Sequentials, so the
// state-dict names are MONAI's; UpCat, the one block with two inputs, as its own module.
#include "nn/models/basic_unet.h"

#include <string>

#include "core/ops/shape.h"
#include "core/ops/view.h"
#include "nn/activation.h"
#include "nn/batchnorm.h"
#include "nn/conv.h"
#include "nn/dropout.h"
#include "nn/normalization.h"
#include "nn/pooling.h"
#include "nn/upsample.h"

namespace kiln::nn::models {
namespace {

std::shared_ptr<Layer> norm_layer(const BasicUNetOptions& o, int64_t channels) {
  switch (o.norm) {
    case UNetNorm::Instance:
      return std::make_shared<InstanceNorm3d>(InstanceNormOptions{.num_features = channels, .affine = true});
    case UNetNorm::Batch:
      return std::make_shared<BatchNorm3d>(BatchNormOptions{.num_features = channels});
    case UNetNorm::Group:
      KILN_CHECK(o.num_groups > 0 && channels % o.num_groups == 0, "BasicUNet: num_groups ", o.num_groups,
                 " does not divide ", channels, " channels");
      return std::make_shared<GroupNorm>(
          GroupNormOptions{.num_groups = o.num_groups, .num_channels = channels});
  }
  return nullptr;
}

std::shared_ptr<Layer> activation(const BasicUNetOptions& o) {
  switch (o.act) {
    case UNetActivation::LeakyReLU:
      return std::make_shared<LeakyReLU>(LeakyReLUOptions{.negative_slope = o.negative_slope});
    case UNetActivation::ReLU:
      return std::make_shared<ReLU>();
    case UNetActivation::PReLU:
      return std::make_shared<PReLU>();
  }
  return nullptr;
}

// MONAI's Convolution: conv (3x3x3, padding 1), then adn = norm, dropout, activation.
std::shared_ptr<Sequential> conv_block(const BasicUNetOptions& o, int64_t in, int64_t out) {
  auto block = std::make_shared<Sequential>();
  block->push_back(
      "conv",
      std::make_shared<Conv3d>(ConvOptions{
          .in_channels = in, .out_channels = out, .kernel_size = {3}, .padding = {1}, .bias = o.bias}));
  auto adn = std::make_shared<Sequential>();
  adn->push_back("N", norm_layer(o, out));
  adn->push_back("D", std::make_shared<Dropout>(DropoutOptions{.p = o.dropout}));
  adn->push_back("A", activation(o));
  block->push_back("adn", adn);
  return block;
}

// MONAI's TwoConv.
std::shared_ptr<Sequential> two_conv(const BasicUNetOptions& o, int64_t in, int64_t out) {
  auto convs = std::make_shared<Sequential>();
  convs->push_back("conv_0", conv_block(o, in, out));
  convs->push_back("conv_1", conv_block(o, out, out));
  return convs;
}

// MONAI's Down: max_pooling, convs.
std::shared_ptr<Sequential> down(const BasicUNetOptions& o, int64_t in, int64_t out) {
  auto block = std::make_shared<Sequential>();
  block->push_back("max_pooling",
                   std::make_shared<MaxPool3d>(MaxPoolOptions{.kernel_size = {2}, .stride = {2}}));
  block->push_back("convs", two_conv(o, in, out));
  return block;
}

// MONAI's UpSample by 2: `deconv` (2x2x2, stride 2), or `preconv` (1x1x1, only when the
// channel count changes) then trilinear interpolation with align_corners.
std::shared_ptr<Sequential> upsample(const BasicUNetOptions& o, int64_t in, int64_t out) {
  auto up = std::make_shared<Sequential>();
  if (o.upsample == UNetUpsample::Deconv) {
    up->push_back("deconv", std::make_shared<ConvTranspose3d>(ConvTransposeOptions{
                                .in_channels = in, .out_channels = out, .kernel_size = {2}, .stride = {2}}));
    return up;
  }
  if (in != out) {
    up->push_back("preconv", std::make_shared<Conv3d>(
                                 ConvOptions{.in_channels = in, .out_channels = out, .kernel_size = {1}}));
  }
  up->push_back("upsample_non_trainable",
                std::make_shared<Upsample>(UpsampleOptions{
                    .scale_factor = {2.0}, .mode = InterpolateMode::Linear, .align_corners = true}));
  return up;
}

// x repeated at the far end of each spatial dim where `like` is one voxel longer (MONAI's
// replicate pad after an upsampling of an odd size).
Tensor pad_to(Tensor x, const Tensor& like) {
  for (int64_t d = 2; d < x.dim(); ++d) {
    if (x.size(d) != like.size(d)) x = cat({x, narrow(x, d, x.size(d) - 1, 1)}, d);
  }
  return x;
}

}  // namespace

// MONAI's UpCat: upsample, pad, cat([skip, upsampled]), convs.
class BasicUNet::UpCat : public Module {
 public:
  UpCat(const BasicUNetOptions& o, int64_t in, int64_t skip, int64_t out, bool halves) {
    const int64_t up = halves ? in / 2 : in;
    upsample_ = register_module("upsample", upsample(o, in, up));
    convs_ = register_module("convs", two_conv(o, skip + up, out));
  }
  Tensor forward(const Tensor& x, const Tensor& skip) {
    return convs_->forward(cat({skip, pad_to(upsample_->forward(x), skip)}, 1));
  }
  std::string type_name() const override { return "UpCat"; }

 private:
  std::shared_ptr<Sequential> upsample_, convs_;
};

BasicUNet::BasicUNet(const BasicUNetOptions& options) : options_(options) {
  const std::vector<int64_t>& f = options.features;
  KILN_CHECK(f.size() == 6, "BasicUNet: features must have 6 entries (MONAI's), got ", f.size());
  for (int64_t c : f) KILN_CHECK(c > 0, "BasicUNet: every feature count must be positive, got ", c);
  KILN_CHECK(options.in_channels > 0 && options.out_channels > 0,
             "BasicUNet: in_channels and out_channels must "
             "be positive, got ",
             options.in_channels, " and ", options.out_channels);
  KILN_CHECK(options.dropout >= 0 && options.dropout <= 1, "BasicUNet: dropout must be in [0, 1], got ",
             options.dropout);
  conv_0_ = register_module("conv_0", two_conv(options, options.in_channels, f[0]));
  for (size_t k = 1; k <= 4; ++k) {
    downs_.push_back(register_module("down_" + std::to_string(k), down(options, f[k - 1], f[k])));
  }
  for (size_t k = 4; k >= 1; --k) {
    const bool last = k == 1;
    upcats_.push_back(register_module("upcat_" + std::to_string(k),
                                      std::make_shared<UpCat>(options, f[k], f[k - 1], last ? f[5] : f[k - 1],
                                                              /*halves=*/!last)));
  }
  final_conv_ = register_module(
      "final_conv", std::make_shared<Conv3d>(ConvOptions{
                        .in_channels = f[5], .out_channels = options.out_channels, .kernel_size = {1}}));
}

Tensor BasicUNet::forward(const Tensor& input) {
  KILN_CHECK(input.dim() == 5 && input.size(1) == options_.in_channels, "BasicUNet: expected [N, ",
             options_.in_channels, ", D, H, W], got ", input.sizes());
  for (int64_t d = 2; d < 5; ++d) {
    KILN_CHECK(input.size(d) >= 16,
               "BasicUNet: every spatial size must be at least 16 (four 2x poolings), got ", input.sizes());
  }
  std::vector<Tensor> skips{conv_0_->forward(input)};
  for (const auto& down_k : downs_) skips.push_back(down_k->forward(skips.back()));
  Tensor x = skips.back();
  for (size_t i = 0; i < upcats_.size(); ++i) x = upcats_[i]->forward(x, skips[skips.size() - 2 - i]);
  return final_conv_->forward(x);
}

}  // namespace kiln::nn::models
