// The DataLoader's throughput (data/loader.h): samples/s of one epoch over 256 volumes
// shaped like MedMNIST 3D (uint8 [1, s, s, s], s = 28 or 64; in memory, as MedMnist3d
// holds a split), batch 32, with 0, 1 and 2 worker threads, with ToFloat only or with the
// augmentation stack a 3D ResNet trainer uses (ToFloat(1/255), RandomFlip on 3 axes,
// RandomRotate90, MedMNIST's shape transform). The 3D ResNet-18 training step on this
// CPU consumes about 4 samples/s at 28^3 (bench/results/2026-11-26-cpu-memory-bound.md):
// the figure to beat by a wide margin.
//
// Roofline: per sample, ToFloat reads s^3 bytes and writes 4 s^3; each flip or rotation
// reads and writes 4 s^3; the collate copies 4 s^3 into the batch. At s = 28 that is
// ~0.5 MB a sample with augmentation: memory allows tens of thousands a second; the
// per-op overheads (a few microseconds each, a dozen ops) bound it first.
#include <memory>

#include "bench/bench_util.h"
#include "core/ops.h"
#include "data/loader.h"

namespace kiln::bench {
namespace {

class Volumes final : public data::Dataset {
 public:
  explicit Volumes(int64_t side) {
    Generator gen(3);
    volumes_ = randint(0, 256, {256, 1, side, side, side}, {.dtype = DType::UInt8}, &gen);
  }
  int64_t size() const override { return volumes_.size(0); }
  data::Sample get(int64_t index) const override {
    check_index(index);
    return {.tensors = {{"image", volumes_.select(0, index)}, {"label", full({}, index % 2, {.dtype = DType::Int64})}},
            .metadata = {}};
  }
  std::string name() const override { return "Volumes"; }

 private:
  Tensor volumes_;
};

data::TransformPtr transform_of(bool augment) {
  std::vector<data::TransformPtr> steps = {std::make_shared<data::ToFloat>(1.0 / 255)};
  if (augment) {
    steps.push_back(std::make_shared<data::RandomFlip>());
    steps.push_back(std::make_shared<data::RandomRotate90>());
    steps.push_back(std::make_shared<data::MedMnistShapeTransform>(true));
  }
  return std::make_shared<data::Compose>(std::move(steps));
}

// args: side, workers, augment (0/1).
void BM_DataLoaderEpoch(benchmark::State& state) {
  const auto dataset = std::make_shared<Volumes>(state.range(0));
  data::DataLoader loader(dataset, {.batch_size = 32,
                                    .shuffle = true,
                                    .num_workers = state.range(1),
                                    .transform = transform_of(state.range(2) != 0),
                                    .seed = 1});
  int64_t epoch = 0, samples = 0;
  for (auto _ : state) {
    for (data::Batch& batch : loader.epoch(epoch++)) samples += batch.at("image").size(0);
  }
  state.counters["samples/s"] = benchmark::Counter(static_cast<double>(samples), benchmark::Counter::kIsRate);
  state.SetLabel(state.range(2) != 0 ? "augmented" : "ToFloat only");
}

BENCHMARK(BM_DataLoaderEpoch)
    ->ArgsProduct({{28, 64}, {0, 1, 2}, {0, 1}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace kiln::bench
