// Reading and writing learning-rate scheduler state dicts (Note [Scheduler state dicts]
// in optim/lr_scheduler.h): JSON numbers that may be non-finite, and checked field
// access whose errors name the scheduler and the field.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/json.h"

namespace kiln::optim::scheduler_state {

// A double as JSON: a number when finite, else the string "inf", "-inf" or "nan".
json::Value number(double value);
json::Value numbers(const std::vector<double>& values);
json::Value integers(const std::vector<int64_t>& values);

// A state dict for `who`: an object with "scheduler": who (checked on reading).
json::Value make(const std::string& who);
void check_scheduler(const json::Value& state, const std::string& who);

// Fields of a state dict; a missing field or a wrong type is a kiln::Error
// ("<who>: load_state_dict: field \"gamma\" ...").
double get_number(const json::Value& state, const std::string& who, const std::string& key);
int64_t get_integer(const json::Value& state, const std::string& who, const std::string& key);
bool get_bool(const json::Value& state, const std::string& who, const std::string& key);
std::string get_string(const json::Value& state, const std::string& who, const std::string& key);
// An array of numbers with exactly `expected` entries (one per parameter group).
std::vector<double> get_numbers(const json::Value& state, const std::string& who, const std::string& key,
                                size_t expected);
std::vector<int64_t> get_integers(const json::Value& state, const std::string& who, const std::string& key);

}  // namespace kiln::optim::scheduler_state
