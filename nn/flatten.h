// Flatten (merges dims start_dim..end_dim into one, a view when possible) and Identity
// (returns its input): the layers that only reshape or pass through.
//
//   Flatten(FlattenOptions{.start_dim = 1, .end_dim = -1});
#pragma once

#include <cstdint>

#include "nn/layer.h"

namespace kiln::nn {

struct FlattenOptions {
  int64_t start_dim = 1;
  int64_t end_dim = -1;
};

class Flatten : public Layer {
 public:
  explicit Flatten(const FlattenOptions& options = {}) : options_(options) {}
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "Flatten"; }
  std::string extra_repr() const override;

 private:
  FlattenOptions options_;
};

class Identity : public Layer {
 public:
  Tensor forward(const Tensor& input) override { return input; }
  std::string type_name() const override { return "Identity"; }
};

}  // namespace kiln::nn
