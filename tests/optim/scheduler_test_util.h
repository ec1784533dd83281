// Helpers for the learning-rate scheduler tests: an optimizer that updates nothing (the
// schedulers only read and write its parameter groups), groups with given lrs, and the
// closeness check the sequences are compared with.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "core/json.h"
#include "core/ops.h"
#include "optim/optimizer.h"

namespace kiln::sched_test {

// An Optimizer whose update does nothing and which accepts any options.
class NullOptimizer : public optim::Optimizer {
 public:
  NullOptimizer(const std::vector<double>& lrs, optim::Options defaults)
      : Optimizer("NullOptimizer", defaults) {
    for (double lr : lrs) add_param_group(optim::ParamGroup{.params = {zeros({2})}, .options = {{"lr", lr}}});
  }

 protected:
  void update(optim::ParamGroup&, const std::vector<Tensor>&, const std::vector<Tensor>&,
              const AmpStepArgs&) override {}
  void check_options(const optim::Options&) const override {}
  const char* scheduled_momentum() const override { return "lr"; }  // never capturable here
};

// SGD-like (has "momentum") and Adam-like (has "beta1", "beta2") optimizers, and one
// with neither, with one group per lr.
inline std::unique_ptr<NullOptimizer> sgd_like(const std::vector<double>& lrs) {
  return std::make_unique<NullOptimizer>(lrs, optim::Options{{"lr", 0.1}, {"momentum", 0.9}});
}
inline std::unique_ptr<NullOptimizer> adam_like(const std::vector<double>& lrs) {
  return std::make_unique<NullOptimizer>(lrs, optim::Options{{"lr", 0.1}, {"beta1", 0.9}, {"beta2", 0.999}});
}
inline std::unique_ptr<NullOptimizer> plain(const std::vector<double>& lrs) {
  return std::make_unique<NullOptimizer>(lrs, optim::Options{{"lr", 0.1}});
}

inline std::vector<double> group_lrs(const optim::Optimizer& optimizer) {
  std::vector<double> lrs;
  for (const optim::ParamGroup& group : optimizer.param_groups()) lrs.push_back(group.lr());
  return lrs;
}

// |actual - expected| <= 1e-15 + 1e-12 |expected|: the two forms differ by rounding only.
inline ::testing::AssertionResult near_rel(double actual, double expected, double rtol = 1e-12) {
  if (std::abs(actual - expected) <= 1e-15 + rtol * std::abs(expected)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "actual " << actual << " vs expected " << expected << " (diff " << actual - expected << ")";
}

// A state dict through its JSON text, as a checkpoint would store it.
inline json::Value through_text(const json::Value& state) { return json::parse(json::dump(state)); }

}  // namespace kiln::sched_test
