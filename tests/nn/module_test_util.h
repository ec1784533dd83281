// Helpers of the tests of Module::load_state_dict on every device (tests/nn/test_module.cpp,
// tests/cuda/test_cuda_load_state_dict.cpp): the tensors a module holds, the failure sweep
// of Note [All-or-nothing loads], and whether a load took a state dict's values.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>

#include "nn/module.h"
#include "tests/test_util.h"

namespace kiln::testing {

// Every parameter and buffer by name (the non-persistent buffers too): the tensors the
// module holds, not state_dict()'s detached views.
inline nn::NamedTensors module_tensors(const nn::Module& module) {
  nn::NamedTensors all = module.named_parameters();
  for (const auto& entry : module.named_buffers()) all.push_back(entry);
  return all;
}

// Note [All-or-nothing loads]: an allocation failing at any point of a load leaves every
// parameter and buffer as it was (the same tensor, version and bytes); then the load runs
// through. Returns the number of points a failure was injected at.
inline int64_t expect_all_or_nothing(nn::Module& target, const nn::StateDict& sd, bool strict = true) {
  const TensorsSnapshot before(module_tensors(target));
  return fail_each_allocation([&] { target.load_state_dict(sd, strict); },
                              [&] { EXPECT_TRUE(before.same_as(module_tensors(target))); });
}

// Whether every entry of the module's state dict holds the value `sd` gives its name,
// converted to its dtype, bit for bit.
inline ::testing::AssertionResult holds_state_dict(const nn::Module& module, const nn::StateDict& sd) {
  for (const auto& [name, t] : module.state_dict()) {
    const Tensor* given = find_named(sd, name);
    if (given == nullptr) return ::testing::AssertionFailure() << "the state dict has no \"" << name << "\"";
    const ::testing::AssertionResult same = bitwise_equal(t, given->to(t.dtype()));
    if (!same) return ::testing::AssertionFailure() << "\"" << name << "\": " << same.message();
  }
  return ::testing::AssertionSuccess();
}

}  // namespace kiln::testing
