// Linear: y = x W^T + b over the last dim, with PyTorch's default initialisation:
// W ~ kaiming_uniform_(a = sqrt(5)), i.e. U(-1/sqrt(in), 1/sqrt(in)), and
// b ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
//
//   Linear fc(LinearOptions{.in_features = 512, .out_features = 10, .bias = false});
#pragma once

#include <cstdint>

#include "nn/layer.h"

namespace kiln::nn {

struct LinearOptions {
  int64_t in_features = 0;
  int64_t out_features = 0;
  bool bias = true;
};

class Linear : public Layer {
 public:
  explicit Linear(const LinearOptions& options);
  // x [..., in_features] -> [..., out_features].
  Tensor forward(const Tensor& input) override;
  // Draws the weight and bias again (from `generator`, or the default one).
  void reset_parameters(Generator* generator = nullptr);

  std::string type_name() const override { return "Linear"; }
  std::string extra_repr() const override;
  const LinearOptions& options() const { return options_; }

  Tensor weight;  // [out_features, in_features]
  Tensor bias;    // [out_features], or undefined without bias

 private:
  LinearOptions options_;
};

}  // namespace kiln::nn
