// CsvLog: a run's numbers as a CSV table (RFC 4180), one row per epoch, or per step, with
// the columns fixed at the start. The file is rewritten whole and atomically at most every
// `flush_interval`, by flush() and when the log goes (a PeriodicFile in Replace mode,
// train/periodic_file.h), so it never holds half a row, whatever stops the run.
//
// Numbers are written with 9 significant digits (float32 round-trips), NaN as "nan", a
// column a row leaves out as an empty field; a column name with a comma, a quote or a
// line break is quoted.
//
//   CsvLog log("runs/r1/metrics.csv", {"epoch", "loss/train", "auc/val"});
//   log.add_row({{"epoch", 1}, {"loss/train", 0.61}, {"auc/val", 0.83}});
#pragma once

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "data/csv.h"
#include "train/periodic_file.h"

namespace kiln::train {

class CsvLog {
 public:
  CsvLog(std::string path, std::vector<std::string> columns,
         std::chrono::milliseconds flush_interval = std::chrono::seconds(5));

  // A column the log does not have is an error naming it.
  void add_row(const std::vector<std::pair<std::string, double>>& values);
  void flush();
  // Replaces the table by `text`, a table this log wrote before (its header must be this
  // log's): a resumed run continues the table its checkpoint saved.
  void restore(const std::string& text);
  const std::string& path() const { return file_.path(); }
  // The table as the file will hold it.
  const std::string& text() const { return file_.text(); }

 private:
  std::vector<std::string> columns_;
  PeriodicFile file_;
};

// A CSV field: quoted when it holds a comma, a quote or a line break (data/csv.h).
using data::csv_field;

}  // namespace kiln::train
