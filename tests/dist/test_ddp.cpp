// DistributedDataParallel (dist/ddp.h) with 2 and 3 ranks as threads over the loopback
// address: training a small 3D conv net for several steps equals one process training on
// the combined batch (losses and weights); no_sync accumulation equals one large batch;
// gradients are views of buckets built in reverse parameter order with the first bucket
// small; start-up broadcasts rank 0's weights; a parameter without gradient is an error
// naming it, and find_unused_parameters allows it; GradScaler decisions agree across
// ranks; and with a slow network (a delay per collective) the buckets' all-reduces are
// issued while backward still computes and waited for only after its last gradient, an
// order recorded by a process group that logs its calls (no clock: `kiln_allreduce_bench --ddp`
// measures the time overlap saves).
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <mutex>
#include <optional>

#include "core/autocast.h"
#include "core/ops.h"
#include "dist/ddp.h"
#include "nn/nn.h"
#include "optim/optim.h"
#include "tests/dist/ranks_in_threads.h"
#include "tests/test_util.h"
#include "train/amp.h"

namespace kiln {
namespace {

using dist::DistributedDataParallel;
using dist::ProcessGroupRing;
using testing::handle;
using testing::run_ranks_in_threads;
using namespace std::chrono_literals;

constexpr auto kLimit = std::chrono::seconds(180);

// Models are built before the rank threads start: their initialisation draws from the
// process's one default generator, which the threads would otherwise share in a race.

std::shared_ptr<nn::Sequential> conv_net(uint64_t seed, int64_t width = 4) {
  manual_seed(seed);
  return std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Layer>>{
      std::make_shared<nn::Conv3d>(
          nn::Conv3dOptions{.in_channels = 1, .out_channels = width, .kernel_size = {3}, .padding = {1}}),
      std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Conv3d>(
          nn::Conv3dOptions{.in_channels = width, .out_channels = width, .kernel_size = {3}, .padding = {1}}),
      std::make_shared<nn::ReLU>(),
      std::make_shared<nn::AdaptiveAvgPool3d>(nn::AdaptiveAvgPool3dOptions{.output_size = {1}}),
      std::make_shared<nn::Flatten>(),
      std::make_shared<nn::Linear>(nn::LinearOptions{.in_features = width, .out_features = 3})});
}

struct Batch {
  Tensor x, y;
};
Batch batch(int step, int64_t n) {
  return {testing::random_uniform({n, 1, 6, 6, 6}, -1, 1, DType::Float32, 100 + step),
          testing::random_uniform({n}, 0, 3, DType::Float32, 200 + step).to(DType::Int64)};
}

constexpr int kSteps = 4;
constexpr int64_t kPerRank = 2;

// Single-process training on the combined batch of `world` ranks: its losses and weights.
std::pair<std::vector<float>, nn::StateDict> train_alone(int world) {
  auto net = conv_net(5);
  optim::SGD sgd(net->parameters(), {.lr = 0.1, .momentum = 0.9});
  std::vector<float> losses;
  for (int step = 0; step < kSteps; ++step) {
    const Batch b = batch(step, world * kPerRank);
    sgd.zero_grad();
    Tensor loss = cross_entropy(net->forward(b.x), b.y);
    loss.backward();
    sgd.step();
    losses.push_back(loss.item<float>());
  }
  return {losses, net->state_dict()};
}

TEST(DistributedDataParallel, TrainingEqualsOneProcessOnTheCombinedBatch) {
  testing::with_watchdog(kLimit, [] {
    for (int world : {2, 3}) {
      SCOPED_TRACE(::testing::Message() << world << " ranks");
      const auto [alone_losses, alone_weights] = train_alone(world);
      std::vector<std::shared_ptr<nn::Sequential>> nets;
      for (int r = 0; r < world; ++r) nets.push_back(conv_net(r == 0 ? 5 : 77 + r));  // DDP copies rank 0's
      std::vector<std::vector<float>> losses(static_cast<size_t>(world));
      std::mutex mutex;
      const auto errors = run_ranks_in_threads(world, [&](ProcessGroupRing& group) {
        const int64_t rank = group.rank();
        DistributedDataParallel ddp(nets[static_cast<size_t>(rank)], {.group = handle(group)});
        optim::SGD sgd(ddp.parameters(), {.lr = 0.1, .momentum = 0.9});
        for (int step = 0; step < kSteps; ++step) {
          const Batch b = batch(step, world * kPerRank);
          sgd.zero_grad();
          Tensor loss = cross_entropy(ddp.forward(b.x.narrow(0, rank * kPerRank, kPerRank)),
                                      b.y.narrow(0, rank * kPerRank, kPerRank));
          loss.backward();
          sgd.step();
          std::lock_guard<std::mutex> lock(mutex);
          losses[static_cast<size_t>(rank)].push_back(loss.item<float>());
        }
      });
      for (const std::string& e : errors) ASSERT_EQ(e, "");
      for (int step = 0; step < kSteps; ++step) {
        float mean = 0;
        for (int r = 0; r < world; ++r)
          mean += losses[static_cast<size_t>(r)][static_cast<size_t>(step)] / world;
        EXPECT_NEAR(mean, alone_losses[static_cast<size_t>(step)], 1e-5) << "step " << step;
      }
      for (int r = 0; r < world; ++r) {
        const nn::StateDict weights = nets[static_cast<size_t>(r)]->state_dict();
        ASSERT_EQ(weights.size(), alone_weights.size());
        for (size_t i = 0; i < weights.size(); ++i) {
          EXPECT_TRUE(testing::all_close(weights[i].second, alone_weights[i].second, {1e-5, 1e-4}))
              << weights[i].first << " on rank " << r;
          // The replicas stay bitwise identical.
          EXPECT_TRUE(testing::bitwise_equal(weights[i].second, nets[0]->state_dict()[i].second));
        }
      }
    }
  });
}

TEST(DistributedDataParallel, NoSyncAccumulationEqualsOneLargeBatch) {
  testing::with_watchdog(kLimit, [] {
    const int world = 2;
    auto alone = conv_net(5);
    const Batch b = batch(0, 4 * world);  // 2 micro-batches of 2 per rank
    cross_entropy(alone->forward(b.x), b.y).backward();
    std::vector<std::shared_ptr<nn::Sequential>> nets = {conv_net(5), conv_net(5)};
    const auto errors = run_ranks_in_threads(world, [&](ProcessGroupRing& group) {
      const int64_t rank = group.rank();
      DistributedDataParallel ddp(nets[static_cast<size_t>(rank)], {.group = handle(group)});
      // Rank r's samples: [4r, 4r + 4), in two micro-batches; each loss / 2.
      const auto micro = [&](int64_t k) {
        const int64_t at = rank * 4 + k * 2;
        (cross_entropy(ddp.forward(b.x.narrow(0, at, 2)), b.y.narrow(0, at, 2)) / 2.0).backward();
      };
      {
        auto guard = ddp.no_sync();
        micro(0);
      }
      micro(1);
    });
    for (const std::string& e : errors) ASSERT_EQ(e, "");
    const auto expected = alone->named_parameters();
    for (const auto& net : nets) {
      const auto got = net->named_parameters();
      for (size_t i = 0; i < got.size(); ++i)
        EXPECT_TRUE(testing::all_close(got[i].second.grad(), expected[i].second.grad(), {1e-6, 1e-4}))
            << got[i].first;
    }
  });
}

TEST(DistributedDataParallel, BucketsInReverseOrderWithASmallFirstBucketAndGradientsAsViews) {
  testing::with_watchdog(kLimit, [] {
    auto net = conv_net(5, 32);  // conv2: 32*32*27 floats = 108 KiB
    auto other = conv_net(9, 32);
    const auto errors = run_ranks_in_threads(2, [&](ProcessGroupRing& group) {
      auto replica = group.rank() == 0 ? net : other;
      DistributedDataParallel ddp(
          replica, {.group = handle(group), .bucket_cap_mb = 0.1, .first_bucket_cap_mb = 0.0003});
      const auto buckets = ddp.bucket_parameter_names();
      ASSERT_EQ(buckets.size(), 3u);
      // Reverse order: the last layer first, in a small first bucket.
      EXPECT_EQ(buckets[0], (std::vector<std::string>{"6.bias", "6.weight"}));
      EXPECT_EQ(buckets[1], (std::vector<std::string>{"2.bias", "2.weight"}));
      EXPECT_EQ(buckets[2], (std::vector<std::string>{"0.bias", "0.weight"}));
      const Batch b = batch(0, 2);
      cross_entropy(ddp.forward(b.x), b.y).backward();
      // Each gradient is a view of its bucket: neighbours in a bucket are adjacent.
      const auto named = replica->named_parameters();
      const Tensor w = *testing::find_named(named, "6.weight"), bias = *testing::find_named(named, "6.bias");
      EXPECT_EQ(static_cast<const char*>(w.grad().data_ptr()),
                static_cast<const char*>(bias.grad().data_ptr()) + bias.numel() * 4);
      // Start-up broadcast: rank 1 trained rank 0's weights.
      EXPECT_TRUE(testing::bitwise_equal(*testing::find_named(named, "0.weight"),
                                         *testing::find_named(net->named_parameters(), "0.weight")));
      EXPECT_EQ(ddp.named_parameters()[0].first, "module.0.weight");  // PyTorch's DDP names
    });
    for (const std::string& e : errors) EXPECT_EQ(e, "");
  });
}

// A model with a branch its forward can skip.
class TwoHeads : public nn::Layer {
 public:
  explicit TwoHeads(bool use_second) : use_second_(use_second) {
    first = register_module(
        "first", std::make_shared<nn::Linear>(nn::LinearOptions{.in_features = 4, .out_features = 2}));
    second = register_module(
        "second", std::make_shared<nn::Linear>(nn::LinearOptions{.in_features = 4, .out_features = 2}));
  }
  Tensor forward(const Tensor& x) override { return use_second_ ? second->forward(x) : first->forward(x); }
  std::shared_ptr<nn::Linear> first, second;
  bool use_second_;
};

TEST(DistributedDataParallel, UnusedParametersAreAnErrorNamingThemUnlessFindUnusedParameters) {
  testing::with_watchdog(kLimit, [] {
    manual_seed(3);
    std::vector<std::shared_ptr<TwoHeads>> first_only = {std::make_shared<TwoHeads>(false),
                                                         std::make_shared<TwoHeads>(false)};
    const auto errors = run_ranks_in_threads(2, [&](ProcessGroupRing& group) {
      DistributedDataParallel ddp(first_only[static_cast<size_t>(group.rank())], {.group = handle(group)});
      const Tensor x = ones({3, 4});
      ddp.forward(x).sum().backward();
      EXPECT_KILN_ERROR(ddp.forward(x), "the last backward gave no gradient to 2 parameter(s)",
                        "second.weight", "find_unused_parameters");
    });
    for (const std::string& e : errors) EXPECT_EQ(e, "");
    // With find_unused_parameters: rank 1 uses the second head, rank 0 the first; each
    // head's gradient is the average over the ranks (zero from the rank that skipped it).
    std::vector<nn::NamedTensors> grads(2);
    std::vector<std::shared_ptr<TwoHeads>> either = {std::make_shared<TwoHeads>(false),
                                                     std::make_shared<TwoHeads>(true)};
    const auto found = run_ranks_in_threads(2, [&](ProcessGroupRing& group) {
      auto model = either[static_cast<size_t>(group.rank())];
      DistributedDataParallel ddp(model, {.group = handle(group), .find_unused_parameters = true});
      for (int step = 0; step < 2; ++step) {
        ddp.zero_grad();
        ddp.forward(ones({3, 4})).sum().backward();
      }
      grads[static_cast<size_t>(group.rank())] = model->named_parameters();
    });
    for (const std::string& e : found) EXPECT_EQ(e, "");
    for (const auto& [name, p] : grads[0]) {
      ASSERT_TRUE(p.grad().defined()) << name;
      // d sum(x W^T + b) = 3 per weight and bias element (3 rows of ones), from one rank of two.
      EXPECT_TRUE(testing::all_close(p.grad(), full_like(p, 3.0 / 2))) << name;
    }
  });
}

TEST(DistributedDataParallel, GradScalerSkipsTheStepOnEveryRankWhenOneRankOverflows) {
  testing::with_watchdog(kLimit, [] {
    std::vector<double> scales(2);
    std::vector<Tensor> weights(2);
    manual_seed(4);
    std::vector<std::shared_ptr<nn::Linear>> models;
    for (int r = 0; r < 2; ++r)
      models.push_back(std::make_shared<nn::Linear>(nn::LinearOptions{.in_features = 4, .out_features = 2}));
    const auto errors = run_ranks_in_threads(2, [&](ProcessGroupRing& group) {
      auto model = models[static_cast<size_t>(group.rank())];
      DistributedDataParallel ddp(model, {.group = handle(group)});
      optim::SGD sgd(ddp.parameters(), {.lr = 0.5});
      optim::GradScaler scaler({.init_scale = 1024.0});
      const Tensor before = model->parameter("weight").clone();
      // Rank 1's input overflows its gradients to Inf; rank 0's is fine.
      const Tensor x = group.rank() == 1 ? full({2, 4}, 1e38) : ones({2, 4});
      scaler.scale(ddp.forward(x).sum()).backward();
      scaler.step(sgd);
      scaler.update();
      scales[static_cast<size_t>(group.rank())] = scaler.get_scale();
      weights[static_cast<size_t>(group.rank())] = model->parameter("weight").sub(before);
    });
    for (const std::string& e : errors) EXPECT_EQ(e, "");
    EXPECT_EQ(scales[0], 512.0);  // both backed off
    EXPECT_EQ(scales[1], 512.0);
    EXPECT_TRUE(testing::all_equal(weights[0], zeros({2, 4})));  // both skipped the step
    EXPECT_TRUE(testing::all_equal(weights[1], zeros({2, 4})));
  });
}

// A training run's final parameters, and the gradient norm each step had before clipping.
struct AmpRun {
  nn::NamedTensors parameters;
  std::vector<double> norms;
};

// One training run at an Apex level with GradScaler and gradient clipping, on `x`'s rows
// [first, first + count) (the whole batch when alone).
AmpRun train_with_amp(const std::shared_ptr<nn::Sequential>& net, train::OptLevel level,
                      const std::shared_ptr<dist::ProcessGroup>& group, int64_t first, int64_t count) {
  AmpRun run;
  optim::SGD sgd(net->parameters(), {.lr = 0.05, .momentum = 0.9});
  const train::AmpProperties amp = train::amp_initialize(*net, sgd, level, DType::BFloat16);
  std::optional<DistributedDataParallel> ddp;
  if (group) ddp.emplace(net, dist::DDPOptions{.group = group});
  optim::GradScaler scaler({.init_scale = 256.0, .enabled = amp.dynamic_loss_scale});
  for (int step = 0; step < 3; ++step) {
    const Batch b = batch(step, 4);
    const Tensor x = train::amp_cast_input(amp, b.x.narrow(0, first, count));
    sgd.zero_grad();
    Tensor logits;
    {
      AutocastGuard autocast(amp.low_dtype, amp.enabled_autocast);
      logits = ddp ? ddp->forward(x) : net->forward(x);
    }
    // A mean over the whole batch: each rank's share of it (DDP averages over 2 ranks).
    const Tensor loss = cross_entropy(train::amp_cast_output(amp, logits), b.y.narrow(0, first, count));
    scaler.scale(loss).backward();
    scaler.unscale_(sgd);
    // The gradients' norms here are about 0.2: clipping at 0.1 acts on every step. The norm
    // before clipping shows the gradient DDP averaged is the whole batch's, which the
    // clipped weights alone would not (any gradient above 0.1 is rescaled to the same norm).
    run.norms.push_back(optim::clip_grad_norm_(net->parameters(), 0.1).item<double>());
    scaler.step(sgd);
    scaler.update();
  }
  run.parameters = net->named_parameters();
  return run;
}

TEST(DistributedDataParallel, AmpLevelsWithGradScalerAndClippingMatchOneProcess) {
  testing::with_watchdog(kLimit, [] {
    for (const train::OptLevel level :
         {train::OptLevel::O0, train::OptLevel::O1, train::OptLevel::O2, train::OptLevel::O3}) {
      SCOPED_TRACE(train::name(level));
      const AmpRun alone = train_with_amp(conv_net(5), level, nullptr, 0, 4);
      std::vector<std::shared_ptr<nn::Sequential>> nets = {conv_net(5), conv_net(5)};
      std::vector<AmpRun> ranks(2);
      const auto errors = run_ranks_in_threads(2, [&](ProcessGroupRing& group) {
        const auto r = static_cast<size_t>(group.rank());
        ranks[r] = train_with_amp(nets[r], level, handle(group), group.rank() * 2, 2);
      });
      for (const std::string& e : errors) ASSERT_EQ(e, "");
      // bfloat16 ops (O1), gradients (O2) and parameters (O3) round differently when the
      // batch is split in two halves.
      const testing::Tolerance tolerance =
          level == train::OptLevel::O0 ? testing::Tolerance{1e-5, 1e-4} : testing::Tolerance{2e-2, 2e-2};
      const nn::NamedTensors& expected = alone.parameters;
      for (size_t i = 0; i < expected.size(); ++i) {
        const Tensor& got = ranks[0].parameters[i].second;
        EXPECT_TRUE(
            testing::all_close(got.to(DType::Float32), expected[i].second.to(DType::Float32), tolerance))
            << expected[i].first;
        EXPECT_TRUE(testing::bitwise_equal(got, ranks[1].parameters[i].second)) << expected[i].first;
      }
      ASSERT_EQ(ranks[0].norms.size(), alone.norms.size());
      for (size_t step = 0; step < alone.norms.size(); ++step) {
        EXPECT_GT(alone.norms[step], 0.1) << "step " << step << ": clipping did not act";
        EXPECT_NEAR(ranks[0].norms[step], alone.norms[step], alone.norms[step] * tolerance.rtol * 2)
            << "step " << step;
      }
    }
  });
}

TEST(DistributedDataParallel, BuffersFollowRankZeroBeforeEachForward) {
  testing::with_watchdog(kLimit, [] {
    std::vector<Tensor> running_means(2);
    manual_seed(2);
    std::vector<std::shared_ptr<nn::Sequential>> models;
    for (int r = 0; r < 2; ++r)
      models.push_back(std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Layer>>{
          std::make_shared<nn::Linear>(nn::LinearOptions{.in_features = 3, .out_features = 4}),
          std::make_shared<nn::BatchNorm1d>(nn::BatchNorm1dOptions{.num_features = 4})}));
    const auto errors = run_ranks_in_threads(2, [&](ProcessGroupRing& group) {
      auto model = models[static_cast<size_t>(group.rank())];
      DistributedDataParallel ddp(model, {.group = handle(group)});
      // Different data per rank: different running statistics after this forward.
      ddp.forward(
             testing::random_uniform({5, 3}, -1, 1, DType::Float32, 10 + static_cast<uint64_t>(group.rank())))
          .sum()
          .backward();
      ddp.eval();
      NoGradGuard no_grad;
      ddp.forward(ones({1, 3}));  // broadcasts rank 0's buffers first; eval updates none
      running_means[static_cast<size_t>(group.rank())] =
          testing::find_named(model->state_dict(), "1.running_mean")->clone();
    });
    for (const std::string& e : errors) ASSERT_EQ(e, "");
    EXPECT_TRUE(testing::bitwise_equal(running_means[1], running_means[0]));
    EXPECT_FALSE(testing::all_close(running_means[0], zeros({4})));  // it did move
  });
}

// A process group that passes every collective to `inner` and writes in `log` when an
// all-reduce is issued and when it is first waited for: the order of communication and
// backward, seen without a clock.
class RecordingGroup : public dist::ProcessGroup {
 public:
  RecordingGroup(dist::ProcessGroup& inner, std::function<void(const std::string&)> log)
      : ProcessGroup(inner.rank(), inner.size(), inner.options()), inner_(inner), log_(std::move(log)) {}
  std::string backend() const override { return "recording " + inner_.backend(); }

 protected:
  std::shared_ptr<dist::Work> run_all_reduce(const Tensor& tensor, dist::ReduceOp op) override {
    return recorded(inner_.all_reduce(tensor, op));
  }
  std::shared_ptr<dist::Work> run_all_reduce_coalesced(const std::vector<Tensor>& tensors,
                                                       dist::ReduceOp op) override {
    return recorded(inner_.all_reduce_coalesced(tensors, op));
  }
  std::shared_ptr<dist::Work> run_broadcast(const Tensor& tensor, int64_t root) override {
    return inner_.broadcast(tensor, root);
  }
  std::shared_ptr<dist::Work> run_all_gather(const Tensor& output, const Tensor& input) override {
    return inner_.all_gather_into_tensor(output, input);
  }
  std::shared_ptr<dist::Work> run_reduce_scatter(const Tensor& output, const Tensor& input,
                                                 dist::ReduceOp op) override {
    return inner_.reduce_scatter_tensor(output, input, op);
  }
  std::shared_ptr<dist::Work> run_barrier() override { return inner_.barrier(); }

 private:
  dist::ProcessGroup& inner_;
  std::function<void(const std::string&)> log_;

  std::shared_ptr<dist::Work> recorded(std::shared_ptr<dist::Work> work) {
    log_("issue");
    // The ring's all-reduce has no finishing step of its own to keep.
    work->finish_in_wait([log = log_] { log("wait"); });
    return work;
  }
};

TEST(DistributedDataParallel, CommunicationOverlapsBackwardOnASlowNetwork) {
  testing::with_watchdog(kLimit, [] {
    // Every collective waits 100 ms first (a slow network): a DDP that waited for a bucket
    // before backward was done would hold backward up; one that overlaps does not.
    constexpr auto kDelay = 100ms;
    const auto conv = [](int64_t in, int64_t out) {
      return std::make_shared<nn::Conv3d>(
          nn::Conv3dOptions{.in_channels = in, .out_channels = out, .kernel_size = {3}, .padding = {1}});
    };
    std::vector<std::shared_ptr<nn::Sequential>> models;
    for (int r = 0; r < 2; ++r)
      models.push_back(std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Layer>>{
          conv(1, 8), std::make_shared<nn::ReLU>(), conv(8, 8), std::make_shared<nn::ReLU>(), conv(8, 8),
          std::make_shared<nn::ReLU>(), conv(8, 1)}));
    std::vector<std::vector<std::string>> logs(2);
    const auto errors = run_ranks_in_threads(
        2,
        [&](ProcessGroupRing& ring) {
          const auto r = static_cast<size_t>(ring.rank());
          std::mutex log_mutex;
          const auto log = [&](const std::string& event) {
            std::lock_guard<std::mutex> lock(log_mutex);
            logs[r].push_back(event);
          };
          auto model = models[r];
          // Registered before DDP's own hooks, so each runs before DDP may start a bucket.
          for (const Tensor& p : model->parameters())
            p.register_post_accumulate_grad_hook([&](const Tensor&) { log("gradient"); });
          auto group = std::make_shared<RecordingGroup>(ring, log);
          // One bucket per layer: a bucket closes once it holds 200 bytes (a bias never does).
          constexpr double k200Bytes = 200.0 / (1 << 20);
          DistributedDataParallel ddp(model,
                                      {.group = group, .bucket_cap_mb = k200Bytes, .first_bucket_cap_mb = k200Bytes});
          ASSERT_EQ(ddp.bucket_parameter_names().size(), 4u);
          const Tensor x = testing::random_uniform({2, 1, 8, 8, 8}, -1, 1, DType::Float32, 1);
          const Tensor loss = ddp.forward(x).pow(2).mean();
          log("backward");
          loss.backward();
          log("returned");
        },
        60s, kDelay);
    for (const std::string& e : errors) ASSERT_EQ(e, "");
    for (size_t r = 0; r < 2; ++r) {
      std::string order;
      for (const std::string& event : logs[r]) order += event + " ";
      SCOPED_TRACE("rank " + std::to_string(r) + ": " + order);
      const auto at = [&](const std::string& event) {
        return std::find(logs[r].begin(), logs[r].end(), event) - logs[r].begin();
      };
      const auto count_before = [&](const std::string& event, std::ptrdiff_t end) {
        return std::count(logs[r].begin(), logs[r].begin() + end, event);
      };
      const auto last_gradient = std::find(logs[r].rbegin(), logs[r].rend(), "gradient").base() - 1 - logs[r].begin();
      // Backward produced all 8 gradients, and each of the 4 buckets was issued once.
      EXPECT_EQ(count_before("gradient", std::ssize(logs[r])), 8);
      EXPECT_EQ(count_before("issue", std::ssize(logs[r])), 4);
      EXPECT_EQ(count_before("issue", at("backward")), 0);
      // The buckets of the last three layers were on the network while backward still
      // computed the first layer's gradients, and none was waited for until backward had
      // produced every gradient: communication overlapped computation.
      EXPECT_EQ(count_before("issue", last_gradient), 3);
      EXPECT_EQ(count_before("wait", last_gradient), 0);
      // And backward returned only once every bucket was waited for.
      EXPECT_EQ(count_before("wait", at("returned")), 4);
    }
  });
}

}  // namespace
}  // namespace kiln
