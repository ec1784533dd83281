// Options structs (STYLE 14) follow one rule: members in the order PyTorch lists the
// arguments of the matching class or function, Kiln's own members after PyTorch's, and a
// one-line designated-initializer example in the header.
//
// The order is pinned by spelling every struct out in PyTorch's order, which compiles only
// while the declaration agrees (C++20 designators must follow declaration order): here
// for core's structs, tests/nn/test_options_order.cpp and tests/optim/test_options_order.cpp
// for the others. The examples are comments, which no compiler reads, so this file also
// reads every `struct ...Options` under core/, nn/ and optim/ and fails when one has no
// example in its header, or when an example names a member that does not exist or names
// members out of declaration order.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "core/ops.h"
#include "core/text_file.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

TEST(OptionsOrder, TensorOptionsFollowPyTorchsFactoryKeywords) {
  // torch.zeros(..., dtype, layout, device, requires_grad, pin_memory); Kiln has no layout.
  const TensorOptions options{
      .dtype = DType::Float64, .device = Device::cpu(), .requires_grad = true, .pin_memory = false};
  EXPECT_TRUE(options.requires_grad);
}

TEST(OptionsOrder, LossOptionsFollowPyTorchsArguments) {
  const Tensor w = ones({3});
  // F.nll_loss(input, target, weight, size_average, ignore_index, reduce, reduction)
  const NllLossOptions nll{.weight = w, .ignore_index = 1, .reduction = Reduction::Sum};
  // F.cross_entropy(..., weight, size_average, ignore_index, reduce, reduction, label_smoothing)
  const CrossEntropyOptions ce{
      .weight = w, .ignore_index = 1, .reduction = Reduction::Sum, .label_smoothing = 0.1};
  // F.binary_cross_entropy_with_logits(..., weight, size_average, reduce, reduction, pos_weight)
  const BceWithLogitsOptions bce{.weight = w, .reduction = Reduction::Sum, .pos_weight = w};
  EXPECT_EQ(nll.reduction, Reduction::Sum);
  EXPECT_EQ(ce.label_smoothing, 0.1);
  EXPECT_TRUE(bce.pos_weight.defined());
}

// The segmentation losses follow MONAI's argument order (monai.losses 1.6), other_act
// left out; Kiln's nested `dice` stands for the Dice arguments of the combined losses.
TEST(OptionsOrder, SegmentationLossOptionsFollowMonaisArguments) {
  // DiceLoss(include_background, to_onehot_y, sigmoid, softmax, other_act, squared_pred, jaccard,
  //          reduction, smooth_nr, smooth_dr, batch, weight, soft_label, ignore_index)
  const DiceLossOptions dice{.include_background = false,
                             .to_onehot_y = true,
                             .sigmoid = false,
                             .softmax = true,
                             .squared_pred = true,
                             .jaccard = true,
                             .reduction = Reduction::Sum,
                             .smooth_nr = 0.0,
                             .smooth_dr = 1e-3,
                             .batch = true,
                             .weight = ones({2}),
                             .soft_label = true,
                             .ignore_index = 255};
  // FocalLoss(include_background, to_onehot_y, gamma, alpha, weight, reduction, use_softmax, ignore_index)
  const FocalLossOptions focal{.include_background = false,
                               .to_onehot_y = true,
                               .gamma = 1.0,
                               .alpha = 0.25,
                               .alpha_per_class = {},
                               .weight = ones({}),
                               .reduction = Reduction::None,
                               .use_softmax = true,
                               .ignore_index = 0};
  // DiceCELoss(<DiceLoss's>, lambda_dice, lambda_ce, label_smoothing)
  const DiceCeLossOptions dice_ce{.dice = dice, .lambda_dice = 0.5, .lambda_ce = 2.0, .label_smoothing = 0.1};
  // DiceFocalLoss(<DiceLoss's>, gamma, weight, lambda_dice, lambda_focal, alpha)
  const DiceFocalLossOptions dice_focal{
      .dice = dice, .gamma = 1.0, .lambda_dice = 0.5, .lambda_focal = 2.0, .alpha = 0.25};
  EXPECT_EQ(dice.ignore_index, 255);
  EXPECT_TRUE(focal.use_softmax);
  EXPECT_EQ(dice_ce.label_smoothing, 0.1);
  EXPECT_EQ(dice_focal.lambda_focal, 2.0);
}

struct OptionsStruct {
  std::string file;
  std::vector<std::string> members;  // in declaration order
};

struct Example {
  std::string file;
  std::string name;  // as written: the struct or an alias of it
  std::vector<std::string> designators;
};

std::string read_text(const fs::path& path) { return read_text_file(path.string()); }

std::vector<fs::path> headers() {
  std::vector<fs::path> paths;
  for (const char* folder : {"core", "nn", "optim"}) {
    for (const auto& entry : fs::recursive_directory_iterator(fs::path(KILN_SOURCE_DIR) / folder)) {
      if (entry.path().extension() == ".h") paths.push_back(entry.path());
    }
  }
  return paths;
}

// The member a declaration line declares: the first name followed by =, { or ;
// (`std::function<double(double)> scale_fn = nullptr;` declares scale_fn).
std::string member_name(const std::string& line) {
  static const std::regex declared(R"((\w+)\s*(=|\{|;))");
  std::smatch m;
  return std::regex_search(line, m, declared) ? m[1].str() : "";
}

// The designators at the top level of the braces that open at text[open].
std::vector<std::string> designators(const std::string& text, size_t open) {
  static const std::regex designator(R"(^\.(\w+)\s*=)");
  std::vector<std::string> names;
  int depth = 0;
  for (size_t i = open; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '(' || c == '[' || c == '{') ++depth;
    if (c == ')' || c == ']' || c == '}') --depth;
    if (depth == 0) break;
    std::smatch m;
    const std::string rest = text.substr(i, 64);
    if (depth == 1 && c == '.' && std::regex_search(rest, m, designator)) names.push_back(m[1]);
  }
  return names;
}

void read_header(const fs::path& path, std::map<std::string, OptionsStruct>& structs,
                 std::map<std::string, std::string>& aliases, std::vector<Example>& examples) {
  static const std::regex struct_start(R"(^struct (\w+Options) \{)");
  static const std::regex alias(R"(^using (\w+Options) = (\w+Options);)");
  static const std::regex example_start(R"((\w+Options)\{\.)");
  const std::string file = fs::relative(path, KILN_SOURCE_DIR).string();
  std::istringstream lines(read_text(path));
  std::string line;
  std::smatch m;
  while (std::getline(lines, line)) {
    if (std::regex_search(line, m, struct_start)) {
      OptionsStruct& s = structs[m[1]];
      s.file = file;
      while (std::getline(lines, line) && line != "};") {
        const std::string code = line.substr(0, line.find("//"));
        const std::string name = member_name(code);
        if (!name.empty()) s.members.push_back(name);
      }
    } else if (std::regex_search(line, m, alias)) {
      aliases[m[1]] = m[2];
    } else if (line.find("//") != std::string::npos) {
      const std::string comment = line.substr(line.find("//"));
      for (auto it = std::sregex_iterator(comment.begin(), comment.end(), example_start);
           it != std::sregex_iterator(); ++it) {
        const size_t open = static_cast<size_t>(it->position(0) + it->length(1));
        examples.push_back({file, (*it)[1], designators(comment, open)});
      }
    }
  }
}

TEST(OptionsOrder, EveryOptionsStructHasACorrectExampleInItsHeader) {
  std::map<std::string, OptionsStruct> structs;
  std::map<std::string, std::string> aliases;
  std::vector<Example> examples;
  for (const fs::path& path : headers()) read_header(path, structs, aliases, examples);
  ASSERT_GT(structs.size(), 20u) << "could not read the options structs under core/, nn/ and optim/";

  std::map<std::string, int> examples_in_own_header;
  for (const Example& example : examples) {
    const std::string name = aliases.count(example.name) ? aliases.at(example.name) : example.name;
    if (!structs.count(name)) continue;  // not one of ours (e.g. a PyTorch name in prose)
    const OptionsStruct& s = structs.at(name);
    SCOPED_TRACE(example.file + ": " + example.name);
    EXPECT_FALSE(example.designators.empty()) << "an example sets no member";
    long previous = -1;
    for (const std::string& designator : example.designators) {
      const auto it = std::find(s.members.begin(), s.members.end(), designator);
      if (it == s.members.end()) {
        ADD_FAILURE() << "." << designator << " is not a member of " << name << " (" << s.file << ")";
        continue;
      }
      const long index = it - s.members.begin();
      EXPECT_GT(index, previous) << "." << designator << " is out of declaration order";
      previous = index;
    }
    if (example.file == s.file) ++examples_in_own_header[name];
  }
  for (const auto& [name, s] : structs) {
    EXPECT_GT(examples_in_own_header[name], 0)
        << s.file << ": no one-line designated-initializer example of " << name << " in the header comment";
  }
}

}  // namespace
}  // namespace kiln
