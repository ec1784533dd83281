// LinearLR: scales every group's lr by a factor that moves linearly from start_factor to
// end_factor over total_iters steps (a warm-up, typically), then stays, as
// torch.optim.lr_scheduler.LinearLR:
//     lr_t = base_lr (start + (end - start) min(t, total_iters) / total_iters),
// computed recursively like PyTorch (Note [Recursive schedules] in optim/lr_scheduler.h):
//     lr_0 = lr * start,  lr_t = lr_{t-1} (1 + (end - start) / (total_iters start + (t - 1) (end - start))).
//
//   LinearLR warmup(optimizer, LinearLROptions{.start_factor = 0.1, .total_iters = 500});
#pragma once

#include <cstdint>

#include "optim/lr_scheduler.h"

namespace kiln::optim {

struct LinearLROptions {
  double start_factor = 1.0 / 3;  // in (0, 1]
  double end_factor = 1.0;        // in [0, 1]
  int64_t total_iters = 5;        // > 0
};

class LinearLR : public LRScheduler {
 public:
  LinearLR(Optimizer& optimizer, const LinearLROptions& options = {});
  const LinearLROptions& options() const { return options_; }

 protected:
  std::vector<double> compute_lrs() override;
  void save_extra(json::Value& state) const override;
  void load_extra(const json::Value& state) override;

 private:
  LinearLROptions options_;
};

}  // namespace kiln::optim
