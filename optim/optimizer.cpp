// Optimizer base: parameter groups and their options, zero_grad, per-parameter state,
// master weights, GradScaler's unscale hooks, and the step driver that groups parameters
// by device and dtype so that each group costs one fused multi-tensor call per bucket.
// (The state dict lives in optimizer_state_dict.cpp.)
#include "optim/optimizer.h"

#include <algorithm>
#include <array>
#include <unordered_set>
#include <utility>

#include "core/autograd/grad_mode.h"
#include "core/device_values.h"
#include "core/error.h"
#include "core/host_sync.h"
#include "core/memory_format.h"
#include "core/ops/factory.h"

namespace kiln::optim {

double ParamGroup::get(const std::string& name) const {
  const auto it = options.find(name);
  KILN_CHECK(it != options.end(), "optimizer: parameter group has no option \"", name, "\"");
  return it->second;
}

Optimizer::Optimizer(std::string name, Options defaults) : name_(std::move(name)), defaults_(std::move(defaults)) {}

void Optimizer::add_param_group(ParamGroup group) {
  const std::string& who = name_;
  KILN_CHECK(!group.params.empty(), who, ": a parameter group has no parameters");
  std::unordered_set<const TensorImpl*> seen;
  for (const ParamGroup& existing : groups_)
    for (const Tensor& p : existing.params) seen.insert(p.impl());
  for (size_t i = 0; i < group.params.size(); ++i) {
    const Tensor& p = group.params[i];
    KILN_CHECK(p.defined(), who, ": parameter ", i, " of the group is undefined");
    KILN_CHECK(p.is_floating_point(), who, ": parameter ", i, " has dtype ", p.dtype(),
               "; only floating-point tensors can be optimized");
    KILN_CHECK(p.is_leaf(), who, ": parameter ", i, " (", p.sizes(),
               ") is not a leaf tensor; optimize the leaves (e.g. x.detach().requires_grad_())");
    // Note [Optimizer layouts]: the fused steps update a parameter, its gradient and its
    // state as one flat run of memory each (Note [Multi-tensor kernels]), so a parameter
    // must be dense (contiguous, or another dense layout such as channels-last) and its
    // gradient and state are kept laid out as it is: state is made by zeros_like, which
    // keeps the layout; a gradient in another layout is copied into the parameter's
    // (grad_in_param_layout); a loaded state tensor is copied into it. A strided
    // parameter would fail only inside step(), after its step counter had advanced.
    KILN_CHECK(is_non_overlapping_and_dense(p.sizes(), p.strides()), who, ": parameter ", i, " (shape ",
               p.sizes(), ", strides ", p.strides(),
               ") is not dense; the fused optimizer steps update dense tensors (make the ",
               "parameter from x.contiguous())");
    KILN_CHECK(seen.insert(p.impl()).second, who, ": parameter ", i, " (", p.sizes(),
               ") appears in more than one parameter group (or twice in one)");
  }
  check_option_names(group.options);
  for (const auto& [key, value] : defaults_) group.options.emplace(key, value);
  check_options(group.options);
  groups_.push_back(std::move(group));
}

void Optimizer::add_param_groups(std::vector<ParamGroup> groups) {
  KILN_CHECK(!groups.empty(), name_, ": got an empty list of parameter groups");
  for (ParamGroup& group : groups) add_param_group(std::move(group));
}

// The options a group may hold: the optimizer's own, and those learning-rate schedulers
// add ("initial_lr", "base_lr", "max_lr", "base_momentum", ...).
void Optimizer::check_option_names(const Options& options) const {
  for (const auto& [key, value] : options)
    KILN_CHECK(defaults_.count(key) != 0 || key == "initial_lr" || key.rfind("base_", 0) == 0 ||
                   key.rfind("max_", 0) == 0,
               name_, ": unknown option \"", key, "\" in a parameter group");
}

namespace {
void clear_grad(const Tensor& t, bool set_to_none) {
  Tensor grad = t.grad();
  if (!grad.defined()) return;
  if (set_to_none) {
    t.set_grad(Tensor());
  } else {
    grad.zero_();
  }
}
}  // namespace

void Optimizer::zero_grad(bool set_to_none) {
  NoGradGuard no_grad;
  for (ParamGroup& group : groups_)
    for (const Tensor& p : group.params) clear_grad(p, set_to_none);
  for (auto& [param, master] : masters_) clear_grad(master, set_to_none);
  grads_prepared_ = false;
}

// A parameter with a master weight keeps its state under the master (Note [Master
// weights]): that is the tensor the kernels update, and the state has its dtype.
const ParamState& Optimizer::state(const Tensor& param) const {
  static const ParamState kEmpty;
  const Tensor* master = find_master(param);
  const auto it = state_.find(master ? master->impl() : param.impl());
  return it == state_.end() ? kEmpty : it->second;
}

ParamState& Optimizer::mutable_state(const Tensor& param) { return state_[param.impl()]; }

std::vector<Tensor> Optimizer::state_list(const std::vector<Tensor>& params, const std::string& name,
                                          std::vector<bool>* is_new) {
  std::vector<Tensor> list;
  list.reserve(params.size());
  if (is_new) is_new->assign(params.size(), false);
  for (size_t i = 0; i < params.size(); ++i) {
    ParamState& state = mutable_state(params[i]);
    auto it = state.find(name);
    if (it == state.end()) {
      it = state.emplace(name, zeros_like(params[i])).first;
      if (is_new) (*is_new)[i] = true;
    }
    list.push_back(it->second);
  }
  return list;
}

std::vector<Tensor> Optimizer::step_counters(const std::vector<Tensor>& params) {
  std::vector<Tensor> steps;
  steps.reserve(params.size());
  for (const Tensor& p : params) {
    ParamState& state = mutable_state(p);
    auto it = state.find("step");
    if (it == state.end())
      it = state.emplace("step", zeros({}, TensorOptions{.dtype = DType::Float32, .device = p.device()})).first;
    steps.push_back(it->second);
  }
  return steps;
}

// ---- master weights (Note [Master weights]) ---------------------------------------------

void Optimizer::enable_master_weights() {
  KILN_CHECK(state_.empty(), name_, ": enable_master_weights() must be called before the first step");
  master_weights_ = true;
}

namespace {
bool is_low_precision(DType dtype) { return dtype == DType::Float16 || dtype == DType::BFloat16; }
}  // namespace

const Tensor* Optimizer::find_master(const Tensor& param) const {
  const auto it = masters_.find(param.impl());
  return it == masters_.end() ? nullptr : &it->second;
}

bool Optimizer::keeps_master(const Tensor& param) const {
  return master_weights_ && is_low_precision(param.dtype());
}

Tensor Optimizer::make_master(const Tensor& param) {
  return param.detach().to(param.device(), DType::Float32, /*non_blocking=*/false, /*copy=*/true);
}

Tensor Optimizer::master_of(const Tensor& param) {
  if (!keeps_master(param)) return Tensor();
  auto it = masters_.find(param.impl());
  if (it == masters_.end()) it = masters_.emplace(param.impl(), make_master(param)).first;
  return it->second;
}

std::vector<Tensor> Optimizer::master_params() {
  std::vector<Tensor> out;
  for (const ParamGroup& group : groups_) {
    for (const Tensor& p : group.params) {
      const Tensor master = master_of(p);
      out.push_back(master.defined() ? master : p);
    }
  }
  return out;
}

// ---- step ---------------------------------------------------------------------------------

// The parameters of one group that step() updates with one kernel call: one device, one
// dtype, and either all with master weights or none.
struct Optimizer::Bucket {
  Device device;
  DType dtype = DType::Float32;
  bool masters = false;
  std::vector<Tensor> params;        // what the kernel writes: model parameters or masters
  std::vector<Tensor> grads;         // what it reads: model or master gradients
  std::vector<Tensor> model_params;  // with masters: the model's parameters
  std::vector<Tensor> model_grads;   // with masters: the model's gradients
};

namespace {
// The gradient `grad` of `param` laid out as the parameter (Note [Optimizer layouts]):
// itself when it is, else a copy.
Tensor grad_in_param_layout(const Tensor& grad, const Tensor& param) {
  if (same_strides_where_it_matters(param.sizes(), grad.strides(), param.strides())) return grad;
  NoGradGuard no_grad;
  Tensor laid_out = empty_like(param, {.dtype = grad.dtype()});
  laid_out.copy_(grad);
  return laid_out;
}
}  // namespace

std::vector<Optimizer::Bucket> Optimizer::buckets(const ParamGroup& group) {
  std::vector<Bucket> out;
  for (const Tensor& p : group.params) {
    Tensor grad = p.grad();
    if (!grad.defined()) continue;  // no gradient: skipped, state does not advance
    grad = grad_in_param_layout(grad, p);
    const Tensor master = master_of(p);
    const Tensor& written = master.defined() ? master : p;
    auto it = std::find_if(out.begin(), out.end(), [&](const Bucket& b) {
      return b.device == p.device() && b.dtype == written.dtype() && b.masters == master.defined();
    });
    if (it == out.end()) {
      it = out.insert(out.end(), Bucket{});
      it->device = p.device();
      it->dtype = written.dtype();
      it->masters = master.defined();
    }
    it->params.push_back(written);
    if (master.defined()) {
      if (!master.grad().defined()) master.set_grad(empty_like(master));
      it->grads.push_back(master.grad());
      it->model_params.push_back(p);
      it->model_grads.push_back(grad);
    } else {
      it->grads.push_back(grad);
    }
  }
  return out;
}

namespace {
// `t` on `device`, copied there without a host sync when it lives elsewhere (GradScaler's
// tensors may sit on another device than some parameters).
Tensor on_device(const Tensor& t, Device device) {
  return !t.defined() || t.device() == device ? t : t.to(device, /*non_blocking=*/true);
}

AmpStepArgs amp_on(const AmpStepArgs& amp, Device device) {
  return AmpStepArgs{.inv_scale = on_device(amp.inv_scale, device), .found_inf = on_device(amp.found_inf, device)};
}
}  // namespace

namespace {
// GradScaler's tensors, checked before step() writes anything: a check failing in the
// middle (in a step kernel's op) would leave earlier buckets updated and, worse, step
// counters advanced without their update.
void check_amp_args(const std::string& who, const AmpStepArgs& amp) {
  const std::pair<const char*, const Tensor*> args[] = {{"amp.inv_scale", &amp.inv_scale},
                                                        {"amp.found_inf", &amp.found_inf}};
  for (const auto& [name, t] : args) {
    if (!t->defined()) continue;
    KILN_CHECK(t->dtype() == DType::Float32 && t->sizes() == std::vector<int64_t>{1}, who, ".step: ", name,
               " must be a float32 tensor of shape [1], got ", t->dtype(), " ", t->sizes());
  }
}
}  // namespace

void Optimizer::step(const AmpStepArgs& amp) {
  check_amp_args(name_, amp);
  NoGradGuard no_grad;
  for (ParamGroup& group : groups_)
    for (Bucket& bucket : buckets(group)) step_bucket(group, bucket, amp);
  grads_prepared_ = false;
}

// With master weights: model gradients (times inv_scale) -> float32 master gradients,
// the update of the masters, masters -> model parameters. When amp.found_inf skips the
// update, the copy back writes the values the parameters already hold (each parameter
// is its master rounded, Note [Master weights]), so it is harmless.
void Optimizer::step_bucket(ParamGroup& group, Bucket& bucket, const AmpStepArgs& amp) {
  AmpStepArgs local = amp_on(amp, bucket.device);
  if (grads_prepared_) local.inv_scale = Tensor();  // Note [Unscaled once]
  if (bucket.masters) {
    if (!grads_prepared_) multi_tensor_scale_(bucket.model_grads, bucket.grads, local.inv_scale);
    local.inv_scale = Tensor();
  }
  if (has_step_counter()) increment_steps_(step_counters(bucket.params), local.found_inf);
  update(group, bucket.params, bucket.grads, local);
  if (bucket.masters) multi_tensor_scale_(bucket.params, bucket.model_params);
}

// ---- CUDA graphs (Note [Capturable optimizers]) -------------------------------------------

void Optimizer::set_capturable(bool capturable) {
  capturable_ = capturable;
  if (!capturable) scheduled_.clear();
}

void Optimizer::write_scheduled(const ScheduledOptions& entry) const {
  const ParamGroup& group = groups_[entry.group];
  const std::array<double, 2> values = {group.lr(), group.get(scheduled_momentum())};
  write_doubles_(entry.values, values);
}

Tensor Optimizer::scheduled_options(const ParamGroup& group, Device device) {
  if (!capturable_) return Tensor();
  const auto index = static_cast<size_t>(&group - groups_.data());
  KILN_ASSERT(index < groups_.size(), "scheduled_options: not one of this optimizer's groups");
  auto it = std::find_if(scheduled_.begin(), scheduled_.end(),
                         [&](const ScheduledOptions& e) { return e.group == index && e.device == device; });
  if (it == scheduled_.end()) {
    it = scheduled_.insert(scheduled_.end(),
                           {index, device, empty({2}, TensorOptions{.dtype = DType::Float64, .device = device})});
  }
  if (!capturing_on_this_thread()) write_scheduled(*it);
  return it->values;
}

void Optimizer::write_scheduled_options() {
  KILN_CHECK(!capturing_on_this_thread(), name_, ".write_scheduled_options: not during a capture (the values "
             "would be frozen into the graph)");
  for (const ScheduledOptions& entry : scheduled_) write_scheduled(entry);
}

std::vector<double> Optimizer::scheduled_signature() const {
  std::vector<double> signature;
  for (const ParamGroup& group : groups_) {
    signature.push_back(static_cast<double>(group.params.size()));
    for (const auto& [key, value] : group.options) {
      if (key == "lr") continue;
      signature.push_back(key == scheduled_momentum() ? (value != 0 ? 1.0 : 0.0) : value);
    }
  }
  return signature;
}

std::vector<Tensor> Optimizer::persistent_tensors() const {
  std::vector<Tensor> tensors;
  for (const auto& [param, state] : state_)
    for (const auto& [name, t] : state) tensors.push_back(t);
  for (const auto& [param, master] : masters_) tensors.push_back(master);
  for (const ScheduledOptions& entry : scheduled_) tensors.push_back(entry.values);
  return tensors;
}

// ---- GradScaler support -----------------------------------------------------------------

std::vector<Tensor> Optimizer::unscale_grads_(const Tensor& inv_scale) { return scale_grads(inv_scale, true); }

std::vector<Tensor> Optimizer::check_grads_finite_(const Tensor& inv_scale) {
  return scale_grads(inv_scale, master_weights_);
}

// One multi_tensor_scale_ per device over every gradient there: in place (or into the
// master gradients) when `write`, a check only otherwise.
std::vector<Tensor> Optimizer::scale_grads(const Tensor& inv_scale, bool write) {
  KILN_CHECK(inv_scale.defined(), name_, ": unscale_grads_ needs an inv_scale tensor");
  NoGradGuard no_grad;
  struct PerDevice {
    Device device;
    std::vector<Tensor> src, dst;
  };
  std::vector<PerDevice> devices;
  for (const ParamGroup& group : groups_) {
    for (const Tensor& p : group.params) {
      auto it = std::find_if(devices.begin(), devices.end(), [&](const PerDevice& d) { return d.device == p.device(); });
      if (it == devices.end()) {
        it = devices.insert(devices.end(), PerDevice{});
        it->device = p.device();
      }
      Tensor grad = p.grad();
      if (!grad.defined()) continue;
      if (const Tensor laid_out = grad_in_param_layout(grad, p); !laid_out.is_same(grad)) {
        grad = laid_out;
        p.set_grad(grad);
      }
      it->src.push_back(grad);
      const Tensor master = write ? master_of(p) : Tensor();
      if (master.defined() && !master.grad().defined()) master.set_grad(empty_like(master));
      if (write) it->dst.push_back(master.defined() ? master.grad() : grad);
    }
  }
  std::vector<Tensor> found_infs;
  for (const PerDevice& d : devices) {
    Tensor found_inf = zeros({1}, TensorOptions{.dtype = DType::Float32, .device = d.device});
    const Tensor scale = write ? on_device(inv_scale, d.device) : Tensor();
    if (!d.src.empty()) multi_tensor_scale_(d.src, d.dst, scale, found_inf);  // no gradients here: 0
    found_infs.push_back(found_inf);
  }
  if (write) grads_prepared_ = true;
  return found_infs;
}

}  // namespace kiln::optim
