// plot_run_svg (train/plot.h): Note [Run plots].
#include "train/plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <vector>

#include "core/error.h"
#include "train/run_logs.h"

namespace kiln::train {
namespace {

constexpr double kPanelWidth = 340, kPanelHeight = 260;
constexpr double kLeft = 58, kRight = 12, kTop = 34, kBottom = 40;  // the plot area's margins
const char* const kColours[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd"};

struct Series {
  std::string name;
  std::vector<double> values;  // per row; NaN where missing
  std::vector<double> epochs;  // each value's place on the epoch axis
};

struct Panel {
  std::string title;
  std::vector<Series> series;
  bool unit_range = false;  // metrics: always [0, 1]
  bool log_scale = false;   // decided from the values (the learning rate)
};

double parse_number(const std::string& field) {
  if (field.empty()) return std::numeric_limits<double>::quiet_NaN();
  try {
    size_t used = 0;
    const double value = std::stod(field, &used);
    return used == field.size() ? value : std::numeric_limits<double>::quiet_NaN();
  } catch (const std::exception&) {
    return std::numeric_limits<double>::quiet_NaN();  // "nan" and the like
  }
}

// The column's values at `epochs` (one per row), or an empty series when the table has
// no such column.
Series column_of(const data::CsvTable& table, const std::string& name, const std::vector<double>& epochs) {
  Series series{.name = name, .values = {}, .epochs = epochs};
  const int64_t c = table.column(name);
  if (c < 0) return {.name = name, .values = {}, .epochs = {}};
  for (const auto& row : table.rows) series.values.push_back(parse_number(row[static_cast<size_t>(c)]));
  return series;
}

std::vector<double> numbers_of(const data::CsvTable& table, const std::string& name) {
  return column_of(table, name, {}).values;
}

// Where each logged step of steps.csv lies on the epoch axis: epoch e's batch b of B at
// e - 1 + b / B, B being the epoch's last logged batch (every epoch logs its last one).
// One place per row (NaN where the row says no epoch or batch, or the table lacks them).
std::vector<double> step_epochs(const data::CsvTable& steps) {
  const std::vector<double> epoch = numbers_of(steps, column::kEpoch), batch = numbers_of(steps, "batch");
  std::vector<double> at(steps.rows.size(), std::numeric_limits<double>::quiet_NaN());
  if (epoch.size() != at.size() || batch.size() != at.size()) return at;
  std::map<double, double> last;  // each epoch's last logged batch, in one pass
  for (size_t i = 0; i < at.size(); ++i)
    if (std::isfinite(epoch[i]) && std::isfinite(batch[i])) last[epoch[i]] = std::max(last[epoch[i]], batch[i]);
  for (size_t i = 0; i < at.size(); ++i) {
    const auto found = last.find(epoch[i]);
    if (found != last.end() && found->second > 0) at[i] = epoch[i] - 1 + batch[i] / found->second;
  }
  return at;
}

std::string escape(const std::string& text) {
  std::string out;
  for (const char c : text) {
    if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else if (c == '&')
      out += "&amp;";
    else if (c == '"')
      out += "&quot;";
    else
      out += c;
  }
  return out;
}

std::string number(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g", value);
  return text;
}

// [low, high] over every finite value of the panel (log10 of them on a log scale).
std::pair<double, double> value_range(const Panel& panel) {
  if (panel.unit_range) return {0, 1};
  double low = std::numeric_limits<double>::infinity(), high = -low;
  for (const Series& s : panel.series) {
    for (double v : s.values) {
      if (!std::isfinite(v) || (panel.log_scale && v <= 0)) continue;
      v = panel.log_scale ? std::log10(v) : v;
      low = std::min(low, v);
      high = std::max(high, v);
    }
  }
  if (!std::isfinite(low)) return {0, 1};
  if (high - low < 1e-12) return {low - 0.5, high + 0.5};
  return {low, high};
}

// The epoch axis of a panel: [first, last] over its series' finite places.
std::pair<double, double> epoch_range(const Panel& panel) {
  double first = std::numeric_limits<double>::infinity(), last = -first;
  for (const Series& s : panel.series) {
    for (const double e : s.epochs) {
      if (!std::isfinite(e)) continue;
      first = std::min(first, e);
      last = std::max(last, e);
    }
  }
  if (!std::isfinite(first)) return {0, 1};
  return {first, last > first ? last : first + 1};
}

void draw_panel(std::string& svg, const Panel& panel, double x0) {
  const double plot_w = kPanelWidth - kLeft - kRight, plot_h = kPanelHeight - kTop - kBottom;
  const double left = x0 + kLeft, top = kTop;
  const std::pair<double, double> range = value_range(panel);
  const double low = range.first, high = range.second;  // plain names: lambdas capture them
  const std::pair<double, double> axis = epoch_range(panel);
  const double first = axis.first, last = axis.second;  // plain names, as above
  const auto x_of = [&](double epoch) { return left + (epoch - first) / (last - first) * plot_w; };
  const auto y_of = [&](double v) {
    const double t = ((panel.log_scale ? std::log10(v) : v) - low) / (high - low);
    return top + (1 - t) * plot_h;
  };
  char buffer[1024];  // holds the longest line below: fixed text, numbers and the fixed series names
  std::snprintf(
      buffer, sizeof buffer,
      "<text x=\"%.1f\" y=\"20\" font-size=\"14\" text-anchor=\"middle\">%s</text>\n"
      "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"#888\"/>\n",
      left + plot_w / 2, escape(panel.title + (panel.log_scale ? " (log)" : "")).c_str(), left, top, plot_w,
      plot_h);
  svg += buffer;
  const auto label = [&](double value) { return number(panel.log_scale ? std::pow(10, value) : value); };
  std::snprintf(buffer, sizeof buffer,
                "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">%s</text>\n"
                "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">%s</text>\n"
                "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"middle\">%s</text>\n"
                "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"middle\">%s</text>\n"
                "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"middle\">epoch</text>\n",
                left - 4, top + 10, label(high).c_str(), left - 4, top + plot_h, label(low).c_str(), left,
                top + plot_h + 14, number(first).c_str(), left + plot_w, top + plot_h + 14,
                number(last).c_str(), left + plot_w / 2, top + plot_h + 30);
  svg += buffer;
  size_t colour = 0, drawn = 0;
  for (const Series& s : panel.series) {
    if (s.values.empty()) continue;
    const char* stroke = kColours[colour++ % std::size(kColours)];
    std::string points;
    const auto flush = [&] {
      if (!points.empty()) {
        svg += "<polyline fill=\"none\" stroke-width=\"1.8\" stroke=\"" + std::string(stroke) +
               "\" points=\"" + points + "\"/>\n";
      }
      points.clear();
    };
    for (size_t i = 0; i < s.values.size(); ++i) {
      const double v = s.values[i], e = s.epochs[i];
      if (!std::isfinite(v) || !std::isfinite(e) || (panel.log_scale && v <= 0)) {
        flush();  // a gap in the line
        continue;
      }
      std::snprintf(buffer, sizeof buffer, "%s%.1f,%.1f", points.empty() ? "" : " ", x_of(e), y_of(v));
      points += buffer;
    }
    flush();
    std::snprintf(buffer, sizeof buffer,
                  "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" fill=\"%s\">%s</text>\n", left + 6,
                  top + 14 + 13 * static_cast<double>(drawn++), stroke, escape(s.name).c_str());
    svg += buffer;
  }
}

// The metric columns (train/run_logs.h: val/<metric> and train/<metric>, losses apart), the
// validation ones first, in the table's order.
std::vector<Series> metric_columns(const data::CsvTable& table, const std::vector<double>& epochs) {
  std::vector<Series> series;
  for (const char* prefix : {column::kVal, column::kTrain}) {
    for (const std::string& name : table.columns) {
      if (name.starts_with(prefix) && name != prefix + std::string(column::kLoss))
        series.push_back(column_of(table, name, epochs));
    }
  }
  return series;
}

bool within_unit_range(const std::vector<Series>& series) {
  for (const Series& s : series) {
    for (const double v : s.values) {
      if (std::isfinite(v) && (v < 0 || v > 1)) return false;
    }
  }
  return true;
}

}  // namespace

std::string plot_run_svg(const data::CsvTable& table, const std::string& title, const data::CsvTable* steps) {
  const std::vector<double> epochs = numbers_of(table, column::kEpoch);
  KILN_CHECK(!epochs.empty(), "plot ", title, ": the table has no \"epoch\" column or no rows");
  const std::vector<Series> metrics = metric_columns(table, epochs);
  const std::string train_loss = std::string(column::kTrain) + column::kLoss;
  std::vector<Panel> panels = {
      {.title = "loss",
       .series = {column_of(table, train_loss, epochs),
                  column_of(table, std::string(column::kVal) + column::kLoss, epochs)}},
      {.title = "metrics", .series = metrics, .unit_range = within_unit_range(metrics)},
      {.title = "learning rate", .series = {column_of(table, column::kLr, epochs)}},
  };
  // Note [Run plots]: with steps.csv, the rate and the running loss at every logged step.
  if (steps != nullptr && !steps->rows.empty()) {
    const std::vector<double> at = step_epochs(*steps);
    Series running = column_of(*steps, train_loss, at);
    running.name = "train/loss (steps)";
    if (!running.values.empty()) panels[0].series.push_back(std::move(running));
    if (Series rate = column_of(*steps, column::kLr, at); !rate.values.empty()) panels[2].series = {std::move(rate)};
  }
  const auto [lr_low, lr_high] = value_range(panels[2]);
  panels[2].log_scale = lr_low > 0 && lr_high / lr_low > 10;
  const double width = kPanelWidth * static_cast<double>(panels.size());
  char header[256];
  std::snprintf(
      header, sizeof header,
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
      "font-family=\"sans-serif\">\n",
      width, kPanelHeight, width, kPanelHeight);
  std::string svg = header;
  svg += "<title>" + escape(title) + "</title>\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  for (size_t p = 0; p < panels.size(); ++p) {
    draw_panel(svg, panels[p], kPanelWidth * static_cast<double>(p));
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace kiln::train
