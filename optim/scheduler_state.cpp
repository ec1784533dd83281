// Scheduler state dict fields: non-finite numbers as strings, and field access that
// turns every missing field or wrong type into an error naming the scheduler.
#include "optim/scheduler_state.h"

#include <cmath>
#include <limits>

#include "core/error.h"

namespace kiln::optim::scheduler_state {

namespace {

const json::Value& field(const json::Value& state, const std::string& who, const std::string& key) {
  KILN_CHECK(state.is(json::Type::Object), who, ": load_state_dict: expected a JSON object, got ",
             json::with_article(state.type()));
  const json::Value* value = state.find(key);
  KILN_CHECK(value != nullptr, who, ": load_state_dict: the state has no field \"", key, "\"");
  return *value;
}

[[noreturn]] void wrong_type(const std::string& who, const std::string& key, const char* expected,
                             const json::Value& value) {
  throw Error(detail::str_cat(who, ": load_state_dict: field \"", key, "\" should be ", expected, ", got ",
                              json::with_article(value.type())));
}

double to_double(const json::Value& value, const std::string& who, const std::string& key) {
  if (value.is(json::Type::Number) || value.is(json::Type::Integer)) return value.as_number();
  if (value.is(json::Type::String)) {
    const std::string& text = value.as_string();
    if (text == "inf") return std::numeric_limits<double>::infinity();
    if (text == "-inf") return -std::numeric_limits<double>::infinity();
    if (text == "nan") return std::numeric_limits<double>::quiet_NaN();
  }
  wrong_type(who, key, "a number (or \"inf\", \"-inf\", \"nan\")", value);
}

}  // namespace

json::Value number(double value) {
  if (std::isnan(value)) return json::Value::string("nan");
  if (std::isinf(value)) return json::Value::string(value > 0 ? "inf" : "-inf");
  return json::Value::number(value);
}

json::Value numbers(const std::vector<double>& values) {
  json::Value array = json::Value::array();
  for (double v : values) array.push_back(number(v));
  return array;
}

json::Value integers(const std::vector<int64_t>& values) {
  json::Value array = json::Value::array();
  for (int64_t v : values) array.push_back(json::Value::integer(v));
  return array;
}

json::Value make(const std::string& who) {
  json::Value state = json::Value::object();
  state.add("scheduler", json::Value::string(who));
  return state;
}

void check_scheduler(const json::Value& state, const std::string& who) {
  const std::string saved = get_string(state, who, "scheduler");
  KILN_CHECK(saved == who, who, ": load_state_dict: the state belongs to a ", saved, ", not a ", who);
}

double get_number(const json::Value& state, const std::string& who, const std::string& key) {
  return to_double(field(state, who, key), who, key);
}

int64_t get_integer(const json::Value& state, const std::string& who, const std::string& key) {
  const json::Value& value = field(state, who, key);
  if (!value.is(json::Type::Integer)) wrong_type(who, key, "an integer", value);
  return value.as_integer();
}

bool get_bool(const json::Value& state, const std::string& who, const std::string& key) {
  const json::Value& value = field(state, who, key);
  if (!value.is(json::Type::Bool)) wrong_type(who, key, "a boolean", value);
  return value.as_bool();
}

std::string get_string(const json::Value& state, const std::string& who, const std::string& key) {
  const json::Value& value = field(state, who, key);
  if (!value.is(json::Type::String)) wrong_type(who, key, "a string", value);
  return value.as_string();
}

std::vector<double> get_numbers(const json::Value& state, const std::string& who, const std::string& key,
                                size_t expected) {
  const json::Value& value = field(state, who, key);
  if (!value.is(json::Type::Array)) wrong_type(who, key, "an array of numbers", value);
  const std::vector<json::Value>& items = value.as_array();
  KILN_CHECK(items.size() == expected, who, ": load_state_dict: field \"", key, "\" has ", items.size(),
             " entries but the optimizer has ", expected, " parameter group(s)");
  std::vector<double> out;
  out.reserve(items.size());
  for (const json::Value& item : items) out.push_back(to_double(item, who, key));
  return out;
}

std::vector<int64_t> get_integers(const json::Value& state, const std::string& who, const std::string& key) {
  const json::Value& value = field(state, who, key);
  if (!value.is(json::Type::Array)) wrong_type(who, key, "an array of integers", value);
  std::vector<int64_t> out;
  for (const json::Value& item : value.as_array()) {
    if (!item.is(json::Type::Integer)) wrong_type(who, key, "an array of integers", value);
    out.push_back(item.as_integer());
  }
  return out;
}

}  // namespace kiln::optim::scheduler_state
