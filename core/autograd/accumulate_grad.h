// AccumulateGrad: the node at the end of every path, writing a leaf's .grad.
//
// Note [Gradient set to none]: a leaf whose .grad is undefined (None) gets the incoming
// gradient itself (stolen when nothing else holds it, else cloned), not zeros plus the
// gradient; only a defined .grad is accumulated into, in place. So zero_grad(set_to_none)
// costs nothing and the first backward after it allocates exactly one tensor per leaf.
// Order of work: the leaf's tensor hooks (may replace the gradient), accumulate, then its
// post-accumulate-grad hooks (DDP starts a bucket's all-reduce there).
//
// Note [Gradient layout]: a leaf's new .grad is laid out as the leaf is (PyTorch's
// gradient layout contract): with the leaf's strides when the leaf is non-overlapping and
// dense (a channels-last leaf gets a channels-last gradient), row-major otherwise. An
// incoming gradient in another layout (a permuted view, a broadcast) is copied into it,
// through differentiable ops, so a create_graph backward still records. (The optimizers
// take row-major parameters only, for now: channels-last weights, whose gradient and
// state would follow this contract, are the next step of the channels-last work.)
#pragma once

#include <memory>

#include "core/autograd/node.h"

namespace kiln::autograd {

class AccumulateGrad final : public Node {
 public:
  explicit AccumulateGrad(std::shared_ptr<TensorImpl> leaf);
  std::vector<Tensor> apply(std::vector<Tensor>&& grad_outputs) override;
  std::string name() const override { return "AccumulateGrad"; }

  const std::shared_ptr<TensorImpl>& leaf() const { return leaf_; }

 private:
  std::shared_ptr<TensorImpl> leaf_;  // the leaf holds only a weak_ptr back: no cycle
};

}  // namespace kiln::autograd
