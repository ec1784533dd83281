// Module: the base of every layer and model, as PyTorch's torch.nn.Module.
//
// A module owns named parameters (tensors an optimizer updates), named buffers (state
// that is not trained, such as batch norm's running statistics) and named child modules,
// each kept in registration order. Walking them gives PyTorch's dotted names
// ("layer1.0.conv1.weight", "bn1.num_batches_tracked"), so a state dict saved by PyTorch
// loads by name. Modules are held by std::shared_ptr; register_module returns the child
// it registered, and a layer keeps handles to its own tensors as members (the handles
// share the registered tensor's impl, so they stay valid across to(), Note [Set data]).
//
// Note [Options structs]: layers are configured by one options struct each, written with
// designated initializers in declaration order, e.g.
//   auto conv = std::make_shared<nn::Conv3d>(nn::Conv3dOptions{.in_channels = 1,
//                                            .out_channels = 8, .kernel_size = {3}});
// A layer with no options (ReLU, Identity) has a default constructor. As C++20 wants the
// designators in declaration order, every options struct (layers, losses, optimizers,
// schedulers, GradScaler, TensorOptions) declares its members in the order PyTorch lists
// the arguments of the matching class or function, Kiln's own members after PyTorch's,
// and its header shows a one-line example; tests/core/test_options_structs.cpp checks
// the examples, and the options-order tests spell each struct out in PyTorch's order.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "core/generator.h"
#include "core/tensor.h"

namespace kiln::nn {

// Names to tensors in a fixed order (PyTorch's OrderedDict of a state dict).
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;
using StateDict = NamedTensors;

// What a non-strict load_state_dict did not load.
struct MismatchedKey {
  std::string name;
  std::vector<int64_t> expected_shape;  // the module's
  std::vector<int64_t> got_shape;       // the state dict's
};
struct LoadStateDictResult {
  std::vector<std::string> missing_keys;     // in the module, not in the state dict
  std::vector<std::string> unexpected_keys;  // in the state dict, not in the module
  std::vector<MismatchedKey> mismatched_keys;
  bool ok() const { return missing_keys.empty() && unexpected_keys.empty() && mismatched_keys.empty(); }
};

class Module : public std::enable_shared_from_this<Module> {
 public:
  using NamedModules = std::vector<std::pair<std::string, std::shared_ptr<Module>>>;

  Module() = default;
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // The class name shown by to_string ("Linear", "Conv3d").
  virtual std::string type_name() const { return "Module"; }
  // The options shown between the parentheses of to_string (PyTorch's extra_repr).
  virtual std::string extra_repr() const { return ""; }

  // ---- registration ----------------------------------------------------------------------
  // Registers `tensor` (a leaf: it is detached first if it has history) and returns the
  // registered handle; with requires_grad it becomes trainable.
  Tensor register_parameter(const std::string& name, Tensor tensor, bool requires_grad = true);
  // A non-persistent buffer is moved by to() but left out of state_dict().
  Tensor register_buffer(const std::string& name, Tensor tensor, bool persistent = true);
  template <typename M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    add_child(name, module);
    return module;
  }

  // ---- walking ---------------------------------------------------------------------------
  // Each in PyTorch's order: this module's own entries first, then each child's in
  // registration order (pre-order), names joined with '.'. A tensor or module reachable
  // under two names is listed once (the first), as PyTorch's remove_duplicate.
  NamedTensors named_parameters(bool recurse = true) const;
  NamedTensors named_buffers(bool recurse = true) const;
  std::vector<Tensor> parameters(bool recurse = true) const;
  std::vector<Tensor> buffers(bool recurse = true) const;
  // This module (named "") then every descendant, pre-order.
  NamedModules named_modules();
  NamedModules named_children() const;
  std::vector<std::shared_ptr<Module>> children() const;
  // Direct access by local name; errors name the missing entry.
  Tensor& parameter(const std::string& name);
  Tensor& buffer(const std::string& name);
  std::shared_ptr<Module> child(const std::string& name) const;

  // ---- mode, devices, gradients ----------------------------------------------------------
  // Sets the training flag of this module and every descendant (returns *this).
  Module& train(bool on = true);
  Module& eval() { return train(false); }
  bool is_training() const { return training_; }
  // Moves every parameter, buffer and gradient (floating ones also change dtype; integer
  // buffers such as num_batches_tracked keep theirs) in place (Note [Set data]).
  Module& to(Device device);
  Module& to(DType dtype);
  Module& to(Device device, DType dtype);
  // Lays out every parameter, buffer and gradient of the format's rank in `format` (PyTorch's
  // module.to(memory_format=...)): ChannelsLast3d makes 5-d convolution weights
  // channels-last (4-d ones ChannelsLast), so a channels-last input runs every convolution
  // without a conversion and the optimizer updates the weights in that layout; Contiguous
  // makes every tensor row-major again. Other ranks are left as they are.
  Module& to(MemoryFormat format);
  // Every parameter's .grad becomes None (set_to_none) or is zeroed in place.
  void zero_grad(bool set_to_none = true);
  // fn on every descendant, children first, then on this module (PyTorch's apply).
  Module& apply(const std::function<void(Module&)>& fn);

  // ---- state -----------------------------------------------------------------------------
  // Parameters and persistent buffers by dotted name, detached, sharing their storage.
  StateDict state_dict() const;
  // Copies the values in by name (converting dtype and device) under no-grad: the
  // parameters and buffers keep their identity, and their version counters are bumped.
  // strict: any missing or unexpected key or shape mismatch is an error listing them all,
  // and nothing is loaded. Non-strict: loads every key whose shape matches and reports the
  // rest. Either way all or nothing is loaded, even when memory runs out part-way (Note
  // [All-or-nothing loads] in core/safetensors.h).
  LoadStateDictResult load_state_dict(const StateDict& state_dict, bool strict = true);

  // The module tree as PyTorch prints it: "Sequential(\n  (0): Linear(...)\n)".
  std::string to_string() const;

 protected:
  // For containers: a child registered under `name` (a new name; an empty module is ok).
  void add_child(const std::string& name, std::shared_ptr<Module> module);
  // The child registered under `name` becomes `module`, in the same place of the order
  // (PyTorch's `model.fc = new_layer`): how a model swaps its head.
  void replace_child(const std::string& name, std::shared_ptr<Module> module);

 private:
  struct Buffer {
    std::string name;
    Tensor tensor;
    bool persistent;
  };
  void check_new_name(const std::string& name, const char* what) const;
  void collect_state(const std::string& prefix, StateDict& out) const;
  void print(std::ostream& os, int indent) const;
  template <typename Fn>
  void convert_tensors(const Fn& convert);

  NamedTensors parameters_;
  std::vector<Buffer> buffers_;
  NamedModules children_;
  bool training_ = true;
};

std::ostream& operator<<(std::ostream& os, const Module& module);

// The number of parameter elements (only those that require grad when trainable_only).
int64_t parameter_count(const Module& module, bool trainable_only = false);

}  // namespace kiln::nn
