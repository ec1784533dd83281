// Module: registration, PyTorch-ordered walks with dotted names, train/eval, to(),
// zero_grad, apply, state_dict / load_state_dict and printing (see module.h).
#include "nn/module.h"

#include <map>
#include <set>
#include <sstream>

#include "core/autograd/grad_mode.h"
#include "core/ops/copy.h"
#include "core/ops/factory.h"

namespace kiln::nn {
namespace {

std::string join(const std::string& prefix, const std::string& name) {
  return prefix.empty() ? name : prefix + "." + name;
}

// A shared_ptr to `module`: its owner's when it has one, else a non-owning alias (a module
// made on the stack can still list itself in named_modules).
std::shared_ptr<Module> handle_of(Module& module) {
  std::shared_ptr<Module> owned = module.weak_from_this().lock();
  return owned ? owned : std::shared_ptr<Module>(std::shared_ptr<Module>(), &module);
}

// Modules in pre-order with their dotted prefixes, each listed once.
std::vector<std::pair<std::string, const Module*>> walk(const Module& root) {
  std::vector<std::pair<std::string, const Module*>> out;
  std::set<const Module*> seen;
  std::function<void(const std::string&, const Module&)> visit = [&](const std::string& prefix, const Module& m) {
    if (!seen.insert(&m).second) return;
    out.emplace_back(prefix, &m);
    for (const auto& [name, child] : m.named_children()) visit(join(prefix, name), *child);
  };
  visit("", root);
  return out;
}

std::string shapes_of(const std::vector<int64_t>& shape) { return shape_str(shape); }

}  // namespace

void Module::check_new_name(const std::string& name, const char* what) const {
  KILN_CHECK(!name.empty() && name.find('.') == std::string::npos, type_name(), ": ", what, " name \"", name,
             "\" must be non-empty and contain no '.'");
  bool taken = false;
  for (const auto& p : parameters_) taken = taken || p.first == name;
  for (const auto& b : buffers_) taken = taken || b.name == name;
  for (const auto& c : children_) taken = taken || c.first == name;
  KILN_CHECK(!taken, type_name(), ": cannot register ", what, " \"", name, "\": the name is already taken");
}

Tensor Module::register_parameter(const std::string& name, Tensor tensor, bool requires_grad) {
  check_new_name(name, "parameter");
  KILN_CHECK(tensor.defined(), type_name(), ": parameter \"", name, "\" is undefined");
  if (!tensor.is_leaf()) tensor = tensor.detach();
  if (requires_grad) {
    KILN_CHECK(tensor.is_floating_point(), type_name(), ": parameter \"", name,
               "\" must be floating-point to require grad, got ", tensor.dtype());
  }
  tensor.requires_grad_(requires_grad);
  parameters_.emplace_back(name, tensor);
  return tensor;
}

Tensor Module::register_buffer(const std::string& name, Tensor tensor, bool persistent) {
  check_new_name(name, "buffer");
  KILN_CHECK(tensor.defined(), type_name(), ": buffer \"", name, "\" is undefined");
  buffers_.push_back({name, tensor, persistent});
  return tensor;
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> module) {
  check_new_name(name, "module");
  KILN_CHECK(module != nullptr, type_name(), ": module \"", name, "\" is null");
  KILN_CHECK(module.get() != this, type_name(), ": a module cannot be its own child");
  children_.emplace_back(name, std::move(module));
}

void Module::replace_child(const std::string& name, std::shared_ptr<Module> module) {
  KILN_CHECK(module != nullptr, type_name(), ": module \"", name, "\" is null");
  KILN_CHECK(module.get() != this, type_name(), ": a module cannot be its own child");
  for (auto& child : children_) {
    if (child.first != name) continue;
    child.second = std::move(module);
    return;
  }
  KILN_CHECK(false, type_name(), ": no child module named \"", name, "\" to replace");
}

NamedTensors Module::named_parameters(bool recurse) const {
  NamedTensors out;
  std::set<const TensorImpl*> seen;
  for (const auto& [prefix, m] : recurse ? walk(*this) : decltype(walk(*this)){{"", this}}) {
    for (const auto& [name, t] : m->parameters_) {
      if (seen.insert(t.impl()).second) out.emplace_back(join(prefix, name), t);
    }
  }
  return out;
}

NamedTensors Module::named_buffers(bool recurse) const {
  NamedTensors out;
  std::set<const TensorImpl*> seen;
  for (const auto& [prefix, m] : recurse ? walk(*this) : decltype(walk(*this)){{"", this}}) {
    for (const Buffer& b : m->buffers_) {
      if (seen.insert(b.tensor.impl()).second) out.emplace_back(join(prefix, b.name), b.tensor);
    }
  }
  return out;
}

std::vector<Tensor> Module::parameters(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [name, t] : named_parameters(recurse)) out.push_back(t);
  return out;
}

std::vector<Tensor> Module::buffers(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [name, t] : named_buffers(recurse)) out.push_back(t);
  return out;
}

Module::NamedModules Module::named_modules() {
  NamedModules out;
  for (const auto& [prefix, m] : walk(*this)) out.emplace_back(prefix, handle_of(const_cast<Module&>(*m)));
  return out;
}

Module::NamedModules Module::named_children() const { return children_; }

std::vector<std::shared_ptr<Module>> Module::children() const {
  std::vector<std::shared_ptr<Module>> out;
  for (const auto& c : children_) out.push_back(c.second);
  return out;
}

Tensor& Module::parameter(const std::string& name) {
  for (auto& p : parameters_) {
    if (p.first == name) return p.second;
  }
  detail::throw_user_error(detail::str_cat(type_name(), ": no parameter named \"", name, "\""));
}

Tensor& Module::buffer(const std::string& name) {
  for (Buffer& b : buffers_) {
    if (b.name == name) return b.tensor;
  }
  detail::throw_user_error(detail::str_cat(type_name(), ": no buffer named \"", name, "\""));
}

std::shared_ptr<Module> Module::child(const std::string& name) const {
  for (const auto& c : children_) {
    if (c.first == name) return c.second;
  }
  detail::throw_user_error(detail::str_cat(type_name(), ": no child module named \"", name, "\""));
}

Module& Module::train(bool on) {
  training_ = on;
  for (auto& c : children_) c.second->train(on);
  return *this;
}

// Every tensor of the tree (parameters, their gradients, buffers) gets
// set_data(convert(t)) when convert changes it, so every handle sees the result.
template <typename Fn>
void Module::convert_tensors(const Fn& convert) {
  NoGradGuard no_grad;
  auto update = [&](const Tensor& t) {
    if (!t.defined()) return;
    const Tensor converted = convert(t);
    if (!converted.is_same(t)) t.set_data(converted);
  };
  for (const auto& [prefix, m] : walk(*this)) {
    Module& module = const_cast<Module&>(*m);
    for (auto& p : module.parameters_) {
      update(p.second);
      update(p.second.grad());
    }
    for (Buffer& b : module.buffers_) update(b.tensor);
  }
}

Module& Module::to(Device device, DType dtype) {
  KILN_CHECK(is_floating(dtype), type_name(), ".to: expected a floating-point dtype, got ", dtype);
  convert_tensors([&](const Tensor& t) {
    return t.to(device, t.is_floating_point() ? dtype : t.dtype());
  });
  return *this;
}

Module& Module::to(MemoryFormat format) {
  const int rank = memory_format_rank(format);
  convert_tensors([&](const Tensor& t) {
    if (format == MemoryFormat::Contiguous) return t.contiguous();
    if (t.dim() != rank) return t;
    // The format's exact strides, even for a tensor that is both layouts at once (a stem's
    // [C_out, 1, k...] weight): they mark it as channels-last for the convolutions (Note
    // [Convolution memory format]), which contiguous(format) leaves as it is.
    const Dims strides = memory_format_strides(t.sizes(), format, "Module::to");
    if (t.strides() == strides) return t;
    Tensor laid_out = empty_strided(t.sizes(), strides, {.dtype = t.dtype(), .device = t.device()});
    laid_out.copy_(t);
    return laid_out;
  });
  return *this;
}

Module& Module::to(Device device) {
  convert_tensors([&](const Tensor& t) { return t.to(device); });
  return *this;
}

Module& Module::to(DType dtype) {
  KILN_CHECK(is_floating(dtype), type_name(), ".to: expected a floating-point dtype, got ", dtype);
  convert_tensors([&](const Tensor& t) { return t.is_floating_point() ? t.to(dtype) : t; });
  return *this;
}

void Module::zero_grad(bool set_to_none) {
  NoGradGuard no_grad;
  for (const Tensor& p : parameters()) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    if (set_to_none) {
      p.set_grad(Tensor());
    } else {
      if (g.grad_fn()) {
        g = g.detach();
        p.set_grad(g);
      }
      g.zero_();
    }
  }
}

Module& Module::apply(const std::function<void(Module&)>& fn) {
  for (auto& c : children_) c.second->apply(fn);
  fn(*this);
  return *this;
}

void Module::collect_state(const std::string& prefix, StateDict& out) const {
  for (const auto& [name, t] : parameters_) out.emplace_back(join(prefix, name), t.detach());
  for (const Buffer& b : buffers_) {
    if (b.persistent) out.emplace_back(join(prefix, b.name), b.tensor.detach());
  }
  for (const auto& [name, c] : children_) c->collect_state(join(prefix, name), out);
}

StateDict Module::state_dict() const {
  StateDict out;
  collect_state("", out);
  return out;
}

namespace {

std::string describe_problems(const LoadStateDictResult& r) {
  std::ostringstream os;
  auto list = [&](const char* title, const std::vector<std::string>& keys) {
    if (keys.empty()) return;
    os << "\n  " << title << ":";
    for (const std::string& k : keys) os << " \"" << k << "\"";
  };
  list("missing keys", r.missing_keys);
  list("unexpected keys", r.unexpected_keys);
  for (const MismatchedKey& m : r.mismatched_keys) {
    os << "\n  size mismatch for \"" << m.name << "\": the module has " << shapes_of(m.expected_shape)
       << ", the state dict " << shapes_of(m.got_shape);
  }
  return os.str();
}

// The state dict's entries matched to the module's by name: the pairs to copy
// (destination, source) and the report of what did not match.
LoadStateDictResult match_keys(const StateDict& own, const StateDict& given,
                               std::vector<std::pair<Tensor, Tensor>>& to_copy) {
  const std::map<std::string, Tensor> by_name(given.begin(), given.end());
  std::set<std::string> own_names;
  LoadStateDictResult report;
  for (const auto& [name, dst] : own) {
    own_names.insert(name);
    const auto it = by_name.find(name);
    if (it == by_name.end()) {
      report.missing_keys.push_back(name);
    } else if (!it->second.defined() || it->second.sizes() != dst.sizes()) {
      report.mismatched_keys.push_back(
          {name, dst.sizes().vec(), sizes_or_none(it->second).vec()});
    } else {
      to_copy.emplace_back(dst, it->second);
    }
  }
  for (const auto& [name, t] : given) {
    if (!own_names.count(name)) report.unexpected_keys.push_back(name);
  }
  return report;
}

// `src` as the commit copies it into `dst` (Note [All-or-nothing loads]): dst's dtype,
// contiguous when dst is, on dst's device; but a host source for a contiguous GPU tensor
// stays on the host (the copy is then one host-to-device memcpy, and the weights are not
// held twice on the GPU). `src` itself when it is that already; else a fresh tensor.
Tensor staged_source(const Tensor& src, const Tensor& dst) {
  const bool from_host = src.device().is_cpu() && !dst.device().is_cpu() && dst.is_contiguous();
  const Tensor staged = src.detach().to(from_host ? src.device() : dst.device(), dst.dtype());
  return dst.is_contiguous() ? staged.contiguous() : staged;
}

}  // namespace

// Note [All-or-nothing loads]: names, shapes and every conversion (each may fail: a
// conversion allocates) come first; then copies that cannot fail.
LoadStateDictResult Module::load_state_dict(const StateDict& state_dict, bool strict) {
  std::vector<std::pair<Tensor, Tensor>> to_copy;  // (destination, source)
  LoadStateDictResult report = match_keys(this->state_dict(), state_dict, to_copy);
  KILN_CHECK(!strict || report.ok(), "load_state_dict: error(s) loading the state dict of ", type_name(),
             " (nothing was loaded):", describe_problems(report),
             "\nHint: load_state_dict(sd, /*strict=*/false) loads the matching keys and reports the rest");
  NoGradGuard no_grad;
  for (auto& [dst, src] : to_copy) src = staged_source(src, dst);
  for (auto& [dst, src] : to_copy) dst.copy_(src);  // staged: a plain copy, which cannot fail
  return report;
}

void Module::print(std::ostream& os, int indent) const {
  os << type_name() << '(' << extra_repr();
  if (children_.empty()) {
    os << ')';
    return;
  }
  const std::string pad(static_cast<size_t>(indent + 2), ' ');
  os << '\n';
  for (const auto& [name, c] : children_) {
    os << pad << '(' << name << "): ";
    c->print(os, indent + 2);
    os << '\n';
  }
  os << std::string(static_cast<size_t>(indent), ' ') << ')';
}

std::string Module::to_string() const {
  std::ostringstream os;
  print(os, 0);
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Module& module) { return os << module.to_string(); }

int64_t parameter_count(const Module& module, bool trainable_only) {
  int64_t count = 0;
  for (const Tensor& p : module.parameters()) {
    if (!trainable_only || p.requires_grad()) count += p.numel();
  }
  return count;
}

}  // namespace kiln::nn
