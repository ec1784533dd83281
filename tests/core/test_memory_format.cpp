// Memory formats (core/memory_format.h): contiguity in each format, the suggested format
// and contiguous(format), against PyTorch's answers for the same sizes and strides
// (tests/core/memory_format/make_fixtures.py); then contiguous(format)'s values and
// gradient, its errors, and the elementwise loop's memory order (Note [Loops in memory
// order] in kernels/strided_loop.cpp).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/memory_format.h"
#include "core/ops.h"
#include "data/npz.h"
#include "kernels/strided_loop.h"
#include "tests/gradcheck.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

// `sizes` and `strides` over a zeroed buffer large enough for any fixture case.
Tensor strided_view(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides) {
  return as_strided(zeros({4096}), Dims(sizes), Dims(strides), 0);
}

const data::npz::File& fixture() {
  static const data::npz::File file(std::string(KILN_SOURCE_DIR) + "/tests/core/memory_format/memory_format.npz");
  return file;
}

// The fixture's cases: the names of its arrays "<name><suffix>", without the suffix.
std::vector<std::string> cases_with(const std::string& suffix) {
  std::vector<std::string> names;
  for (const data::npz::Array& array : fixture().arrays()) {
    if (array.key.ends_with(suffix)) names.push_back(array.key.substr(0, array.key.size() - suffix.size()));
  }
  return names;
}

Dims dims_of(const std::string& key) { return Dims(fixture().load(key).to_vector<int64_t>()); }

TEST(MemoryFormat, ContiguityAndTheSuggestedFormatAreTheOnesPyTorchGives) {
  const std::vector<std::string> cases = cases_with("_facts");
  EXPECT_GE(cases.size(), 31u);
  for (const std::string& name : cases) {
    SCOPED_TRACE(name);
    const std::vector<int64_t> sizes = fixture().load(name + "_sizes").to_vector<int64_t>();
    const std::vector<int64_t> strides = fixture().load(name + "_strides").to_vector<int64_t>();
    const std::vector<int64_t> facts = fixture().load(name + "_facts").to_vector<int64_t>();
    ASSERT_EQ(facts.size(), 4u);
    const Tensor t = strided_view(sizes, strides);
    EXPECT_EQ(t.is_contiguous(), facts[0] == 1);
    EXPECT_EQ(t.is_contiguous(MemoryFormat::Contiguous), facts[0] == 1);
    EXPECT_EQ(t.is_contiguous(MemoryFormat::ChannelsLast), facts[1] == 1);
    EXPECT_EQ(t.is_contiguous(MemoryFormat::ChannelsLast3d), facts[2] == 1);
    EXPECT_EQ(static_cast<int64_t>(t.suggest_memory_format()), facts[3]);
    // An elementwise result, a clone and a conversion keep the layout as PyTorch's do
    // (Note [Elementwise result layout], preserve_format).
    EXPECT_EQ(exp(t).strides(), dims_of(name + "_exp_strides"));
    EXPECT_EQ(t.clone().strides(), dims_of(name + "_clone_strides"));
    EXPECT_EQ(t.to(DType::Float64).strides(), dims_of(name + "_double_strides"));
    if (fixture().contains(name + "_cl_strides")) {
      const MemoryFormat format = t.dim() == 4 ? MemoryFormat::ChannelsLast : MemoryFormat::ChannelsLast3d;
      EXPECT_EQ(t.contiguous(format).strides(), dims_of(name + "_cl_strides"));
    }
  }
}

TEST(MemoryFormat, ElementwiseResultsAreLaidOutAsPyTorchLaysThemOut) {
  const std::vector<std::string> pairs = cases_with("_add_strides");
  EXPECT_GE(pairs.size(), 15u);
  for (const std::string& name : pairs) {
    SCOPED_TRACE(name);
    const auto operand = [&](const std::string& which) {
      return strided_view(fixture().load(name + which + "_sizes").to_vector<int64_t>(),
                          fixture().load(name + which + "_strides").to_vector<int64_t>());
    };
    const Tensor a = operand("_a"), b = operand("_b");
    const Dims expected = dims_of(name + "_add_strides");
    EXPECT_EQ(add(a, b).strides(), expected);
    EXPECT_EQ(mul(a, b).strides(), expected);  // one rule for every binary op
  }
}

TEST(MemoryFormat, ElementwiseValuesAndGradientsDoNotDependOnTheLayout) {
  const Tensor x = testing::random_for({2, 3, 2, 3, 2}, DType::Float64, 21);
  const Tensor bias = testing::random_for({1, 3, 1, 1, 1}, DType::Float64, 22);
  const Tensor xl = x.contiguous(MemoryFormat::ChannelsLast3d);
  const Tensor y = add(mul(xl, xl), bias);
  EXPECT_TRUE(y.is_contiguous(MemoryFormat::ChannelsLast3d));
  EXPECT_TRUE(testing::all_close(y, add(mul(x, x), bias), {1e-15, 1e-15}));
  EXPECT_TRUE(testing::gradcheck(
      [](const std::vector<Tensor>& in) {
        return where(gt(in[0], 0.0), exp(in[0]), mul(in[0], in[1]));
      },
      {xl.detach().requires_grad_(true), bias.detach().requires_grad_(true)}));
}

TEST(MemoryFormat, StridesOfEachFormat) {
  EXPECT_EQ(memory_format_strides(std::vector<int64_t>{2, 3, 4, 5, 6}, MemoryFormat::ChannelsLast3d, "t"),
            (Dims{360, 1, 90, 18, 3}));
  EXPECT_EQ(memory_format_strides(std::vector<int64_t>{2, 3, 4, 5}, MemoryFormat::ChannelsLast, "t"),
            (Dims{60, 1, 15, 3}));
  EXPECT_EQ(memory_format_strides(std::vector<int64_t>{2, 3, 4}, MemoryFormat::Contiguous, "t"), (Dims{12, 4, 1}));
  // A size-0 dim counts as 1 in contiguous strides and as 0 in channels-last ones, as in PyTorch.
  EXPECT_EQ(memory_format_strides(std::vector<int64_t>{2, 0, 4, 5}, MemoryFormat::Contiguous, "t"),
            (Dims{20, 20, 5, 1}));
  EXPECT_EQ(memory_format_strides(std::vector<int64_t>{2, 0, 4, 5}, MemoryFormat::ChannelsLast, "t"),
            (Dims{0, 1, 0, 0}));
  EXPECT_EQ(memory_format_strides(std::vector<int64_t>{2, 3, 0, 5}, MemoryFormat::ChannelsLast, "t"),
            (Dims{0, 1, 15, 3}));
  EXPECT_KILN_ERROR(memory_format_strides(std::vector<int64_t>{2, 3, 4, 5}, MemoryFormat::ChannelsLast3d, "myop"),
                    "myop", "channels_last_3d is for 5-d tensors");
  const int64_t huge = int64_t{1} << 40;
  EXPECT_KILN_ERROR(memory_format_strides(std::vector<int64_t>{huge, huge, 1, 1}, MemoryFormat::ChannelsLast, "myop"),
                    "myop", "overflow");
  // PyTorch's names, which messages use.
  EXPECT_STREQ(memory_format_name(MemoryFormat::Contiguous), "contiguous");
  EXPECT_STREQ(memory_format_name(MemoryFormat::ChannelsLast), "channels_last");
  EXPECT_STREQ(memory_format_name(MemoryFormat::ChannelsLast3d), "channels_last_3d");
}

TEST(MemoryFormat, ContiguousInAFormatCopiesValuesAndIsItselfWhenAlreadySo) {
  for (DType dtype : {DType::Float32, DType::Float64, DType::BFloat16, DType::Int64}) {
    SCOPED_TRACE(dtype_name(dtype));
    const Tensor x = testing::random_for({2, 3, 4, 5, 6}, dtype, 7);
    const Tensor y = x.contiguous(MemoryFormat::ChannelsLast3d);
    EXPECT_EQ(y.sizes(), x.sizes());
    EXPECT_EQ(y.strides(), (Dims{360, 1, 90, 18, 3}));
    EXPECT_TRUE(y.is_contiguous(MemoryFormat::ChannelsLast3d));
    EXPECT_FALSE(y.is_contiguous());
    EXPECT_TRUE(testing::all_equal(y, x));
    EXPECT_TRUE(y.contiguous(MemoryFormat::ChannelsLast3d).is_same(y));
    const Tensor back = y.contiguous();
    EXPECT_TRUE(back.is_contiguous());
    EXPECT_TRUE(testing::all_equal(back, x));
    // From a strided source: a slice of a permuted tensor.
    const Tensor source = x.transpose(2, 4).slice(1, 1, 3);
    EXPECT_TRUE(testing::all_equal(source.contiguous(MemoryFormat::ChannelsLast3d), source));
  }
  const Tensor image = testing::random_for({2, 3, 4, 5}, DType::Float32, 8);
  EXPECT_TRUE(testing::all_equal(image.contiguous(MemoryFormat::ChannelsLast), image));
  EXPECT_TRUE(image.contiguous(MemoryFormat::Contiguous).is_same(image));
}

TEST(MemoryFormat, ARankTheFormatIsNotForIsAnError) {
  EXPECT_KILN_ERROR(zeros({2, 3, 4, 5}).contiguous(MemoryFormat::ChannelsLast3d), "contiguous",
                    "channels_last_3d is for 5-d tensors", "[2, 3, 4, 5]");
  EXPECT_KILN_ERROR(zeros({2, 3}).contiguous(MemoryFormat::ChannelsLast), "contiguous", "4-d");
  EXPECT_KILN_ERROR(empty({2, 3, 4}, {}, MemoryFormat::ChannelsLast), "empty", "4-d");
  EXPECT_FALSE(zeros({2, 3, 4, 5}).is_contiguous(MemoryFormat::ChannelsLast3d));
}

TEST(MemoryFormat, EmptyInAFormatHasItsStrides) {
  const Tensor t = empty({2, 3, 4, 5, 6}, {.dtype = DType::Float64}, MemoryFormat::ChannelsLast3d);
  EXPECT_TRUE(t.is_contiguous(MemoryFormat::ChannelsLast3d));
  EXPECT_EQ(t.dtype(), DType::Float64);
  EXPECT_EQ(t.storage().nbytes(), static_cast<size_t>(2 * 3 * 4 * 5 * 6 * 8));
}

TEST(MemoryFormat, ContiguousInAFormatPassesTheGradientThrough) {
  const Tensor x = testing::random_for({2, 3, 2, 3, 2}, DType::Float64, 9).requires_grad_(true);
  EXPECT_TRUE(testing::gradcheck([](const std::vector<Tensor>& in) {
    return mul(in[0].contiguous(MemoryFormat::ChannelsLast3d), in[0]).sum();
  }, {x}));
  const Tensor y = x.contiguous(MemoryFormat::ChannelsLast3d);
  y.sum().backward();
  EXPECT_TRUE(testing::all_equal(x.grad(), ones_like(x)));
}

TEST(MemoryFormat, HostileSizesAreClearErrorsOrRightAnswersNeverOverflows) {
  const int64_t big = int64_t{1} << 32;
  // No elements, sizes whose product overflows: copies keep the layout, checks answer.
  const Tensor none = empty({0, big, big});
  EXPECT_EQ(none.clone().sizes(), none.sizes());
  EXPECT_EQ(empty({big, big, 0}).to(DType::Float64).numel(), 0);
  EXPECT_FALSE(empty({0, big, big, big}).is_contiguous(MemoryFormat::ChannelsLast));
  // Its channels-last strides would pass int64 (PyTorch's wrap): a clear error instead.
  EXPECT_KILN_ERROR(empty({0, big, big, big}).contiguous(MemoryFormat::ChannelsLast), "contiguous", "overflow");
  // A broadcast to more elements than int64 holds names the op.
  EXPECT_KILN_ERROR(add(ones({1}).expand({big, 1}), ones({1}).expand({1, big})), "add");
}

// ---- Note [Gradient layout] (core/autograd/accumulate_grad.h) -----------------------------

TEST(GradientLayout, AChannelsLastLeafGetsAChannelsLastGradient) {
  const Tensor x = testing::random_for({2, 3, 2, 3, 2}, DType::Float64, 31);
  const Tensor w = testing::random_for({2, 3, 2, 3, 2}, DType::Float64, 32)
                       .contiguous(MemoryFormat::ChannelsLast3d)
                       .requires_grad_(true);
  mul(x, w).sum().backward();  // the gradient arrives as x times a broadcast one: contiguous
  EXPECT_TRUE(w.grad().is_contiguous(MemoryFormat::ChannelsLast3d));
  EXPECT_TRUE(testing::all_equal(w.grad(), x));
  mul(x, w).sum().backward();  // accumulated in place: still laid out as w
  EXPECT_TRUE(w.grad().is_contiguous(MemoryFormat::ChannelsLast3d));
  EXPECT_TRUE(testing::all_close(w.grad(), mul(x, 2.0), {1e-15, 1e-15}));
}

TEST(GradientLayout, ARowMajorLeafGetsARowMajorGradientWhateverArrives) {
  const Tensor a = testing::random_for({3, 4}, DType::Float64, 33).requires_grad_(true);
  const Tensor b = testing::random_for({4, 3}, DType::Float64, 34);
  mul(a.t(), b).sum().backward();  // the gradient arrives as a transposed view
  EXPECT_TRUE(a.grad().is_contiguous());
  EXPECT_TRUE(testing::all_equal(a.grad(), b.t()));
  const Tensor l = testing::random_for({2, 3, 2, 2}, DType::Float64, 35).requires_grad_(true);
  mul(l, testing::random_for({2, 3, 2, 2}, DType::Float64, 36).contiguous(MemoryFormat::ChannelsLast)).sum().backward();
  EXPECT_TRUE(l.grad().is_contiguous());
}

// ---- Note [Loops in memory order] --------------------------------------------------------

TEST(LoopsInMemoryOrder, ChannelsLastOperandsCoalesceToOneDim) {
  const Tensor a = empty({2, 3, 4, 5, 6}, {}, MemoryFormat::ChannelsLast3d);
  const Tensor b = empty({2, 3, 4, 5, 6}, {}, MemoryFormat::ChannelsLast3d);
  const Tensor out = empty({2, 3, 4, 5, 6}, {}, MemoryFormat::ChannelsLast3d);
  const StridedLoop loop = make_strided_loop({&out, &a, &b});
  ASSERT_EQ(loop.ndim, 1);
  EXPECT_EQ(loop.sizes[0], 720);
  for (int k = 0; k < 3; ++k) EXPECT_EQ(loop.byte_strides[k][0], 4);
}

TEST(LoopsInMemoryOrder, APerChannelBroadcastFollowsTheOutputsOrder) {
  const Tensor out = empty({2, 3, 4, 5, 6}, {}, MemoryFormat::ChannelsLast3d);
  const Tensor bias = zeros({3}).reshape({1, 3, 1, 1, 1}).expand({2, 3, 4, 5, 6});
  const StridedLoop loop = make_strided_loop({&out, &bias});
  // Memory order N·D·H·W outside, C inside: the output is one run of 720, the bias a
  // repeating run of 3 (two dims: 240 positions × 3 channels).
  ASSERT_EQ(loop.ndim, 2);
  EXPECT_EQ(loop.sizes[0], 240);
  EXPECT_EQ(loop.sizes[1], 3);
  EXPECT_EQ(loop.byte_strides[0][1], 4);
  EXPECT_EQ(loop.byte_strides[1][0], 0);
  EXPECT_EQ(loop.byte_strides[1][1], 4);
}

TEST(LoopsInMemoryOrder, ARowMajorLoopIsUnchanged) {
  const Tensor out = empty({3, 4});
  const Tensor at = zeros({4, 3}).t();
  const StridedLoop loop = make_strided_loop({&out, &at});
  ASSERT_EQ(loop.ndim, 2);  // the output decides: rows outside
  EXPECT_EQ(loop.sizes[0], 3);
  EXPECT_EQ(loop.byte_strides[0][0], 16);
  EXPECT_EQ(loop.byte_strides[1][0], 4);
}

TEST(LoopsInMemoryOrder, ElementwiseResultsOnEveryLayoutMix) {
  const Tensor x = testing::random_for({2, 3, 4, 5, 6}, DType::Float64, 11);
  const Tensor y = testing::random_for({2, 3, 4, 5, 6}, DType::Float64, 12);
  const Tensor expected = add(x, y);
  const Tensor xl = x.contiguous(MemoryFormat::ChannelsLast3d), yl = y.contiguous(MemoryFormat::ChannelsLast3d);
  EXPECT_TRUE(testing::all_equal(add(xl, yl), expected));
  EXPECT_TRUE(testing::all_equal(add(xl, y), expected));
  EXPECT_TRUE(testing::all_equal(add(x, yl), expected));
  EXPECT_TRUE(testing::all_equal(add(xl, y.transpose(1, 3).contiguous().transpose(1, 3)), expected));
  const Tensor bias = testing::random_for({3, 1, 1, 1}, DType::Float64, 13);
  EXPECT_TRUE(testing::all_equal(add(xl, bias), add(x, bias)));
  Tensor into = zeros({2, 3, 4, 5, 6}, {.dtype = DType::Float64}).contiguous(MemoryFormat::ChannelsLast3d);
  into.copy_(x);
  EXPECT_TRUE(testing::all_equal(into, x));
}

}  // namespace
}  // namespace kiln
