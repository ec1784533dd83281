// nn::Module: PyTorch's dotted names and order for parameters, buffers and modules;
// deduplication; registration errors; train/eval recursion; zero_grad; to() keeping
// parameter identity and integer buffers' dtype; apply order; state_dict round trips,
// strict errors and non-strict reports, loads that keep identity and leave everything
// untouched when an allocation fails part-way; weights files; printing and parameter counts.
#include <gtest/gtest.h>

#include <filesystem>

#include "core/ops.h"
#include "nn/nn.h"
#include "tests/nn/module_test_util.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

using testing::all_close;
using Names = std::vector<std::string>;

// A module with a float buffer, an integer counter and a non-persistent scratch buffer.
class Stats : public nn::Module {
 public:
  Stats() {
    running_mean = register_buffer("running_mean", zeros({4}));
    count = register_buffer("count", zeros({}, {.dtype = DType::Int64}));
    register_buffer("scratch", ones({2}), /*persistent=*/false);
  }
  std::string type_name() const override { return "Stats"; }
  Tensor running_mean, count;
};

// fc1 -> relu -> body (Linear, Tanh) -> heads[0] + heads[1].
class TinyNet : public nn::Module {
 public:
  explicit TinyNet(uint64_t seed) {
    manual_seed(seed);
    fc1 = register_module("fc1", std::make_shared<nn::Linear>(nn::LinearOptions{.in_features = 3, .out_features = 4}));
    register_module("act", std::make_shared<nn::ReLU>());
    body = register_module("body", std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Layer>>{
                                       std::make_shared<nn::Linear>(nn::LinearOptions{.in_features = 4, .out_features = 4}),
                                       std::make_shared<nn::Tanh>()}));
    heads = register_module("heads", std::make_shared<nn::ModuleList>());
    heads->push_back(std::make_shared<nn::Linear>(nn::LinearOptions{.in_features = 4, .out_features = 2}));
    heads->push_back(
        std::make_shared<nn::Linear>(nn::LinearOptions{.in_features = 4, .out_features = 2, .bias = false}));
    stats = register_module("stats", std::make_shared<Stats>());
  }
  Tensor forward(const Tensor& x) {
    const Tensor h = body->forward(relu(fc1->forward(x)));
    return add(heads->at<nn::Linear>(0)->forward(h), heads->at<nn::Linear>(1)->forward(h));
  }
  std::string type_name() const override { return "TinyNet"; }
  std::shared_ptr<nn::Linear> fc1;
  std::shared_ptr<nn::Sequential> body;
  std::shared_ptr<nn::ModuleList> heads;
  std::shared_ptr<Stats> stats;
};

template <typename Pairs>
Names names_of(const Pairs& pairs) {
  Names out;
  for (const auto& p : pairs) out.push_back(p.first);
  return out;
}

TEST(Module, DottedNamesInPyTorchOrder) {
  TinyNet net(1);
  EXPECT_EQ(names_of(net.named_parameters()),
            (Names{"fc1.weight", "fc1.bias", "body.0.weight", "body.0.bias", "heads.0.weight", "heads.0.bias",
                   "heads.1.weight"}));
  EXPECT_EQ(names_of(net.named_buffers()), (Names{"stats.running_mean", "stats.count", "stats.scratch"}));
  EXPECT_EQ(names_of(net.state_dict()),
            (Names{"fc1.weight", "fc1.bias", "body.0.weight", "body.0.bias", "heads.0.weight", "heads.0.bias",
                   "heads.1.weight", "stats.running_mean", "stats.count"}));
  EXPECT_EQ(names_of(net.named_modules()),
            (Names{"", "fc1", "act", "body", "body.0", "body.1", "heads", "heads.0", "heads.1", "stats"}));
  EXPECT_EQ(names_of(net.named_children()), (Names{"fc1", "act", "body", "heads", "stats"}));
  EXPECT_EQ(names_of(net.named_parameters(/*recurse=*/false)), Names{});
  EXPECT_EQ(names_of(net.fc1->named_parameters(false)), (Names{"weight", "bias"}));
  EXPECT_EQ(net.parameters().size(), 7u);
  EXPECT_TRUE(net.parameters()[0].is_same(net.fc1->weight));
}

TEST(Module, SharedModulesAndParametersAreListedOnce) {
  nn::Sequential seq;
  auto shared = std::make_shared<nn::Linear>(nn::LinearOptions{.in_features = 2, .out_features = 2});
  seq.push_back(shared);
  seq.push_back(shared);
  EXPECT_EQ(names_of(seq.named_parameters()), (Names{"0.weight", "0.bias"}));
  EXPECT_EQ(names_of(seq.named_modules()), (Names{"", "0"}));
  // state_dict keeps every name (as PyTorch), sharing one storage.
  EXPECT_EQ(names_of(seq.state_dict()), (Names{"0.weight", "0.bias", "1.weight", "1.bias"}));
}

TEST(Module, RegistrationErrors) {
  nn::Module m;
  m.register_parameter("w", ones({2}));
  EXPECT_KILN_ERROR(m.register_parameter("w", ones({2})), "\"w\"", "already taken");
  EXPECT_KILN_ERROR(m.register_buffer("w", ones({2})), "already taken");
  EXPECT_KILN_ERROR(m.register_buffer("a.b", ones({2})), "a.b", "'.'");
  EXPECT_KILN_ERROR(m.register_parameter("i", ones({2}, {.dtype = DType::Int64})), "floating-point");
  EXPECT_KILN_ERROR(m.parameter("nope"), "no parameter named \"nope\"");
  EXPECT_TRUE(m.parameter("w").requires_grad());
  EXPECT_FALSE(m.register_parameter("frozen", ones({2}), /*requires_grad=*/false).requires_grad());
}

TEST(Module, TrainAndEvalRecurse) {
  TinyNet net(1);
  EXPECT_TRUE(net.is_training());
  net.eval();
  for (const auto& [name, m] : net.named_modules()) EXPECT_FALSE(m->is_training()) << name;
  net.body->train();
  EXPECT_TRUE(net.body->operator[](0)->is_training());
  EXPECT_FALSE(net.is_training());
  net.train();
  for (const auto& [name, m] : net.named_modules()) EXPECT_TRUE(m->is_training()) << name;
}

TEST(Module, ZeroGradSetsToNoneOrZeroes) {
  TinyNet net(1);
  sum(net.forward(ones({5, 3}))).backward();
  for (const Tensor& p : net.parameters()) ASSERT_TRUE(p.grad().defined());
  const Tensor grad_before = net.fc1->weight.grad();
  net.zero_grad(/*set_to_none=*/false);
  for (const Tensor& p : net.parameters()) {
    ASSERT_TRUE(p.grad().defined());
    EXPECT_TRUE(all_close(p.grad(), zeros_like(p)));
  }
  EXPECT_TRUE(net.fc1->weight.grad().is_same(grad_before));  // zeroed in place
  net.zero_grad();
  for (const Tensor& p : net.parameters()) EXPECT_FALSE(p.grad().defined());
}

TEST(Module, ToDTypeKeepsParameterIdentityAndIntegerBuffers) {
  TinyNet net(1);
  const Tensor weight_handle = net.fc1->weight;  // as an optimizer would hold it
  const Tensor x = ones({5, 3});
  const std::vector<double> before = net.forward(x).to_vector<double>();
  sum(net.forward(x)).backward();
  net.to(DType::Float64);
  EXPECT_EQ(weight_handle.dtype(), DType::Float64);
  EXPECT_TRUE(net.parameters()[0].is_same(weight_handle));
  EXPECT_TRUE(weight_handle.requires_grad());
  EXPECT_EQ(weight_handle.grad().dtype(), DType::Float64);
  EXPECT_EQ(net.stats->running_mean.dtype(), DType::Float64);
  EXPECT_EQ(net.stats->buffer("scratch").dtype(), DType::Float64);
  EXPECT_EQ(net.stats->count.dtype(), DType::Int64);
  const Tensor y = net.forward(x.to(DType::Float64));
  EXPECT_EQ(y.dtype(), DType::Float64);
  EXPECT_TRUE(all_close(y.to(DType::Float32), tensor(std::vector<float>(before.begin(), before.end()), {5, 2})));
  net.to(Device::cpu(), DType::Float32);
  EXPECT_EQ(weight_handle.dtype(), DType::Float32);
  EXPECT_EQ(net.stats->count.dtype(), DType::Int64);
  EXPECT_KILN_ERROR(net.to(DType::Int32), "floating-point");
}

TEST(Module, ApplyVisitsChildrenFirstThenSelf) {
  TinyNet net(1);
  Names order;
  net.apply([&](nn::Module& m) { order.push_back(m.type_name()); });
  EXPECT_EQ(order, (Names{"Linear", "ReLU", "Linear", "Tanh", "Sequential", "Linear", "Linear", "ModuleList", "Stats",
                          "TinyNet"}));
}

TEST(Module, StateDictIsDetachedAndSharesStorage) {
  TinyNet net(1);
  const nn::StateDict sd = net.state_dict();
  const Tensor& w = sd[0].second;
  EXPECT_FALSE(w.requires_grad());
  EXPECT_EQ(w.data_ptr(), net.fc1->weight.data_ptr());
}

TEST(Module, StateDictRoundTripGivesEqualOutputs) {
  TinyNet source(1), fresh(2);
  source.stats->count.fill_(int64_t{7});
  const Tensor x = testing::random_uniform({6, 3}, -1, 1, DType::Float32, 3);
  EXPECT_FALSE(all_close(fresh.forward(x), source.forward(x)));
  const nn::LoadStateDictResult report = fresh.load_state_dict(source.state_dict());
  EXPECT_TRUE(report.ok());
  EXPECT_TRUE(testing::all_equal(fresh.forward(x), source.forward(x)));
  EXPECT_EQ(fresh.stats->count.item<int64_t>(), 7);
  // Loading copies: the two models do not share storage afterwards.
  EXPECT_NE(fresh.fc1->weight.data_ptr(), source.fc1->weight.data_ptr());
}

TEST(Module, LoadStateDictConvertsDType) {
  TinyNet source(1), fresh(2);
  source.to(DType::Float64);
  fresh.load_state_dict(source.state_dict());
  EXPECT_EQ(fresh.fc1->weight.dtype(), DType::Float32);
  EXPECT_TRUE(all_close(fresh.fc1->weight, source.fc1->weight.to(DType::Float32)));
}

nn::StateDict broken_state_dict(const TinyNet& source) {
  nn::StateDict sd;
  for (const auto& [name, t] : source.state_dict()) {
    if (name == "heads.1.weight") continue;                                     // missing
    if (name == "fc1.bias") sd.emplace_back(name, zeros({5}));                  // mismatched
    else sd.emplace_back(name, t);
  }
  sd.emplace_back("extra.weight", ones({1}));  // unexpected
  return sd;
}

TEST(Module, StrictLoadListsEveryProblemAndLoadsNothing) {
  TinyNet source(1), fresh(2);
  const std::vector<double> before = fresh.fc1->weight.to_vector<double>();
  EXPECT_KILN_ERROR(fresh.load_state_dict(broken_state_dict(source)), "load_state_dict", "TinyNet",
                    "missing keys: \"heads.1.weight\"", "unexpected keys: \"extra.weight\"",
                    "size mismatch for \"fc1.bias\"", "[4]", "[5]", "strict=*/false");
  EXPECT_EQ(fresh.fc1->weight.to_vector<double>(), before);
}

TEST(Module, NonStrictLoadReportsAndLoadsTheRest) {
  TinyNet source(1), fresh(2);
  const std::vector<double> fresh_bias = fresh.fc1->bias.to_vector<double>();
  const nn::LoadStateDictResult report = fresh.load_state_dict(broken_state_dict(source), /*strict=*/false);
  EXPECT_EQ(report.missing_keys, Names{"heads.1.weight"});
  EXPECT_EQ(report.unexpected_keys, Names{"extra.weight"});
  ASSERT_EQ(report.mismatched_keys.size(), 1u);
  EXPECT_EQ(report.mismatched_keys[0].name, "fc1.bias");
  EXPECT_EQ(report.mismatched_keys[0].expected_shape, std::vector<int64_t>{4});
  EXPECT_EQ(report.mismatched_keys[0].got_shape, std::vector<int64_t>{5});
  EXPECT_FALSE(report.ok());
  EXPECT_TRUE(testing::all_equal(fresh.fc1->weight, source.fc1->weight));
  EXPECT_TRUE(testing::all_equal(fresh.heads->at<nn::Linear>(0)->bias, source.heads->at<nn::Linear>(0)->bias));
  EXPECT_EQ(fresh.fc1->bias.to_vector<double>(), fresh_bias);
  EXPECT_FALSE(testing::all_equal(fresh.heads->at<nn::Linear>(1)->weight, source.heads->at<nn::Linear>(1)->weight));
}

TEST(Module, LoadStateDictCopiesIntoTheSameTensorsAndBumpsTheirVersions) {
  TinyNet source(1), target(2);
  const nn::NamedTensors before = testing::module_tensors(target);
  std::vector<uint32_t> versions;
  for (const auto& [name, t] : before) versions.push_back(t.version());
  target.load_state_dict(source.state_dict());
  const nn::NamedTensors after = testing::module_tensors(target);
  ASSERT_EQ(after.size(), before.size());
  for (size_t i = 0; i < after.size(); ++i) {
    EXPECT_TRUE(after[i].second.is_same(before[i].second)) << after[i].first;
    // The non-persistent scratch buffer is not in the state dict: not copied into.
    const uint32_t bumps = after[i].first == "stats.scratch" ? 0 : 1;
    EXPECT_EQ(after[i].second.version(), versions[i] + bumps) << after[i].first;
  }
  EXPECT_TRUE(target.fc1->weight.is_same(after[0].second));
}

TEST(Module, LoadStateDictLoadsNothingWhenMemoryRunsOut) {
  TinyNet source(1), target(2);
  source.stats->count.fill_(int64_t{5});
  source.to(DType::Float64);
  nn::StateDict sd = source.state_dict();
  ASSERT_EQ(sd[1].first, "fc1.bias");
  sd[1].second = testing::non_contiguous(source.fc1->bias.to(DType::Float32));
  // Seven float64 tensors to convert and a non-contiguous one to pack, each into a fresh
  // tensor before anything is written; the int64 counter is copied as it is.
  EXPECT_EQ(testing::expect_all_or_nothing(target, sd, /*strict=*/true), 8);
  EXPECT_TRUE(testing::holds_state_dict(target, sd));
  EXPECT_EQ(target.stats->count.item<int64_t>(), 5);
}

TEST(Module, NonStrictLoadLoadsNothingWhenMemoryRunsOut) {
  TinyNet source(1), target(2);
  source.to(DType::Float64);
  const std::vector<double> heads1 = target.heads->at<nn::Linear>(1)->weight.to_vector<double>();
  // Six float64 tensors match (fc1.bias is mismatched, heads.1.weight missing).
  EXPECT_EQ(testing::expect_all_or_nothing(target, broken_state_dict(source), /*strict=*/false), 6);
  EXPECT_TRUE(testing::bitwise_equal(target.fc1->weight, source.fc1->weight.to(DType::Float32)));
  EXPECT_EQ(target.heads->at<nn::Linear>(1)->weight.to_vector<double>(), heads1);
}

TEST(Module, WeightsFileRoundTrip) {
  const std::string path =
      (std::filesystem::temp_directory_path() / "kiln_test_module_weights.safetensors").string();
  TinyNet source(1), fresh(2);
  source.stats->count.fill_(int64_t{3});
  nn::save_weights(source, path, {{"format", "pt"}});
  const safetensors::Loaded file = safetensors::load(path);
  EXPECT_EQ(file.tensors.size(), source.state_dict().size());
  EXPECT_EQ(file.metadata.at("format"), "pt");
  EXPECT_TRUE(nn::load_weights(fresh, path).ok());
  const Tensor x = testing::random_uniform({4, 3}, -1, 1, DType::Float32, 5);
  EXPECT_TRUE(testing::all_equal(fresh.forward(x), source.forward(x)));
  EXPECT_EQ(fresh.stats->count.item<int64_t>(), 3);
  // A file of another model: strict names the problem, non-strict reports it.
  nn::Linear other(nn::LinearOptions{.in_features = 3, .out_features = 4});
  EXPECT_KILN_ERROR(nn::load_weights(other, path), "unexpected keys", "\"fc1.weight\"", "missing keys: \"weight\"");
  EXPECT_EQ(nn::load_weights(other, path, /*strict=*/false).unexpected_keys.size(), file.tensors.size());
  std::filesystem::remove(path);
}

TEST(Module, PrintsTheTreeAndCountsParameters) {
  TinyNet net(1);
  EXPECT_EQ(net.to_string(),
            "TinyNet(\n"
            "  (fc1): Linear(in_features=3, out_features=4, bias=True)\n"
            "  (act): ReLU()\n"
            "  (body): Sequential(\n"
            "    (0): Linear(in_features=4, out_features=4, bias=True)\n"
            "    (1): Tanh()\n"
            "  )\n"
            "  (heads): ModuleList(\n"
            "    (0): Linear(in_features=4, out_features=2, bias=True)\n"
            "    (1): Linear(in_features=4, out_features=2, bias=False)\n"
            "  )\n"
            "  (stats): Stats()\n"
            ")");
  EXPECT_EQ(nn::parameter_count(net), 3 * 4 + 4 + 4 * 4 + 4 + 4 * 2 + 2 + 4 * 2);
  net.fc1->weight.requires_grad_(false);
  EXPECT_EQ(nn::parameter_count(net, /*trainable_only=*/true), 4 + 4 * 4 + 4 + 4 * 2 + 2 + 4 * 2);
}

}  // namespace
}  // namespace kiln
