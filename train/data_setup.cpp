// make_train_data: MedMNIST 3D (data/medmnist.h) with MedMNIST's own transforms (to [0, 1],
// its shape transform, augmented for training), or data::SyntheticShapes.
#include "train/data_setup.h"

#include "core/error.h"
#include "data/medmnist.h"
#include "data/sampler.h"
#include "data/synthetic.h"
#include "train/scans.h"

namespace kiln::train {
namespace {

// MedMNIST's own: to [0, 1], then its shape transform (random for augmented training).
data::TransformPtr medmnist_transform(bool train, bool augment) {
  return std::make_shared<data::Compose>(std::vector<data::TransformPtr>{
      std::make_shared<data::ToFloat>(1.0 / 255.0), std::make_shared<data::MedMnistShapeTransform>(train && augment)});
}

TrainData medmnist(const TrainConfig& config) {
  const data::MedMnistInfo& info = data::medmnist_info(config.dataset);  // an error listing the flags
  KILN_CHECK(config.size == 28 || config.size == 64, "dataset ", config.dataset,
             ": the size is 28 or 64, got ", config.size);
  const data::MedMnistOptions options{
      .root = config.data_root, .size = config.size, .download = config.download};
  const auto split = [&](data::Split which) {
    return std::make_shared<data::MedMnist3d>(config.dataset, which, options);
  };
  TrainData result;
  result.description = std::string(info.python_class) + " at " + std::to_string(config.size) + "^3 from " +
                       data::medmnist_path(config.dataset, options);
  result.task = parse_task(info.task);
  result.classes = static_cast<int64_t>(info.labels.size());
  for (const std::string_view label : info.labels) result.class_names.emplace_back(label);
  result.train = split(data::Split::Train);
  result.val = split(data::Split::Val);
  result.test = split(data::Split::Test);
  result.train_transform = medmnist_transform(/*train=*/true, config.augment);
  result.eval_transform = medmnist_transform(/*train=*/false, false);
  return result;
}

TrainData synthetic(const TrainConfig& config) {
  KILN_CHECK(config.size >= 8 && config.size <= 128,
             "dataset synthetic: the size (the volumes' side) is 8 to 128, got ", config.size);
  const auto split = [&](int64_t samples, uint64_t seed) {
    return std::make_shared<data::SyntheticShapes>(
        data::SyntheticShapesOptions{.size = samples, .side = config.size, .noise = 0.35, .seed = seed});
  };
  const int64_t held_out = std::max<int64_t>(1, config.synthetic_samples / 4);
  TrainData result;
  result.description = "synthetic shapes (ball, cube, jack) at " + std::to_string(config.size) + "^3, " +
                       std::to_string(config.synthetic_samples) + " training volumes";
  result.task = Task::MultiClass;
  result.classes = data::SyntheticShapes::kClasses;
  result.class_names = {"ball", "cube", "jack"};
  result.train = split(config.synthetic_samples, 1);
  result.val = split(held_out, 2);
  result.test = split(held_out, 3);
  if (config.augment) result.train_transform = std::make_shared<data::RandomFlip>();
  return result;
}

std::unique_ptr<data::DataLoader> make_loader(const RunContext& run, std::shared_ptr<const data::Dataset> dataset,
                                              data::TransformPtr transform, bool train) {
  const TrainConfig& config = run.config;
  data::SamplerPtr sampler = nullptr;
  if (train && run.distributed.enabled) {
    sampler = std::make_shared<data::DistributedSampler>(dataset->size(), run.distributed.world_size,
                                                         run.distributed.rank, /*shuffle=*/true,
                                                         static_cast<uint64_t>(config.seed));
  }
  return std::make_unique<data::DataLoader>(
      std::move(dataset), data::DataLoaderOptions{.batch_size = config.batch_size,
                                                  .shuffle = train && sampler == nullptr,
                                                  .sampler = sampler,
                                                  .drop_last = train && config.drop_last,
                                                  .num_workers = config.workers,
                                                  .prefetch_factor = config.prefetch_factor,
                                                  .persistent_workers = config.persistent_workers,
                                                  .pin_memory = config.pin_memory && run.device.is_cuda(),
                                                  .transform = std::move(transform),
                                                  .seed = static_cast<uint64_t>(config.seed)});
}

}  // namespace

RunBatches make_batches(const RunContext& run, const TrainData& data) {
  RunBatches batches;
  batches.train_loader = make_loader(run, data.train, data.train_transform, true);
  batches.val_loader = make_loader(run, data.val, data.eval_transform, false);
  batches.test_loader = make_loader(run, data.test, data.eval_transform, false);
  KILN_CHECK(batches.train_loader->size() > 0, "batch-size ", run.config.batch_size,
             " is larger than the training set (", data.train->size(), " samples) with drop-last: no batch to train on");
  const data::PrefetchMode mode = run.config.device_prefetch ? data::PrefetchMode::CopyStream : data::PrefetchMode::None;
  batches.train = std::make_unique<data::DevicePrefetcher>(*batches.train_loader, run.device, mode);
  batches.val = std::make_unique<data::DevicePrefetcher>(*batches.val_loader, run.device, mode);
  batches.test = std::make_unique<data::DevicePrefetcher>(*batches.test_loader, run.device, mode);
  return batches;
}

TrainData make_train_data(const TrainConfig& config, const Choices& choices, const std::string& saved_split) {
  if (is_own_scans(config)) return make_scan_data(config, choices, saved_split);
  KILN_CHECK(!choices.preprocessing.any_set && choices.task == TaskChoice::Auto, "dataset ", config.dataset,
             ": --task, --orientation, --spacing, --normalize, --crop-pad and --resize are for your own scans "
             "(--dataset manifest.csv or a folder); ", config.dataset, " has its own");
  return config.dataset == "synthetic" ? synthetic(config) : medmnist(config);
}

TrainData make_train_data(const TrainConfig& config) { return make_train_data(config, validate(config)); }

data::TransformPtr eval_transform_of(const TrainConfig& config, const Choices& choices) {
  if (is_own_scans(config)) return preprocessing_transform(choices.preprocessing, /*train=*/false, false);
  if (config.dataset == "synthetic") return nullptr;
  return medmnist_transform(/*train=*/false, false);
}

std::vector<int64_t> class_counts(const data::Dataset& dataset, int64_t classes) {
  std::vector<int64_t> counts(static_cast<size_t>(classes), 0);
  const auto count = [&](int64_t label) {
    KILN_CHECK(label >= 0 && label < classes, dataset.name(), ": label ", label, " is outside [0, ", classes,
               ")");
    ++counts[static_cast<size_t>(label)];
  };
  if (const auto* medmnist = dynamic_cast<const data::MedMnist3d*>(&dataset)) {
    for (const int64_t label : medmnist->labels().to_vector<int64_t>()) count(label);
    return counts;
  }
  for (int64_t i = 0; i < dataset.size(); ++i) count(dataset.get(i).at(data::kLabel).item<int64_t>());
  return counts;
}

}  // namespace kiln::train
