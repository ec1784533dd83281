// The autograd graph: Node (a backward function), Edge, SavedTensor and AutogradMeta.
//
// Every differentiable op that runs with grad mode on and an input that requires grad
// creates one Node. The node's `next_edges` point, one per forward input, at the node
// that produced that input (its grad_fn and output number) or at the AccumulateGrad node
// of a leaf; an input that needs no gradient gets an empty edge. Backward calls
// `apply(grads w.r.t. the forward outputs)` and gets the grads w.r.t. the forward inputs.
//
// Note [Saved tensors]: a node saves the fewest tensors its derivative needs, as
// SavedTensor: an alias that shares storage and version counter but has no autograd
// state, so saving an op's own output makes no reference cycle. Unpacking compares the
// version with the one at save time (Note [Version counter]): a saved tensor that was
// modified in place is an error naming the node. After a backward without retain_graph
// the saved tensors are freed and the node is marked released; reaching it again is an
// error that says to pass retain_graph.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/pooled.h"
#include "core/tensor.h"

namespace kiln::autograd {

class Node;

struct Edge {
  std::shared_ptr<Node> node;
  uint32_t input_nr = 0;  // which of node's forward outputs the gradient belongs to
  bool is_valid() const { return node != nullptr; }
};

// What the engine needs to know about a forward output to make a zero gradient for it
// or to check and cast the gradient it is given.
struct TensorMeta {
  Dims sizes;
  DType dtype = kDefaultFloat;
  Device device;
};

using TensorHook = std::function<Tensor(const Tensor&)>;

class Node {
 public:
  Node();
  virtual ~Node() = default;
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  // Gradients w.r.t. the forward inputs (one per next edge; undefined where the edge is
  // empty) from the gradients w.r.t. the forward outputs (never undefined: the engine
  // fills zeros). Runs with grad mode off.
  virtual std::vector<Tensor> apply(std::vector<Tensor>&& grad_outputs) = 0;
  // The forward op that made this node ("mul"), for error messages.
  virtual std::string name() const = 0;
  // Frees the saved tensors (backward without retain_graph).
  virtual void release_saved() {}

  bool needs_input_grad(size_t i) const { return i < next_edges.size() && next_edges[i].is_valid(); }

  // Pooled (Note [Pooled small blocks]): a node and its two short lists are made per op.
  std::vector<Edge, PooledAllocator<Edge>> next_edges;
  std::vector<TensorMeta, PooledAllocator<TensorMeta>> output_meta;
  // Tensor hooks registered on the node's outputs: (output number, handle, hook).
  struct PreHook {
    uint32_t output_nr;
    int handle;
    TensorHook hook;
  };
  std::vector<PreHook> pre_hooks;
  // Creation order; the engine runs the most recently created ready node first.
  uint64_t sequence_nr;
  bool released = false;
};

class SavedTensor {
 public:
  SavedTensor() = default;
  explicit SavedTensor(const Tensor& tensor);
  // The saved tensor; throws if it was freed or modified in place since it was saved.
  Tensor unpack(const Node& owner) const;
  bool defined() const { return data_.defined() || released_; }
  void release() {
    data_ = Tensor();
    released_ = true;
  }

 private:
  Tensor data_;
  uint32_t saved_version_ = 0;
  bool released_ = false;
};

struct AutogradMeta {
  KILN_POOLED_NEW_DELETE(AutogradMeta)  // one per op's output (Note [Pooled small blocks])
  bool requires_grad = false;  // set on leaves by requires_grad_()
  Tensor grad;                 // undefined = None (Note [Gradient set to none])
  std::shared_ptr<Node> grad_fn;
  uint32_t output_nr = 0;
  std::weak_ptr<Node> grad_accumulator;  // leaves: their AccumulateGrad node
  bool retains_grad = false;
  std::vector<std::pair<int, TensorHook>> leaf_hooks;  // leaves only; non-leaves use pre_hooks
  std::vector<std::function<void(const Tensor&)>> post_accumulate_hooks;
};

// ---- what ops use to record themselves ------------------------------------------------

// True when grad mode is on and any defined input requires grad.
bool any_requires_grad(std::initializer_list<const Tensor*> inputs);
bool any_requires_grad(const std::vector<Tensor>& inputs);

// The edge a gradient for `tensor` flows into (empty if it needs none).
Edge gradient_edge(const Tensor& tensor);

// Connects `node` to its forward inputs and makes it the grad_fn of `outputs`. Ops write
// `record(node, {a, b}, {out})`: the braces bind to the spans without building vectors.
void record(const std::shared_ptr<Node>& node, std::span<const Tensor> inputs, std::span<const Tensor> outputs);
inline void record(const std::shared_ptr<Node>& node, std::initializer_list<Tensor> inputs,
                   std::initializer_list<Tensor> outputs) {
  record(node, std::span<const Tensor>(inputs.begin(), inputs.size()),
         std::span<const Tensor>(outputs.begin(), outputs.size()));
}

// The autograd state of a tensor, created on first use.
AutogradMeta& autograd_meta(const Tensor& tensor);
// Null when the tensor has no autograd state yet.
AutogradMeta* autograd_meta_if_any(const Tensor& tensor);

}  // namespace kiln::autograd
