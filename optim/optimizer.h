// Optimizer: the base of SGD, Adam, AdamW and RMSprop, as torch.optim.Optimizer.
//
// An optimizer holds parameter groups. Each group has its parameters and its
// hyper-parameters by name ("lr", "momentum", "beta1", "beta2", "eps", "weight_decay",
// ...; booleans as 0/1), as PyTorch's param_group dicts: a learning-rate scheduler sets
// group.options["lr"] between steps, and CyclicLR drives "momentum" or "beta1".
// Options a group does not give are filled from the optimizer's defaults.
//
// Per-parameter state (momentum buffers, Adam's moments, the step counter) is created at
// the parameter's first step, in its dtype and on its device (steps: Float32 [] on the
// device, Note [Step counters on the device] in core/ops/multi_tensor.h).
//
// step() updates every parameter that has a gradient with one fused multi-tensor call
// per (group, device, dtype) (core/ops/multi_tensor.h); parameters without a gradient are
// skipped and their state does not advance, as in PyTorch.
//
// Note [Master weights]: for Apex's O2, enable_master_weights() makes the optimizer keep
// a float32 copy of every float16/bfloat16 parameter. step() reads the model's low
// precision gradients into float32 master gradients, updates the masters, and copies
// them back into the model's parameters. Small updates that would round away in float16
// accumulate in the masters.
//
// Note [Capturable optimizers]: a step captured by a CUDA graph (train/graphed_step.h)
// replays its kernels' arguments, so the learning rate a scheduler changes between steps
// cannot be one. With set_capturable(true) (PyTorch's capturable=True), each group's lr
// and the option schedulers cycle as momentum (SGD's and RMSprop's "momentum", Adam's
// "beta1") also live in a Float64 [2] tensor per device, which the step kernels read as
// they run (Note [Scheduled options on the device] in core/backend.h). step() writes the
// group's current values there first, except during a capture, where the write would be
// frozen into the graph: whoever replays the graph calls write_scheduled_options() before
// each replay (GraphedStep does). A capturable step computes what a plain one computes.
// The other options are read on the host when the step is captured: changing them (or
// momentum between zero and non-zero) needs a new capture (scheduled_signature()).
//
// state_dict() follows PyTorch's layout: parameters are numbered 0, 1, ... across groups
// in order; tensors are named "state.<index>.<name>" and the groups' options with their
// parameter indices are JSON metadata. save_state_dict / load_state_dict_file put it in a
// safetensors file (atomically).
#pragma once

#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/json.h"
#include "core/ops/multi_tensor.h"
#include "core/safetensors.h"
#include "core/tensor.h"

namespace kiln::optim {

using Options = std::map<std::string, double>;

struct ParamGroup {
  std::vector<Tensor> params;
  Options options;

  // The option called `name`; a kiln::Error naming it when the group has none.
  double get(const std::string& name) const;
  bool has(const std::string& name) const { return options.count(name) != 0; }
  void set(const std::string& name, double value) { options[name] = value; }
  double lr() const { return get("lr"); }
  void set_lr(double lr) { set("lr", lr); }
};

// A parameter's state by name ("momentum_buffer", "exp_avg", "exp_avg_sq", "step", ...).
using ParamState = std::map<std::string, Tensor>;

struct OptimizerStateDict {
  safetensors::NamedTensors tensors;  // "state.<index>.<name>", "state.<index>.master_weight"
  json::Value param_groups;           // [{"lr": 0.1, ..., "params": [0, 1, ...]}, ...]
  std::string source;                 // the file it was read from (named in load errors)
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // One update of every parameter that has a gradient. `amp` (GradScaler's entry, see
  // Backend::AmpStepArgs): inv_scale multiplies the gradients as they are read,
  // found_inf != 0 leaves everything (state and step counters included) unchanged. Its
  // tensors (Float32 [1], checked before anything is written) may live on any device;
  // they are copied where needed without a host sync.
  void step(const AmpStepArgs& amp = {});

  // Clears the gradients: set to None (undefined) by default, which is faster than
  // filling zeros and lets the next backward assign instead of add; or zero-filled.
  void zero_grad(bool set_to_none = true);

  // Adds a group; options it lacks come from the defaults. A parameter already in some
  // group, a non-floating, non-leaf or non-contiguous parameter, or an unknown option is
  // an error.
  void add_param_group(ParamGroup group);
  std::vector<ParamGroup>& param_groups() { return groups_; }
  const std::vector<ParamGroup>& param_groups() const { return groups_; }
  const Options& defaults() const { return defaults_; }

  // The state of `param` (empty before its first step).
  const ParamState& state(const Tensor& param) const;

  // Note [Master weights]. Must be called before the first step; parameters already
  // float32/float64 keep no copy. A master is made from its parameter's value at the
  // parameter's first step (so model weights loaded before that are taken over).
  void enable_master_weights();
  bool has_master_weights() const { return master_weights_; }
  // The tensors step() updates, as Apex's amp.master_params(optimizer): each parameter's
  // float32 master (made now if missing) when it keeps one, else the parameter itself.
  // After unscale_grads_, their .grad() is what step() will read: clip these, not the
  // model's parameters, when master weights are on.
  std::vector<Tensor> master_params();

  // ---- GradScaler support (optim/grad_scaler.h) ------------------------------------------
  // Multiplies every gradient step() will read by inv_scale (Float32 [1], any device) -
  // with master weights: master gradient = model gradient * inv_scale - and returns one
  // Float32 [1] tensor per device the parameters live on, holding 1 if any of its
  // gradients had an Inf or NaN, else 0. step() then reads the unscaled gradients.
  std::vector<Tensor> unscale_grads_(const Tensor& inv_scale);
  // The same check without writing anything, for a step that unscales as it reads
  // (step(amp) with amp.inv_scale). With master weights this unscales as above, since the
  // master gradients must be written anyway.
  // Note [Unscaled once]: after unscale_grads_ (or check_grads_finite_ with master
  // weights) the next step() ignores amp.inv_scale, as the gradients it reads are
  // unscaled already; zero_grad() and step() end that.
  std::vector<Tensor> check_grads_finite_(const Tensor& inv_scale);

  // PyTorch's layout (above). load_state_dict checks the group count, each group's
  // parameter count and every tensor's shape against this optimizer, and loads nothing
  // when any check fails (kiln::Error naming what differs) or memory runs out part-way
  // (Note [All-or-nothing loads] in core/safetensors.h). It replaces the options, the
  // state and the masters; the parameters are not touched. With master weights, a
  // parameter whose master the dict does not hold gets a fresh one from its current
  // value, as at a first step (call master_params() again after a load).
  OptimizerStateDict state_dict() const;
  void load_state_dict(const OptimizerStateDict& state);

  // "SGD", "Adam", ...
  const std::string& name() const { return name_; }

  // ---- CUDA graphs (Note [Capturable optimizers]) -----------------------------------------
  void set_capturable(bool capturable);
  bool capturable() const { return capturable_; }
  // Writes every group's lr and scheduled momentum into its device tensors (one small
  // launch per group and device), for the replay that follows.
  void write_scheduled_options();
  // What a captured step took from the options on the host: every option of every group
  // but lr and the scheduled momentum, and whether that momentum is non-zero. A captured
  // step is valid while this stays the same.
  std::vector<double> scheduled_signature() const;
  // Every tensor the optimizer keeps across steps (state, step counters, masters, the
  // scheduled options): what a captured step updates in place.
  std::vector<Tensor> persistent_tensors() const;

 protected:
  // A derived constructor calls add_param_group for each of its groups (virtual calls
  // such as check_options cannot run from this base constructor).
  Optimizer(std::string name, Options defaults);
  // add_param_group for each group of a non-empty list (a derived constructor's groups).
  void add_param_groups(std::vector<ParamGroup> groups);

  // The update of one group's parameters that have gradients, all on `device` with one
  // dtype; `grads` are what the kernel reads (model or master gradients), `params` what
  // it writes (model parameters or masters).
  virtual void update(ParamGroup& group, const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                      const AmpStepArgs& amp) = 0;
  // Checks a group's options (ranges such as lr >= 0, 0 <= beta < 1), naming the optimizer.
  virtual void check_options(const Options& options) const = 0;
  // The option schedulers cycle as momentum: "momentum" (SGD, RMSprop) or "beta1" (Adam).
  virtual const char* scheduled_momentum() const = 0;
  // For update(): the Note [Scheduled options on the device] tensor of `group` on `device`
  // (undefined unless capturable), holding the group's values now, or during a capture
  // whatever write_scheduled_options() writes before each replay.
  Tensor scheduled_options(const ParamGroup& group, Device device);

  // The state of a parameter the kernel writes (a master weight, when there is one).
  ParamState& mutable_state(const Tensor& param);
  // The state tensors called `name` of `params` (tensors update() writes), created as
  // zeros like each parameter when missing; `is_new`, when given, says which were created.
  std::vector<Tensor> state_list(const std::vector<Tensor>& params, const std::string& name,
                                 std::vector<bool>* is_new = nullptr);
  // Optimizers with a "step" counter per parameter (Adam, RMSprop) return true: step()
  // then creates the counters (Float32 [] zeros on the device) and increments them
  // (increment_steps_, skipped on amp.found_inf) before update(), which finds them with
  // step_counters().
  virtual bool has_step_counter() const { return false; }
  std::vector<Tensor> step_counters(const std::vector<Tensor>& params);

 private:
  struct Bucket;
  std::vector<Bucket> buckets(const ParamGroup& group);
  void step_bucket(ParamGroup& group, Bucket& bucket, const AmpStepArgs& amp);
  // The float32 master of `param` (made now if missing), or undefined when it keeps none.
  Tensor master_of(const Tensor& param);
  // Whether `param` keeps a master (master weights on, float16/bfloat16), and a new master
  // for it: a float32 copy of its current values (contiguous, as every fresh copy).
  bool keeps_master(const Tensor& param) const;
  static Tensor make_master(const Tensor& param);
  const Tensor* find_master(const Tensor& param) const;
  std::vector<Tensor> scale_grads(const Tensor& inv_scale, bool write);
  void check_option_names(const Options& options) const;
  // load_state_dict's stage phase (Note [All-or-nothing loads]; optimizer_state_dict.cpp):
  // everything checked, copied and allocated, nothing of this optimizer changed.
  struct StagedLoad;
  struct StagedTensor;
  StagedLoad stage_load(const OptimizerStateDict& state) const;
  std::vector<Options> stage_options(const OptimizerStateDict& state,
                                     std::map<int64_t, Tensor>& params_by_index) const;
  StagedTensor stage_tensor(const std::string& name, const Tensor& tensor,
                            const std::map<int64_t, Tensor>& params_by_index, const std::string& who,
                            const std::string& src) const;

  std::string name_;
  std::vector<ParamGroup> groups_;
  Options defaults_;
  std::unordered_map<const TensorImpl*, ParamState> state_;
  bool master_weights_ = false;
  std::unordered_map<const TensorImpl*, Tensor> masters_;  // model parameter -> float32 copy
  bool grads_prepared_ = false;  // Note [Unscaled once]
  // Note [Capturable optimizers]: {lr, momentum or beta1} per group (by index) and device.
  struct ScheduledOptions {
    size_t group;
    Device device;
    Tensor values;
  };
  bool capturable_ = false;
  std::vector<ScheduledOptions> scheduled_;
  void write_scheduled(const ScheduledOptions& entry) const;
};

// Writes / reads an optimizer state dict as a safetensors file (the param groups under
// the metadata key "kiln.optimizer"), atomically. Reading checks the metadata's JSON and
// names the file in every error; saving returns whether the save is durable (see
// safetensors::save). Argument order (the state, then the path): Note [Save and load
// argument order] in core/safetensors.h.
SaveStatus save_state_dict(const OptimizerStateDict& state, const std::string& path);
OptimizerStateDict load_state_dict_file(const std::string& path, Device device = Device::cpu());

}  // namespace kiln::optim
