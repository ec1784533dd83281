// The run configuration's choices as enums, each with one name table: what a flag, a JSON
// key and config.json spell ("adamw"), what --help lists, and what the code switches on.
// Imitates core/op_table.h: one row per enumerator, in the enum's order, checked at compile
// time; everything else derives from the rows.
//
//   const train::Optimizer optimizer = train::parse_choice<train::Optimizer>("adamw");
//   switch (optimizer) { case train::Optimizer::AdamW: ... }
//   train::choice_name(optimizer);       // "adamw"
//   train::choice_list<train::Scheduler>();  // "none, step, multistep, ..."
//
// Adding a choice: an enumerator, its row, and the switches the compiler then points at
// (-Wswitch). TrainConfig (train/config.h) keeps the text, as the user wrote it; validate()
// parses every choice once into Choices, which the run uses from then on.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/device.h"
#include "core/text_list.h"
#include "optim/cyclic_lr.h"
#include "train/amp.h"

namespace kiln::train {

template <typename E>
struct ChoiceRow {
  E value;           // row i describes enumerator i
  const char* name;  // as typed: "adamw"
};

enum class Optimizer : uint8_t { Sgd, Adam, AdamW, RMSprop };
enum class Scheduler : uint8_t { None, Step, MultiStep, Exponential, Cosine, Linear, Cyclic, OneCycle, Plateau };
// "auto": the task's own loss (train/objective.h).
enum class LossChoice : uint8_t { Auto, CrossEntropy, Bce, MultilabelBce, Mse, L1, SmoothL1 };
// "auto": auc for classification, rmse for regression (train/metrics.h, train/regression.h).
enum class Monitor : uint8_t { Auto, Auc, Acc, Loss, Mae, Rmse, R2 };
// "auto": bfloat16 on the CPU, float16 on a GPU, as torch.autocast picks per device (the
// CPU has no fast float16 arithmetic: there float16 ran 1.45x slower than float32, bfloat16
// as fast).
enum class LowPrecision : uint8_t { Auto, F16, BF16 };
enum class DistBackend : uint8_t { Auto, Ring, Nccl };
// What the labels are. "auto": MedMNIST's own task, or for one's own scans a class per
// sample (binary or multi-class) from one label column, multi-label from several.
enum class TaskChoice : uint8_t { Auto, Classification, MultiLabel, Regression };
// One's own scans' orientation: as the files store it, or reoriented to RAS+ (train/preprocessing.h).
enum class Orientation : uint8_t { Stored, Ras };

inline constexpr ChoiceRow<Optimizer> kOptimizerRows[] = {
    {Optimizer::Sgd, "sgd"}, {Optimizer::Adam, "adam"}, {Optimizer::AdamW, "adamw"}, {Optimizer::RMSprop, "rmsprop"}};
inline constexpr ChoiceRow<Scheduler> kSchedulerRows[] = {
    {Scheduler::None, "none"},         {Scheduler::Step, "step"},     {Scheduler::MultiStep, "multistep"},
    {Scheduler::Exponential, "exponential"}, {Scheduler::Cosine, "cosine"}, {Scheduler::Linear, "linear"},
    {Scheduler::Cyclic, "cyclic"},     {Scheduler::OneCycle, "onecycle"}, {Scheduler::Plateau, "plateau"}};
inline constexpr ChoiceRow<LossChoice> kLossRows[] = {
    {LossChoice::Auto, "auto"}, {LossChoice::CrossEntropy, "cross-entropy"}, {LossChoice::Bce, "bce"},
    {LossChoice::MultilabelBce, "multilabel-bce"}, {LossChoice::Mse, "mse"}, {LossChoice::L1, "l1"},
    {LossChoice::SmoothL1, "smooth-l1"}};
inline constexpr ChoiceRow<Monitor> kMonitorRows[] = {
    {Monitor::Auto, "auto"}, {Monitor::Auc, "auc"}, {Monitor::Acc, "acc"}, {Monitor::Loss, "loss"},
    {Monitor::Mae, "mae"},   {Monitor::Rmse, "rmse"}, {Monitor::R2, "r2"}};
inline constexpr ChoiceRow<LowPrecision> kLowPrecisionRows[] = {
    {LowPrecision::Auto, "auto"}, {LowPrecision::F16, "f16"}, {LowPrecision::BF16, "bf16"}};
inline constexpr ChoiceRow<DistBackend> kDistBackendRows[] = {
    {DistBackend::Auto, "auto"}, {DistBackend::Ring, "ring"}, {DistBackend::Nccl, "nccl"}};
inline constexpr ChoiceRow<TaskChoice> kTaskRows[] = {{TaskChoice::Auto, "auto"},
                                                      {TaskChoice::Classification, "classification"},
                                                      {TaskChoice::MultiLabel, "multi-label"},
                                                      {TaskChoice::Regression, "regression"}};
inline constexpr ChoiceRow<Orientation> kOrientationRows[] = {{Orientation::Stored, "stored"},
                                                             {Orientation::Ras, "RAS"}};
inline constexpr ChoiceRow<optim::CyclicMode> kCyclicModeRows[] = {
    {optim::CyclicMode::Triangular, "triangular"},
    {optim::CyclicMode::Triangular2, "triangular2"},
    {optim::CyclicMode::ExpRange, "exp_range"}};
inline constexpr ChoiceRow<OptLevel> kOptLevelRows[] = {
    {OptLevel::O0, "O0"}, {OptLevel::O1, "O1"}, {OptLevel::O2, "O2"}, {OptLevel::O3, "O3"}};

// Which table belongs to an enum, and the setting it is for (in error messages): one
// overload of choice_table per enum.
template <typename E>
struct ChoiceTable {
  const char* setting;
  std::span<const ChoiceRow<E>> rows;
};
constexpr ChoiceTable<Optimizer> choice_table(Optimizer) { return {"optimizer", kOptimizerRows}; }
constexpr ChoiceTable<Scheduler> choice_table(Scheduler) { return {"scheduler", kSchedulerRows}; }
constexpr ChoiceTable<LossChoice> choice_table(LossChoice) { return {"loss", kLossRows}; }
constexpr ChoiceTable<Monitor> choice_table(Monitor) { return {"monitor", kMonitorRows}; }
constexpr ChoiceTable<LowPrecision> choice_table(LowPrecision) { return {"amp-dtype", kLowPrecisionRows}; }
constexpr ChoiceTable<DistBackend> choice_table(DistBackend) { return {"dist-backend", kDistBackendRows}; }
constexpr ChoiceTable<TaskChoice> choice_table(TaskChoice) { return {"task", kTaskRows}; }
constexpr ChoiceTable<Orientation> choice_table(Orientation) { return {"orientation", kOrientationRows}; }
constexpr ChoiceTable<optim::CyclicMode> choice_table(optim::CyclicMode) { return {"cyclic-mode", kCyclicModeRows}; }
constexpr ChoiceTable<OptLevel> choice_table(OptLevel) { return {"amp", kOptLevelRows}; }

namespace detail {
constexpr bool same_text(const char* a, const char* b) {
  while (*a != '\0' && *a == *b) ++a, ++b;
  return *a == *b;
}
}  // namespace detail

// Row i describes enumerator i, and names are non-empty and distinct.
template <typename E, size_t N>
constexpr bool valid_choice_rows(const ChoiceRow<E> (&rows)[N]) {
  for (size_t i = 0; i < N; ++i) {
    if (static_cast<size_t>(rows[i].value) != i || rows[i].name[0] == '\0') return false;
    for (size_t j = 0; j < i; ++j) {
      if (detail::same_text(rows[i].name, rows[j].name)) return false;
    }
  }
  return true;
}
static_assert(valid_choice_rows(kOptimizerRows));
static_assert(valid_choice_rows(kSchedulerRows));
static_assert(valid_choice_rows(kLossRows));
static_assert(valid_choice_rows(kMonitorRows));
static_assert(valid_choice_rows(kLowPrecisionRows));
static_assert(valid_choice_rows(kDistBackendRows));
static_assert(valid_choice_rows(kTaskRows));
static_assert(valid_choice_rows(kOrientationRows));
static_assert(valid_choice_rows(kCyclicModeRows));
static_assert(valid_choice_rows(kOptLevelRows));

template <typename E>
constexpr const char* choice_name(E value) {
  return choice_table(E{}).rows[static_cast<size_t>(value)].name;
}

// The low precision a run on `device` uses ("auto" resolved for the device).
inline DType to_dtype(LowPrecision low, Device device) {
  if (low == LowPrecision::Auto) return device.is_cuda() ? DType::Float16 : DType::BFloat16;
  return low == LowPrecision::BF16 ? DType::BFloat16 : DType::Float16;
}

// The names, in the table's order: "sgd, adam, adamw, rmsprop".
template <typename E>
std::string choice_list() {
  std::vector<std::string> names;
  for (const ChoiceRow<E>& row : choice_table(E{}).rows) names.emplace_back(row.name);
  return joined(names);
}

// The enumerator named `text`; anything else is an error naming the setting and the choices:
// "config: optimizer is one of sgd, adam, adamw, rmsprop, got 'lion'".
[[noreturn]] void throw_unknown_choice(const char* setting, const std::string& choices, std::string_view text);

template <typename E>
E parse_choice(std::string_view text) {
  for (const ChoiceRow<E>& row : choice_table(E{}).rows) {
    if (text == row.name) return row.value;
  }
  throw_unknown_choice(choice_table(E{}).setting, choice_list<E>(), text);
}

}  // namespace kiln::train
