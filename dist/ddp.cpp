// DistributedDataParallel (ddp.h): bucket assignment, the readiness hooks, launching
// buckets in order, and finishing a backward (Note [Gradient buckets]).
#include "dist/ddp.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <unordered_set>

#include "core/autograd/accumulate_grad.h"
#include "core/autograd/grad_mode.h"
#include "core/error.h"
#include "core/ops/factory.h"
#include "core/ops/shape.h"
#include "dist/init_process_group.h"

namespace kiln::dist {
namespace {

int64_t bytes_of(double megabytes) { return static_cast<int64_t>(megabytes * 1024.0 * 1024.0); }

// Tensors that can share a flat buffer: the same dtype on the same device.
using Placement = std::tuple<DType, DeviceType, int>;
Placement placement_of(const Tensor& t) { return {t.dtype(), t.device().type, t.device().index}; }

// The leaves whose gradients `outputs` depend on: a walk of the autograd graph.
std::unordered_set<const TensorImpl*> leaves_reached(const std::vector<Tensor>& outputs) {
  std::unordered_set<const TensorImpl*> leaves;
  std::unordered_set<const autograd::Node*> seen;
  std::vector<const autograd::Node*> stack;
  for (const Tensor& out : outputs)
    if (out.defined() && out.grad_fn()) stack.push_back(out.grad_fn().get());
  while (!stack.empty()) {
    const autograd::Node* node = stack.back();
    stack.pop_back();
    if (!seen.insert(node).second) continue;
    if (const auto* accumulate = dynamic_cast<const autograd::AccumulateGrad*>(node))
      leaves.insert(accumulate->leaf().get());
    for (const autograd::Edge& edge : node->next_edges)
      if (edge.is_valid()) stack.push_back(edge.node.get());
  }
  return leaves;
}

}  // namespace

void broadcast_coalesced(ProcessGroup& group, const std::vector<Tensor>& tensors, int64_t root) {
  std::map<Placement, std::vector<Tensor>> groups;
  for (const Tensor& t : tensors) groups[placement_of(t)].push_back(t);
  NoGradGuard no_grad;
  // Every broadcast is issued before any is waited for; each result is copied back on the
  // caller's stream once its broadcast is done (no host wait on a device backend).
  std::vector<std::pair<Tensor, std::shared_ptr<Work>>> flats;
  for (const auto& [placement, members] : groups) {
    std::vector<Tensor> flat_parts;
    for (const Tensor& t : members) flat_parts.push_back(t.reshape({-1}));
    const Tensor flat = cat(flat_parts, 0);
    flats.emplace_back(flat, group.broadcast(flat, root));
  }
  size_t g = 0;
  for (const auto& [placement, members] : groups) {
    const auto& [flat, work] = flats[g++];
    work->wait_stream();
    int64_t at = 0;
    for (const Tensor& t : members) {
      Tensor target = t;
      target.copy_(flat.narrow(0, at, t.numel()).view(t.sizes()));
      at += t.numel();
    }
  }
}

// ---- the state the hooks share ----------------------------------------------------------

struct DistributedDataParallel::State {
  struct Param {
    Tensor tensor;
    std::string name;
    size_t bucket = 0;
    int64_t offset = 0;  // in the bucket's flat tensor, in elements
    Tensor view = {};    // its slice of the flat tensor, shaped as the parameter: its .grad
  };
  struct Bucket {
    std::vector<size_t> params;
    Tensor flat;
    Tensor world_size;   // the divisor, a scalar on the bucket's device (made once)
    size_t pending = 0;  // parameters not ready yet in this backward
    std::shared_ptr<Work> work;
  };

  ProcessGroup* group = nullptr;
  bool find_unused = false;
  std::vector<Param> params;
  std::vector<Bucket> buckets;
  bool require_sync = true;  // false under no_sync
  bool armed = false;        // a forward prepared a reduction that backward has not finished
  size_t marked_count = 0;
  std::vector<bool> marked;        // ready in this backward
  std::vector<bool> locally_used;  // with find_unused: the forward output depends on it
  size_t next_bucket = 0;          // the next bucket to launch

  void arm() {
    armed = true;
    marked_count = 0;
    marked.assign(params.size(), false);
    locally_used.assign(params.size(), true);
    for (Bucket& b : buckets) b.pending = b.params.size(), b.work = nullptr;
    next_bucket = 0;
  }

  void mark_ready(size_t i) {
    if (!armed) return;  // no_sync, or a backward that no DDP forward prepared
    KILN_CHECK(
        !marked[i], "DistributedDataParallel: parameter '", params[i].name,
        "' received its gradient twice in one backward (a second backward through the same forward needs "
        "no_sync for all but the last)");
    marked[i] = true;
    ++marked_count;
    Param& p = params[i];
    const Tensor grad = p.tensor.grad();
    if (locally_used[i] && grad.defined() && !grad.is_same(p.view)) {
      NoGradGuard no_grad;  // the gradient becomes the bucket's view (Note [Gradient buckets])
      p.view.copy_(grad);
      p.tensor.set_grad(p.view);
    }
    if (--buckets[params[i].bucket].pending == 0) launch_ready_buckets();
  }

  // Launches every bucket that is ready, in index order (several at once as one
  // coalesced call); after the last, finishes.
  void launch_ready_buckets() {
    NoGradGuard no_grad;
    std::vector<size_t> ready;
    while (next_bucket < buckets.size() && buckets[next_bucket].pending == 0) ready.push_back(next_bucket++);
    std::vector<Tensor> flats;
    for (const size_t b : ready) {
      Tensor& flat = buckets[b].flat;
      if (group->size() > 1) flat.div_(buckets[b].world_size);
      flats.push_back(flat);
    }
    if (!flats.empty()) {
      const std::shared_ptr<Work> work =
          flats.size() == 1 ? group->all_reduce(flats[0]) : group->all_reduce_coalesced(flats);
      for (const size_t b : ready) buckets[b].work = work;
    }
    if (next_bucket == buckets.size()) finish();
  }

  void finish() {
    armed = false;
    for (Bucket& b : buckets) b.work->wait_stream();  // the optimizer runs after, on the same stream
    if (!find_unused) return;
    // Which parameters some rank used: they get the averaged gradient; the others keep theirs.
    std::vector<int32_t> flags(params.size());
    for (size_t i = 0; i < params.size(); ++i) flags[i] = locally_used[i] ? 1 : 0;
    Tensor used = tensor(flags, {}, {.dtype = DType::Int32, .device = buckets[0].flat.device()});
    group->all_reduce(used, ReduceOp::Max)->wait();
    const std::vector<int32_t> globally = used.to_vector<int32_t>();
    for (size_t i = 0; i < params.size(); ++i)
      if (!locally_used[i] && globally[i] != 0) params[i].tensor.set_grad(params[i].view);
  }

  // Counts the parameters `outputs` does not depend on as ready, with zero gradient.
  void mark_unused(const std::vector<Tensor>& outputs) {
    const auto reached = leaves_reached(outputs);
    NoGradGuard no_grad;
    for (size_t i = 0; i < params.size(); ++i) {
      if (reached.count(params[i].tensor.impl()) != 0) continue;
      locally_used[i] = false;
      const Tensor grad = params[i].tensor.grad();
      if (!grad.defined() || !grad.is_same(params[i].view)) params[i].view.zero_();
      mark_ready(i);
    }
  }

  // Before a new forward: a backward that left parameters without gradient is an error.
  void check_previous_backward() const {
    if (!armed || marked_count == 0) return;
    std::string missing;
    size_t count = 0;
    for (size_t i = 0; i < params.size(); ++i) {
      if (marked[i]) continue;
      if (count++ < 10) missing += (missing.empty() ? "'" : ", '") + params[i].name + "'";
    }
    KILN_CHECK(false, "DistributedDataParallel: the last backward gave no gradient to ", count,
               " parameter(s) (", missing, count > 10 ? ", ..." : "",
               "), so their buckets were never averaged; if the model does not use every parameter in every "
               "forward, construct DDP with find_unused_parameters = true");
  }
};

// ---- construction -----------------------------------------------------------------------

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<nn::Layer> module, DDPOptions options)
    : module_(std::move(module)), options_(options), state_(std::make_shared<State>()) {
  KILN_CHECK(module_ != nullptr, "DistributedDataParallel: no module");
  KILN_CHECK(options.bucket_cap_mb > 0 && options.first_bucket_cap_mb > 0,
             "DistributedDataParallel: bucket caps must be positive, got ", options.first_bucket_cap_mb,
             " and ", options.bucket_cap_mb, " MB");
  group_ = options.group ? options.group : world_group();
  register_module("module", module_);
  State& s = *state_;
  s.group = group_.get();
  s.find_unused = options.find_unused_parameters;

  // Rank 0's weights and buffers everywhere.
  std::vector<Tensor> everything = module_->parameters();
  for (const Tensor& b : module_->buffers()) everything.push_back(b);
  if (group_->size() > 1 && !everything.empty()) broadcast_coalesced(*group_, everything, 0);

  // Buckets (Note [Gradient buckets]): reverse order, one open bucket per dtype and device.
  for (const auto& [name, p] : module_->named_parameters())
    if (p.requires_grad()) s.params.push_back({.tensor = p, .name = name});
  std::reverse(s.params.begin(), s.params.end());
  std::map<Placement, std::pair<size_t, int64_t>> open;  // placement -> (bucket, its cap in bytes)
  std::vector<int64_t> bucket_elements;
  for (size_t i = 0; i < s.params.size(); ++i) {
    State::Param& p = s.params[i];
    const Placement key = placement_of(p.tensor);
    auto it = open.find(key);
    if (it == open.end()) {
      const int64_t cap = bytes_of(s.buckets.empty() ? options.first_bucket_cap_mb : options.bucket_cap_mb);
      it = open.emplace(key, std::make_pair(s.buckets.size(), cap)).first;
      s.buckets.emplace_back();
      bucket_elements.push_back(0);
    }
    const size_t b = it->second.first;
    p.bucket = b;
    p.offset = bucket_elements[b];
    bucket_elements[b] += p.tensor.numel();
    s.buckets[b].params.push_back(i);
    if (bucket_elements[b] * static_cast<int64_t>(p.tensor.element_size()) >= it->second.second)
      open.erase(it);
  }
  NoGradGuard no_grad;
  for (size_t b = 0; b < s.buckets.size(); ++b) {
    State::Bucket& bucket = s.buckets[b];
    const Tensor& first = s.params[bucket.params.front()].tensor;
    const TensorOptions placement{.dtype = first.dtype(), .device = first.device()};
    bucket.flat = zeros({bucket_elements[b]}, placement);
    bucket.world_size = scalar_tensor(static_cast<double>(group_->size()), placement);
    for (const size_t i : bucket.params) {
      State::Param& p = s.params[i];
      // Laid out as the parameter (a channels-last weight gets a channels-last view of its
      // slice), so the optimizer's flat update reads it as it is (Note [Optimizer layouts]).
      const Tensor slice = bucket.flat.narrow(0, p.offset, p.tensor.numel());
      p.view = p.tensor.is_contiguous()
                   ? slice.view(p.tensor.sizes())
                   : slice.as_strided(p.tensor.sizes(), p.tensor.strides(), slice.storage_offset());
      const Tensor grad = p.tensor.grad();
      if (!grad.defined()) continue;
      p.view.copy_(grad);
      p.tensor.set_grad(p.view);
    }
  }
  const std::weak_ptr<State> weak = state_;
  for (size_t i = 0; i < s.params.size(); ++i)
    s.params[i].tensor.register_post_accumulate_grad_hook([weak, i](const Tensor&) {
      if (const auto state = weak.lock()) state->mark_ready(i);
    });
}

DistributedDataParallel::~DistributedDataParallel() = default;

std::vector<std::vector<std::string>> DistributedDataParallel::bucket_parameter_names() const {
  std::vector<std::vector<std::string>> names;
  for (const State::Bucket& b : state_->buckets) {
    names.emplace_back();
    for (const size_t i : b.params) names.back().push_back(state_->params[i].name);
  }
  return names;
}

// ---- forward ----------------------------------------------------------------------------

void DistributedDataParallel::pre_forward() {
  state_->check_previous_backward();
  state_->armed = false;
  if (options_.broadcast_buffers && group_->size() > 1) {
    const std::vector<Tensor> buffers = module_->buffers();
    if (!buffers.empty()) broadcast_coalesced(*group_, buffers, 0);
  }
  if (autograd::grad_mode_enabled() && state_->require_sync) state_->arm();
}

void DistributedDataParallel::post_forward(const std::vector<Tensor>& outputs) {
  if (state_->armed && options_.find_unused_parameters) state_->mark_unused(outputs);
}

Tensor DistributedDataParallel::forward(const Tensor& input) {
  pre_forward();
  Tensor output = module_->forward(input);
  post_forward({output});
  return output;
}

DistributedDataParallel::NoSync::NoSync(DistributedDataParallel& ddp)
    : ddp_(ddp), previous_(ddp.state_->require_sync) {
  ddp.state_->require_sync = false;
}

DistributedDataParallel::NoSync::~NoSync() { ddp_.state_->require_sync = previous_; }

}  // namespace kiln::dist
