// RunProgress: how far a run has come, the loop's counters and decisions. A checkpoint
// saves it and a resumed run starts from it: one field list, progress_fields(), serves
// both directions (to_json, progress_from_json), so a new counter is one member and one
// row (Note [Checkpoint layout] in train/checkpoint.h: the "progress" object).
//
// Named RunProgress, not Progress: that is the progress line's struct (train/progress.h).
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <variant>
#include <vector>

#include "core/json.h"

namespace kiln::train {

struct RunProgress {
  int64_t epoch = 0;  // epochs completed
  int64_t batch = 0;  // batches of epoch + 1 done (a mid-epoch checkpoint), else 0
  int64_t step = 0;   // optimizer steps
  double best_metric = std::numeric_limits<double>::quiet_NaN();  // the monitored metric; NaN: none yet
  int64_t best_epoch = 0;
  int64_t bad_validations = 0;  // validations since the best (early stopping's count)
  bool stopped_early = false;   // the last validation stopped the run (patience)
  int64_t micro_batches = 0;    // trained, over the whole run (the log interval counts them)
  // The current epoch's running sums (train/running_sums.h) count these.
  int64_t seen = 0;            // samples
  int64_t label_elements = 0;  // label values (samples x labels for multi-label)
  int64_t world_size = 1;      // the ranks that took the progress (a mid-epoch checkpoint's batches are theirs)
  bool monitor_fallback = false;  // Note [An undefined monitor] (train/trainer.cpp): the best by val loss
};

using ProgressMember = std::variant<int64_t RunProgress::*, double RunProgress::*, bool RunProgress::*>;

struct ProgressField {
  const char* name;  // the JSON key
  ProgressMember member;
  bool required = true;  // false: a field newer than some checkpoints, its default when absent
};

const std::vector<ProgressField>& progress_fields();

// Integers and booleans as JSON integers (0/1); a NaN metric as null.
json::Value to_json(const RunProgress& progress);
// Every required field must be there with its type; an error names `source` and the key.
RunProgress progress_from_json(const json::Value& object, const std::string& source);

// Where the run is, as the messages say it: "epoch 2 after its batch 5, step 13" in the
// middle of an epoch, "after epoch 2, step 16" at its end.
std::string progress_point(const RunProgress& progress);

}  // namespace kiln::train
