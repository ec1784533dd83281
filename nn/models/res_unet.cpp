// ResUNet (res_unet.h): nnU-Net's modules, each a small class or named Sequential so the
// state-dict names come out as nnU-Net's, aliases included.
#include "nn/models/res_unet.h"

#include <algorithm>
#include <numeric>
#include <string>

#include "core/ops/elementwise.h"
#include "core/ops/interpolate.h"
#include "core/ops/shape.h"
#include "nn/activation.h"
#include "nn/conv.h"
#include "nn/normalization.h"
#include "nn/pooling.h"

namespace kiln::nn::models {
namespace {

using Triple = std::array<int64_t, 3>;

std::vector<int64_t> vec(const Triple& t) { return {t[0], t[1], t[2]}; }
bool all_ones(const Triple& t) { return t[0] == 1 && t[1] == 1 && t[2] == 1; }

// nnU-Net's ConvDropoutNormReLU: conv (padding (k - 1) / 2), instance norm, and LeakyReLU
// unless `act` is false; the layers registered by name and again as `all_modules`.
class ConvNormAct final : public Layer {
 public:
  ConvNormAct(const ResUNetOptions& o, int64_t in, int64_t out, Triple kernel, Triple stride, bool bias,
              bool act) {
    all_ = std::make_shared<Sequential>();
    auto conv = register_module(
        "conv", std::make_shared<Conv3d>(
                    ConvOptions{.in_channels = in,
                                .out_channels = out,
                                .kernel_size = vec(kernel),
                                .stride = vec(stride),
                                .padding = {(kernel[0] - 1) / 2, (kernel[1] - 1) / 2, (kernel[2] - 1) / 2},
                                .bias = bias}));
    auto norm = register_module(
        "norm", std::make_shared<InstanceNorm3d>(InstanceNormOptions{.num_features = out, .affine = true}));
    all_->push_back(conv);
    all_->push_back(norm);
    if (act) {
      auto nonlin = register_module(
          "nonlin", std::make_shared<LeakyReLU>(LeakyReLUOptions{.negative_slope = o.negative_slope}));
      all_->push_back(nonlin);
    }
    register_module("all_modules", all_);
  }
  Tensor forward(const Tensor& x) override { return all_->forward(x); }
  std::string type_name() const override { return "ConvDropoutNormReLU"; }

 private:
  std::shared_ptr<Sequential> all_;
};

// nnU-Net's StackedConvBlocks (`convs` of conv blocks) and StackedResidualBlocks (`blocks`
// of residual blocks): `count` blocks made by make(in, out, stride), the first strided.
template <typename Make>
std::shared_ptr<Sequential> stacked(const char* name, int64_t count, int64_t in, int64_t out, Triple stride,
                                    const Make& make) {
  auto blocks = std::make_shared<Sequential>();
  for (int64_t i = 0; i < count; ++i)
    blocks->push_back(make(i == 0 ? in : out, out, i == 0 ? stride : Triple{1, 1, 1}));
  auto stage = std::make_shared<Sequential>();
  stage->push_back(name, blocks);
  return stage;
}

std::shared_ptr<Sequential> stacked_convs(const ResUNetOptions& o, int64_t count, int64_t in, int64_t out,
                                          Triple kernel, Triple stride) {
  return stacked("convs", count, in, out, stride, [&](int64_t i, int64_t c, Triple s) {
    return std::make_shared<ConvNormAct>(o, i, c, kernel, s, o.conv_bias, true);
  });
}

// nnU-Net's BasicBlockD.
class ResidualBlock final : public Layer {
 public:
  ResidualBlock(const ResUNetOptions& o, int64_t in, int64_t out, Triple kernel, Triple stride) {
    conv1_ = register_module("conv1",
                             std::make_shared<ConvNormAct>(o, in, out, kernel, stride, o.conv_bias, true));
    conv2_ = register_module(
        "conv2", std::make_shared<ConvNormAct>(o, out, out, kernel, Triple{1, 1, 1}, o.conv_bias, false));
    nonlin2_ = register_module(
        "nonlin2", std::make_shared<LeakyReLU>(LeakyReLUOptions{.negative_slope = o.negative_slope}));
    if (!all_ones(stride) || in != out) {
      skip_ = std::make_shared<Sequential>();
      if (!all_ones(stride)) {
        skip_->push_back(
            std::make_shared<AvgPool3d>(AvgPoolOptions{.kernel_size = vec(stride), .stride = vec(stride)}));
      }
      if (in != out)
        skip_->push_back(
            std::make_shared<ConvNormAct>(o, in, out, Triple{1, 1, 1}, Triple{1, 1, 1}, false, false));
      register_module("skip", skip_);
    }
  }
  Tensor forward(const Tensor& x) override {
    const Tensor residual = skip_ ? skip_->forward(x) : x;
    return nonlin2_->forward(add(conv2_->forward(conv1_->forward(x)), residual));
  }
  std::string type_name() const override { return "BasicBlockD"; }

 private:
  std::shared_ptr<Layer> conv1_, conv2_, nonlin2_;
  std::shared_ptr<Sequential> skip_;
};

std::shared_ptr<Sequential> residual_stage(const ResUNetOptions& o, int64_t count, int64_t in, int64_t out,
                                           Triple kernel, Triple stride) {
  return stacked("blocks", count, in, out, stride, [&](int64_t i, int64_t c, Triple s) {
    return std::make_shared<ResidualBlock>(o, i, c, kernel, s);
  });
}

// The options with nnU-Net's defaults filled in, checked.
ResUNetOptions completed(ResUNetOptions o) {
  const char* op = "ResUNet";
  const size_t stages = o.features.size();
  KILN_CHECK(stages >= 2, op, ": needs at least 2 stages, got ", stages);
  for (int64_t f : o.features) KILN_CHECK(f > 0, op, ": every feature count must be positive, got ", f);
  if (o.kernel_sizes.empty()) o.kernel_sizes.assign(stages, Triple{3, 3, 3});
  if (o.strides.empty()) {
    o.strides.assign(stages, Triple{2, 2, 2});
    o.strides[0] = {1, 1, 1};
  }
  if (o.decoder_convs.empty()) o.decoder_convs.assign(stages - 1, 1);
  KILN_CHECK(o.kernel_sizes.size() == stages && o.strides.size() == stages && o.blocks.size() == stages, op,
             ": kernel_sizes, strides and blocks need one entry per stage (", stages, "), got ",
             o.kernel_sizes.size(), ", ", o.strides.size(), " and ", o.blocks.size());
  KILN_CHECK(o.decoder_convs.size() == stages - 1, op, ": decoder_convs needs ", stages - 1, " entries, got ",
             o.decoder_convs.size());
  for (size_t s = 0; s < stages; ++s) {
    KILN_CHECK(o.blocks[s] >= 1, op, ": every stage needs a block, got ", o.blocks[s]);
    for (int axis = 0; axis < 3; ++axis) {
      KILN_CHECK(o.kernel_sizes[s][axis] >= 1 && o.kernel_sizes[s][axis] % 2 == 1, op,
                 ": kernel sizes must be odd and positive, got ", o.kernel_sizes[s][axis]);
      KILN_CHECK(o.strides[s][axis] >= 1, op, ": strides must be positive, got ", o.strides[s][axis]);
    }
  }
  for (int64_t c : o.decoder_convs) KILN_CHECK(c >= 1, op, ": every decoder stage needs a conv, got ", c);
  KILN_CHECK(o.in_channels > 0 && o.num_classes > 0, op, ": in_channels and num_classes must be positive");
  return o;
}

}  // namespace

ResUNet::ResUNet(const ResUNetOptions& options) : options_(completed(options)) {
  const ResUNetOptions& o = options_;
  const size_t n = o.features.size();
  auto encoder = std::make_shared<Sequential>();
  stem_ = stacked_convs(o, 1, o.in_channels, o.features[0], o.kernel_sizes[0], Triple{1, 1, 1});
  encoder->push_back("stem", stem_);
  stages_ = std::make_shared<Sequential>();
  for (size_t s = 0; s < n; ++s) {
    stages_->push_back(residual_stage(o, o.blocks[s], s == 0 ? o.features[0] : o.features[s - 1],
                                      o.features[s], o.kernel_sizes[s], o.strides[s]));
  }
  encoder->push_back("stages", stages_);
  register_module("encoder", encoder);

  auto decoder = std::make_shared<Module>();
  auto decoder_stages = std::make_shared<ModuleList>(), transpconvs = std::make_shared<ModuleList>(),
       seg_layers = std::make_shared<ModuleList>();
  for (size_t s = 1; s < n; ++s) {
    const int64_t below = o.features[n - s], skip = o.features[n - s - 1];
    const Triple stride = o.strides[n - s];
    auto up = std::make_shared<ConvTranspose3d>(ConvTransposeOptions{.in_channels = below,
                                                                     .out_channels = skip,
                                                                     .kernel_size = vec(stride),
                                                                     .stride = vec(stride),
                                                                     .bias = o.conv_bias});
    auto stage =
        stacked_convs(o, o.decoder_convs[s - 1], 2 * skip, skip, o.kernel_sizes[n - s - 1], Triple{1, 1, 1});
    auto seg = std::make_shared<Conv3d>(
        ConvOptions{.in_channels = skip, .out_channels = o.num_classes, .kernel_size = {1}});
    transpconvs_.push_back(up);
    decoder_stages_.push_back(stage);
    seg_layers_.push_back(seg);
    decoder_stages->push_back(stage);
    transpconvs->push_back(up);
    seg_layers->push_back(seg);
  }
  decoder->register_module("encoder", encoder);  // nnU-Net's decoder holds the encoder
  decoder->register_module("stages", decoder_stages);
  decoder->register_module("transpconvs", transpconvs);
  decoder->register_module("seg_layers", seg_layers);
  register_module("decoder", decoder);
}

std::vector<Tensor> ResUNet::skips(const Tensor& input) {
  KILN_CHECK(input.dim() == 5 && input.size(1) == options_.in_channels, "ResUNet: expected [N, ",
             options_.in_channels, ", D, H, W], got ", input.sizes());
  for (int axis = 0; axis < 3; ++axis) {
    int64_t factor = 1;
    for (const Triple& s : options_.strides) factor *= s[static_cast<size_t>(axis)];
    KILN_CHECK(input.size(axis + 2) % factor == 0, "ResUNet: spatial size ", input.size(axis + 2),
               " of axis ", axis, " is not divisible by its strides' product ", factor, " (input ",
               input.sizes(), ")");
  }
  std::vector<Tensor> out;
  Tensor x = stem_->forward(input);
  for (const auto& stage : stages_->children()) {
    x = std::static_pointer_cast<Layer>(stage)->forward(x);
    out.push_back(x);
  }
  return out;
}

std::vector<Tensor> ResUNet::decode(const std::vector<Tensor>& skips, bool every_stage) {
  std::vector<Tensor> outputs;
  Tensor x = skips.back();
  for (size_t s = 0; s < decoder_stages_.size(); ++s) {
    x = decoder_stages_[s]->forward(cat({transpconvs_[s]->forward(x), skips[skips.size() - s - 2]}, 1));
    const bool last = s + 1 == decoder_stages_.size();
    if (every_stage || last)
      outputs.push_back(seg_layers_[every_stage ? s : seg_layers_.size() - 1]->forward(x));
  }
  return {outputs.rbegin(), outputs.rend()};
}

Tensor ResUNet::forward(const Tensor& input) { return decode(skips(input), false).front(); }

std::vector<Tensor> ResUNet::forward_deep(const Tensor& input) {
  return decode(skips(input), options_.deep_supervision);
}

std::vector<double> deep_supervision_weights(int64_t outputs) {
  KILN_CHECK(outputs >= 1, "deep_supervision_weights: needs at least one output, got ", outputs);
  if (outputs == 1) return {1.0};
  std::vector<double> w(static_cast<size_t>(outputs));
  for (size_t i = 0; i < w.size(); ++i) w[i] = 1.0 / static_cast<double>(int64_t{1} << i);
  w.back() = 0;
  const double total = std::accumulate(w.begin(), w.end(), 0.0);
  for (double& v : w) v /= total;
  return w;
}

Tensor deep_supervision_loss(const std::vector<Tensor>& outputs, const Tensor& labels,
                             const SegmentationLossFn& loss) {
  const char* op = "deep_supervision_loss";
  KILN_CHECK(!outputs.empty(), op, ": no outputs");
  KILN_CHECK(labels.defined() && labels.dim() == outputs[0].dim() && labels.size(1) == 1, op,
             ": labels must be a label map [N, 1, d...] of the outputs' rank, got ",
             labels.defined() ? labels.sizes() : Dims{});
  const std::vector<double> weights = deep_supervision_weights(static_cast<int64_t>(outputs.size()));
  Tensor total;
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (weights[i] == 0) continue;
    const std::vector<int64_t> size(outputs[i].sizes().begin() + 2, outputs[i].sizes().end());
    const bool same = std::equal(size.begin(), size.end(), labels.sizes().begin() + 2);
    const Tensor target =
        same ? labels : interpolate(labels, {.size = size, .mode = InterpolateMode::NearestExact});
    const Tensor term = mul(loss(outputs[i], target), weights[i]);
    total = total.defined() ? add(total, term) : term;
  }
  return total;
}

}  // namespace kiln::nn::models
