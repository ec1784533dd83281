// The bottleneck report (bottleneck.h): sums per phase, the remainder, and the first rule
// that fires, largest share first.
#include "train/bottleneck.h"

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <string_view>

#include "core/error.h"

namespace kiln::train {
namespace {

const std::vector<const char*> kPhases = {phase::kData,      phase::kCopy,       phase::kForward,
                                          phase::kBackward,  phase::kOptimizer,  phase::kGraphed,
                                          phase::kEvaluation, phase::kCheckpoint};

std::string percent(double fraction) {
  char text[16];
  std::snprintf(text, sizeof text, "%.0f%%", fraction * 100.0);
  return text;
}

double fraction_of(const BottleneckReport& r, const char* name) {
  for (const PhaseTime& p : r.phases)
    if (p.phase == name) return p.fraction;
  return 0;
}

std::string diagnose(const BottleneckReport& r, const ReportContext& context) {
  const double data = fraction_of(r, phase::kData), copy = fraction_of(r, phase::kCopy);
  const double optimizer = fraction_of(r, phase::kOptimizer), evaluation = fraction_of(r, phase::kEvaluation);
  const double checkpoint = fraction_of(r, phase::kCheckpoint);
  const double compute =
      fraction_of(r, phase::kForward) + fraction_of(r, phase::kBackward) + fraction_of(r, phase::kGraphed);
  const std::string device = context.on_gpu ? "the GPU" : "the step";
  if (data >= 0.20)
    return device + " waited for data " + percent(data) + " of the time: raise --workers (now " +
           std::to_string(context.workers) + ")" + (context.pin_memory ? "" : " or turn on --pin-memory") +
           ", or cache decoded volumes";
  if (copy >= 0.15)
    return "host-to-device copies took " + percent(copy) + " of the time: " +
           (context.pin_memory
                ? std::string("make the batch smaller in memory (a lower-precision input dtype)")
                : std::string("turn on --pin-memory, so copies are asynchronous and overlap compute"));
  if (context.on_gpu && r.host_syncs_per_batch >= 1.0) {
    char count[32];
    std::snprintf(count, sizeof count, "%.1f", r.host_syncs_per_batch);
    return std::string(count) +
           " host syncs per batch: an .item(), .cpu() or to_vector() inside the loop stalls "
           "the GPU each time; keep running sums on the device and read them once per log interval";
  }
  if (optimizer >= 0.25)
    return "the optimizer took " + percent(optimizer) +
           " of the time: Kiln's optimizers already update every parameter in one fused "
           "multi-tensor call, so step less often (--accumulate) or with a larger batch (--batch-size)";
  if (evaluation >= 0.30)
    return "evaluation took " + percent(evaluation) +
           " of the time: evaluate less often (--eval-every) or with a "
           "larger batch";
  if (checkpoint >= 0.10)
    return "checkpoints took " + percent(checkpoint) + " of the time: save less often (--checkpoint-every)";
  std::string advice;
  if (context.on_gpu) {
    advice = std::string("; try ") + (context.cuda_graphs ? "" : "--cuda-graphs, ") +
             "--amp O1 or O2, --cudnn-benchmark and a larger --batch-size";
  } else {
    advice = context.bfloat16 ? "; a GPU would speed it up" : "; a GPU, or --amp with bfloat16, would speed it up";
  }
  return "compute-bound: " + percent(compute) + " in forward and backward" + advice;
}

}  // namespace

void add_phase_totals(std::vector<TimeRangeRecord>& totals, const std::vector<TimeRangeRecord>& ranges) {
  for (const TimeRangeRecord& range : ranges) {
    if (range.depth != 0) continue;  // as the report: nested time is its enclosing phase's
    auto total = std::find_if(totals.begin(), totals.end(),
                              [&](const TimeRangeRecord& t) { return t.name == range.name; });
    if (total == totals.end()) total = totals.insert(totals.end(), TimeRangeRecord{.name = range.name});
    total->end_s += range.seconds();
    if (range.device_ms) total->device_ms = total->device_ms.value_or(0) + *range.device_ms;
  }
}

BottleneckReport bottleneck_report(const std::vector<TimeRangeRecord>& records, double wall_seconds,
                                   int64_t batches, const HostSyncs& syncs, const ReportContext& context) {
  KILN_CHECK(wall_seconds >= 0 && batches >= 0, "bottleneck_report: wall time ", wall_seconds, " s over ",
             batches, " batches");
  BottleneckReport r;
  r.wall_seconds = wall_seconds;
  r.batches = batches;
  r.host_syncs = syncs;
  r.host_syncs_per_batch = batches > 0 ? static_cast<double>(syncs.total()) / static_cast<double>(batches) : 0;
  double accounted = 0;
  for (const char* name : kPhases) {
    PhaseTime p{.phase = name};
    bool timed = false;
    for (const TimeRangeRecord& record : records) {
      if (record.name != name || record.depth != 0) continue;  // a nested range is its enclosing phase's
      timed = true;
      p.seconds += record.seconds();
      if (record.device_ms) p.device_seconds = p.device_seconds.value_or(0) + *record.device_ms / 1e3;
    }
    if (std::string_view(name) == phase::kGraphed && !timed) continue;  // only a --cuda-graphs run has it
    accounted += p.seconds;
    r.phases.push_back(p);
  }
  r.phases.push_back({.phase = "other", .seconds = std::max(0.0, wall_seconds - accounted)});
  for (PhaseTime& p : r.phases) p.fraction = wall_seconds > 0 ? p.seconds / wall_seconds : 0;
  r.diagnosis = diagnose(r, context);
  return r;
}

std::string format_bottleneck_report(const BottleneckReport& r) {
  std::ostringstream out;
  char line[128];
  std::snprintf(line, sizeof line, "where the time went (%.1f s, %lld batches):\n", r.wall_seconds,
                static_cast<long long>(r.batches));
  out << line;
  for (const PhaseTime& p : r.phases) {
    std::snprintf(line, sizeof line, "  %-11s %9.2f s %5s", p.phase.c_str(), p.seconds,
                  percent(p.fraction).c_str());
    out << line;
    if (p.device_seconds) {
      std::snprintf(line, sizeof line, "   (device %.2f s)", *p.device_seconds);
      out << line;
    }
    out << "\n";
  }
  std::snprintf(line, sizeof line,
                "  host syncs  %9.1f per batch (item %lld, copies %lld, synchronize %lld, index %lld)\n",
                r.host_syncs_per_batch, static_cast<long long>(r.host_syncs.item),
                static_cast<long long>(r.host_syncs.copy_to_host),
                static_cast<long long>(r.host_syncs.synchronize),
                static_cast<long long>(r.host_syncs.index_check));
  out << line << "  -> " << r.diagnosis << "\n";
  return out.str();
}

}  // namespace kiln::train
