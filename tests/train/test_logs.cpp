// The run's logs for people and programs: CsvLog (train/csv_log.h) writes the header at
// once, complete rows with empty fields and "nan", quotes awkward names, refuses unknown
// and repeated columns, and saves whole files, over PeriodicFile (train/periodic_file.h),
// which saves at once the first time, then at most once per interval, whole or appended;
// the progress line (train/progress.h) has
// its exact layout, redraws in place on a terminal and prints plain lines elsewhere.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "tests/test_util.h"
#include "train/csv_log.h"
#include "train/periodic_file.h"
#include "train/progress.h"

namespace kiln {
namespace {

using namespace std::chrono_literals;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

TEST(CsvLog, HeaderRowsEmptyFieldsNaNAndQuoting) {
  EXPECT_EQ(train::csv_field("plain"), "plain");
  EXPECT_EQ(train::csv_field("a,b"), "\"a,b\"");
  EXPECT_EQ(train::csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
  testing::TempFolder folder;
  const std::string path = folder.file("metrics.csv");
  {
    train::CsvLog log(path, {"epoch", "loss/train", "auc,val"}, 0ms);
    EXPECT_EQ(read_file(path), "epoch,loss/train,\"auc,val\"\n");  // the header at once
    log.add_row({{"epoch", 1}, {"loss/train", 0.612345678912}, {"auc,val", 0.5}});
    log.add_row({{"epoch", 2}, {"auc,val", std::nan("")}});
    EXPECT_EQ(read_file(path), "epoch,loss/train,\"auc,val\"\n1,0.612345679,0.5\n2,,nan\n");
    EXPECT_KILN_ERROR(log.add_row({{"accuracy", 1}}), "has no column 'accuracy'");
  }
  EXPECT_KILN_ERROR(train::CsvLog(folder.file("x.csv"), {"a", "a"}), "the column 'a' is listed twice");
  EXPECT_KILN_ERROR(train::CsvLog(folder.file("x.csv"), {}), "needs at least one column");
}

TEST(CsvLog, RowsAreSavedByFlushOrWhenTheLogGoes) {
  testing::TempFolder folder;
  const std::string path = folder.file("steps.csv");
  {
    train::CsvLog log(path, {"step", "loss"}, 1h);
    log.add_row({{"step", 1}, {"loss", 2}});
    EXPECT_EQ(read_file(path), "step,loss\n");  // not yet: the interval has not passed
    log.flush();
    EXPECT_EQ(read_file(path), "step,loss\n1,2\n");
    log.add_row({{"step", 2}, {"loss", 1}});
  }
  EXPECT_EQ(read_file(path), "step,loss\n1,2\n2,1\n");
  EXPECT_EQ(folder.entries(), std::vector<std::string>{"steps.csv"});  // no temporary file left
}

TEST(PeriodicFile, ReplaceSavesWholeAtOnceThenPerIntervalAndAtTheEnd) {
  testing::TempFolder folder;
  const std::string path = folder.file("table.csv");
  {
    train::PeriodicFile file(path, train::PeriodicFile::Mode::Replace, 1h, "test");
    EXPECT_EQ(folder.entries(), std::vector<std::string>{});  // nothing written yet
    file.append("a\n");
    file.save_if_due();  // the first save is due at once, whatever the clock reads
    EXPECT_EQ(read_file(path), "a\n");
    file.append("1\n");
    file.save_if_due();  // within the hour: kept in memory
    EXPECT_EQ(read_file(path), "a\n");
    EXPECT_EQ(file.text(), "a\n1\n");
    file.replace("b\n2\n");
    file.save();
    EXPECT_EQ(read_file(path), "b\n2\n");
    file.append("3\n");
  }
  EXPECT_EQ(read_file(path), "b\n2\n3\n");
  EXPECT_EQ(folder.entries(), std::vector<std::string>{"table.csv"});
}

TEST(PeriodicFile, AppendAddsOnlyWhatIsNewAndIsNeverReplaced) {
  testing::TempFolder folder;
  const std::string path = folder.file("events");
  {
    train::PeriodicFile file(path, train::PeriodicFile::Mode::Append, 1h, "test");
    EXPECT_EQ(read_file(path), "");  // created at once
    file.append("one;");
    file.save_if_due();
    EXPECT_EQ(read_file(path), "one;");
    file.append("two;");
    file.save_if_due();
    EXPECT_EQ(read_file(path), "one;");
    EXPECT_EQ(file.text(), "two;");  // what is not saved yet
    file.save();
    EXPECT_EQ(read_file(path), "one;two;");
    EXPECT_EQ(file.text(), "");
    EXPECT_KILN_ERROR(file.replace("x"), "appended to, not replaced");
    file.append("three;");
  }
  EXPECT_EQ(read_file(path), "one;two;three;");
  EXPECT_KILN_ERROR(train::PeriodicFile(folder.file("no/such/folder/events"), train::PeriodicFile::Mode::Append,
                                        1h, "TensorBoardWriter"),
                    "TensorBoardWriter: cannot open");
}

TEST(Progress, TheLineAndHowItIsDrawn) {
  const train::Progress p{.epoch = 3,
                          .epochs = 100,
                          .step = 120,
                          .steps = 400,
                          .samples_per_s = 412.34,
                          .loss = 0.43216,
                          .lr = 1e-3,
                          .eta_s = 41.2};
  EXPECT_EQ(
      train::format_progress(p),
      "epoch 3/100 [======>             ] 120/400  412.3 samples/s  loss 0.4322  lr 1.00e-03  ETA 0:41");
  EXPECT_EQ(train::format_progress({.epoch = 1, .epochs = 2, .step = 7, .eta_s = 3725}),
            "epoch 1/2 step 7  0.0 samples/s  ETA 1:02:05");
  std::ostringstream terminal;
  train::ProgressBar bar(terminal, /*terminal=*/true);
  bar.update({.epoch = 1, .epochs = 1, .step = 1, .steps = 2});
  bar.update({.epoch = 1, .epochs = 1, .step = 2, .steps = 2});  // the last step always draws
  EXPECT_EQ(terminal.str(),
            "\r\033[K" + train::format_progress({.epoch = 1, .epochs = 1, .step = 1, .steps = 2}) +
                "\r\033[K" + train::format_progress({.epoch = 1, .epochs = 1, .step = 2, .steps = 2}) + "\n");
  std::ostringstream log;
  train::ProgressBar plain(log, /*terminal=*/false, 1h);
  for (int64_t s = 1; s <= 5; ++s) plain.update({.epoch = 1, .epochs = 1, .step = s, .steps = 5});
  EXPECT_EQ(log.str(), train::format_progress({.epoch = 1, .epochs = 1, .step = 1, .steps = 5}) + "\n" +
                           train::format_progress({.epoch = 1, .epochs = 1, .step = 5, .steps = 5}) + "\n");
}

}  // namespace
}  // namespace kiln
