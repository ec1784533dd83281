// CsvLog (csv_log.h): the table kept as text, saved whole by save_atomically.
#include "train/csv_log.h"

#include <cmath>
#include <cstdio>

#include "core/atomic_file.h"
#include "core/error.h"

namespace kiln::train {
namespace {

std::string number(double value) {
  if (std::isnan(value)) return "nan";
  char text[32];
  std::snprintf(text, sizeof text, "%.9g", value);
  return text;
}

}  // namespace

std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
  std::string quoted = "\"";
  for (const char c : text) {
    if (c == '"') quoted += '"';
    quoted += c;
  }
  return quoted + "\"";
}

CsvLog::CsvLog(std::string path, std::vector<std::string> columns, std::chrono::milliseconds flush_interval)
    : path_(std::move(path)), columns_(std::move(columns)), flush_interval_(flush_interval) {
  KILN_CHECK(!columns_.empty(), "CsvLog: ", path_, " needs at least one column");
  for (size_t i = 0; i < columns_.size(); ++i) {
    for (size_t j = 0; j < i; ++j)
      KILN_CHECK(columns_[i] != columns_[j], "CsvLog: the column '", columns_[i], "' is listed twice");
    if (i > 0) text_ += ',';
    text_ += csv_field(columns_[i]);
  }
  text_ += "\n";
  dirty_ = true;
  flush();
}

CsvLog::~CsvLog() {
  try {
    flush();
  } catch (const Error&) {
    // A destructor must not throw; the previous, complete file stays.
  }
}

void CsvLog::add_row(const std::vector<std::pair<std::string, double>>& values) {
  std::vector<std::string> fields(columns_.size());
  for (const auto& [name, value] : values) {
    size_t c = 0;
    while (c < columns_.size() && columns_[c] != name) ++c;
    KILN_CHECK(c < columns_.size(), "CsvLog: ", path_, " has no column '", name, "'");
    fields[c] = number(value);
  }
  for (size_t c = 0; c < fields.size(); ++c) {
    if (c > 0) text_ += ',';
    text_ += fields[c];
  }
  text_ += "\n";
  dirty_ = true;
  if (std::chrono::steady_clock::now() - last_flush_ >= flush_interval_) flush();
}

void CsvLog::restore(const std::string& text) {
  const std::string header = text_.substr(0, text_.find('\n') + 1);
  KILN_CHECK(text.starts_with(header), "CsvLog: ", path_, ": the saved table's columns are not this log's");
  text_ = text;
  dirty_ = true;
  flush();
}

void CsvLog::flush() {
  last_flush_ = std::chrono::steady_clock::now();
  if (!dirty_) return;
  save_atomically(text_, path_, "CsvLog");
  dirty_ = false;
}

}  // namespace kiln::train
