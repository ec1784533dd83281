// Optimizer state dicts: the layout, a round trip through a file after which training
// continues bit for bit as if uninterrupted (SGD, Adam with amsgrad, RMSprop), bad files
// and mismatched optimizers answered with errors that name the file and load nothing, and
// an allocation failing at any point of a load leaving everything as it was.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>

#include "core/safetensors.h"
#include "tests/optim/optim_test_util.h"

namespace kiln {
namespace {

using optim::Adam;
using optim::AdamOptions;
using optim::Optimizer;
using optim::ParamGroup;
using optim::RMSprop;
using optim::RMSpropOptions;
using optim::SGD;
using optim::SGDOptions;
using testing::all_equal;
using testing::make_params;
using testing::TempFolder;

using MakeOptimizer = std::function<std::unique_ptr<Optimizer>(const std::vector<Tensor>& params)>;

void train(Optimizer& optimizer, const std::vector<Tensor>& params, int first_step, int steps) {
  for (int s = first_step; s < first_step + steps; ++s) {
    testing::set_step_grads(params, s);
    optimizer.step();
  }
}

// Trains 6 steps straight, and 3 + save + load into a new optimizer (on copies of the
// parameters) + 3; both must end with identical parameters and state.
void expect_resumes_bit_identically(const MakeOptimizer& make, DType dtype, bool master_weights = false) {
  TempFolder dir;
  const std::vector<Tensor> straight = make_params(dtype);
  const std::unique_ptr<Optimizer> uninterrupted = make(straight);
  if (master_weights) uninterrupted->enable_master_weights();
  train(*uninterrupted, straight, 0, 6);

  const std::vector<Tensor> first_half = make_params(dtype);
  const std::unique_ptr<Optimizer> before = make(first_half);
  if (master_weights) before->enable_master_weights();
  train(*before, first_half, 0, 3);
  optim::save_state_dict(before->state_dict(), dir.file("optimizer.safetensors"));

  const std::vector<Tensor> resumed = testing::clone_params(first_half);
  const std::unique_ptr<Optimizer> after = make(resumed);
  if (master_weights) after->enable_master_weights();
  after->load_state_dict(optim::load_state_dict_file(dir.file("optimizer.safetensors")));
  train(*after, resumed, 3, 3);

  for (size_t i = 0; i < straight.size(); ++i) {
    EXPECT_TRUE(all_equal(resumed[i].detach(), straight[i].detach())) << "parameter " << i;
    const optim::ParamState& expected = uninterrupted->state(straight[i]);
    const optim::ParamState& actual = after->state(resumed[i]);
    ASSERT_EQ(actual.size(), expected.size());
    for (const auto& [name, tensor] : expected) EXPECT_TRUE(all_equal(actual.at(name), tensor)) << name;
  }
}

// Note [Save and load argument order] (core/safetensors.h): the state, then the path, as
// torch.save(obj, f) and nn::save_weights(module, path); the other order does not compile.
template <typename First, typename Second>
constexpr bool save_state_dict_accepts = requires(const First& first, const Second& second) {
  optim::save_state_dict(first, second);
};

TEST(OptimizerStateDict, SaveTakesTheStateThenThePath) {
  EXPECT_TRUE((save_state_dict_accepts<optim::OptimizerStateDict, std::string>));
  EXPECT_FALSE((save_state_dict_accepts<std::string, optim::OptimizerStateDict>));
}

TEST(OptimizerStateDict, LayoutIsPyTorchs) {
  const std::vector<Tensor> params = make_params(DType::Float32);
  Adam adam({ParamGroup{.params = {params[0], params[1]}, .options = {{"lr", 0.5}}},
             ParamGroup{.params = {params[2]}, .options = {}}},
            AdamOptions{.lr = 0.1});
  params[0].set_grad(testing::step_grad(params[0], 0, 0));
  params[2].set_grad(testing::step_grad(params[2], 2, 0));
  adam.step();
  const optim::OptimizerStateDict state = adam.state_dict();
  std::vector<std::string> names;
  for (const auto& [name, tensor] : state.tensors) names.push_back(name);
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"state.0.exp_avg", "state.0.exp_avg_sq", "state.0.step",
                                             "state.2.exp_avg", "state.2.exp_avg_sq", "state.2.step"}));
  ASSERT_EQ(state.param_groups.as_array().size(), 2u);
  const json::Value& group0 = state.param_groups.as_array()[0];
  EXPECT_EQ(group0.find("lr")->as_number(), 0.5);
  EXPECT_EQ(group0.find("beta2")->as_number(), 0.999);
  ASSERT_EQ(group0.find("params")->as_array().size(), 2u);
  EXPECT_EQ(group0.find("params")->as_array()[1].as_integer(), 1);
  EXPECT_EQ(state.param_groups.as_array()[1].find("params")->as_array()[0].as_integer(), 2);
}

TEST(OptimizerStateDict, FileRoundTripResumesBitIdentically) {
  for (const DType dtype : {DType::Float32, DType::Float64}) {
    SCOPED_TRACE(dtype_name(dtype));
    expect_resumes_bit_identically(
        [](const std::vector<Tensor>& p) {
          return std::make_unique<SGD>(p, SGDOptions{.lr = 0.1, .momentum = 0.9, .dampening = 0.1});
        },
        dtype);
    expect_resumes_bit_identically(
        [](const std::vector<Tensor>& p) {
          return std::make_unique<Adam>(
              std::vector<ParamGroup>{ParamGroup{.params = {p[0]}, .options = {{"lr", 0.02}}},
                                      ParamGroup{.params = {p[1], p[2]}, .options = {}}},
              AdamOptions{.lr = 0.01, .weight_decay = 0.1, .amsgrad = true});
        },
        dtype);
    expect_resumes_bit_identically(
        [](const std::vector<Tensor>& p) {
          return std::make_unique<RMSprop>(p, RMSpropOptions{.lr = 0.01, .momentum = 0.5, .centered = true});
        },
        dtype);
  }
}

TEST(OptimizerStateDict, GroupOptionsAreRestored) {
  const std::vector<Tensor> params = make_params(DType::Float32);
  SGD sgd(params, SGDOptions{.lr = 0.1});
  sgd.param_groups()[0].set_lr(0.025);
  sgd.param_groups()[0].set("initial_lr", 0.1);
  SGD other(testing::clone_params(params), SGDOptions{.lr = 0.1});
  other.load_state_dict(sgd.state_dict());
  EXPECT_EQ(other.param_groups()[0].lr(), 0.025);
  EXPECT_EQ(other.param_groups()[0].get("initial_lr"), 0.1);
}

// A trained Adam with two groups and its file, for the error tests.
struct SavedAdam {
  std::vector<Tensor> params = make_params(DType::Float32);
  Adam adam{std::vector<ParamGroup>{ParamGroup{.params = {params[0], params[1]}, .options = {}},
                                    ParamGroup{.params = {params[2]}, .options = {}}},
            AdamOptions{.lr = 0.01}};
  SavedAdam() { train(adam, params, 0, 2); }
};

TEST(OptimizerStateDict, CorruptAndTruncatedFilesNameTheFile) {
  TempFolder dir;
  SavedAdam saved;
  const std::string good = dir.file("good.safetensors");
  optim::save_state_dict(saved.adam.state_dict(), good);
  EXPECT_NO_THROW(optim::load_state_dict_file(good));

  const std::string truncated = dir.file("truncated.safetensors");
  std::filesystem::copy_file(good, truncated);
  std::filesystem::resize_file(truncated, std::filesystem::file_size(good) / 2);
  EXPECT_KILN_ERROR(optim::load_state_dict_file(truncated), "truncated.safetensors");

  const std::string garbage = dir.file("garbage.safetensors");
  std::ofstream(garbage) << "this is not a safetensors file at all";
  EXPECT_KILN_ERROR(optim::load_state_dict_file(garbage), "garbage.safetensors");

  EXPECT_KILN_ERROR(optim::load_state_dict_file(dir.file("missing.safetensors")), "missing.safetensors");

  const std::string weights = dir.file("weights.safetensors");
  safetensors::save({{"weight", ones({2})}}, weights);
  EXPECT_KILN_ERROR(optim::load_state_dict_file(weights), "weights.safetensors", "kiln.optimizer");

  const auto with_metadata = [&](const std::string& name, const std::string& json_text) {
    const std::string path = dir.file(name);
    safetensors::save({{"state.0.step", zeros({})}}, path, {{"kiln.optimizer", json_text}});
    return path;
  };
  EXPECT_KILN_ERROR(optim::load_state_dict_file(with_metadata("bad_json.safetensors", "[{\"lr\": 0.1,")),
                    "bad_json.safetensors", "not valid JSON");
  EXPECT_KILN_ERROR(optim::load_state_dict_file(with_metadata("object.safetensors", "{\"lr\": 0.1}")),
                    "object.safetensors", "array");
  EXPECT_KILN_ERROR(optim::load_state_dict_file(with_metadata("no_params.safetensors", "[{\"lr\": 0.1}]")),
                    "no_params.safetensors", "params");
  EXPECT_KILN_ERROR(
      optim::load_state_dict_file(with_metadata("string_lr.safetensors", "[{\"lr\": \"fast\", \"params\": [0]}]")),
      "string_lr.safetensors", "lr", "number");
  EXPECT_KILN_ERROR(
      optim::load_state_dict_file(with_metadata("float_index.safetensors", "[{\"lr\": 0.1, \"params\": [0.5]}]")),
      "float_index.safetensors", "params");
}

// The optimizer's parameters, options and state as they are, to compare after a failed load.
struct Snapshot {
  std::vector<Tensor> params;
  std::vector<optim::Options> options;
  std::vector<optim::ParamState> state;
  explicit Snapshot(const Optimizer& optimizer) {
    for (const ParamGroup& group : optimizer.param_groups()) {
      options.push_back(group.options);
      for (const Tensor& p : group.params) {
        params.push_back(p.detach().clone());
        optim::ParamState copy;
        for (const auto& [name, tensor] : optimizer.state(p)) copy[name] = tensor.clone();
        state.push_back(copy);
      }
    }
  }
  void expect_unchanged(const Optimizer& optimizer) const {
    size_t index = 0;
    for (size_t g = 0; g < optimizer.param_groups().size(); ++g) {
      EXPECT_EQ(optimizer.param_groups()[g].options, options[g]);
      for (const Tensor& p : optimizer.param_groups()[g].params) {
        EXPECT_TRUE(all_equal(p.detach(), params[index]));
        const optim::ParamState& now = optimizer.state(p);
        EXPECT_EQ(now.size(), state[index].size());
        for (const auto& [name, tensor] : state[index]) EXPECT_TRUE(all_equal(now.at(name), tensor)) << name;
        ++index;
      }
    }
  }
};

TEST(OptimizerStateDict, MismatchedOptimizersAreErrorsAndLoadNothing) {
  TempFolder dir;
  SavedAdam saved;
  const std::string path = dir.file("adam.safetensors");
  optim::save_state_dict(saved.adam.state_dict(), path);
  const optim::OptimizerStateDict loaded = optim::load_state_dict_file(path);

  // One group instead of two.
  Adam one_group(testing::clone_params(saved.params), AdamOptions{.lr = 0.5});
  train(one_group, one_group.param_groups()[0].params, 0, 1);
  const Snapshot one_group_before(one_group);
  EXPECT_KILN_ERROR(one_group.load_state_dict(loaded), "Adam", "2 parameter groups", "1", "adam.safetensors");
  one_group_before.expect_unchanged(one_group);

  // Same groups, but the second holds a parameter of another shape: the shape check fails
  // after the options were checked, and nothing (options included) may be loaded.
  const std::vector<Tensor> params = testing::clone_params(saved.params);
  Tensor other_shape = testing::random_nonzero({7}, DType::Float32, 3);
  other_shape.requires_grad_(true);
  Adam shaped(std::vector<ParamGroup>{ParamGroup{.params = {params[0], params[1]}, .options = {}},
                                      ParamGroup{.params = {other_shape}, .options = {}}},
              AdamOptions{.lr = 0.3});
  train(shaped, shaped.param_groups()[1].params, 0, 1);
  const Snapshot shaped_before(shaped);
  EXPECT_KILN_ERROR(shaped.load_state_dict(loaded), "state.2.", "[7]", "adam.safetensors");
  shaped_before.expect_unchanged(shaped);

  // A group with another parameter count.
  Adam counted(std::vector<ParamGroup>{ParamGroup{.params = {params[0]}, .options = {}},
                                       ParamGroup{.params = {params[1], params[2]}, .options = {}}});
  EXPECT_KILN_ERROR(counted.load_state_dict(loaded), "parameter group 0", "2 parameters", "1");

  // Tensors that name no parameter, or carry a bad name.
  optim::OptimizerStateDict stray = saved.adam.state_dict();
  stray.tensors.emplace_back("state.9.exp_avg", zeros({5}));
  const std::vector<Tensor> target_params = testing::clone_params(saved.params);
  Adam target(std::vector<ParamGroup>{ParamGroup{.params = {target_params[0], target_params[1]}, .options = {}},
                                      ParamGroup{.params = {target_params[2]}, .options = {}}});
  EXPECT_KILN_ERROR(target.load_state_dict(stray), "state.9.exp_avg", "no parameter group");
  optim::OptimizerStateDict odd = saved.adam.state_dict();
  odd.tensors.emplace_back("momentum", zeros({5}));
  EXPECT_KILN_ERROR(target.load_state_dict(odd), "unexpected tensor", "momentum");
  // Options that break the optimizer's checks.
  optim::OptimizerStateDict bad_lr = saved.adam.state_dict();
  bad_lr.param_groups = json::parse(R"([{"lr": -1, "params": [0, 1]}, {"params": [2]}])");
  EXPECT_KILN_ERROR(target.load_state_dict(bad_lr), "Adam", "lr");
}

// The optimizer's options, state and masters (the tensors themselves, with their version
// counters and bytes) and its parameters, to compare bit for bit after a failed load.
struct Everything {
  std::string options;
  testing::TensorsSnapshot state, params;
  explicit Everything(const Optimizer& optimizer)
      : options(json::dump(optimizer.state_dict().param_groups)),
        state(optimizer.state_dict().tensors),
        params(named_params(optimizer)) {}
  void expect_unchanged(const Optimizer& optimizer) const {
    EXPECT_EQ(json::dump(optimizer.state_dict().param_groups), options);
    EXPECT_TRUE(state.same_as(optimizer.state_dict().tensors));
    EXPECT_TRUE(params.same_as(named_params(optimizer)));
  }
  static testing::TensorsSnapshot::Named named_params(const Optimizer& optimizer) {
    testing::TensorsSnapshot::Named out;
    for (const ParamGroup& group : optimizer.param_groups())
      for (const Tensor& p : group.params) out.emplace_back(std::to_string(out.size()), p);
    return out;
  }
};

// Note [All-or-nothing loads]: an allocation failing at any point of a load (a state
// copy, a master copy, a master the dict lacks made from its parameter) leaves the
// options, the state and the masters as they were, bit for bit and the same tensors;
// then the load runs through and holds the dict's values.
TEST(OptimizerStateDict, LoadLoadsNothingWhenMemoryRunsOut) {
  // The target: Adam keeping float32 masters of float16 parameters, two steps in.
  const std::vector<Tensor> params = make_params(DType::Float16);
  Adam target(params, AdamOptions{.lr = 0.1});
  target.enable_master_weights();
  train(target, params, 0, 2);
  // The dict: three steps at another lr, with parameter 0's master left out, so that the
  // load makes it from the model's weights (the allocation that came after the old state
  // had been cleared).
  const std::vector<Tensor> other = make_params(DType::Float16, 9);
  Adam source(other, AdamOptions{.lr = 0.01});
  source.enable_master_weights();
  train(source, other, 0, 3);
  optim::OptimizerStateDict dict = source.state_dict();
  std::erase_if(dict.tensors, [](const auto& entry) { return entry.first == "state.0.master_weight"; });

  const Everything before(target);
  const int64_t failures = testing::fail_each_allocation([&] { target.load_state_dict(dict); },
                                                         [&] { before.expect_unchanged(target); });
  EXPECT_EQ(failures, static_cast<int64_t>(dict.tensors.size()) + 1);  // a copy each, and the new master

  const optim::OptimizerStateDict loaded = target.state_dict();
  EXPECT_EQ(json::dump(loaded.param_groups), json::dump(dict.param_groups));
  EXPECT_EQ(loaded.tensors.size(), dict.tensors.size() + 1);
  for (const auto& [name, tensor] : loaded.tensors) {
    const Tensor* given = testing::find_named(dict.tensors, name);
    EXPECT_TRUE(testing::bitwise_equal(tensor, given ? *given : params[0].detach().to(DType::Float32))) << name;
    if (given) {
      EXPECT_FALSE(tensor.is_same(*given)) << name << ": a copy";
    }
  }
  EXPECT_TRUE(before.params.same_as(Everything::named_params(target)));  // a load never touches them
}

}  // namespace
}  // namespace kiln
