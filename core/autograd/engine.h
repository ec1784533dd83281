// The autograd engine: runs the backward graph from some roots.
//
// Dependency counting: a first walk from the roots counts, for every reachable node, how
// many edges point at it; a node runs once all its incoming gradients have arrived
// (count reaches zero), so each node runs exactly once per backward. Among ready nodes
// the most recently created runs first, which keeps memory low (it frees what the latest
// forward ops saved first). Gradients arriving at the same node slot are summed.
#pragma once

#include <vector>

#include "core/tensor.h"

namespace kiln::autograd {

// Accumulates d(roots)/d(leaves) into the leaves' .grad. `grad_roots[i]` may be undefined
// for a root with one element (taken as 1). See Tensor::backward.
void backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grad_roots = {},
              bool retain_graph = false);

// Returns d(outputs)/d(inputs) without touching any .grad (torch.autograd.grad).
// An input the outputs do not depend on is an error unless allow_unused (then undefined).
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {}, bool retain_graph = false,
                         bool allow_unused = false);

}  // namespace kiln::autograd
