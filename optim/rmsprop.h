// RMSprop, as torch.optim.RMSprop (centered, momentum, weight decay, maximize). The update,
// element by element, is Note [Optimizer formulas] (kernels/optimizer_math.h), the one
// copy both backends run; momentum > 0 keeps a buffer. The options' names in a parameter
// group are rmsprop.cpp's field table (optim/option_fields.h).
// State: "step" (Float32 [] on the device, counted as PyTorch does though the update does
// not use it), "square_avg", "momentum_buffer" (momentum > 0), "grad_avg" (centered).
//
// Options in torch.optim.RMSprop's order, as designated initializers:
//   RMSprop rmsprop(model.parameters(), RMSpropOptions{.lr = 1e-3, .momentum = 0.9, .centered = true});
#pragma once

#include "optim/optimizer.h"

namespace kiln::optim {

struct RMSpropOptions {
  double lr = 1e-2;
  double alpha = 0.99;
  double eps = 1e-8;
  double weight_decay = 0;
  double momentum = 0;
  bool centered = false;
  bool maximize = false;
};

class RMSprop : public Optimizer {
 public:
  explicit RMSprop(std::vector<Tensor> params, RMSpropOptions options = {});
  explicit RMSprop(std::vector<ParamGroup> groups, RMSpropOptions defaults = {});

 protected:
  void update(ParamGroup& group, const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
              const AmpStepArgs& amp) override;
  void check_options(const Options& options) const override;
  const char* scheduled_momentum() const override { return "momentum"; }
  bool has_step_counter() const override { return true; }
};

}  // namespace kiln::optim
