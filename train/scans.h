// Your own scans as a run's data: `kiln train --dataset manifest.csv|folder`. The scan list
// (data/scan_list.h) becomes labelled train, val and test datasets (data/scan_dataset.h)
// with the run's preprocessing (train/preprocessing.h); every file's header is read and
// every problem reported before the first step.
//
// Labels, by --task:
//   classification  one label column (or a folder's classes): the class names are
//                   --class-names in that order, else the labels found, sorted (as numbers
//                   when all are integers, else as text; a folder's by name, as
//                   ImageFolder); two classes make a binary task, more a multi-class one;
//                   each sample's label is its class index, int64 []
//   multi-label     several 0/1 label columns: float32 [L], the columns being the labels
//   regression      one or more number columns: float32 [T]
//   auto            classification from one label column, multi-label from several
//
// Note [Scan splits]: the splits are the manifest's split column or the folder's
// train/val/test folders when given; else each class's scans (all scans, for multi-label
// and regression) are shuffled by a generator seeded with --split-seed and cut into
// test (--test-fraction), val (--val-fraction) and train, each split keeping the
// manifest's order. A resumed run and `kiln eval` use the split the run saved (split.csv
// in its folder: each scan's first file, its labels and its split), so a manifest
// re-sorted or a fraction mistyped later cannot move a scan between splits; a scan added,
// removed or relabelled since is a problem.
//
// Note [Scan checks]: before anything trains (and alone, with --check-data), every scan's
// header is read (data/volume_file.h: read_volume_info) and every problem is reported, one
// line each naming the file or the manifest's row: a missing or unreadable file (or one
// that is no regular file, or an empty volume), a scan listed twice, a label that is not a
// class (or not a number, or not 0/1), scans whose shapes differ (after the spacing)
// without --resize or --crop-pad, channels that differ, a scan's files on other grids or
// voxel sizes, one scan taking more than a quarter of the machine's memory once
// preprocessed, an empty split, a class absent from a split. Then the run stops with all
// of them, and nothing is written. What a header cannot tell (a compressed file whose
// voxels are cut short or corrupt, a NaN voxel: Note [Finite voxels] in
// data/scan_dataset.h) is an error naming the file when the loader first reads it.
#pragma once

#include <string>
#include <vector>

#include "data/scan_list.h"
#include "train/config.h"
#include "train/data_setup.h"
#include "train/run_context.h"

namespace kiln::train {

// Whether config.dataset names one's own scans: neither a MedMNIST flag nor "synthetic".
bool is_own_scans(const TrainConfig& config);

// The route's resolved data: the scans, their targets and splits.
struct OwnScans {
  data::ScanList list;
  Task task = Task::MultiClass;
  std::vector<std::string> class_names;  // classes, or labels of a multi-label task, or targets
  std::vector<Tensor> targets;           // per record
  std::vector<std::string> splits;       // per record: "train", "val" or "test"
  std::vector<std::string> problems;     // Note [Scan checks]
  int64_t channels = 0;                  // of every scan (0 when they differ or are unreadable)
};

// The scans of `config.dataset` with their labels and splits (`saved_split`: a run's
// split.csv to follow, or empty), and every problem found, headers included.
OwnScans read_own_scans(const TrainConfig& config, const Choices& choices, const std::string& saved_split);

// A report for --check-data: what was found, and each problem on its own line.
std::string format_scan_check(const OwnScans& scans);

// The TrainData of one's own scans; an error listing the problems (Note [Scan checks]).
TrainData make_scan_data(const TrainConfig& config, const Choices& choices, const std::string& saved_split);
// The same from scans already read (read_own_scans), so that a command that showed their
// check reads no header twice.
TrainData make_scan_data(const OwnScans& scans, const TrainConfig& config, const Choices& choices);

// The split table a run saves as split.csv: "image,split", one row per scan.
std::string split_table(const OwnScans& scans);

// The split.csv a run being resumed saved (Note [Scan splits]): the run folder's when
// --resume auto finds a checkpoint there, the folder above a --resume checkpoint's
// otherwise; empty for a new run, or when there is none.
std::string saved_split_file(const RunContext& run);

}  // namespace kiln::train
