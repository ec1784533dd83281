// PeriodicFile: a run's log file (a CSV table, a TensorBoard event file) built in memory
// and saved at most once per interval, on save(), and when it goes, so that logging a row
// costs no disk write and a file on disk never holds half a record. The one mechanism
// behind CsvLog and TensorBoardWriter.
//
//   Replace  the file is the whole text, saved by save_atomically (core/atomic_file.h): a
//            reader sees the previous table or the new one. For tables rewritten whole.
//   Append   the records added since the last save are appended in one write. For event
//            files, which TensorBoard reads incrementally, from the offset it has reached:
//            a file replaced by a rename would keep a running TensorBoard on the old one.
//
// The interval is a Throttle (core/throttle.h), so the first save is due at once. A failed
// save is a kiln::Error naming the file and the owner; the destructor saves too but never
// throws (the previous, complete file stays).
//
//   PeriodicFile table("runs/r/epochs.csv", PeriodicFile::Mode::Replace, 5s, "CsvLog");
//   table.append("1,0.61\n");
//   table.save_if_due();
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "core/throttle.h"

namespace kiln::train {

class PeriodicFile {
 public:
  enum class Mode { Replace, Append };

  // Append creates the file (or continues an existing one); Replace writes nothing yet.
  PeriodicFile(std::string path, Mode mode, std::chrono::milliseconds interval, std::string owner);
  ~PeriodicFile();
  PeriodicFile(const PeriodicFile&) = delete;
  PeriodicFile& operator=(const PeriodicFile&) = delete;

  void append(std::string_view text);
  // Replace only: the whole text (a resumed run's table).
  void replace(std::string text);
  // Saves when the interval has passed since the last save.
  void save_if_due();
  // Saves now when anything is unsaved.
  void save();

  const std::string& path() const { return path_; }
  // Replace: the text the file holds once saved. Append: the records not saved yet.
  const std::string& text() const { return text_; }

 private:
  void write_appended();
  std::string path_;
  Mode mode_;
  std::string owner_;
  Throttle throttle_;
  std::string text_;
  bool dirty_ = false;
  int fd_ = -1;  // Append: the file, opened once
};

}  // namespace kiln::train
