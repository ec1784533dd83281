// SGD: stochastic gradient descent with momentum, dampening, Nesterov momentum, weight
// decay and maximize, as torch.optim.SGD. The update, element by element, is Note
// [Optimizer formulas] (kernels/optimizer_math.h), the one copy both backends run; the
// options' names in a parameter group are sgd.cpp's field table (optim/option_fields.h).
// State "momentum_buffer" exists only when momentum != 0; SGD keeps no step counter.
//
// Options in torch.optim.SGD's order, as designated initializers:
//   SGD sgd(model.parameters(), SGDOptions{.lr = 0.1, .momentum = 0.9, .nesterov = true});
#pragma once

#include "optim/optimizer.h"

namespace kiln::optim {

// PyTorch's defaults (lr = 1e-3 since PyTorch 2.x).
struct SGDOptions {
  double lr = 1e-3;
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;
  bool nesterov = false;
  bool maximize = false;
};

class SGD : public Optimizer {
 public:
  explicit SGD(std::vector<Tensor> params, SGDOptions options = {});
  // Each group's options override the defaults by name ("lr", "momentum", ...).
  explicit SGD(std::vector<ParamGroup> groups, SGDOptions defaults = {});

 protected:
  void update(ParamGroup& group, const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
              const AmpStepArgs& amp) override;
  void check_options(const Options& options) const override;
  const char* scheduled_momentum() const override { return "momentum"; }
};

}  // namespace kiln::optim
