// Activation layers over the functional ops of core/ops/activation.h: ReLU, LeakyReLU,
// PReLU (a learned slope, one or one per channel), SiLU (a.k.a. Swish), Sigmoid, Tanh,
// GELU (exact or tanh approximation) and ELU.
//
// Options in PyTorch's order, as designated initializers:
//   LeakyReLU(LeakyReLUOptions{.negative_slope = 0.2});  ELU(ELUOptions{.alpha = 0.5});
//   PReLU(PReLUOptions{.num_parameters = 16, .init = 0.1});  GELU(GELUOptions{.approximate = "tanh"});
#pragma once

#include <cstdint>
#include <string>

#include "nn/layer.h"

namespace kiln::nn {

class ReLU : public Layer {
 public:
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "ReLU"; }
};

struct LeakyReLUOptions {
  double negative_slope = 0.01;
};
class LeakyReLU : public Layer {
 public:
  explicit LeakyReLU(const LeakyReLUOptions& options = {}) : options_(options) {}
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "LeakyReLU"; }
  std::string extra_repr() const override;

 private:
  LeakyReLUOptions options_;
};

struct PReLUOptions {
  int64_t num_parameters = 1;  // 1, or the number of channels (dim 1 of the input)
  double init = 0.25;
};
class PReLU : public Layer {
 public:
  explicit PReLU(const PReLUOptions& options = {});
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "PReLU"; }
  std::string extra_repr() const override;

  Tensor weight;  // [num_parameters], filled with init

 private:
  PReLUOptions options_;
};

class SiLU : public Layer {
 public:
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "SiLU"; }
};
using Swish = SiLU;

class Sigmoid : public Layer {
 public:
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "Sigmoid"; }
};

class Tanh : public Layer {
 public:
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "Tanh"; }
};

struct GELUOptions {
  std::string approximate = "none";  // "none" (erf) or "tanh"
};
class GELU : public Layer {
 public:
  explicit GELU(const GELUOptions& options = {});
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "GELU"; }
  std::string extra_repr() const override { return "approximate='" + options_.approximate + "'"; }

 private:
  GELUOptions options_;
};

struct ELUOptions {
  double alpha = 1.0;
};
class ELU : public Layer {
 public:
  explicit ELU(const ELUOptions& options = {}) : options_(options) {}
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "ELU"; }
  std::string extra_repr() const override;

 private:
  ELUOptions options_;
};

}  // namespace kiln::nn
