// CosineAnnealingLR: anneals every group's lr from its base_lr to eta_min along half a
// cosine over T_max epochs, as torch.optim.lr_scheduler.CosineAnnealingLR (SGDR without
// restarts).
//
// Note [Recursive cosine]: the closed form is
//     lr_t = eta_min + (base_lr - eta_min) (1 + cos(pi t / T_max)) / 2,
// but PyTorch's step() computes it recursively from the group's current lr:
//     lr_t = eta_min + (lr_{t-1} - eta_min) (1 + cos(pi t / T_max)) / (1 + cos(pi (t-1) / T_max)),
// except where the denominator is 0 (t - 1 = T_max mod 2 T_max), where it adds
//     (base_lr - eta_min) (1 - cos(pi / T_max)) / 2.
// We use the recursive form, with PyTorch's operation order, so the doubles are PyTorch's
// and a hand-set lr carries on as in PyTorch; past T_max the lr rises again along the
// cosine (period 2 T_max). The two forms differ by rounding only.
//
//   CosineAnnealingLR scheduler(optimizer, CosineAnnealingLROptions{.T_max = 100, .eta_min = 1e-5});
#pragma once

#include <cstdint>

#include "optim/lr_scheduler.h"

namespace kiln::optim {

struct CosineAnnealingLROptions {
  int64_t T_max = 0;   // required, > 0: epochs of the half cosine
  double eta_min = 0;  // >= 0: the lr at T_max
};

class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& optimizer, const CosineAnnealingLROptions& options);
  const CosineAnnealingLROptions& options() const { return options_; }

 protected:
  std::vector<double> compute_lrs() override;
  void save_extra(json::Value& state) const override;
  void load_extra(const json::Value& state) override;

 private:
  CosineAnnealingLROptions options_;
};

}  // namespace kiln::optim
