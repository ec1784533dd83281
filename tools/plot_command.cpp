// `kiln plot RUN_DIR [--output FILE.svg]`: a run's loss, metric and learning-rate curves
// (its epochs.csv, and steps.csv when the run wrote one) drawn to an SVG file, RUN_DIR/curves.svg by default (train/plot.h).
#include <filesystem>
#include <optional>

#include "core/atomic_file.h"
#include "data/csv.h"
#include "tools/cli.h"
#include "train/plot.h"

namespace kiln::tools {

int run_plot(const std::vector<std::string>& args, std::ostream& out) {
  if (args.size() == 1 && (args[0] == "--help" || args[0] == "-h")) {
    out << "usage: kiln plot RUN_DIR [--output FILE.svg]\n"
           "  draws RUN_DIR/epochs.csv (written by kiln train): losses, metrics and the learning rate,\n"
           "  and RUN_DIR/steps.csv's rate and running loss at every logged step when it is there;\n"
           "  --output: where (default RUN_DIR/curves.svg)\n";
    return 0;
  }
  if (args.empty()) throw UsageError("plot needs a RUN_DIR");
  const std::filesystem::path run_dir = args[0];
  std::filesystem::path output = run_dir / "curves.svg";
  for (size_t i = 1; i < args.size(); i += 2) {
    if (args[i] != "--output") throw UsageError("unknown option '" + args[i] + "'");
    if (i + 1 == args.size()) throw UsageError("--output needs a file");
    output = args[i + 1];
  }
  const data::CsvTable epochs = data::read_csv((run_dir / "epochs.csv").string());
  std::optional<data::CsvTable> steps;  // --csv-per-step's table: the rate at every logged step
  if (std::filesystem::exists(run_dir / "steps.csv")) steps = data::read_csv((run_dir / "steps.csv").string());
  save_atomically(train::plot_run_svg(epochs, run_dir.string(), steps ? &*steps : nullptr), output.string(),
                  "kiln plot");
  out << output.string() << ": " << epochs.rows.size() << " epochs"
      << (steps ? " and " + std::to_string(steps->rows.size()) + " logged steps" : std::string()) << " of "
      << run_dir.string() << "\n";
  return 0;
}

}  // namespace kiln::tools
