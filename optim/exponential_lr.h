// ExponentialLR: multiplies every group's lr by gamma every epoch, as
// torch.optim.lr_scheduler.ExponentialLR: lr = base_lr * gamma^last_epoch, computed
// recursively (Note [Recursive schedules] in optim/lr_scheduler.h).
//
//   ExponentialLR scheduler(optimizer, ExponentialLROptions{.gamma = 0.95});
#pragma once

#include "optim/lr_scheduler.h"

namespace kiln::optim {

struct ExponentialLROptions {
  double gamma = 0;  // required, > 0
};

class ExponentialLR : public LRScheduler {
 public:
  ExponentialLR(Optimizer& optimizer, const ExponentialLROptions& options);
  const ExponentialLROptions& options() const { return options_; }

 protected:
  std::vector<double> compute_lrs() override;
  void save_extra(json::Value& state) const override;
  void load_extra(const json::Value& state) override;

 private:
  ExponentialLROptions options_;
};

}  // namespace kiln::optim
