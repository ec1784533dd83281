// Fails when a public op declared in core/ops/*.h has no gradient check.
//
// The list of ops is read from the headers themselves (every free function returning a
// Tensor or tensors), so a new op cannot slip in without a KILN_GRADCHECK_TEST case or an
// entry below saying why it has no gradient.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "tests/gradcheck.h"

namespace kiln {
namespace {

// Ops with no gradient to check, and why. A list, not a map, so that a name given twice is
// seen (ExemptionsAreListedOnce) rather than silently merged.
const std::vector<std::pair<std::string, std::string>> kNotDifferentiable = {
    {"empty", "factory"}, {"empty_strided", "factory"}, {"zeros", "factory"}, {"ones", "factory"},
    {"full", "factory"}, {"scalar_tensor", "factory"}, {"empty_like", "factory"}, {"zeros_like", "factory"},
    {"ones_like", "factory"}, {"full_like", "factory"}, {"arange", "factory"}, {"linspace", "factory"},
    {"eye", "factory"}, {"from_blob", "factory"}, {"tensor", "factory"}, {"empty_preserving", "factory"},
    {"rand", "random factory"}, {"randn", "random factory"}, {"randint", "random factory"},
    {"randperm", "random factory"}, {"rand_like", "random factory"}, {"randn_like", "random factory"},
    {"bernoulli", "random factory"},
    {"eq", "Bool result"}, {"ne", "Bool result"}, {"lt", "Bool result"}, {"le", "Bool result"},
    {"gt", "Bool result"}, {"ge", "Bool result"}, {"logical_and", "Bool result"},
    {"logical_or", "Bool result"}, {"logical_not", "Bool result"}, {"isnan", "Bool result"},
    {"isinf", "Bool result"}, {"isfinite", "Bool result"}, {"all", "Bool result"}, {"any", "Bool result"},
    {"argmax", "integer result"}, {"argmin", "integer result"},
    {"as_strided", "documented as not differentiable"},
    {"contiguous_alias", "an op's own result seen in keepdim form, asserted to be in no graph"},
    {"pin_memory", "a data-loading copy into pinned memory, documented as not differentiable"},
    {"sum_to", "the backward of broadcasting, checked through every broadcasting op"},
    {"unary_kernel", "engine entry point without autograd"},
    {"binary_kernel", "engine entry point without autograd"},
    {"wrap_scalar", "makes a constant"},
    {"apply_inplace", "mechanism, checked through add_/mul_ in test_inplace"},
    {"kernel_layout", "batch-norm piece (batch_norm_pieces.h): contiguous(format) of the input, whose gradient "
                      "is gradchecked with contiguous and through batch_norm's channels-last gradchecks"},
    {"invstd_of", "batch-norm piece (batch_norm_pieces.h): arithmetic on statistics inside batch_norm"},
    {"residual_operand", "batch-norm piece (batch_norm_pieces.h): contiguous(format) of the residual, whose gradient "
                         "is gradchecked through batch_norm_add_relu's gradchecks"},
    {"multi_tensor_norm", "optimizer and clipping kernel (multi_tensor.h), runs with autograd off"},
    {"one_hot", "encodes integer labels (segmentation_loss.h): a constant target"},
    {"channel_bias_grad", "conv piece (conv_arguments.h): the bias gradient inside conv's and conv_transpose's "
                          "backward, checked through their gradchecks"},
    {"convolve", "conv piece (conv_arguments.h): the pass of conv and conv_transpose, checked through their gradchecks"},
};

bool exempt(const std::string& op) {
  return std::any_of(kNotDifferentiable.begin(), kNotDifferentiable.end(),
                     [&](const auto& entry) { return entry.first == op; });
}

std::set<std::string> declared_ops() {
  const std::filesystem::path ops_dir = std::filesystem::path(KILN_SOURCE_DIR) / "core" / "ops";
  const std::regex declaration(R"(^(?:Tensor|Tensor&|std::vector<Tensor>|std::tuple<Tensor, Tensor>)\s+(\w+)\()");
  std::set<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(ops_dir)) {
    if (entry.path().extension() != ".h") continue;
    std::ifstream in(entry.path());
    std::string line;
    while (std::getline(in, line)) {
      std::smatch m;
      if (std::regex_search(line, m, declaration)) names.insert(m[1]);
    }
  }
  return names;
}

TEST(GradcheckCoverage, EveryDifferentiableOpHasAGradcheckCase) {
  const std::set<std::string> ops = declared_ops();
  ASSERT_GT(ops.size(), 50u) << "could not read the op declarations under core/ops";
  std::ostringstream missing;
  for (const std::string& op : ops) {
    if (exempt(op)) continue;
    if (!testing::gradchecked_ops().count(op)) missing << op << ' ';
  }
  EXPECT_TRUE(missing.str().empty()) << "ops without KILN_GRADCHECK_TEST: " << missing.str();
}

TEST(GradcheckCoverage, ExemptionsAreListedOnceAndNameRealOps) {
  const std::set<std::string> ops = declared_ops();
  std::map<std::string, int> times;
  for (const auto& [op, reason] : kNotDifferentiable) {
    EXPECT_EQ(++times[op], 1) << op << " is listed twice in kNotDifferentiable";
    EXPECT_FALSE(reason.empty()) << op << " is exempt without a reason";
    EXPECT_TRUE(ops.count(op)) << op << " is exempt but core/ops declares no such op";
  }
}

TEST(GradcheckCoverage, EveryGradcheckCaseNamesARealOp) {
  const std::set<std::string> ops = declared_ops();
  for (const std::string& name : testing::gradchecked_ops()) {
    EXPECT_TRUE(ops.count(name) || name == "checkpoint") << "KILN_GRADCHECK_TEST(" << name << ") names no op";
  }
}

}  // namespace
}  // namespace kiln
