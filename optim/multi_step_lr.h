// MultiStepLR: multiplies every group's lr by gamma at each milestone epoch, as
// torch.optim.lr_scheduler.MultiStepLR: lr = base_lr * gamma^(number of milestones <=
// last_epoch), computed recursively (Note [Recursive schedules] in optim/lr_scheduler.h).
// A milestone listed twice multiplies by gamma^2 there, as PyTorch's Counter does.
//
//   MultiStepLR scheduler(optimizer, MultiStepLROptions{.milestones = {30, 80}, .gamma = 0.1});
#pragma once

#include <cstdint>
#include <vector>

#include "optim/lr_scheduler.h"

namespace kiln::optim {

struct MultiStepLROptions {
  std::vector<int64_t> milestones = {};  // epochs, >= 0, any order
  double gamma = 0.1;                    // > 0
};

class MultiStepLR : public LRScheduler {
 public:
  MultiStepLR(Optimizer& optimizer, const MultiStepLROptions& options);
  const MultiStepLROptions& options() const { return options_; }

 protected:
  std::vector<double> compute_lrs() override;
  void save_extra(json::Value& state) const override;
  void load_extra(const json::Value& state) override;

 private:
  MultiStepLROptions options_;
};

}  // namespace kiln::optim
