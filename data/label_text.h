// A label written as text (a manifest's cell) as a number: what the CSV datasets and the
// trainer's own-scans route (train/scans.h) read their targets with. Errors name `where`
// (the file and line) and the text.
#pragma once

#include <cstdint>
#include <string>

namespace kiln::data {

// A finite number ("0.5", "-3", "1e-2"); "nan", "inf", "", "1 2" are errors.
double parse_number(const std::string& text, const std::string& where);
// A class index: an integer >= 0.
int64_t parse_class_index(const std::string& text, const std::string& where);

}  // namespace kiln::data
