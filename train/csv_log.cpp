// CsvLog (csv_log.h): the table kept as text in a PeriodicFile, saved whole and atomically.
#include "train/csv_log.h"

#include <cmath>
#include <cstdio>

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


CsvLog::CsvLog(std::string path, std::vector<std::string> columns, std::chrono::milliseconds flush_interval)
    : columns_(std::move(columns)), file_(std::move(path), PeriodicFile::Mode::Replace, flush_interval, "CsvLog") {
  KILN_CHECK(!columns_.empty(), "CsvLog: ", file_.path(), " needs at least one column");
  std::string header;
  for (size_t i = 0; i < columns_.size(); ++i) {
    for (size_t j = 0; j < i; ++j)
      KILN_CHECK(columns_[i] != columns_[j], "CsvLog: the column '", columns_[i], "' is listed twice");
    if (i > 0) header += ',';
    header += csv_field(columns_[i]);
  }
  file_.append(header + "\n");
  flush();
}

void CsvLog::add_row(const std::vector<std::pair<std::string, double>>& values) {
  std::vector<std::string> fields(columns_.size());
  for (const auto& [name, value] : values) {
    size_t c = 0;
    while (c < columns_.size() && columns_[c] != name) ++c;
    KILN_CHECK(c < columns_.size(), "CsvLog: ", file_.path(), " has no column '", name, "'");
    fields[c] = number(value);
  }
  std::string row;
  for (size_t c = 0; c < fields.size(); ++c) {
    if (c > 0) row += ',';
    row += fields[c];
  }
  file_.append(row + "\n");
  file_.save_if_due();
}

void CsvLog::restore(const std::string& text) {
  const std::string& current = file_.text();
  const std::string header = current.substr(0, current.find('\n') + 1);
  KILN_CHECK(text.starts_with(header), "CsvLog: ", file_.path(), ": the saved table's columns are not this log's");
  file_.replace(text);
  flush();
}

void CsvLog::flush() { file_.save(); }

}  // namespace kiln::train
