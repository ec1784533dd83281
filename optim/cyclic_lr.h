// CyclicLR: cyclical learning rates (Smith, "Cyclical Learning Rates for Training Neural
// Networks"), as torch.optim.lr_scheduler.CyclicLR, stepped once per batch.
//
// Each group's lr moves between base_lr and max_lr in cycles of step_size_up steps up
// and step_size_down steps down (a triangle), the triangle's height scaled by a policy:
//     cycle = floor(1 + t / total),  x = 1 + t / total - cycle       (total = up + down)
//     scale_factor = x / ratio if x <= ratio else (x - 1) / (ratio - 1)   (ratio = up / total)
//     lr = base_lr + (max_lr - base_lr) scale_factor scale_fn(cycle or t)
// with scale_fn by mode: triangular 1, triangular2 1 / 2^(cycle - 1) (amplitude halves
// every cycle), exp_range gamma^t (scale_mode iterations); or a custom scale_fn with its
// scale_mode. With cycle_momentum the momentum option (momentum_option() in
// optim/lr_scheduler.h) moves the other way: momentum = max_momentum -
// (max_momentum - base_momentum) scale_factor scale_fn(...). max_lr below base_lr is
// allowed (the triangle points down), as in PyTorch.
//
// The constructor sets every group's lr to base_lr (and momentum to max_momentum) before
// the initial step, as PyTorch does. A custom scale_fn is code and cannot be saved:
// state_dict records that one was used, and load_state_dict into a scheduler without a
// custom scale_fn of its own is an error (PyTorch silently drops it).
//
// Options in PyTorch's order, as designated initializers:
//   CyclicLR cyclic(optimizer, CyclicLROptions{.base_lr = 1e-4, .max_lr = 1e-2, .step_size_up = 500});
#pragma once

#include <cstdint>
#include <functional>
#include <optional>

#include "optim/lr_scheduler.h"

namespace kiln::optim {

enum class CyclicMode { Triangular, Triangular2, ExpRange };
enum class ScaleMode { Cycle, Iterations };

struct CyclicLROptions {
  GroupValues base_lr = {};                              // required: one value or one per group
  GroupValues max_lr = {};                               // required
  int64_t step_size_up = 2000;                           // > 0
  std::optional<int64_t> step_size_down = std::nullopt;  // >= 0; default step_size_up
  CyclicMode mode = CyclicMode::Triangular;
  double gamma = 1.0;                                // exp_range's base
  std::function<double(double)> scale_fn = nullptr;  // overrides mode when set
  ScaleMode scale_mode = ScaleMode::Cycle;           // for a custom scale_fn
  bool cycle_momentum = true;
  GroupValues base_momentum = 0.8;
  GroupValues max_momentum = 0.9;
};

class CyclicLR : public LRScheduler {
 public:
  CyclicLR(Optimizer& optimizer, const CyclicLROptions& options);

 protected:
  std::vector<double> compute_lrs() override;
  void save_extra(json::Value& state) const override;
  void load_extra(const json::Value& state) override;
  void restore_group_extras() override;

 private:
  double scale(double cycle, int64_t t) const;  // scale_fn at the cycle or the step

  std::vector<double> max_lrs_;  // base_lrs_ hold base_lr
  double total_size_ = 0;        // step_size_up + step_size_down
  double step_ratio_ = 0;        // step_size_up / total_size
  CyclicMode mode_ = CyclicMode::Triangular;
  double gamma_ = 1;
  std::function<double(double)> custom_scale_fn_;
  ScaleMode scale_mode_ = ScaleMode::Cycle;
  bool cycle_momentum_ = false;
  std::string momentum_key_;
  std::vector<double> base_momentums_, max_momentums_;
};

}  // namespace kiln::optim
