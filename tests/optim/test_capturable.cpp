// Capturable optimizers (Note [Capturable optimizers], optim/optimizer.h): with the lr and
// the scheduled momentum (SGD's and RMSprop's momentum, Adam's beta1) read from a device
// tensor, steps equal plain steps bit for bit while a cyclic schedule moves both; during
// a capture step() leaves the tensor alone, so the kernels read what was written before
// (what a replay does); the signature of what a capture froze, the persistent tensors,
// and the op layer's checks of options.scheduled.
#include <gtest/gtest.h>

#include <functional>
#include <memory>

#include "core/device_values.h"
#include "core/host_sync.h"
#include "core/ops.h"
#include "optim/optim.h"
#include "tests/optim/optim_test_util.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

using optim::Optimizer;
using testing::all_equal;
using testing::clone_params;
using testing::make_params;
using testing::set_step_grads;

using MakeOptimizer = std::function<std::unique_ptr<Optimizer>(std::vector<Tensor>)>;

struct Case {
  const char* name;
  MakeOptimizer make;
};

std::vector<Case> cases() {
  return {
      {"SGD nesterov",
       [](std::vector<Tensor> p) -> std::unique_ptr<Optimizer> {
         return std::make_unique<optim::SGD>(
             std::move(p),
             optim::SGDOptions{.lr = 0.1, .momentum = 0.9, .weight_decay = 1e-3, .nesterov = true});
       }},
      {"Adam amsgrad",
       [](std::vector<Tensor> p) -> std::unique_ptr<Optimizer> {
         return std::make_unique<optim::Adam>(
             std::move(p), optim::AdamOptions{.lr = 1e-2, .weight_decay = 1e-2, .amsgrad = true});
       }},
      {"AdamW",
       [](std::vector<Tensor> p) -> std::unique_ptr<Optimizer> {
         return std::make_unique<optim::AdamW>(std::move(p), optim::AdamWOptions{.lr = 1e-2});
       }},
      {"RMSprop centered",
       [](std::vector<Tensor> p) -> std::unique_ptr<Optimizer> {
         return std::make_unique<optim::RMSprop>(
             std::move(p), optim::RMSpropOptions{.lr = 1e-2, .momentum = 0.5, .centered = true});
       }},
  };
}

// A cyclic schedule moving lr and the momentum (or beta1) at every step.
std::unique_ptr<optim::CyclicLR> cyclic(Optimizer& optimizer) {
  return std::make_unique<optim::CyclicLR>(
      optimizer,
      optim::CyclicLROptions{
          .base_lr = 1e-3, .max_lr = 5e-2, .step_size_up = 3, .base_momentum = 0.7, .max_momentum = 0.95});
}

TEST(CapturableOptimizer, StepsEqualPlainStepsWhileAScheduleMovesLrAndMomentum) {
  for (const Case& c : cases()) {
    for (const DType dtype : {DType::Float32, DType::Float64, DType::BFloat16}) {
      SCOPED_TRACE(std::string(c.name) + " " + std::string(dtype_name(dtype)));
      const std::vector<Tensor> plain_params = make_params(dtype),
                                capturable_params = clone_params(plain_params);
      auto plain = c.make(plain_params), capturable = c.make(capturable_params);
      capturable->set_capturable(true);
      EXPECT_TRUE(capturable->capturable());
      auto plain_schedule = cyclic(*plain), capturable_schedule = cyclic(*capturable);
      for (int64_t step = 0; step < 7; ++step) {
        set_step_grads(plain_params, step);
        set_step_grads(capturable_params, step);
        plain->step();
        capturable->step();
        plain_schedule->step();
        capturable_schedule->step();
        for (size_t i = 0; i < plain_params.size(); ++i)
          ASSERT_TRUE(all_equal(plain_params[i], capturable_params[i])) << "step " << step << ", param " << i;
      }
    }
  }
}

TEST(CapturableOptimizer, DuringACaptureTheStepReadsWhatWasWrittenBeforeIt) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    const std::vector<Tensor> params = make_params(DType::Float64), reference_params = clone_params(params);
    auto captured = c.make(params), reference = c.make(reference_params);
    captured->set_capturable(true);
    set_step_grads(params, 0);
    set_step_grads(reference_params, 0);
    captured->step();  // the warm-up step makes the state and the scheduled tensor
    reference->step();
    // Changed between the write and the "captured" step: the step must not see it, as a
    // replay sees only what write_scheduled_options wrote before it.
    const double lr_before = captured->param_groups()[0].lr();
    captured->param_groups()[0].set_lr(lr_before * 10);
    set_step_grads(params, 1);
    set_step_grads(reference_params, 1);
    {
      const CaptureOnThisThread capturing;
      EXPECT_KILN_ERROR(captured->write_scheduled_options(), "write_scheduled_options",
                        "not during a capture");
      captured->step();
    }
    reference->step();  // at lr_before
    for (size_t i = 0; i < params.size(); ++i) EXPECT_TRUE(all_equal(params[i], reference_params[i])) << i;
    // Written outside the capture, the new values are used.
    captured->write_scheduled_options();
    reference->param_groups()[0].set_lr(lr_before * 10);
    set_step_grads(params, 2);
    set_step_grads(reference_params, 2);
    {
      const CaptureOnThisThread capturing;
      captured->step();
    }
    reference->step();
    for (size_t i = 0; i < params.size(); ++i) EXPECT_TRUE(all_equal(params[i], reference_params[i])) << i;
  }
}

TEST(CapturableOptimizer, TheSignatureNamesWhatACaptureFroze) {
  const std::vector<Tensor> params = make_params(DType::Float32);
  optim::SGD sgd(params, optim::SGDOptions{.lr = 0.1, .momentum = 0.9});
  const std::vector<double> before = sgd.scheduled_signature();
  sgd.param_groups()[0].set_lr(0.5);
  sgd.param_groups()[0].set("momentum", 0.5);
  EXPECT_EQ(sgd.scheduled_signature(), before) << "lr and a non-zero momentum come from the device";
  sgd.param_groups()[0].set("momentum", 0.0);
  EXPECT_NE(sgd.scheduled_signature(), before) << "momentum off changes the kernel";
  sgd.param_groups()[0].set("momentum", 0.9);
  sgd.param_groups()[0].set("weight_decay", 1e-4);
  EXPECT_NE(sgd.scheduled_signature(), before) << "weight decay is frozen into a capture";
}

TEST(CapturableOptimizer, PersistentTensorsAreTheStateTheMastersAndTheScheduledOptions) {
  const std::vector<Tensor> params = make_params(DType::Float32);
  optim::Adam adam(params);
  EXPECT_TRUE(adam.persistent_tensors().empty());
  adam.set_capturable(true);
  set_step_grads(params, 0);
  adam.step();
  // exp_avg, exp_avg_sq, step per parameter, and one scheduled tensor (one group, device).
  EXPECT_EQ(adam.persistent_tensors().size(), 3 * params.size() + 1);
  const Tensor exp_avg = adam.state(params[0]).at("exp_avg");
  const void* address = exp_avg.data_ptr();
  set_step_grads(params, 1);
  adam.step();
  EXPECT_EQ(adam.state(params[0]).at("exp_avg").data_ptr(), address) << "state is updated in place";
  adam.set_capturable(false);
  EXPECT_EQ(adam.persistent_tensors().size(), 3 * params.size());
}

TEST(CapturableOptimizer, TheOpLayerChecksTheScheduledTensor) {
  const std::vector<Tensor> params = make_params(DType::Float32);
  set_step_grads(params, 0);
  std::vector<Tensor> grads;
  for (const Tensor& p : params) grads.push_back(p.grad());
  SgdStepParams options{.lr = 0.1};
  options.scheduled = empty({3}, {.dtype = DType::Float64});
  EXPECT_KILN_ERROR(sgd_step_(params, grads, {}, options), "sgd_step_", "options.scheduled", "float64",
                    "[2]");
  options.scheduled = empty({2}, {.dtype = DType::Float32});
  EXPECT_KILN_ERROR(sgd_step_(params, grads, {}, options), "sgd_step_", "options.scheduled", "float32");
}

}  // namespace
}  // namespace kiln
