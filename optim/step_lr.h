// StepLR: multiplies every group's lr by gamma every step_size epochs, as
// torch.optim.lr_scheduler.StepLR: lr = base_lr * gamma^floor(last_epoch / step_size),
// computed recursively (Note [Recursive schedules] in optim/lr_scheduler.h).
//
//   StepLR scheduler(optimizer, StepLROptions{.step_size = 30, .gamma = 0.1});
#pragma once

#include <cstdint>

#include "optim/lr_scheduler.h"

namespace kiln::optim {

struct StepLROptions {
  int64_t step_size = 0;  // required, > 0
  double gamma = 0.1;     // > 0
};

class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& optimizer, const StepLROptions& options);
  const StepLROptions& options() const { return options_; }

 protected:
  std::vector<double> compute_lrs() override;
  void save_extra(json::Value& state) const override;
  void load_extra(const json::Value& state) override;

 private:
  StepLROptions options_;
};

}  // namespace kiln::optim
