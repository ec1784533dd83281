// In-place ops (add_, mul_, fill_, ...) and the rule that guards them.
//
// Note [In-place and autograd]: with no gradient to record (grad mode off, or nothing
// requires grad) an in-place op runs its kernel straight into `self` and bumps the
// version counter. When a gradient must be recorded, it computes the out-of-place op on a
// clone of self (so the backward node saves the old values, not the overwritten ones),
// writes the result into self, and makes self's grad_fn that op's node. Two cases are
// refused with an error: a leaf that requires grad (its .grad would be meaningless; use
// NoGradGuard, as optimizers do) and a view (its base's history would go stale).
#pragma once

#include <functional>

#include "core/tensor.h"

namespace kiln {

// Throws if `self` may not be modified in place while recording (Note above).
void check_inplace_allowed(const Tensor& self, bool recording, const char* op);

// The out-of-place form of an in-place op: f(self, others) -> result.
using OutOfPlaceFn = std::function<Tensor(const Tensor& self, const std::vector<Tensor>& others)>;

// Runs `out_of_place(self, others)` and writes its result into self, following the Note.
// When recording, an operand that shares self's storage (x.mul_(x)) is cloned first, so
// the backward node keeps its old values. The result must have self's shape and a dtype
// that casts to self's without changing category.
Tensor& apply_inplace(Tensor& self, const std::vector<Tensor>& others, const char* op,
                      const OutOfPlaceFn& out_of_place);

}  // namespace kiln
