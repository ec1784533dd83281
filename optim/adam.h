// Adam and AdamW, as torch.optim.Adam / torch.optim.AdamW: Adam adds weight_decay * p to
// the gradient (an L2 penalty), AdamW multiplies p by 1 - lr * weight_decay (decoupled
// weight decay); amsgrad uses the running maximum of the second moment. The update,
// element by element, is Note [Optimizer formulas] (kernels/optimizer_math.h), the one
// copy both backends run. Its bias corrections use the parameter's step counter (state
// "step", Float32 [] on its device, Note [Step counters on the device]). State: "step",
// "exp_avg", "exp_avg_sq", "max_exp_avg_sq" (amsgrad). Group options (adam.cpp's field
// table, optim/option_fields.h): "lr", "beta1", "beta2", "eps", "weight_decay", "amsgrad",
// "maximize" (CyclicLR's cycle_momentum drives "beta1").
//
// Options in torch.optim.Adam's order (betas as beta1, beta2), as designated initializers:
//   Adam adam(model.parameters(), AdamOptions{.lr = 3e-4, .beta2 = 0.98, .amsgrad = true});
//   AdamW adamw(model.parameters(), AdamWOptions{.lr = 1e-3, .weight_decay = 0.05});
#pragma once

#include "optim/optimizer.h"

namespace kiln::optim {

struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0;
  bool amsgrad = false;
  bool maximize = false;
};

// AdamW's defaults differ from Adam's in weight_decay only (PyTorch's 1e-2).
struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 1e-2;
  bool amsgrad = false;
  bool maximize = false;
};

class Adam : public Optimizer {
 public:
  explicit Adam(std::vector<Tensor> params, AdamOptions options = {});
  explicit Adam(std::vector<ParamGroup> groups, AdamOptions defaults = {});

 protected:
  // For AdamW: the name and the decoupled weight decay.
  Adam(std::string name, bool decoupled_weight_decay, Options defaults);

  void update(ParamGroup& group, const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
              const AmpStepArgs& amp) override;
  void check_options(const Options& options) const override;
  const char* scheduled_momentum() const override { return "beta1"; }
  bool has_step_counter() const override { return true; }

 private:
  bool decoupled_weight_decay_ = false;
};

class AdamW : public Adam {
 public:
  explicit AdamW(std::vector<Tensor> params, AdamWOptions options = {});
  explicit AdamW(std::vector<ParamGroup> groups, AdamWOptions defaults = {});
};

}  // namespace kiln::optim
