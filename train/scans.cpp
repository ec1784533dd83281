// One's own scans as a run's data (train/scans.h): labels, splits (Note [Scan splits]) and
// checks (Note [Scan checks]) over a data::ScanList, then the datasets.
#include "train/scans.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "core/allocator.h"
#include "core/error.h"
#include "core/ops.h"
#include "core/text_list.h"
#include "data/csv.h"
#include "data/label_text.h"
#include "data/medmnist.h"
#include "data/scan_dataset.h"
#include "data/volume_file.h"
#include "train/csv_log.h"
#include "train/task.h"

namespace kiln::train {
namespace {

bool is_integer(const std::string& text) {
  int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  return !text.empty() && error == std::errc() && end == text.data() + text.size();
}

// The classes a classification's labels name: --class-names, else the labels found, sorted
// (numerically when every one is an integer; as text for a folder, as ImageFolder does).
std::vector<std::string> class_names_of(const data::ScanList& list, const TrainConfig& config, bool folder) {
  if (!config.class_names.empty()) {
    const std::vector<std::string> names = split_names(config.class_names);
    const std::set<std::string> distinct(names.begin(), names.end());
    KILN_CHECK(distinct.size() == names.size(), "--class-names ", config.class_names, ": a class is named twice");
    return names;
  }
  std::set<std::string> found;
  for (const data::ScanRecord& record : list.records) {
    if (!record.labels[0].empty()) found.insert(record.labels[0]);
  }
  std::vector<std::string> names(found.begin(), found.end());
  if (!folder && std::all_of(names.begin(), names.end(), is_integer)) {
    std::sort(names.begin(), names.end(), [](const std::string& a, const std::string& b) {
      return std::stoll(a) < std::stoll(b);
    });
  }
  return names;
}

Task task_of(const TrainConfig& config, const Choices& choices, const data::ScanList& list, bool folder) {
  TaskChoice task = choices.task;
  if (task == TaskChoice::Auto) task = list.label_columns.size() > 1 ? TaskChoice::MultiLabel : TaskChoice::Classification;
  KILN_CHECK(!folder || task == TaskChoice::Classification, "--task ", config.task,
             ": a folder of scans gives a class per scan (its folder); other tasks come from a CSV manifest");
  KILN_CHECK(task != TaskChoice::Classification || list.label_columns.size() == 1, "--task classification takes one "
             "label column, got ", list.label_columns.size(), " (several 0/1 columns are --task multi-label)");
  switch (task) {
    case TaskChoice::MultiLabel: return Task::MultiLabel;
    case TaskChoice::Regression: return Task::Regression;
    default: return Task::MultiClass;  // Binary once the classes are counted
  }
}

// Each record's target as a tensor, and the problems of those that have none.
void read_targets(OwnScans& scans, bool folder, const TrainConfig& config) {
  const data::ScanList& list = scans.list;
  if (scans.task == Task::MultiClass) {
    scans.class_names = class_names_of(list, config, folder);
    if (scans.class_names.size() < 2)
      scans.problems.push_back(list.source + ": " + std::to_string(scans.class_names.size()) +
                               " class found; a classification needs two or more");
    if (scans.class_names.size() == 2) scans.task = Task::Binary;
  } else {
    KILN_CHECK(config.class_names.empty(), "--class-names names a classification's classes; a ",
               choice_name(scans.task), " task's outputs are its label columns (", joined(list.label_columns), ")");
    scans.class_names = list.label_columns;
  }
  for (const data::ScanRecord& record : list.records) {
    try {
      if (scans.task == Task::Binary || scans.task == Task::MultiClass) {
        const auto found = std::find(scans.class_names.begin(), scans.class_names.end(), record.labels[0]);
        KILN_CHECK(found != scans.class_names.end(), record.where, ": label '", record.labels[0],
                   "' is not one of the classes: ", joined(scans.class_names));
        scans.targets.push_back(full({}, found - scans.class_names.begin(), {.dtype = DType::Int64}));
        continue;
      }
      std::vector<float> values;
      for (const std::string& text : record.labels) {
        const double value = data::parse_number(text, record.where);
        KILN_CHECK(scans.task != Task::MultiLabel || value == 0 || value == 1, record.where,
                   ": a multi-label column holds 0 or 1, got '", text, "'");
        KILN_CHECK(std::abs(value) <= std::numeric_limits<float>::max(), record.where, ": the target '", text,
                   "' does not fit float32 (the model's precision)");
        values.push_back(static_cast<float>(value));
      }
      scans.targets.push_back(tensor(values, {static_cast<int64_t>(values.size())}));
    } catch (const Error& e) {
      scans.problems.push_back(e.what());
      scans.targets.emplace_back();
    }
  }
}

// A scan listed twice would sit in two splits, or train twice as often, unasked: each
// repeat is a problem naming both rows.
void check_repeats(OwnScans& scans) {
  std::map<std::string, const data::ScanRecord*> first;
  for (const data::ScanRecord& record : scans.list.records) {
    if (record.images.empty() || record.images[0].empty()) continue;
    const std::string key = std::filesystem::path(record.images[0]).lexically_normal().string();
    const auto [at, fresh] = first.emplace(key, &record);
    if (!fresh)
      scans.problems.push_back(record.where + ": " + record.images[0] + " is listed again (first at " +
                               at->second->where + ")");
  }
}

// The class index of each record (0 for tasks without classes): what splits stratify by.
std::vector<int64_t> strata(const OwnScans& scans) {
  std::vector<int64_t> of(scans.targets.size(), 0);
  if (scans.task != Task::Binary && scans.task != Task::MultiClass) return of;
  for (size_t i = 0; i < scans.targets.size(); ++i) of[i] = scans.targets[i].defined() ? scans.targets[i].item<int64_t>() : 0;
  return of;
}

// Note [Scan splits]: each stratum shuffled and cut into test, val and train.
std::vector<std::string> seeded_split(const OwnScans& scans, const TrainConfig& config) {
  const std::vector<int64_t> of = strata(scans);
  std::map<int64_t, std::vector<size_t>> members;
  for (size_t i = 0; i < of.size(); ++i) members[of[i]].push_back(i);
  std::vector<std::string> splits(of.size(), "train");
  Generator generator(static_cast<uint64_t>(config.split_seed));
  for (const auto& [stratum, indices] : members) {
    const auto n = static_cast<int64_t>(indices.size());
    const auto share = [&](double fraction) {
      const auto count = static_cast<int64_t>(std::llround(fraction * static_cast<double>(n)));
      return fraction > 0 && n >= 3 ? std::max<int64_t>(count, 1) : count;  // a small class still reaches every split
    };
    const int64_t test = std::min(share(config.test_fraction), n - 1);
    const int64_t val = std::min(share(config.val_fraction), n - 1 - test);
    const std::vector<int64_t> order = randperm(n, {}, &generator).to_vector<int64_t>();
    for (int64_t k = 0; k < test + val; ++k)
      splits[indices[static_cast<size_t>(order[static_cast<size_t>(k)])]] = k < test ? "test" : "val";
  }
  return splits;
}

// A record's labels as split.csv keeps them: the label columns' texts joined by ';'.
std::string label_text(const data::ScanRecord& record) {
  std::string text;
  for (const std::string& label : record.labels) text += (text.empty() ? "" : ";") + label;
  return text;
}

// A scan's name in split.csv: its first file relative to the manifest's folder (or the
// scans' folder), so a run resumed from elsewhere finds its scans again; absolute when
// the file lies outside it.
std::string split_key(const data::ScanList& list, const std::string& file) {
  namespace fs = std::filesystem;
  const fs::path base = list.folder ? fs::path(list.source) : fs::path(list.source).parent_path();
  const fs::path relative = fs::path(file).lexically_normal().lexically_relative(base.lexically_normal());
  const bool inside = !relative.empty() && *relative.begin() != "..";
  return inside ? relative.string() : fs::path(file).lexically_normal().string();
}

// The splits a run saved, by each scan's first file (Note [Scan splits]).
std::vector<std::string> saved_splits(OwnScans& scans, const std::string& path) {
  const data::CsvTable table = data::read_csv(path);
  const int64_t image = table.column("image"), split = table.column("split"), label = table.column("label");
  KILN_CHECK(image >= 0 && split >= 0, path, ": a run's split.csv has the columns image and split");
  std::map<std::string, std::string> saved, saved_labels;
  for (const auto& row : table.rows) {
    saved[row[static_cast<size_t>(image)]] = row[static_cast<size_t>(split)];
    if (label >= 0) saved_labels[row[static_cast<size_t>(image)]] = row[static_cast<size_t>(label)];
  }
  std::vector<std::string> splits;
  for (const data::ScanRecord& record : scans.list.records) {
    const std::string key = split_key(scans.list, record.images[0]);
    if (const auto was = saved_labels.find(key); was != saved_labels.end() && was->second != label_text(record))
      scans.problems.push_back(record.where + ": the label of " + key + " was '" + was->second +
                               "' when the run began, and is '" + label_text(record) + "' now");
    const auto found = saved.find(key);
    if (found == saved.end()) {
      scans.problems.push_back(record.where + ": " + split_key(scans.list, record.images[0]) + " is not in the run's " + path +
                               " (the scans changed since the run began)");
      splits.emplace_back();
      continue;
    }
    if (std::find_if(std::begin(data::kSplitNames), std::end(data::kSplitNames),
                     [&](const char* name) { return found->second == name; }) == std::end(data::kSplitNames))
      scans.problems.push_back(path + ": " + found->first + " has split '" + found->second + "', not train, val or test");
    splits.push_back(found->second);
    saved.erase(found);
  }
  for (const auto& [file, split] : saved)
    scans.problems.push_back(path + ": " + file + " was in the run's " + split + " split and is no longer listed");
  return splits;
}

// The spatial shape a scan's file has once loaded (reoriented, resampled to the spacing).
std::array<int64_t, 3> loaded_shape(const data::VolumeInfo& info, const Preprocessing& p, const std::string& file) {
  const std::array<int64_t, 3> size{info.shape[1], info.shape[2], info.shape[3]};
  if (!p.loading.spacing) return size;
  KILN_CHECK(info.spacing.has_value(), "scan '", file, "': --spacing needs the NIfTI header's voxel size, and this file has none");
  return data::spacing_size(size, *info.spacing, *p.loading.spacing);
}

std::string shape_text(int64_t channels, const std::array<int64_t, 3>& size) {
  return "[" + std::to_string(channels) + ", " + std::to_string(size[0]) + ", " + std::to_string(size[1]) + ", " +
         std::to_string(size[2]) + "]";
}

// What one scan takes in memory as float32, loaded and after crop-pad and resize.
double scan_bytes(int64_t channels, const std::array<int64_t, 3>& loaded, const Preprocessing& p) {
  const std::array<int64_t, 3> final_size = p.resize ? *p.resize : p.crop_pad ? *p.crop_pad : loaded;
  double most = 0;
  for (const std::array<int64_t, 3>& size : {loaded, final_size})
    most = std::max(most, 4.0 * static_cast<double>(channels) * static_cast<double>(size[0]) *
                              static_cast<double>(size[1]) * static_cast<double>(size[2]));
  return most;
}

// A record's files, read from their headers: channels and grid, or problems.
struct RecordShape {
  int64_t channels = 0;
  std::optional<std::array<int64_t, 3>> size;
  bool readable = true;
};

RecordShape record_shape(const data::ScanRecord& record, const Preprocessing& p, std::vector<std::string>& problems) {
  RecordShape shape;
  std::optional<std::array<double, 3>> spacing;
  for (const std::string& file : record.images) {
    if (file.empty() || !data::is_volume_file(file)) {  // reported with the list
      shape.readable = false;
      continue;
    }
    try {
      const data::VolumeInfo info = data::read_volume_info(file, {.reorient_to_ras = p.loading.reorient_to_ras});
      KILN_CHECK(info.shape[0] > 0 && info.shape[1] > 0 && info.shape[2] > 0 && info.shape[3] > 0, file,
                 " holds an empty volume, [", info.shape[0], ", ", info.shape[1], ", ", info.shape[2], ", ",
                 info.shape[3], "]");
      const std::array<int64_t, 3> grid = loaded_shape(info, p, file);
      KILN_CHECK(!shape.size || *shape.size == grid, file, " is ", shape_text(info.shape[0], grid),
                 " but the scan's first file is ", shape_text(shape.channels, *shape.size),
                 "; a scan's files share one grid");
      // Same voxel counts at other voxel sizes are other grids: resampling to --spacing aligns them.
      if (info.spacing && spacing && !p.loading.spacing) {
        for (size_t a = 0; a < 3; ++a)
          KILN_CHECK(std::abs((*info.spacing)[a] - (*spacing)[a]) <= 1e-3 * std::abs((*spacing)[a]), file, " has ",
                     (*info.spacing)[0], " x ", (*info.spacing)[1], " x ", (*info.spacing)[2],
                     " mm voxels, the scan's first file ", (*spacing)[0], " x ", (*spacing)[1], " x ", (*spacing)[2],
                     "; give --spacing to resample them to one grid");
      }
      if (info.spacing) spacing = info.spacing;
      shape.size = grid;
      shape.channels += info.shape[0];
    } catch (const Error& e) {
      problems.push_back(record.where + ": " + e.what());
      shape.readable = false;
    }
  }
  return shape;
}

// Note [Scan checks]: every header read; shapes and channels compared with the first scan's.
void check_headers(OwnScans& scans, const Preprocessing& p) {
  const bool any_shape = p.resize || p.crop_pad;
  std::optional<std::pair<int64_t, std::array<int64_t, 3>>> first;
  std::string first_where;
  bool too_big = false;
  const double memory = static_cast<double>(physical_memory_bytes());  // 0: unknown, no check
  for (const data::ScanRecord& record : scans.list.records) {
    const RecordShape shape = record_shape(record, p, scans.problems);
    if (!shape.readable || !shape.size) continue;
    const double bytes = scan_bytes(shape.channels, *shape.size, p);
    if (!too_big && memory > 0 && bytes > memory / 4) {
      too_big = true;  // once: the settings, not the scan, are what to change
      char gib[64];
      std::snprintf(gib, sizeof gib, "%.1f GiB, more than a quarter of this machine's %.1f GiB", bytes / (1 << 30),
                    memory / (1 << 30));
      scans.problems.push_back(record.where + ": one scan would take " + gib +
                               " once loaded; check --spacing, --resize and --crop-pad");
    }
    if (!first) {
      first = std::make_pair(shape.channels, *shape.size);
      first_where = record.where;
      continue;
    }
    if (shape.channels != first->first)
      scans.problems.push_back(record.where + ": " + std::to_string(shape.channels) + " channels, but " + first_where +
                               " has " + std::to_string(first->first));
    else if (!any_shape && *shape.size != first->second)
      scans.problems.push_back(record.where + ": " + record.images[0] + " is " + shape_text(shape.channels, *shape.size) +
                               " but " + first_where + " is " + shape_text(first->first, first->second) +
                               "; give --resize D,H,W or --crop-pad D,H,W to train on scans of several shapes");
  }
  scans.channels = first ? first->first : 0;
}

// Note [Scan checks]: no split empty, and in a classification every class in every split.
void check_splits(OwnScans& scans) {
  const std::vector<int64_t> of = strata(scans);
  const bool classes = scans.task == Task::Binary || scans.task == Task::MultiClass;
  for (const char* split : data::kSplitNames) {
    std::set<int64_t> present;
    int64_t count = 0;
    for (size_t i = 0; i < scans.splits.size(); ++i) {
      if (scans.splits[i] != split) continue;
      ++count;
      present.insert(of[i]);
    }
    if (count == 0) {
      scans.problems.push_back(scans.list.source + ": the " + split + " split is empty");
      continue;
    }
    if (!classes) continue;
    for (size_t c = 0; c < scans.class_names.size(); ++c) {
      if (!present.count(static_cast<int64_t>(c)))
        scans.problems.push_back(scans.list.source + ": class '" + scans.class_names[c] + "' has no scan in the " +
                                 split + " split");
    }
  }
}

}  // namespace

bool is_own_scans(const TrainConfig& config) {
  if (config.dataset == "synthetic") return false;
  for (const data::MedMnistInfo& info : data::medmnist_3d_datasets()) {
    if (config.dataset == info.flag) return false;
  }
  return true;
}

OwnScans read_own_scans(const TrainConfig& config, const Choices& choices, const std::string& saved_split) {
  std::error_code error;
  if (!std::filesystem::exists(config.dataset, error)) {
    std::string flags;
    for (const data::MedMnistInfo& info : data::medmnist_3d_datasets()) flags += std::string(info.flag) + ", ";
    throw Error("dataset '" + config.dataset + "' is neither a MedMNIST 3D flag (" + flags +
                "or synthetic) nor a CSV manifest or folder of your scans: no such file or folder");
  }
  OwnScans scans;
  scans.list = data::read_scan_list(config.dataset, {.image_columns = split_names(config.image_columns),
                                                     .label_columns = split_names(config.label_columns)});
  const bool folder = scans.list.folder;
  KILN_CHECK(!scans.list.records.empty(), "scans '", config.dataset, "': no scans listed");
  scans.problems = scans.list.problems;
  scans.task = task_of(config, choices, scans.list, folder);
  read_targets(scans, folder, config);
  check_repeats(scans);
  if (!saved_split.empty())
    scans.splits = saved_splits(scans, saved_split);
  else if (scans.list.has_splits)
    for (const data::ScanRecord& record : scans.list.records) scans.splits.push_back(record.split);
  else
    scans.splits = seeded_split(scans, config);
  check_headers(scans, choices.preprocessing);
  check_splits(scans);
  return scans;
}

namespace {

// "3 classes: a, b, c; 1 channel" (or the labels, or the targets).
std::string what_is_learnt(const OwnScans& scans) {
  const bool classes = scans.task == Task::Binary || scans.task == Task::MultiClass;
  const std::string kind = classes ? std::to_string(scans.class_names.size()) + " classes"
                           : scans.task == Task::MultiLabel ? std::to_string(scans.class_names.size()) + " labels"
                                                             : std::to_string(scans.class_names.size()) + " regression targets";
  return kind + ": " + joined(scans.class_names) + "; " + std::to_string(scans.channels) + " channel" +
         (scans.channels == 1 ? "" : "s");
}

}  // namespace

std::string format_scan_check(const OwnScans& scans) {
  std::map<std::string, int64_t> counts;
  for (const std::string& split : scans.splits) ++counts[split];
  std::ostringstream out;
  out << scans.list.source << ": " << scans.list.records.size() << " scans (train " << counts["train"] << ", val "
      << counts["val"] << ", test " << counts["test"] << "), " << what_is_learnt(scans) << "\n";
  if (scans.problems.empty()) return out.str() + "no problems found\n";
  out << scans.problems.size() << " problem" << (scans.problems.size() == 1 ? "" : "s") << ":\n";
  for (const std::string& problem : scans.problems) out << "  " << problem << "\n";
  return out.str();
}

std::string split_table(const OwnScans& scans) {
  std::string text = "image,label,split\n";
  for (size_t i = 0; i < scans.list.records.size(); ++i) {
    const data::ScanRecord& record = scans.list.records[i];
    text += csv_field(split_key(scans.list, record.images[0])) + "," + csv_field(label_text(record)) + "," +
            scans.splits[i] + "\n";
  }
  return text;
}

std::string saved_split_file(const RunContext& run) {
  const std::string& resume = run.config.resume;
  if (resume.empty() || !is_own_scans(run.config)) return "";
  namespace fs = std::filesystem;
  const std::string split = resume == "auto"
                                ? (run.folder.checkpoints().empty() ? "" : run.folder.path(RunFile::Split))
                                : (fs::path(resume).parent_path().parent_path() / kRunFiles[static_cast<size_t>(RunFile::Split)].name).string();
  std::error_code error;
  return !split.empty() && fs::exists(split, error) ? split : "";
}

TrainData make_scan_data(const TrainConfig& config, const Choices& choices, const std::string& saved_split) {
  return make_scan_data(read_own_scans(config, choices, saved_split), config, choices);
}

TrainData make_scan_data(const OwnScans& scans, const TrainConfig& config, const Choices& choices) {
  if (!scans.problems.empty()) {  // the first few: --check-data lists them all
    constexpr size_t kShown = 10;
    std::string lines;
    for (size_t i = 0; i < std::min(kShown, scans.problems.size()); ++i) lines += "\n  " + scans.problems[i];
    if (scans.problems.size() > kShown) lines += "\n  ... and " + std::to_string(scans.problems.size() - kShown) + " more";
    throw Error("scans '" + config.dataset + "': " + std::to_string(scans.problems.size()) + " problem" +
                (scans.problems.size() == 1 ? "" : "s") + " (kiln train --check-data lists them all):" + lines);
  }
  std::map<std::string, std::vector<data::ScanSample>> samples;  // (copies: `scans` stays whole)
  for (size_t i = 0; i < scans.list.records.size(); ++i)
    samples[scans.splits[i]].push_back({.images = scans.list.records[i].images, .label = scans.targets[i]});
  const int64_t budget = config.cache_mb << 20;
  const auto dataset = [&](const std::string& split) {
    const auto share = static_cast<int64_t>(static_cast<double>(budget) * static_cast<double>(samples[split].size()) /
                                            static_cast<double>(scans.list.records.size()));
    return std::make_shared<data::ScanDataset>(
        std::move(samples[split]),
        data::ScanDatasetOptions{.loading = choices.preprocessing.loading, .cache_bytes = share,
                                 .name = "scans " + config.dataset + " (" + split + ")"});
  };
  TrainData data;
  data.task = scans.task;
  data.classes = static_cast<int64_t>(scans.class_names.size());
  data.channels = scans.channels;
  data.class_names = scans.class_names;
  data.split_table = split_table(scans);
  data.train = dataset("train");
  data.val = dataset("val");
  data.test = dataset("test");
  data.train_transform = preprocessing_transform(choices.preprocessing, /*train=*/true, config.augment);
  data.eval_transform = preprocessing_transform(choices.preprocessing, /*train=*/false, config.augment);
  data.description = "your scans from " + scans.list.source + ", " + what_is_learnt(scans);
  return data;
}

}  // namespace kiln::train
