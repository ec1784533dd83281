// RunProgress's field list and its JSON both ways (train/run_progress.h).
#include "train/run_progress.h"

#include <cmath>

#include "core/error.h"

namespace kiln::train {

const std::vector<ProgressField>& progress_fields() {
  using P = RunProgress;
  static const std::vector<ProgressField> fields = {
      {"epoch", &P::epoch},
      {"batch", &P::batch},
      {"step", &P::step},
      {"best_metric", &P::best_metric},
      {"best_epoch", &P::best_epoch},
      {"bad_validations", &P::bad_validations},
      {"seen", &P::seen},
      {"label_elements", &P::label_elements},
      {"micro_batches", &P::micro_batches},
      {"stopped_early", &P::stopped_early},
      {"world_size", &P::world_size},
      {"monitor_fallback", &P::monitor_fallback, false},
  };
  return fields;
}

json::Value to_json(const RunProgress& progress) {
  json::Value object = json::Value::object();
  for (const ProgressField& field : progress_fields()) {
    object.add(field.name, std::visit(
                               [&](auto member) -> json::Value {
                                 const auto value = progress.*member;
                                 if constexpr (std::is_same_v<decltype(value), const double>)
                                   return std::isnan(value) ? json::Value() : json::Value::number(value);
                                 else
                                   return json::Value::integer(static_cast<int64_t>(value));
                               },
                               field.member));
  }
  return object;
}

RunProgress progress_from_json(const json::Value& object, const std::string& source) {
  KILN_CHECK(object.is(json::Type::Object), source, ": progress is not an object");
  RunProgress progress;
  for (const ProgressField& field : progress_fields()) {
    const json::Value* value = object.find(field.name);
    if (value == nullptr && !field.required) continue;
    std::visit(
        [&](auto member) {
          auto& target = progress.*member;
          if constexpr (std::is_same_v<std::remove_cvref_t<decltype(target)>, double>) {
            KILN_CHECK(value && (value->is(json::Type::Null) || value->is(json::Type::Number) ||
                                 value->is(json::Type::Integer)),
                       source, ": progress has no number \"", field.name, "\"");
            target = value->is(json::Type::Null) ? std::nan("") : value->as_number();
          } else {
            KILN_CHECK(value && value->is(json::Type::Integer), source, ": progress has no integer \"",
                       field.name, "\"");
            target = static_cast<std::remove_cvref_t<decltype(target)>>(value->as_integer());
          }
        },
        field.member);
  }
  return progress;
}

std::string progress_point(const RunProgress& progress) {
  return (progress.batch > 0 ? "epoch " + std::to_string(progress.epoch + 1) + " after its batch " +
                                   std::to_string(progress.batch)
                             : "after epoch " + std::to_string(progress.epoch)) +
         ", step " + std::to_string(progress.step);
}

}  // namespace kiln::train
