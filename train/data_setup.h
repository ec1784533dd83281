// The data of a run from its configuration: MedMNIST 3D by flag (train / val / test splits)
// or synthetic shapes, with the transforms each split gets and the task the metrics need.
// A C++ user with their own data fills a TrainData themselves and hands it to the Trainer.
//
//   train::TrainData data = train::make_train_data(config);
//   std::cout << data.description << "\n";
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/loader.h"
#include "data/prefetcher.h"
#include "data/transforms.h"
#include "train/config.h"
#include "train/metrics.h"
#include "train/run_context.h"

namespace kiln::train {

struct TrainData {
  std::string description;  // what was loaded, for the log
  Task task = Task::MultiClass;
  int64_t classes = 2;   // classes, labels of a multi-label task, or targets of a regression
  int64_t channels = 1;  // the input volumes' channels
  std::vector<std::string> class_names = {};  // in the order of the model's outputs; may be empty
  std::shared_ptr<const data::Dataset> train, val, test;
  data::TransformPtr train_transform, eval_transform;  // null: none
  std::string split_table = "";  // one's own scans: split.csv, saved in the run folder (train/scans.h)
};

// config.dataset: a MedMNIST 3D flag (its file where MedMNIST keeps it, fetched when
// config.download), "synthetic" (data::SyntheticShapes at config.size, fixed seeds per
// split, so every training seed sees the same volumes), or one's own scans (a CSV manifest
// or a folder: train/scans.h, following `saved_split`, a run's split.csv, when given).
// Samples hold "image" (float32 [C, D, H, W]) and "label" (an int64 class, or float32
// labels or targets) after the transforms. The preprocessing settings (train/
// preprocessing.h) are one's own scans': MedMNIST and synthetic data refuse them.
TrainData make_train_data(const TrainConfig& config, const Choices& choices, const std::string& saved_split = "");
// The same, validating `config` for its choices.
TrainData make_train_data(const TrainConfig& config);
// What make_train_data's eval_transform would be, without reading the data (for `kiln
// predict` on new files).
data::TransformPtr eval_transform_of(const TrainConfig& config, const Choices& choices);

// The loaders of a run's three splits and their batches on the run's device (Note [Batch
// ranges] in data/prefetcher.h): training shuffles (seeded; in a --ddp run each rank takes
// its share of one permutation, train/distributed.h) and may drop its last batch; batches
// are pinned for a GPU when --pin-memory, and copied ahead on a copy stream when
// --device-prefetch.
struct RunBatches {
  std::unique_ptr<data::DataLoader> train_loader, val_loader, test_loader;
  std::unique_ptr<data::DevicePrefetcher> train, val, test;
};
RunBatches make_batches(const RunContext& run, const TrainData& data);

// How many training samples have each label 0 .. classes - 1 (read from a MedMNIST split's
// label array, else from every sample's "label").
std::vector<int64_t> class_counts(const data::Dataset& dataset, int64_t classes);

}  // namespace kiln::train
