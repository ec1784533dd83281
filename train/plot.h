// The curves of a run as an SVG picture, for people without TensorBoard: `kiln plot
// RUN_DIR` draws epochs.csv's losses, metrics and learning rate side by side (and
// steps.csv's, when the run wrote it).
//
//   const std::string svg = train::plot_run_svg(data::read_csv("runs/x/epochs.csv"), "runs/x");
//
// Note [Run plots]: three panels share the epoch axis: loss (train and val), metrics (every
// val/ and train/ column but the losses: val AUC, val ACC, train ACC for classification,
// on [0, 1] when every value is) and the learning rate (on a log scale when it
// spans more than a factor of 10). Each series is a polyline through its finite values;
// a missing or NaN value (an epoch without validation) breaks the line there. With the
// run's steps.csv (--csv-per-step) the learning rate is drawn at every logged step, so a
// schedule stepped per batch (cyclic, one-cycle) shows its shape, and the running loss
// joins the loss panel; a logged step of epoch e at batch b of B sits at e - 1 + b / B. Axis labels
// give each panel's range. The picture is plain SVG 1.1 (no script, no external fonts),
// which browsers and image viewers open.
#pragma once

#include <string>

#include "data/csv.h"

namespace kiln::train {

// An SVG document of the table's curves, and of `steps`' (a run's steps.csv) when given; a
// table without an "epoch" column or rows is an error naming `title`.
std::string plot_run_svg(const data::CsvTable& epochs, const std::string& title,
                         const data::CsvTable* steps = nullptr);

}  // namespace kiln::train
