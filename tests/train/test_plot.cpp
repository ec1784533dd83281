// A run's curves as SVG (train/plot.h) and `kiln plot`: one polyline per series through
// its finite values, a gap where a value is missing, the log scale for a learning rate
// spanning decades, escaped titles, steps.csv's rate at every logged step; a table
// without epochs is an error.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <sstream>

#include "core/text_file.h"
#include "tests/test_util.h"
#include "tools/cli.h"
#include "train/plot.h"

namespace kiln {
namespace {

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

const char* kTable =
    "epoch,lr,train/loss,train/acc,val/loss,val/auc,val/acc\n"
    "1,0.001,0.9,0.5,1.0,0.6,0.5\n"
    "2,0.001,0.7,0.6,,,\n"
    "3,0.0001,0.5,0.7,0.8,0.8,0.7\n"
    "4,0.00001,0.4,0.8,0.7,nan,0.75\n";

TEST(PlotRun, EachSeriesIsAPolylineBrokenWhereValuesAreMissing) {
  const std::string svg = train::plot_run_svg(data::parse_csv(kTable, "epochs.csv"), "runs/<a&b>");
  EXPECT_TRUE(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
  EXPECT_TRUE(svg.ends_with("</svg>\n"));
  EXPECT_NE(svg.find("<title>runs/&lt;a&amp;b&gt;</title>"), std::string::npos);
  // train/loss 1 line, val/loss 2 pieces (epoch 2 missing), val/auc 2 pieces of which the
  // second is one point, val/acc 2, train/acc 1, lr 1.
  EXPECT_EQ(count(svg, "<polyline"), 9u);
  EXPECT_NE(svg.find("learning rate (log)"), std::string::npos);  // 1e-5 .. 1e-3
  for (const char* name : {"train/loss", "val/loss", "val/auc", "val/acc", "train/acc", "lr"}) {
    EXPECT_NE(svg.find(std::string(">") + name + "</text>"), std::string::npos) << name;
  }
  // The train loss's points: 4, from the left edge to the right edge of the first panel.
  const std::regex first_line("points=\"([0-9., ]+)\"");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(svg, m, first_line));
  EXPECT_EQ(count(m[1].str(), ","), 4u);
  EXPECT_TRUE(m[1].str().starts_with("58.0,"));
}

// A cyclic rate stepped per batch is invisible at one point per epoch; with steps.csv the
// rate is drawn at every logged step, placed within its epoch, and the running loss joins.
const char* kSteps =
    "step,epoch,batch,lr,train/loss,train/acc\n"
    "1,1,1,0.001,1.0,0.5\n"
    "2,1,2,0.003,0.9,0.5\n"
    "3,1,3,0.001,0.8,0.6\n"
    "4,1,4,0.003,0.8,0.6\n"
    "5,2,1,0.001,0.7,0.7\n"
    "6,2,2,0.003,0.6,0.7\n";

TEST(PlotRun, StepsCsvDrawsTheRateAtEveryLoggedStep) {
  const data::CsvTable epochs = data::parse_csv("epoch,lr,train/loss,val/loss\n1,0.003,0.8,0.9\n2,0.003,0.6,0.7\n", "e.csv");
  const std::string without = train::plot_run_svg(epochs, "r");
  const data::CsvTable steps = data::parse_csv(kSteps, "steps.csv");
  const std::string with = train::plot_run_svg(epochs, "r", &steps);
  EXPECT_NE(with.find(">train/loss (steps)</text>"), std::string::npos);
  // The rate's line: 2 points without steps.csv, 6 with it (the cycle shows).
  const auto rate_points = [](const std::string& svg) {
    const size_t panel = svg.find("learning rate");
    const size_t line = svg.find("points=\"", panel);
    return count(svg.substr(line, svg.find('"', line + 8) - line), ",");
  };
  EXPECT_EQ(rate_points(without), 2u);
  EXPECT_EQ(rate_points(with), 6u);
  // kiln plot reads steps.csv beside epochs.csv.
  testing::TempFolder folder;
  std::ofstream(folder.file("epochs.csv")) << "epoch,lr,train/loss,val/loss\n1,0.003,0.8,0.9\n2,0.003,0.6,0.7\n";
  std::ofstream(folder.file("steps.csv")) << kSteps;
  std::ostringstream out, err;
  ASSERT_EQ(tools::run_kiln({"plot", folder.path().string()}, out, err), 0) << err.str();
  EXPECT_NE(out.str().find("2 epochs and 6 logged steps"), std::string::npos) << out.str();
  EXPECT_EQ(rate_points(read_text_file(folder.file("curves.svg"))), 6u);
}

TEST(PlotRun, ATableWithoutEpochsIsAnError) {
  EXPECT_KILN_ERROR(train::plot_run_svg(data::parse_csv("lr\n0.1\n", "t.csv"), "runs/x"), "plot runs/x",
                    "no \"epoch\" column");
  EXPECT_KILN_ERROR(train::plot_run_svg(data::parse_csv("epoch,lr\n", "t.csv"), "runs/x"), "no rows");
}

TEST(PlotRun, KilnPlotWritesTheFile) {
  testing::TempFolder folder;
  std::ofstream(folder.file("epochs.csv")) << kTable;
  std::ostringstream out, err;
  ASSERT_EQ(tools::run_kiln({"plot", folder.path().string()}, out, err), 0) << err.str();
  EXPECT_EQ(count(read_text_file(folder.file("curves.svg")), "<polyline"), 9u);
  EXPECT_NE(out.str().find("4 epochs"), std::string::npos);
  std::ostringstream out2, err2;
  EXPECT_EQ(tools::run_kiln({"plot", folder.file("nothing")}, out2, err2), 1);
  EXPECT_NE(err2.str().find("kiln: "), std::string::npos);
  EXPECT_EQ(tools::run_kiln({"plot"}, out2, err2), 2);
}

}  // namespace
}  // namespace kiln
