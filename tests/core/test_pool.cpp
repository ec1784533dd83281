// Pooling (max, average, adaptive average; 1-3 spatial dims) against naive float64
// reference loops written here: values, max indices and gradients for strides != kernel,
// overlapping windows, padding, dilation, ceil_mode with and without padding,
// count_include_pad both ways, divisor_override, adaptive windows of non-divisible sizes;
// unbatched and non-contiguous inputs, half types, NaN and tied windows; error messages;
// gradient checks of every op in pool.h.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>

#include "core/ops.h"
#include "tests/gradcheck.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

using testing::all_close;
using testing::all_equal;
using testing::gradcheck;
using testing::grad_leaf;
using testing::non_contiguous;
using testing::random_nonzero;
using testing::strided_grad_leaf;
using Inputs = std::vector<Tensor>;
using Sizes = std::vector<int64_t>;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// ==== the reference ============================================================================

// Calls fn(index) for every multi-index of `extents` in row-major order.
void for_each_index(const Sizes& extents, const std::function<void(const Sizes&)>& fn) {
  for (int64_t e : extents) {
    if (e <= 0) return;
  }
  Sizes index(extents.size(), 0);
  while (true) {
    fn(index);
    int64_t d = static_cast<int64_t>(extents.size()) - 1;
    while (d >= 0 && ++index[d] == extents[d]) index[d--] = 0;
    if (d < 0) return;
  }
}

int64_t flat_of(const Sizes& index, const Sizes& extents) {
  int64_t flat = 0;
  for (size_t d = 0; d < extents.size(); ++d) flat = flat * extents[d] + index[d];
  return flat;
}

struct Geometry {  // of one pooling case, spatial dims only
  Sizes kernel = {}, stride = {}, padding = {}, dilation = {};
  bool ceil_mode = false;
  bool count_include_pad = true;
  std::optional<int64_t> divisor = std::nullopt;
};

// PyTorch's output size, written out again: floor or ceil, then drop a last window that
// would start in the right padding.
int64_t ref_out_size(int64_t s, int64_t k, int64_t st, int64_t p, int64_t d, bool ceil_mode) {
  const double exact = static_cast<double>(s + 2 * p - d * (k - 1) - 1) / static_cast<double>(st);
  int64_t out = static_cast<int64_t>(ceil_mode ? std::ceil(exact) : std::floor(exact)) + 1;
  if (ceil_mode && (out - 1) * st >= s + p) --out;
  return out;
}

// One window element of output `o` per tap `j`, or nullopt when it falls outside the input.
std::optional<Sizes> tap(const Sizes& o, const Sizes& j, const Sizes& spatial, const Geometry& g) {
  Sizes pos(o.size());
  for (size_t d = 0; d < o.size(); ++d) {
    const int64_t dil = g.dilation.empty() ? 1 : g.dilation[d];
    pos[d] = o[d] * g.stride[d] - g.padding[d] + j[d] * dil;
    if (pos[d] < 0 || pos[d] >= spatial[d]) return std::nullopt;
  }
  return pos;
}

// A pooling result in float64 and, per output, the weights its window puts on the input
// (flat spatial offset -> weight): what both values and gradients follow from.
struct Reference {
  Sizes out_sizes;
  std::vector<double> values;
  std::vector<int64_t> indices;  // max only
  std::vector<std::vector<std::pair<int64_t, double>>> weights;  // per output, over its plane
};

// Input `x` [N, C, s...]; `pool` fills one output's value, index and weights from the
// plane's values and the output's multi-index.
using PoolFn = std::function<void(const std::vector<double>& plane, const Sizes& spatial, const Sizes& o,
                                  double& value, int64_t& index, std::vector<std::pair<int64_t, double>>& w)>;

Reference run_reference(const Tensor& x, const Sizes& out_spatial, const PoolFn& pool) {
  const std::vector<double> v = x.to(DType::Float64).contiguous().to_vector<double>();
  const Sizes spatial(x.sizes().begin() + 2, x.sizes().end());
  int64_t in_volume = 1;
  for (int64_t s : spatial) in_volume *= s;
  Reference r;
  r.out_sizes = {x.sizes()[0], x.sizes()[1]};
  r.out_sizes.insert(r.out_sizes.end(), out_spatial.begin(), out_spatial.end());
  const int64_t planes = x.sizes()[0] * x.sizes()[1];
  for (int64_t p = 0; p < planes; ++p) {
    const std::vector<double> plane(v.begin() + p * in_volume, v.begin() + (p + 1) * in_volume);
    for_each_index(out_spatial, [&](const Sizes& o) {
      double value = 0;
      int64_t index = -1;
      std::vector<std::pair<int64_t, double>> w;
      pool(plane, spatial, o, value, index, w);
      for (auto& [i, weight] : w) i += p * in_volume;
      r.values.push_back(value);
      r.indices.push_back(index);
      r.weights.push_back(std::move(w));
    });
  }
  return r;
}

Sizes pooled_sizes(const Tensor& x, const Geometry& g) {
  Sizes out;
  for (size_t d = 0; d < g.kernel.size(); ++d) {
    const int64_t dil = g.dilation.empty() ? 1 : g.dilation[d];
    out.push_back(ref_out_size(x.sizes()[d + 2], g.kernel[d], g.stride[d], g.padding[d], dil, g.ceil_mode));
  }
  return out;
}

Reference ref_max_pool(const Tensor& x, const Geometry& g) {
  return run_reference(x, pooled_sizes(x, g), [&](const std::vector<double>& plane, const Sizes& spatial,
                                                  const Sizes& o, double& value, int64_t& index, auto& w) {
    value = -std::numeric_limits<double>::infinity();
    for_each_index(g.kernel, [&](const Sizes& j) {
      const auto pos = tap(o, j, spatial, g);
      if (!pos) return;
      const int64_t i = flat_of(*pos, spatial);
      const double xi = plane[i];
      if (index < 0 || xi > value || (std::isnan(xi) && !std::isnan(value))) {
        value = xi;
        index = i;
      }
    });
    if (index >= 0) w.push_back({index, 1.0});
  });
}

Reference ref_avg_pool(const Tensor& x, const Geometry& g) {
  return run_reference(x, pooled_sizes(x, g), [&](const std::vector<double>& plane, const Sizes& spatial,
                                                  const Sizes& o, double& value, int64_t&, auto& w) {
    int64_t padded = 1;  // the window clipped to the padded input
    for (size_t d = 0; d < o.size(); ++d) {
      const int64_t start = o[d] * g.stride[d] - g.padding[d];
      padded *= std::min(start + g.kernel[d], spatial[d] + g.padding[d]) - start;
    }
    std::vector<int64_t> inside;
    for_each_index(g.kernel, [&](const Sizes& j) {
      if (const auto pos = tap(o, j, spatial, g)) inside.push_back(flat_of(*pos, spatial));
    });
    const double divisor = static_cast<double>(
        g.divisor ? *g.divisor : (g.count_include_pad ? padded : static_cast<int64_t>(inside.size())));
    for (int64_t i : inside) {
      value += plane[i] / divisor;
      w.push_back({i, 1.0 / divisor});
    }
  });
}

Reference ref_adaptive_avg_pool(const Tensor& x, const Sizes& out_spatial) {
  return run_reference(x, out_spatial, [&](const std::vector<double>& plane, const Sizes& spatial, const Sizes& o,
                                           double& value, int64_t&, auto& w) {
    Sizes begin, extent;
    for (size_t d = 0; d < o.size(); ++d) {
      const double s = static_cast<double>(spatial[d]), n = static_cast<double>(out_spatial[d]);
      begin.push_back(static_cast<int64_t>(std::floor(static_cast<double>(o[d]) * s / n)));
      extent.push_back(static_cast<int64_t>(std::ceil(static_cast<double>(o[d] + 1) * s / n)) - begin.back());
    }
    int64_t count = 1;
    for (int64_t e : extent) count *= e;
    for_each_index(extent, [&](const Sizes& j) {
      Sizes pos(j.size());
      for (size_t d = 0; d < j.size(); ++d) pos[d] = begin[d] + j[d];
      const int64_t i = flat_of(pos, spatial);
      value += plane[i] / static_cast<double>(count);
      w.push_back({i, 1.0 / static_cast<double>(count)});
    });
  });
}

Tensor values_of(const Reference& r) { return tensor(r.values, r.out_sizes); }

// d(sum(out * upstream))/dx from the reference's window weights.
Tensor reference_grad(const Reference& r, const Tensor& x, const Tensor& upstream) {
  const std::vector<double> u = upstream.to(DType::Float64).contiguous().to_vector<double>();
  std::vector<double> grad(static_cast<size_t>(x.numel()), 0.0);
  for (size_t o = 0; o < r.weights.size(); ++o) {
    for (const auto& [i, weight] : r.weights[o]) grad[i] += weight * u[o];
  }
  return tensor(grad, x.sizes());
}

// ==== the ops under test, by spatial rank ======================================================

Tensor max_pool(const Tensor& x, const Geometry& g) {
  const std::vector<Tensor (*)(const Tensor&, const Sizes&, const Sizes&, const Sizes&, const Sizes&, bool)> ops = {
      max_pool1d, max_pool2d, max_pool3d};
  return ops[g.kernel.size() - 1](x, g.kernel, g.stride, g.padding, g.dilation, g.ceil_mode);
}

Tensor avg_pool(const Tensor& x, const Geometry& g) {
  switch (g.kernel.size()) {
    case 1:
      return avg_pool1d(x, g.kernel, g.stride, g.padding, g.ceil_mode, g.count_include_pad);
    case 2:
      return avg_pool2d(x, g.kernel, g.stride, g.padding, g.ceil_mode, g.count_include_pad, g.divisor);
    default:
      return avg_pool3d(x, g.kernel, g.stride, g.padding, g.ceil_mode, g.count_include_pad, g.divisor);
  }
}

Tensor adaptive_avg_pool(const Tensor& x, const Sizes& out) {
  switch (out.size()) {
    case 1: return adaptive_avg_pool1d(x, out);
    case 2: return adaptive_avg_pool2d(x, out);
    default: return adaptive_avg_pool3d(x, out);
  }
}

// Forward values and the gradient of sum(out * upstream) against the reference.
void expect_matches(const std::function<Tensor(const Tensor&)>& op, const Reference& ref, const Tensor& x0,
                    DType dtype = DType::Float64) {
  Tensor x = x0.to(dtype).detach().requires_grad_();
  const Tensor out = op(x);
  ASSERT_EQ(out.sizes(), ref.out_sizes);
  EXPECT_TRUE(all_close(out.to(DType::Float64), values_of(ref), testing::tolerance_for(dtype)));
  const Tensor upstream = random_nonzero(out.sizes(), DType::Float64, 7);
  (out * upstream.to(dtype)).sum().backward();
  ASSERT_TRUE(x.grad().defined());
  EXPECT_TRUE(all_close(x.grad().to(DType::Float64), reference_grad(ref, x0, upstream.to(dtype)),
                        testing::tolerance_for(dtype)));
}

struct MaxCase {
  Sizes input;
  Geometry g;
};

const std::vector<MaxCase> kMaxCases = {
    {{2, 3, 9}, {.kernel = {3}, .stride = {2}, .padding = {1}, .dilation = {1}}},
    {{1, 2, 10}, {.kernel = {4}, .stride = {3}, .padding = {2}, .dilation = {2}}},
    {{2, 2, 8}, {.kernel = {3}, .stride = {3}, .padding = {0}, .dilation = {1}, .ceil_mode = true}},
    {{2, 2, 7, 6}, {.kernel = {2, 2}, .stride = {2, 2}, .padding = {0, 0}, .dilation = {1, 1}}},
    {{2, 3, 7, 9}, {.kernel = {3, 2}, .stride = {1, 2}, .padding = {1, 1}, .dilation = {1, 1}}},
    {{1, 2, 8, 7},
     {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 0}, .dilation = {2, 1}, .ceil_mode = true}},
    {{2, 2, 7, 7},
     {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}, .dilation = {1, 1}, .ceil_mode = true}},
    {{2, 3, 7, 8, 6},
     {.kernel = {3, 3, 3}, .stride = {2, 2, 2}, .padding = {1, 1, 1}, .dilation = {1, 1, 1}}},
    {{1, 2, 5, 6, 7},
     {.kernel = {2, 3, 2},
      .stride = {1, 2, 3},
      .padding = {0, 1, 1},
      .dilation = {2, 1, 1},
      .ceil_mode = true}},
    {{2, 2, 4, 4, 4},
     {.kernel = {2, 2, 2}, .stride = {2, 2, 2}, .padding = {0, 0, 0}, .dilation = {1, 1, 1}}},
    // Rows of 8 or more outputs: the CPU kernel's row updates (Note [Separable max
    // pooling]), with padding, dilation gaps and a clipped last window along w.
    {{2, 3, 33}, {.kernel = {3}, .stride = {2}, .padding = {1}, .dilation = {1}}},
    {{2, 2, 5, 18}, {.kernel = {3, 3}, .stride = {2, 1}, .padding = {1, 1}, .dilation = {1, 1}}},
    {{1, 2, 4, 5, 23},
     {.kernel = {3, 3, 3},
      .stride = {1, 2, 2},
      .padding = {1, 1, 1},
      .dilation = {1, 1, 2},
      .ceil_mode = true}},
    {{1, 2, 3, 4, 16},
     {.kernel = {2, 2, 2}, .stride = {2, 2, 1}, .padding = {0, 0, 1}, .dilation = {1, 1, 1}}},
};

TEST(Pool, MaxPoolMatchesReference) {
  uint64_t seed = 1;
  for (const MaxCase& c : kMaxCases) {
    SCOPED_TRACE(::testing::Message() << "input " << shape_str(c.input) << " kernel " << shape_str(c.g.kernel));
    const Tensor x = random_nonzero(c.input, DType::Float64, seed++);
    const Reference ref = ref_max_pool(x, c.g);
    for (DType dtype : {DType::Float64, DType::Float32}) {
      expect_matches([&](const Tensor& t) { return max_pool(t, c.g); }, ref, x, dtype);
    }
    const auto [values, indices] = max_pool_with_indices(x, static_cast<int64_t>(c.g.kernel.size()), c.g.kernel,
                                                         c.g.stride, c.g.padding, c.g.dilation, c.g.ceil_mode);
    EXPECT_TRUE(all_equal(values, values_of(ref)));
    EXPECT_TRUE(all_equal(indices, tensor(ref.indices, ref.out_sizes)));
  }
}

TEST(Pool, MaxPoolHalfTypesMatchReference) {
  for (DType dtype : {DType::Float16, DType::BFloat16}) {
    const MaxCase& c = kMaxCases[7];
    const Tensor x = random_nonzero(c.input, DType::Float64, 3).to(dtype).to(DType::Float64);  // representable
    expect_matches([&](const Tensor& t) { return max_pool(t, c.g); }, ref_max_pool(x, c.g), x, dtype);
  }
}

TEST(Pool, MaxPoolNaNWinsAndTiesKeepTheFirst) {
  // One plane of 1x6: windows [0, 1], [2, 3], [4, 5] with stride 2.
  const Tensor x = tensor<double>({1.0, kNaN, 3.0, 3.0, kNaN, kNaN}, {1, 1, 6});
  const auto [values, indices] = max_pool_with_indices(x, 1, {2});
  EXPECT_TRUE(std::isnan(values.to_vector<double>()[0]));
  EXPECT_EQ(values.to_vector<double>()[1], 3.0);
  EXPECT_TRUE(std::isnan(values.to_vector<double>()[2]));
  EXPECT_EQ(indices.to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 4}));
  // A constant input: each window's first element, in 2-d and 3-d.
  const auto [v2, i2] = max_pool_with_indices(full({1, 1, 4, 4}, 2.0), 2, {2}, {2});
  EXPECT_EQ(i2.to_vector<int64_t>(), (std::vector<int64_t>{0, 2, 8, 10}));
  const auto [v3, i3] = max_pool_with_indices(full({1, 1, 2, 2, 2}, -1.0), 3, {2}, {1}, {1});
  EXPECT_EQ(i3.to_vector<int64_t>()[13], 0);  // center window of the 3x3x3 output holds all 8; the first wins
}

// Note [Separable max pooling] (kernels/cpu/pool.cpp) picks the winner along w, then h,
// then d (window by window on short rows, by row updates on rows of 8 or more): on inputs
// full of ties (values 0, 1, 2) and NaNs spread over the rows of each
// window, values and indices must still be the full-window scan's.
TEST(Pool, MaxPoolTiesAndNaNsAcrossRowsFollowWindowOrder) {
  const std::vector<MaxCase> cases = {
      {{2, 3, 7, 8, 9},
       {.kernel = {3, 3, 3}, .stride = {2, 2, 2}, .padding = {1, 1, 1}, .dilation = {1, 1, 1}}},
      {{1, 2, 9, 7, 8},
       {.kernel = {3, 2, 3},
        .stride = {1, 2, 2},
        .padding = {1, 0, 1},
        .dilation = {2, 1, 2},
        .ceil_mode = true}},
      // Rows of 8 or more outputs (the row updates), plain and with dilation and ceil mode.
      {{2, 2, 5, 6, 20},
       {.kernel = {3, 3, 3}, .stride = {2, 1, 1}, .padding = {1, 1, 1}, .dilation = {1, 1, 1}}},
      {{1, 2, 6, 5, 25},
       {.kernel = {2, 3, 3},
        .stride = {1, 2, 2},
        .padding = {1, 1, 1},
        .dilation = {1, 2, 2},
        .ceil_mode = true}},
  };
  for (const MaxCase& c : cases) {
    int64_t count = 1;
    for (int64_t size : c.input) count *= size;
    std::vector<double> values(static_cast<size_t>(count));
    for (size_t i = 0; i < values.size(); ++i) values[i] = (i * 7919 % 61) % 17 == 0 ? kNaN : static_cast<double>(i * 31 % 3);
    const Tensor x = tensor<double>(values, c.input);
    const Reference ref = ref_max_pool(x, c.g);
    const auto [got, indices] = max_pool_with_indices(x, 3, c.g.kernel, c.g.stride, c.g.padding, c.g.dilation,
                                                      c.g.ceil_mode);
    EXPECT_TRUE(all_equal(indices, tensor(ref.indices, ref.out_sizes)));
    const std::vector<double> got_values = got.to_vector<double>();
    for (size_t i = 0; i < got_values.size(); ++i) {
      EXPECT_TRUE(got_values[i] == ref.values[i] || (std::isnan(got_values[i]) && std::isnan(ref.values[i]))) << i;
    }
  }
}

TEST(Pool, MaxPoolWindowWithNoTapInsideTheInputGivesMinusInfinity) {
  // Width 2, kernel 2, padding 1, dilation 3: the one window's taps are at -1 and 2.
  Tensor x = tensor<double>({4.0, 5.0}, {1, 1, 2}).requires_grad_();
  const auto [values, indices] = max_pool_with_indices(x, 1, {2}, {1}, {1}, {3});
  EXPECT_EQ(values.to_vector<double>(), (std::vector<double>{-std::numeric_limits<double>::infinity()}));
  EXPECT_EQ(indices.to_vector<int64_t>(), (std::vector<int64_t>{-1}));
  max_pool1d(x, {2}, {1}, {1}, {3}).sum().backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{0.0, 0.0}));
}

struct AvgCase {
  Sizes input;
  Geometry g;
};

const std::vector<AvgCase> kAvgCases = {
    {{2, 3, 9}, {.kernel = {3}, .stride = {2}, .padding = {1}}},
    {{2, 3, 9}, {.kernel = {3}, .stride = {2}, .padding = {1}, .count_include_pad = false}},
    {{1, 2, 8}, {.kernel = {3}, .stride = {3}, .padding = {0}, .ceil_mode = true}},
    {{1, 2, 8}, {.kernel = {4}, .stride = {3}, .padding = {2}, .ceil_mode = true}},
    {{1, 2, 8}, {.kernel = {4}, .stride = {3}, .padding = {2}, .ceil_mode = true, .count_include_pad = false}},
    {{2, 2, 7, 6}, {.kernel = {2, 2}, .stride = {2, 2}, .padding = {0, 0}}},
    {{2, 3, 7, 9}, {.kernel = {3, 2}, .stride = {1, 2}, .padding = {1, 1}}},
    {{2, 2, 7, 7}, {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}, .ceil_mode = true}},
    {{2, 2, 6, 7}, {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}, .ceil_mode = true,
                    .count_include_pad = false}},
    {{2, 2, 6, 7}, {.kernel = {3, 2}, .stride = {2, 1}, .padding = {1, 1}, .divisor = 5}},
    {{2, 3, 7, 8, 6}, {.kernel = {3, 3, 3}, .stride = {2, 2, 2}, .padding = {1, 1, 1}}},
    {{1, 2, 5, 6, 7}, {.kernel = {2, 3, 2}, .stride = {1, 2, 3}, .padding = {0, 1, 1}, .ceil_mode = true,
                       .count_include_pad = false}},
    {{2, 2, 4, 4, 4}, {.kernel = {2, 2, 2}, .stride = {2, 2, 2}, .padding = {0, 0, 0}, .divisor = 3}},
    {{1, 2, 5, 5, 5}, {.kernel = {2, 2, 2}, .stride = {2, 2, 2}, .padding = {1, 1, 1}, .ceil_mode = true}},
    // Rows of 16 or more: the CPU kernels' row-wise paths (Note [Row-wise average pooling]),
    // with overlapping windows along d and h, a clipped last window, and both divisors.
    {{2, 3, 33}, {.kernel = {4}, .stride = {3}, .padding = {2}, .ceil_mode = true}},
    {{2, 2, 5, 18}, {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}, .divisor = 5}},
    {{1, 2, 3, 4, 20}, {.kernel = {2, 2, 3}, .stride = {1, 2, 2}, .padding = {1, 0, 1}, .ceil_mode = true,
                        .count_include_pad = false}},
    {{1, 2, 4, 5, 17}, {.kernel = {3, 3, 3}, .stride = {1, 1, 1}, .padding = {1, 1, 1}}},
};

TEST(Pool, AvgPoolMatchesReference) {
  uint64_t seed = 20;
  for (const AvgCase& c : kAvgCases) {
    SCOPED_TRACE(::testing::Message() << "input " << shape_str(c.input) << " kernel " << shape_str(c.g.kernel)
                                      << " padding " << shape_str(c.g.padding) << " ceil " << c.g.ceil_mode
                                      << " count_include_pad " << c.g.count_include_pad);
    const Tensor x = random_nonzero(c.input, DType::Float64, seed++);
    const Reference ref = ref_avg_pool(x, c.g);
    for (DType dtype : {DType::Float64, DType::Float32, DType::Float16, DType::BFloat16}) {
      expect_matches([&](const Tensor& t) { return avg_pool(t, c.g); }, ref, x, dtype);
    }
  }
}

TEST(Pool, AvgPoolCeilModeClipsTheLastWindowToThePaddedInput) {
  // 4 wide, kernel 2, stride 2, padding 1, ceil: windows [-1, 1), [1, 3), [3, 5) inside
  // the padded input [-1, 5), so every divisor is 2 (count_include_pad).
  const Tensor x = tensor<double>({1, 2, 3, 4}, {1, 1, 4});
  EXPECT_EQ(avg_pool1d(x, {2}, {2}, {1}, true).to_vector<double>(), (std::vector<double>{0.5, 2.5, 2.0}));
  // 3 wide, kernel 2, stride 2, no padding, ceil: windows [0, 2), [2, 4) -> the second
  // sticks out of the (unpadded) input and counts only its 1 element.
  const Tensor y = tensor<double>({1, 2, 6}, {1, 1, 3});
  EXPECT_EQ(avg_pool1d(y, {2}, {2}, {0}, true).to_vector<double>(), (std::vector<double>{1.5, 6.0}));
}

struct AdaptiveCase {
  Sizes input;
  Sizes output;
};

TEST(Pool, AdaptiveAvgPoolMatchesReference) {
  const std::vector<AdaptiveCase> cases = {
      {{2, 3, 7}, {3}},       {{2, 3, 5}, {5}},          {{2, 3, 4}, {1}},         {{1, 2, 3}, {5}},
      {{2, 2, 7, 5}, {3, 2}}, {{1, 3, 6, 6}, {4, 4}},    {{2, 2, 5, 7, 4}, {3, 2, 1}},
      {{2, 3, 4, 4, 4}, {1, 1, 1}}, {{1, 2, 3, 5, 7}, {3, 5, 7}},
      // Rows of 8 or more (the CPU's row-wise forward; backward row-wise at 16+, 4 wide or less).
      {{1, 2, 3, 4, 19}, {2, 3, 5}},    {{2, 2, 3, 20}, {4, 7}},  {{1, 2, 2, 3, 16}, {1, 1, 1}},
      {{1, 2, 9}, {4}},
  };
  uint64_t seed = 40;
  for (const AdaptiveCase& c : cases) {
    SCOPED_TRACE(::testing::Message() << "input " << shape_str(c.input) << " output " << shape_str(c.output));
    const Tensor x = random_nonzero(c.input, DType::Float64, seed++);
    const Reference ref = ref_adaptive_avg_pool(x, c.output);
    for (DType dtype : {DType::Float64, DType::Float32, DType::Float16, DType::BFloat16}) {
      expect_matches([&](const Tensor& t) { return adaptive_avg_pool(t, c.output); }, ref, x, dtype);
    }
  }
}

TEST(Pool, UnbatchedInputsPoolEachChannel) {
  const Tensor x = random_nonzero({3, 7, 6}, DType::Float64, 50);
  const Tensor batched = x.unsqueeze(0);
  EXPECT_TRUE(all_equal(max_pool2d(x, {3}, {2}, {1}), max_pool2d(batched, {3}, {2}, {1}).squeeze(0)));
  const Tensor x1 = random_nonzero({3, 7}, DType::Float64, 51);
  EXPECT_TRUE(all_equal(avg_pool1d(x1, {2}), avg_pool1d(x1.unsqueeze(0), {2}).squeeze(0)));
  EXPECT_TRUE(all_equal(adaptive_avg_pool2d(x, {2}), adaptive_avg_pool2d(batched, {2}).squeeze(0)));
  const auto [values, indices] = max_pool_with_indices(x, 2, {2});
  EXPECT_EQ(indices.sizes(), (Sizes{3, 3, 3}));
  Tensor leaf = x.detach().requires_grad_();
  max_pool2d(leaf, {2}).sum().backward();
  EXPECT_EQ(leaf.grad().sizes(), x.sizes());
  EXPECT_DOUBLE_EQ(leaf.grad().sum().item<double>(), 27.0);  // one per 2x2 window of [3, 3, 3]
}

TEST(Pool, NonContiguousInputsGiveTheSameResult) {
  const Tensor x = random_nonzero({2, 3, 6, 7, 5}, DType::Float64, 60);
  const Tensor strided = non_contiguous(x);
  const Tensor transposed = x.transpose(3, 4).contiguous().transpose(3, 4);
  for (const Tensor& t : {strided, transposed}) {
    ASSERT_FALSE(t.is_contiguous());
    EXPECT_TRUE(all_equal(max_pool3d(t, {3}, {2}, {1}), max_pool3d(x, {3}, {2}, {1})));
    EXPECT_TRUE(all_equal(avg_pool3d(t, {2, 3, 2}), avg_pool3d(x, {2, 3, 2})));
    EXPECT_TRUE(all_equal(adaptive_avg_pool3d(t, {4, 3, 2}), adaptive_avg_pool3d(x, {4, 3, 2})));
  }
}

TEST(Pool, BadArgumentsAreClearErrors) {
  const Tensor x = random_nonzero({2, 3, 8, 8}, DType::Float32, 70);
  EXPECT_KILN_ERROR(max_pool2d(x, {0}), "max_pool2d", "kernel_size must be positive");
  EXPECT_KILN_ERROR(max_pool2d(x, {2}, {0}), "max_pool2d", "stride must be positive");
  EXPECT_KILN_ERROR(max_pool2d(x, {2}, {}, {0}, {0}), "max_pool2d", "dilation must be positive");
  EXPECT_KILN_ERROR(max_pool2d(x, {3}, {}, {2}), "max_pool2d", "at most half of kernel_size", "[2, 2]");
  EXPECT_KILN_ERROR(avg_pool2d(x, {2}, {}, {-1}), "avg_pool2d", "padding");
  EXPECT_KILN_ERROR(max_pool2d(x, {2, 2, 2}), "max_pool2d", "kernel_size must have 1 or 2 values");
  EXPECT_KILN_ERROR(max_pool2d(x, {9}), "max_pool2d", "too small", "[2, 3, 8, 8]");
  EXPECT_KILN_ERROR(max_pool2d(x, {3}, {}, {0}, {4}), "max_pool2d", "too small");
  EXPECT_KILN_ERROR(max_pool3d(x.flatten(0, 1), {2}), "max_pool3d", "4-d (unbatched) or 5-d");
  EXPECT_KILN_ERROR(avg_pool1d(x, {2}), "avg_pool1d", "2-d (unbatched) or 3-d");
  EXPECT_KILN_ERROR(max_pool2d(x.to(DType::Int64), {2}), "max_pool2d", "floating-point", "int64");
  EXPECT_KILN_ERROR(avg_pool2d(x, {2}, {}, {0}, false, true, 0), "avg_pool2d", "divisor_override");
  EXPECT_KILN_ERROR(adaptive_avg_pool2d(x, {0, 2}), "adaptive_avg_pool2d", "output_size must be positive");
  EXPECT_KILN_ERROR(adaptive_avg_pool2d(zeros({2, 0, 4, 4}), {2}), "adaptive_avg_pool2d", "empty");
  EXPECT_KILN_ERROR(max_pool_with_indices(x, 4, {2}), "max_pool_with_indices", "spatial_dims");
  EXPECT_KILN_ERROR(max_pool2d(Tensor(), {2}), "max_pool2d", "undefined");
}

TEST(Pool, EmptyBatchGivesAnEmptyResult) {
  const Tensor x = zeros({0, 3, 6, 6});
  EXPECT_EQ(max_pool2d(x, {2}).sizes(), (Sizes{0, 3, 3, 3}));
  EXPECT_EQ(avg_pool2d(x, {3}, {1}).sizes(), (Sizes{0, 3, 4, 4}));
  EXPECT_EQ(adaptive_avg_pool2d(x, {1}).sizes(), (Sizes{0, 3, 1, 1}));
}

// ==== gradient checks ==========================================================================

KILN_GRADCHECK_TEST(max_pool1d) {
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return max_pool1d(v[0], {3}, {2}, {1}); }, {grad_leaf({2, 2, 9}, 1)}));
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return max_pool1d(v[0], {2}, {1}, {1}, {2}, true); },
                        {strided_grad_leaf({2, 7}, 2)}));
}

KILN_GRADCHECK_TEST(max_pool2d) {
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return max_pool2d(v[0], {3, 2}, {2, 1}, {1, 0}); },
                        {grad_leaf({2, 2, 7, 5}, 3)}));
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return max_pool2d(v[0], {2}, {2}, {0}, {1}, true); },
                        {strided_grad_leaf({2, 5, 5}, 4)}));
}

KILN_GRADCHECK_TEST(max_pool3d) {
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return max_pool3d(v[0], {3}, {2}, {1}); },
                        {grad_leaf({1, 2, 5, 4, 5}, 5)}));
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return max_pool3d(v[0], {2}, {1}, {0}, {2}); },
                        {strided_grad_leaf({2, 4, 5, 4}, 6)}));
}

KILN_GRADCHECK_TEST(max_pool_with_indices) {
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return std::get<0>(max_pool_with_indices(v[0], 2, {2}, {1})); },
                        {grad_leaf({1, 3, 4, 5}, 7)}));
}

KILN_GRADCHECK_TEST(avg_pool1d) {
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return avg_pool1d(v[0], {3}, {2}, {1}, true, false); },
                        {grad_leaf({2, 2, 8}, 8)}));
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return avg_pool1d(v[0], {2}); }, {strided_grad_leaf({3, 7}, 9)}));
}

KILN_GRADCHECK_TEST(avg_pool2d) {
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return avg_pool2d(v[0], {3}, {2}, {1}, true, true); },
                        {grad_leaf({2, 2, 6, 7}, 10)}));
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return avg_pool2d(v[0], {2, 3}, {1, 2}, {0}, false, true, 4); },
                        {strided_grad_leaf({2, 5, 6}, 11)}));
}

KILN_GRADCHECK_TEST(avg_pool3d) {
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return avg_pool3d(v[0], {3}, {2}, {1}, false, false); },
                        {grad_leaf({1, 2, 5, 4, 5}, 12)}));
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return avg_pool3d(v[0], {2}); }, {strided_grad_leaf({2, 4, 5, 4}, 13)}));
}

KILN_GRADCHECK_TEST(adaptive_avg_pool1d) {
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return adaptive_avg_pool1d(v[0], {3}); }, {grad_leaf({2, 2, 7}, 14)}));
}

KILN_GRADCHECK_TEST(adaptive_avg_pool2d) {
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return adaptive_avg_pool2d(v[0], {3, 2}); },
                        {strided_grad_leaf({2, 2, 7, 5}, 15)}));
}

KILN_GRADCHECK_TEST(adaptive_avg_pool3d) {
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return adaptive_avg_pool3d(v[0], {2, 1, 3}); },
                        {grad_leaf({1, 2, 5, 4, 4}, 16)}));
}

}  // namespace
}  // namespace kiln
