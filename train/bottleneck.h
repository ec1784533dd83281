// The bottleneck report: an epoch's (or --profile-steps') wall time split into the phases
// of a training step, with the host syncs per step and a one-line diagnosis naming the
// flag to try, from the TimeRange records the trainer makes (core/time_range.h).
//
// The trainer wraps each phase of its loop in a TimeRange named after it (Phase below).
// The report sums each phase's top-level records (a range nested in another, such as the
// data waits inside an evaluation, belongs to the enclosing phase), counts what is left as "other", and reads
// the shares: data loading above 20%, copies above 15%, any host sync per step on a GPU, an optimizer above
// 25%, evaluation above 30% or checkpoints above 10% each have their own advice; otherwise the step is
// compute-bound, and the advice is about compute.
//
//   Timeline timeline;  ... the epoch ...
//   const BottleneckReport report = bottleneck_report(timeline.stop(), wall_s, batches, syncs, context);
//   std::cout << format_bottleneck_report(report);
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/host_sync.h"
#include "core/time_range.h"
#include "data/prefetcher.h"

namespace kiln::train {

// The phase names the trainer's ranges use.
namespace phase {
inline constexpr const char* kData = data::kDataRange;  // waiting for the next batch (Note [Batch ranges])
inline constexpr const char* kCopy = data::kCopyRange;  // host-to-device copies without device prefetching
inline constexpr const char* kForward = "forward";  // forward and loss
inline constexpr const char* kBackward = "backward";
inline constexpr const char* kOptimizer = "optimizer";  // clipping, unscaling, step, scheduler
// --cuda-graphs: the whole step, replayed as one CUDA graph (its warm-up steps included),
// where forward, backward and optimizer cannot be told apart. Listed only when it occurs.
inline constexpr const char* kGraphed = "graphed";
inline constexpr const char* kEvaluation = "evaluation";
inline constexpr const char* kCheckpoint = "checkpoint";
}  // namespace phase

// What the advice may refer to.
struct ReportContext {
  bool on_gpu = false;
  int64_t workers = 0;
  bool pin_memory = false;
  bool bfloat16 = false;  // the run already computes in bfloat16 (--amp with bf16)
  bool cuda_graphs = false;  // the steps are replayed CUDA graphs (--cuda-graphs)
};

struct PhaseTime {
  std::string phase = {};
  double seconds = 0;
  double fraction = 0;                                  // of the wall time
  std::optional<double> device_seconds = std::nullopt;  // from device events, when the ranges had them
};

// Note [Steps and batches]: a step is an optimizer step (steps.csv's "step", TensorBoard's x
// axis, the summary's count, --profile-steps); a batch is one forward and backward, a
// micro-batch under --accumulate. The report counts batches, since its time is theirs.
struct BottleneckReport {
  double wall_seconds = 0;
  int64_t batches = 0;
  std::vector<PhaseTime> phases;  // the seven phases in step order (graphed too, when timed), then "other"
  double host_syncs_per_batch = 0;
  HostSyncs host_syncs;
  std::string diagnosis;
};

// What the report reads of a set of records, kept small: `ranges`' top-level records added
// into one record per phase name in `totals` (seconds and device time summed), so a long
// run keeps a handful of records rather than five per step; the report of the totals is
// the report of all the ranges.
void add_phase_totals(std::vector<TimeRangeRecord>& totals, const std::vector<TimeRangeRecord>& ranges);

// What a run's report is made of, gathered epoch by epoch: the records as phase totals,
// the wall time of the epochs and of their training phases, and the host syncs made in the
// steps between log intervals (Note [A training step] in train/trainer.h).
struct RunTimes {
  std::vector<TimeRangeRecord> records;  // add_phase_totals of every epoch's ranges
  double wall_seconds = 0;               // the epochs, validation and checkpoints included
  double train_seconds = 0;              // their training phases
  int64_t trained_samples = 0;
  HostSyncs quiet_syncs;
  int64_t quiet_steps = 0;
  double samples_per_s() const { return train_seconds > 0 ? static_cast<double>(trained_samples) / train_seconds : 0; }
};

BottleneckReport bottleneck_report(const std::vector<TimeRangeRecord>& records, double wall_seconds,
                                   int64_t batches, const HostSyncs& syncs, const ReportContext& context);
// A small table (phase, seconds, share, device seconds), the syncs, and the diagnosis.
std::string format_bottleneck_report(const BottleneckReport& report);

}  // namespace kiln::train
