// The autograd engine (see engine.h): dependency counting, a ready queue ordered by
// creation, gradient buffers per node, hooks, anomaly checks and graph release.
#include "core/autograd/engine.h"

#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "core/autocast.h"
#include "core/autograd/accumulate_grad.h"
#include "core/autograd/grad_mode.h"
#include "core/autograd/node.h"
#include "core/ops/elementwise.h"
#include "core/ops/factory.h"
#include "core/ops/reduce.h"

namespace kiln::autograd {
namespace {

struct GraphTask {
  bool retain_graph = false;
  bool accumulate_into_leaves = true;  // false for grad(): AccumulateGrad nodes do not run
  std::unordered_map<Node*, int> dependencies;
  std::unordered_map<Node*, std::vector<Tensor>> buffers;
  // grad(): which (node, slot) gradients to hand back, and where.
  std::unordered_map<Node*, std::vector<std::pair<uint32_t, size_t>>> captures;
  std::vector<Tensor> captured;
};

struct ByNewestFirst {
  bool operator()(const Node* a, const Node* b) const { return a->sequence_nr < b->sequence_nr; }
};

void add_to_buffer(GraphTask& task, const Edge& edge, Tensor grad) {
  std::vector<Tensor>& slots = task.buffers[edge.node.get()];
  if (slots.empty()) slots.resize(edge.node->output_meta.size());
  KILN_ASSERT(edge.input_nr < slots.size(), "edge into slot ", edge.input_nr, " of '",
              edge.node->name(), "' with ", slots.size(), " outputs");
  Tensor& slot = slots[edge.input_nr];
  slot = slot.defined() ? add(slot, grad) : std::move(grad);
}

void count_dependencies(GraphTask& task, const std::vector<Edge>& root_edges) {
  std::vector<Node*> stack;
  std::unordered_set<Node*> seen;
  for (const Edge& e : root_edges) {
    if (e.is_valid() && seen.insert(e.node.get()).second) stack.push_back(e.node.get());
  }
  while (!stack.empty()) {
    Node* node = stack.back();
    stack.pop_back();
    KILN_CHECK(!node->released,
               "autograd: trying to backward through the graph a second time: the backward of '",
               node->name(), "' already ran and freed its saved tensors. Pass retain_graph=true "
               "to the first backward() if you need to call it twice.");
    for (const Edge& e : node->next_edges) {
      if (!e.is_valid()) continue;
      ++task.dependencies[e.node.get()];
      if (seen.insert(e.node.get()).second) stack.push_back(e.node.get());
    }
  }
}

// Casts an incoming gradient to the dtype of the forward output it belongs to.
Tensor conform(const Node& node, uint32_t slot, Tensor grad) {
  const TensorMeta& meta = node.output_meta[slot];
  KILN_ASSERT(grad.sizes() == meta.sizes, "gradient of shape ", grad.sizes(),
              " for an output of shape ", meta.sizes, " of '", node.name(), "'");
  if (grad.dtype() != meta.dtype) grad = grad.to(meta.dtype);
  return grad;
}

void check_anomaly(const Node& node, const std::vector<Tensor>& grads) {
  for (size_t i = 0; i < grads.size(); ++i) {
    const Tensor& g = grads[i];
    if (!g.defined() || !g.is_floating_point()) continue;
    const bool bad = logical_not(isfinite(g)).sum().item<int64_t>() > 0;
    KILN_CHECK(!bad, "anomaly detected: the backward of '", node.name(),
               "' returned NaN or Inf values in its gradient for input ", i,
               " (shape ", g.sizes(), "). The forward op '", node.name(), "' is where to look.");
  }
}

// Runs one node on its gathered gradients; returns false if it was skipped.
void run_node(GraphTask& task, Node& node, std::vector<Tensor> inputs,
              std::priority_queue<Node*, std::vector<Node*>, ByNewestFirst>& ready) {
  inputs.resize(node.output_meta.size());
  for (const Node::PreHook& h : node.pre_hooks) {
    Tensor& g = inputs[h.output_nr];
    if (!g.defined()) continue;
    Tensor replaced = h.hook(g);
    if (replaced.defined()) g = std::move(replaced);
  }
  if (auto it = task.captures.find(&node); it != task.captures.end()) {
    for (auto [slot, index] : it->second) task.captured[index] = inputs[slot];
  }
  const bool is_accumulator = dynamic_cast<AccumulateGrad*>(&node) != nullptr;
  bool any_defined = false;
  for (const Tensor& g : inputs) any_defined |= g.defined();

  std::vector<Tensor> outputs;
  if (any_defined && !(is_accumulator && !task.accumulate_into_leaves)) {
    for (uint32_t i = 0; i < inputs.size(); ++i) {
      if (inputs[i].defined()) {
        inputs[i] = conform(node, i, std::move(inputs[i]));
      } else {
        const TensorMeta& m = node.output_meta[i];
        inputs[i] = zeros(m.sizes, {.dtype = m.dtype, .device = m.device});
      }
    }
    NoGradGuard no_grad;
    outputs = node.apply(std::move(inputs));
    if (!is_accumulator) {
      KILN_ASSERT(outputs.size() == node.next_edges.size(), "'", node.name(), "' returned ",
                  outputs.size(), " gradients for ", node.next_edges.size(), " inputs");
      if (anomaly_mode_enabled()) check_anomaly(node, outputs);
    }
  }
  if (!task.retain_graph && !is_accumulator) {
    node.release_saved();
    node.released = true;
  }
  for (size_t i = 0; i < node.next_edges.size(); ++i) {
    const Edge& e = node.next_edges[i];
    if (!e.is_valid()) continue;
    if (i < outputs.size() && outputs[i].defined()) add_to_buffer(task, e, std::move(outputs[i]));
    if (--task.dependencies[e.node.get()] == 0) ready.push(e.node.get());
  }
}

// Note [Backward runs without autocast]: each backward node runs in the dtypes its
// forward saw (the forward's casts are ordinary to() nodes, whose backward casts the
// gradient back), so autocast must not act again on the ops a backward function calls:
// amax's backward counts ties with a sum over a float16 mask, and autocast would make
// that sum, and so the gradient, float32. The engine turns autocast off for the whole
// backward pass (hooks included); activation checkpointing's recompute switches the
// forward's state back on for its own forward.
void execute(GraphTask& task, const std::vector<Tensor>& roots, const std::vector<Tensor>& grad_roots) {
  const AutocastGuard no_autocast(autocast_state().dtype, /*enabled=*/false);
  KILN_CHECK(grad_roots.empty() || grad_roots.size() == roots.size(), "backward: got ",
             grad_roots.size(), " gradients for ", roots.size(), " tensors");
  std::vector<Edge> root_edges;
  for (size_t i = 0; i < roots.size(); ++i) {
    const Tensor& root = roots[i];
    KILN_CHECK(root.defined() && root.requires_grad(), "backward: tensor ", i,
               " does not require grad and has no grad_fn (was it computed under NoGradGuard, "
               "or from tensors without requires_grad?)");
    Tensor g = grad_roots.empty() ? Tensor() : grad_roots[i];
    if (!g.defined()) {
      KILN_CHECK(root.numel() == 1, "backward: a gradient can be implied only for a tensor with "
                 "one element; got shape ", root.sizes(), ": pass `gradient`");
      g = ones_like(root);
    }
    KILN_CHECK(g.sizes() == root.sizes(), "backward: gradient of shape ", g.sizes(),
               " for a tensor of shape ", root.sizes());
    KILN_CHECK(g.device() == root.device(), "backward: gradient on ", g.device(),
               " for a tensor on ", root.device());
    root_edges.push_back(gradient_edge(root));
  }
  count_dependencies(task, root_edges);
  for (size_t i = 0; i < roots.size(); ++i) {
    Tensor g = grad_roots.empty() || !grad_roots[i].defined() ? ones_like(roots[i]) : grad_roots[i];
    add_to_buffer(task, root_edges[i], g.detach());
  }
  std::priority_queue<Node*, std::vector<Node*>, ByNewestFirst> ready;
  std::unordered_set<Node*> pushed;
  for (const Edge& e : root_edges) {
    if (task.dependencies[e.node.get()] == 0 && pushed.insert(e.node.get()).second) ready.push(e.node.get());
  }
  while (!ready.empty()) {
    Node* node = ready.top();
    ready.pop();
    std::vector<Tensor> inputs;
    if (auto it = task.buffers.find(node); it != task.buffers.end()) {
      inputs = std::move(it->second);
      task.buffers.erase(it);
    }
    run_node(task, *node, std::move(inputs), ready);
  }
}

}  // namespace

void backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grad_roots, bool retain_graph) {
  GraphTask task;
  task.retain_graph = retain_graph;
  execute(task, roots, grad_roots);
}

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, bool retain_graph, bool allow_unused) {
  GraphTask task;
  task.retain_graph = retain_graph;
  task.accumulate_into_leaves = false;
  task.captured.resize(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    KILN_CHECK(inputs[i].defined() && inputs[i].requires_grad(), "grad: input ", i,
               " does not require grad");
    const Edge e = gradient_edge(inputs[i]);
    task.captures[e.node.get()].push_back({e.input_nr, i});
  }
  execute(task, outputs, grad_outputs);
  for (size_t i = 0; i < inputs.size(); ++i) {
    KILN_CHECK(allow_unused || task.captured[i].defined(), "grad: input ", i,
               " was not used to compute the outputs (pass allow_unused=true to get None)");
  }
  return task.captured;
}

}  // namespace kiln::autograd
