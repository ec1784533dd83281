// The bottleneck report (train/bottleneck.h) on synthetic phase records: each phase's sum
// and share, "other" as the rest of the wall time, device seconds when the ranges had
// events, and the diagnosis each rule gives (data, copies, host syncs on a GPU, optimizer,
// evaluation, checkpoints, compute) with the flag it names; a --cuda-graphs run's "graphed"
// phase, listed only when timed; the formatted table; bad input.
#include <gtest/gtest.h>

#include "tests/test_util.h"
#include "train/bottleneck.h"

namespace kiln {
namespace {

using namespace train;

// Records of `steps` steps, each phase taking the seconds given.
std::vector<TimeRangeRecord> steps_of(int steps, const std::vector<std::pair<const char*, double>>& phases) {
  std::vector<TimeRangeRecord> records;
  double at = 0;
  for (int s = 0; s < steps; ++s)
    for (const auto& [name, seconds] : phases) {
      records.push_back({.name = name, .start_s = at, .end_s = at + seconds});
      at += seconds;
    }
  return records;
}

TEST(BottleneckReport, SharesOtherAndDeviceTime) {
  auto records = steps_of(10, {{phase::kData, 0.01}, {phase::kForward, 0.03}, {phase::kBackward, 0.05}});
  records[1].device_ms = 25.0;  // one forward with events
  const BottleneckReport r = bottleneck_report(records, 1.0, 10, HostSyncs{}, {});
  ASSERT_EQ(r.phases.size(), 8u);
  EXPECT_EQ(r.phases[0].phase, "data");
  EXPECT_NEAR(r.phases[0].seconds, 0.1, 1e-9);
  EXPECT_NEAR(r.phases[2].fraction, 0.3, 1e-9);
  EXPECT_NEAR(*r.phases[2].device_seconds, 0.025, 1e-12);
  EXPECT_FALSE(r.phases[3].device_seconds.has_value());
  EXPECT_EQ(r.phases[7].phase, "other");
  EXPECT_NEAR(r.phases[7].seconds, 0.1, 1e-9);
  EXPECT_NE(r.diagnosis.find("compute-bound: 80% in forward and backward"), std::string::npos) << r.diagnosis;
  EXPECT_NE(r.diagnosis.find("a GPU, or --amp with bfloat16, would speed it up"), std::string::npos) << r.diagnosis;
  // A run already in bfloat16 is not told to use it.
  const BottleneckReport bf16 = bottleneck_report(records, 1.0, 10, HostSyncs{}, {.bfloat16 = true});
  EXPECT_EQ(bf16.diagnosis.find("bfloat16"), std::string::npos) << bf16.diagnosis;
  EXPECT_NE(bf16.diagnosis.find("a GPU would speed it up"), std::string::npos) << bf16.diagnosis;
}

// The data waits inside an evaluation are the evaluation's time, not the data phase's.
TEST(BottleneckReport, NestedRangesBelongToTheirEnclosingPhase) {
  const std::vector<TimeRangeRecord> records = {
      {.name = phase::kData, .start_s = 0, .end_s = 0.1},
      {.name = phase::kEvaluation, .start_s = 0.1, .end_s = 0.6},
      {.name = phase::kData, .depth = 1, .start_s = 0.2, .end_s = 0.4},
  };
  const BottleneckReport r = bottleneck_report(records, 1.0, 1, HostSyncs{}, {});
  EXPECT_NEAR(r.phases[0].seconds, 0.1, 1e-12);
  EXPECT_NEAR(r.phases[5].seconds, 0.5, 1e-12);
  EXPECT_EQ(r.phases[5].phase, "evaluation");
  EXPECT_NEAR(r.phases[7].seconds, 0.4, 1e-12);
}

// Folding epochs of records into per-phase totals changes nothing in the report.
TEST(BottleneckReport, PhaseTotalsGiveTheSameReport) {
  auto epoch1 = steps_of(7, {{phase::kData, 0.01}, {phase::kForward, 0.03}, {phase::kBackward, 0.05}});
  auto epoch2 = steps_of(5, {{phase::kForward, 0.02}, {phase::kOptimizer, 0.01}});
  epoch1[1].device_ms = 25.0;
  epoch2.push_back({.name = phase::kData, .depth = 1, .start_s = 0, .end_s = 9});  // nested: not counted
  std::vector<TimeRangeRecord> all = epoch1, totals;
  all.insert(all.end(), epoch2.begin(), epoch2.end());
  add_phase_totals(totals, epoch1);
  add_phase_totals(totals, epoch2);
  EXPECT_EQ(totals.size(), 4u);
  const BottleneckReport a = bottleneck_report(all, 2.0, 12, HostSyncs{}, {});
  const BottleneckReport b = bottleneck_report(totals, 2.0, 12, HostSyncs{}, {});
  ASSERT_EQ(a.phases.size(), b.phases.size());
  for (size_t i = 0; i < a.phases.size(); ++i) {
    EXPECT_NEAR(a.phases[i].seconds, b.phases[i].seconds, 1e-12) << a.phases[i].phase;
    EXPECT_EQ(a.phases[i].device_seconds.has_value(), b.phases[i].device_seconds.has_value());
  }
  EXPECT_NEAR(*b.phases[2].device_seconds, 0.025, 1e-12);
  EXPECT_EQ(a.diagnosis, b.diagnosis);
}

TEST(BottleneckReport, EachRuleNamesItsFlag) {
  const ReportContext gpu{.on_gpu = true, .workers = 2, .pin_memory = false};
  const auto diagnosis = [&](const std::vector<std::pair<const char*, double>>& phases,
                             HostSyncs syncs = {}) {
    return bottleneck_report(steps_of(1, phases), 1.0, 1, syncs, gpu).diagnosis;
  };
  EXPECT_NE(
      diagnosis({{phase::kData, 0.41}, {phase::kForward, 0.5}})
          .find("the GPU waited for data 41% of the time: raise --workers (now 2) or turn on --pin-memory"),
      std::string::npos);
  EXPECT_NE(diagnosis({{phase::kCopy, 0.2}, {phase::kForward, 0.7}}).find("turn on --pin-memory"),
            std::string::npos);
  EXPECT_NE(
      diagnosis({{phase::kForward, 0.9}}, HostSyncs{.item = 3}).find("3.0 host syncs per batch: an .item()"),
      std::string::npos);
  EXPECT_NE(diagnosis({{phase::kOptimizer, 0.3}, {phase::kForward, 0.6}}).find("--accumulate"),
            std::string::npos);
  EXPECT_NE(diagnosis({{phase::kEvaluation, 0.5}, {phase::kForward, 0.4}}).find("--eval-every"),
            std::string::npos);
  EXPECT_NE(diagnosis({{phase::kCheckpoint, 0.15}, {phase::kForward, 0.8}}).find("--checkpoint-every"),
            std::string::npos);
  EXPECT_NE(diagnosis({{phase::kForward, 0.4}, {phase::kBackward, 0.5}}).find("--amp O1 or O2"),
            std::string::npos);
  // On the CPU a sync costs nothing: no advice about it.
  EXPECT_EQ(bottleneck_report(steps_of(1, {{phase::kForward, 0.9}}), 1.0, 1, HostSyncs{.item = 3}, {})
                .diagnosis.find("host syncs"),
            std::string::npos);
}

// A graphed step is the whole step: compute, listed after the optimizer only in a run
// that has it, and the advice no longer suggests graphs to it.
TEST(BottleneckReport, AGraphedStepIsComputeAndListedOnlyWhenTimed) {
  const auto records = steps_of(10, {{phase::kData, 0.01}, {phase::kGraphed, 0.08}});
  const BottleneckReport r =
      bottleneck_report(records, 1.0, 10, HostSyncs{}, {.on_gpu = true, .cuda_graphs = true});
  ASSERT_EQ(r.phases.size(), 9u);
  EXPECT_EQ(r.phases[5].phase, "graphed");
  EXPECT_NEAR(r.phases[5].seconds, 0.8, 1e-9);
  EXPECT_EQ(r.phases[6].phase, "evaluation");
  EXPECT_NE(r.diagnosis.find("compute-bound: 80%"), std::string::npos) << r.diagnosis;
  EXPECT_EQ(r.diagnosis.find("--cuda-graphs"), std::string::npos) << r.diagnosis;
  EXPECT_NE(r.diagnosis.find("; try --amp O1 or O2"), std::string::npos) << r.diagnosis;
  const BottleneckReport eager = bottleneck_report(steps_of(1, {{phase::kForward, 0.9}}), 1.0, 1, HostSyncs{},
                                                   {.on_gpu = true});
  EXPECT_EQ(eager.phases.size(), 8u);
  EXPECT_NE(eager.diagnosis.find("; try --cuda-graphs, --amp O1 or O2"), std::string::npos) << eager.diagnosis;
}

TEST(BottleneckReport, FormattedTableAndBadInput) {
  const BottleneckReport r = bottleneck_report(steps_of(4, {{phase::kData, 0.5}, {phase::kForward, 0.25}}),
                                               4.0, 4, HostSyncs{.item = 2}, {});
  const std::string text = format_bottleneck_report(r);
  EXPECT_NE(text.find("where the time went (4.0 s, 4 batches):"), std::string::npos) << text;
  EXPECT_NE(text.find("  data             2.00 s   50%"), std::string::npos) << text;
  EXPECT_NE(text.find("  other            1.00 s   25%"), std::string::npos) << text;
  EXPECT_NE(text.find("0.5 per batch (item 2"), std::string::npos) << text;
  EXPECT_NE(text.find("-> the step waited for data 50%"), std::string::npos) << text;
  EXPECT_KILN_ERROR(bottleneck_report({}, -1.0, 1, {}, {}), "bottleneck_report: wall time -1");
}

}  // namespace
}  // namespace kiln
