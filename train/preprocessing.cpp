// parse_preprocessing and preprocessing_transform (train/preprocessing.h).
#include "train/preprocessing.h"

#include <cmath>
#include <limits>
#include <vector>

#include "core/error.h"
#include "core/text_list.h"
#include "data/label_text.h"
#include "train/config.h"

namespace kiln::train {
namespace {

constexpr double kFloatMax = std::numeric_limits<float>::max();

// "a,b,c" as numbers; an error names the flag.
std::vector<double> numbers(const std::string& text, const char* flag) {
  std::vector<double> values;
  for (const std::string& item : split_list(text)) values.push_back(data::parse_number(item, flag));
  return values;
}

std::array<int64_t, 3> size_of(const std::string& text, const char* flag) {
  const std::vector<double> values = numbers(text, flag);
  KILN_CHECK(values.size() == 3, flag, " is three sizes D,H,W, got '", text, "'");
  std::array<int64_t, 3> size{};
  for (size_t a = 0; a < 3; ++a) {
    KILN_CHECK(values[a] >= 1 && values[a] <= 4096 && values[a] == static_cast<double>(static_cast<int64_t>(values[a])),
               flag, " sizes are whole numbers from 1 to 4096, got '", text, "'");
    size[a] = static_cast<int64_t>(values[a]);
  }
  return size;
}

Normalization normalization_of(const std::string& text) {
  if (text == "auto" || text == "zscore") return {.mode = Normalization::Mode::ZScore};
  if (text == "none") return {.mode = Normalization::Mode::None};
  if (text == "minmax") return {.mode = Normalization::Mode::MinMax};
  if (text.starts_with("window:")) {
    const std::vector<double> bounds = numbers(text.substr(7), "--normalize window");
    KILN_CHECK(bounds.size() == 2 && bounds[0] < bounds[1], "--normalize window:LO,HI needs LO < HI, got '", text, "'");
    KILN_CHECK(std::abs(bounds[0]) <= kFloatMax && std::abs(bounds[1]) <= kFloatMax &&
                   static_cast<float>(bounds[1]) - static_cast<float>(bounds[0]) >= std::numeric_limits<float>::min(),
               "--normalize ", text, ": the window must be wide enough for float32, the volumes' precision");
    return {.mode = Normalization::Mode::Window, .a = bounds[0], .b = bounds[1]};
  }
  if (text.starts_with("scale:")) {
    const std::vector<double> factor = numbers(text.substr(6), "--normalize scale");
    KILN_CHECK(factor.size() == 1 && std::abs(factor[0]) >= std::numeric_limits<float>::min() &&
                   std::abs(factor[0]) <= kFloatMax,
               "--normalize scale:F needs one factor that float32, the volumes' precision, holds (neither 0 nor "
               "beyond 3.4e38), got '", text, "'");
    return {.mode = Normalization::Mode::Scale, .a = factor[0]};
  }
  throw Error("config: normalize is auto, zscore, minmax, window:LO,HI, scale:F or none, got '" + text + "'");
}

}  // namespace

Preprocessing parse_preprocessing(const TrainConfig& config) {
  Preprocessing p;
  p.normalization = normalization_of(config.normalize);
  p.loading.reorient_to_ras = parse_choice<Orientation>(config.orientation) == Orientation::Ras;
  if (!config.spacing.empty()) {
    std::vector<double> mm = numbers(config.spacing, "--spacing");
    if (mm.size() == 1) mm.assign(3, mm[0]);
    KILN_CHECK(mm.size() == 3, "--spacing is MM or MM,MM,MM, got '", config.spacing, "'");
    for (const double s : mm) KILN_CHECK(s > 0, "--spacing must be positive, got '", config.spacing, "'");
    p.loading.spacing = std::array<double, 3>{mm[0], mm[1], mm[2]};
  }
  if (!config.crop_pad.empty()) p.crop_pad = size_of(config.crop_pad, "--crop-pad");
  if (!config.resize.empty()) p.resize = size_of(config.resize, "--resize");
  p.any_set = config.normalize != "auto" || p.loading.reorient_to_ras || p.loading.spacing || p.crop_pad || p.resize;
  return p;
}

data::TransformPtr preprocessing_transform(const Preprocessing& p, bool train, bool augment) {
  std::vector<data::TransformPtr> steps;
  const Normalization& n = p.normalization;
  switch (n.mode) {
    case Normalization::Mode::None: steps.push_back(std::make_shared<data::ToFloat>()); break;
    case Normalization::Mode::Scale: steps.push_back(std::make_shared<data::ToFloat>(n.a)); break;
    case Normalization::Mode::ZScore:
      steps.push_back(std::make_shared<data::ToFloat>());
      steps.push_back(std::make_shared<data::Normalize>(data::Normalize::zscore()));
      break;
    case Normalization::Mode::MinMax:
      steps.push_back(std::make_shared<data::ToFloat>());
      steps.push_back(std::make_shared<data::Normalize>(data::Normalize::min_max()));
      break;
    case Normalization::Mode::Window:
      steps.push_back(std::make_shared<data::ToFloat>());
      steps.push_back(std::make_shared<data::Normalize>(data::Normalize::window(n.a, n.b)));
      break;
  }
  if (p.crop_pad) {
    steps.push_back(std::make_shared<data::Pad>(*p.crop_pad));
    steps.push_back(std::make_shared<data::CenterCrop>(*p.crop_pad));
  }
  if (p.resize) steps.push_back(std::make_shared<data::Resize>(*p.resize));
  if (train && augment) steps.push_back(std::make_shared<data::RandomFlip>());
  return std::make_shared<data::Compose>(std::move(steps));
}

}  // namespace kiln::train
