// Layer: a Module with one tensor in and one tensor out, which is what Sequential chains.
//
// Every single-input layer (Linear, Conv3d, ReLU, BatchNorm3d, Sequential itself ...)
// derives from Layer and implements forward; call it as layer->forward(x) or (*layer)(x).
// Modules with other signatures (the losses take input and target) derive from Module
// directly and are not Sequential entries.
#pragma once

#include "core/tensor.h"
#include "nn/module.h"

namespace kiln::nn {

class Layer : public Module {
 public:
  virtual Tensor forward(const Tensor& input) = 0;
  Tensor operator()(const Tensor& input) { return forward(input); }
};

}  // namespace kiln::nn
