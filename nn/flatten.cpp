// Flatten: kiln::flatten with the layer's dims.
#include "nn/flatten.h"

#include "core/ops/view.h"

namespace kiln::nn {

Tensor Flatten::forward(const Tensor& input) { return flatten(input, options_.start_dim, options_.end_dim); }

std::string Flatten::extra_repr() const {
  return "start_dim=" + std::to_string(options_.start_dim) + ", end_dim=" + std::to_string(options_.end_dim);
}

}  // namespace kiln::nn
