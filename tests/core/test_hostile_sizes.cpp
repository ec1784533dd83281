// The hostile-input suite: every factory, view and shape op called with extreme sizes,
// strides, steps, dims and indices (0, +-1, near 2^31, 2^32, 2^62, INT64_MIN/MAX) in every
// dtype. Each call must either succeed with a tensor that keeps every invariant of Note
// [Checked sizes] (and, for a view, reads exactly the storage elements its sizes, strides
// and offset name) or throw kiln::Error; anything else (another exception, a crash, a
// sanitizer report) fails. `make sanitize` runs it under ASan and UBSan, where an
// out-of-bounds read or a signed overflow on the way is a failure too.
//
// The sweeps decide the expected outcome by a model written here in 128-bit arithmetic,
// independent of the code under test. Requests that are valid but need more memory than
// a test may take (between 1 MiB and 2^57 bytes: whether they succeed depends on the
// machine) are not made; at 2^57 bytes and beyond no machine can map them.
#include <gtest/gtest.h>

#include <algorithm>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/ops.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

constexpr int64_t k31 = int64_t{1} << 31;
constexpr int64_t k32 = int64_t{1} << 32;
constexpr int64_t k62 = int64_t{1} << 62;

// The values every integer argument is tried with.
const std::vector<int64_t> kExtremes = {INT64_MIN, -k62, -k32, -k31 - 1, -k31, -2,      -1,      0,
                                        1,         2,    3,    k31 - 1,  k31,  k31 + 1, k32 - 1, k32,
                                        k62,       INT64_MAX - 1, INT64_MAX};
// Dims tried: the valid ones of a 3-d tensor and a few far out of range.
const std::vector<int64_t> kDims = {INT64_MIN, -k32, -4, -3, -1, 0, 1, 2, 3, k32, INT64_MAX};

const std::vector<DType> kAllDTypes = {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16,
                                       DType::Int64,   DType::Int32,   DType::UInt8,   DType::Bool};

constexpr __int128 kSmallBytes = __int128{1} << 20;  // results this small are read in full
constexpr __int128 kUnmappableBytes = __int128{1} << 57;

using Int128 = __int128;

// Product of sizes in 128 bits: 0 if any size is 0, else saturating at 2^100 so that no
// number of int64 sizes can overflow.
Int128 product(const std::vector<int64_t>& sizes) {
  for (const int64_t s : sizes) {
    if (s == 0) return 0;
  }
  Int128 p = 1;
  for (const int64_t s : sizes) {
    p *= s;
    if (p > (Int128{1} << 100) || p < -(Int128{1} << 100)) return Int128{1} << 100;
  }
  return p;
}

bool any_negative(const std::vector<int64_t>& values) {
  for (const int64_t v : values) {
    if (v < 0) return true;
  }
  return false;
}

// ---- checking a result -----------------------------------------------------------------

// Note [Checked sizes]'s invariants, in 128-bit arithmetic: sizes and strides >= 0, numel
// fits int64, and offset + span elements of the dtype fit in the storage.
::testing::AssertionResult keeps_invariants(const Tensor& t) {
  if (any_negative(t.sizes())) return ::testing::AssertionFailure() << "negative size " << shape_str(t.sizes());
  if (any_negative(t.strides())) return ::testing::AssertionFailure() << "negative stride " << shape_str(t.strides());
  const Int128 numel = product(t.sizes());
  if (numel > INT64_MAX || numel != t.numel()) {
    return ::testing::AssertionFailure() << "numel " << t.numel() << " of sizes " << shape_str(t.sizes());
  }
  if (t.storage_offset() < 0) return ::testing::AssertionFailure() << "negative offset " << t.storage_offset();
  if (numel == 0) return ::testing::AssertionSuccess();
  Int128 last = t.storage_offset();
  for (int64_t d = 0; d < t.dim(); ++d) last += Int128{t.sizes()[d] - 1} * t.strides()[d];
  const Int128 end_bytes = (last + 1) * static_cast<Int128>(t.element_size());
  if (end_bytes > static_cast<Int128>(t.storage().nbytes())) {
    return ::testing::AssertionFailure() << "sizes " << shape_str(t.sizes()) << " strides " << shape_str(t.strides())
                                         << " offset " << t.storage_offset() << " reach past "
                                         << t.storage().nbytes() << " bytes";
  }
  return ::testing::AssertionSuccess();
}

// The storage index of every element of `t`, in row-major order of its indices.
std::vector<int64_t> storage_indices(const Tensor& t) {
  std::vector<int64_t> indices;
  std::vector<int64_t> position(t.sizes().size(), 0);
  for (int64_t n = 0; n < t.numel(); ++n) {
    int64_t at = t.storage_offset();
    for (size_t d = 0; d < position.size(); ++d) at += position[d] * t.strides()[d];
    indices.push_back(at);
    for (size_t d = position.size(); d-- > 0;) {
      if (++position[d] < t.sizes()[d]) break;
      position[d] = 0;
    }
  }
  return indices;
}

// A view of an iota storage (the value at storage index k is k) must read, element by
// element, exactly the storage indices its sizes, strides and offset name.
::testing::AssertionResult reads_its_own_storage(const Tensor& view) {
  const std::vector<double> values = view.contiguous().to(DType::Float64).to_vector<double>();
  const std::vector<int64_t> expected = storage_indices(view);
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i] != static_cast<double>(expected[i])) {
      return ::testing::AssertionFailure() << "element " << i << " reads " << values[i] << ", expected storage index "
                                           << expected[i];
    }
  }
  return ::testing::AssertionSuccess();
}

enum class Outcome { Ok, Error };

// Runs `call` and returns its tensor, or nullopt when it threw kiln::Error. Any other
// exception is a failure of the test (reported with `what`).
std::optional<Tensor> run(const std::function<Tensor()>& call, const std::string& what) {
  try {
    return call();
  } catch (const Error&) {
    return std::nullopt;
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << " threw something other than kiln::Error: " << e.what();
    return std::nullopt;
  }
}

// For calls whose outcome the test does not model: a kiln::Error, or a result that keeps
// the invariants and, when small, reads back. Returns the result for further checks.
std::optional<Tensor> survives(const std::function<Tensor()>& call, const std::string& what) {
  std::optional<Tensor> result = run(call, what);
  if (!result) return std::nullopt;
  EXPECT_TRUE(keeps_invariants(*result)) << what;
  if (result->numel() > 0 && result->numel() * static_cast<Int128>(result->element_size()) <= kSmallBytes) {
    EXPECT_NO_THROW(result->contiguous().sum()) << what;  // every element read once
  }
  return result;
}

std::string args_str(const std::vector<int64_t>& values) { return shape_str(values); }

// ---- factories ---------------------------------------------------------------------------

// What a factory asked for `sizes` of `dtype` must do, by the model above; nullopt when the
// request is valid but machine-dependent (not made).
std::optional<Outcome> factory_outcome(const std::vector<int64_t>& sizes, DType dtype) {
  if (any_negative(sizes)) return Outcome::Error;
  const Int128 numel = product(sizes);
  if (numel == 0) return Outcome::Ok;
  if (numel > INT64_MAX) return Outcome::Error;
  const Int128 bytes = numel * static_cast<Int128>(itemsize(dtype));
  if (bytes > INT64_MAX || bytes >= kUnmappableBytes) return Outcome::Error;
  if (bytes <= kSmallBytes) return Outcome::Ok;
  return std::nullopt;
}

// Size lists of one to three extremes (and the shapes the issue names).
std::vector<std::vector<int64_t>> extreme_shapes() {
  std::vector<std::vector<int64_t>> shapes = {{}, {k62}, {0, k62}, {k62, 0}, {k32, k32}, {k31, k31},
                                              {0, k32, k32}, {k32, k32, 0}, {k31, k31, 2}, {2, 3, 4}};
  for (const int64_t a : kExtremes) {
    shapes.push_back({a});
    for (const int64_t b : {int64_t{0}, int64_t{1}, int64_t{3}, -int64_t{1}, k31, k32, k62, INT64_MAX}) {
      shapes.push_back({a, b});
      shapes.push_back({b, a});
    }
  }
  return shapes;
}

TEST(HostileSizes, FactoriesSucceedOrRefuseAsModelled) {
  int64_t made = 0;
  for (const std::vector<int64_t>& sizes : extreme_shapes()) {
    for (const DType dtype : kAllDTypes) {
      const std::optional<Outcome> expected = factory_outcome(sizes, dtype);
      if (!expected) continue;
      const std::string what = "sizes " + args_str(sizes) + " dtype " + std::string(dtype_name(dtype));
      const TensorOptions options{.dtype = dtype};
      const std::vector<std::pair<std::string, std::function<Tensor()>>> factories = {
          {"empty", [&] { return empty(sizes, options); }},
          {"zeros", [&] { return zeros(sizes, options); }},
          {"ones", [&] { return ones(sizes, options); }},
          {"full", [&] { return full(sizes, 1, options); }},
          {"empty_strided", [&] { return empty_strided(sizes, contiguous_strides(sizes), options); }},
      };
      for (const auto& [name, call] : factories) {
        const std::optional<Tensor> result = run(call, name + " " + what);
        ASSERT_EQ(result.has_value(), *expected == Outcome::Ok) << name << " " << what;
        if (!result) continue;
        ++made;
        EXPECT_EQ(result->sizes(), sizes) << name << " " << what;
        EXPECT_TRUE(keeps_invariants(*result)) << name << " " << what;
        if (name != "empty" && name != "empty_strided" && result->numel() > 0) {
          const double want = name == "zeros" ? 0.0 : 1.0;
          EXPECT_TRUE(testing::all_equal(result->to(DType::Float64), full(sizes, want, {.dtype = DType::Float64})))
              << name << " " << what;
        }
      }
    }
  }
  EXPECT_GT(made, 100);  // the sweep made real tensors, not only errors
}

TEST(HostileSizes, RandomFactoriesSucceedOrRefuseAsModelled) {
  for (const std::vector<int64_t>& sizes : extreme_shapes()) {
    const std::optional<Outcome> expected = factory_outcome(sizes, DType::Float64);
    if (!expected) continue;
    const std::string what = "sizes " + args_str(sizes);
    const std::vector<std::pair<std::string, std::function<Tensor()>>> factories = {
        {"rand", [&] { return rand(sizes, {.dtype = DType::Float64}); }},
        {"randn", [&] { return randn(sizes, {.dtype = DType::Float64}); }},
        {"randint", [&] { return randint(INT64_MIN, INT64_MAX, sizes); }},
        {"bernoulli", [&] { return bernoulli(sizes, 0.5, {.dtype = DType::Float64}); }},
    };
    for (const auto& [name, call] : factories) {
      const std::optional<Tensor> result = run(call, name + " " + what);
      ASSERT_EQ(result.has_value(), *expected == Outcome::Ok) << name << " " << what;
      if (result) {
        EXPECT_TRUE(keeps_invariants(*result)) << name << " " << what;
      }
    }
  }
}

TEST(HostileSizes, FromBlobAndEmptyStridedCheckTheSpan) {
  std::vector<float> buffer(64, 1.0f);
  for (const int64_t size : kExtremes) {
    for (const int64_t stride : kExtremes) {
      const std::vector<int64_t> sizes = {size, 2}, strides = {stride, 1};
      const std::string what = "sizes " + args_str(sizes) + " strides " + args_str(strides);
      // Model: the span in elements, then bytes of float32. from_blob allocates nothing
      // (the caller promises the memory), so only an unrepresentable span refuses it.
      bool representable = size >= 0 && stride >= 0 && product(sizes) <= INT64_MAX;
      std::optional<Outcome> expected;
      if (!representable) {
        expected = Outcome::Error;
      } else if (size == 0) {
        expected = Outcome::Ok;
      } else {
        const Int128 span = Int128{size - 1} * stride + 2;
        const Int128 bytes = span * 4;
        representable = span <= INT64_MAX && bytes <= INT64_MAX;
        if (!representable || bytes >= kUnmappableBytes) {
          expected = Outcome::Error;
        } else if (bytes <= kSmallBytes) {
          expected = Outcome::Ok;
        }
      }
      const std::optional<Tensor> wrapped =
          run([&] { return from_blob(buffer.data(), sizes, strides); }, "from_blob " + what);
      ASSERT_EQ(wrapped.has_value(), representable) << "from_blob " << what;
      if (wrapped) {
        EXPECT_TRUE(keeps_invariants(*wrapped)) << "from_blob " << what;
      }
      if (!expected) continue;
      const std::optional<Tensor> made = run([&] { return empty_strided(sizes, strides); }, "empty_strided " + what);
      ASSERT_EQ(made.has_value(), *expected == Outcome::Ok) << "empty_strided " << what;
      if (made) {
        EXPECT_TRUE(keeps_invariants(*made)) << what;
      }
    }
  }
}

TEST(HostileSizes, ArangeLinspaceEyeRandperm) {
  for (const int64_t a : kExtremes) {
    for (const int64_t b : kExtremes) {
      // Steps of at least 2^62 make at most 4 elements whatever the ends; the rest of the
      // lengths are modelled in Factory.ArangeLengthsThatOverflowAreErrors.
      for (const int64_t step : {k62, -k62, INT64_MAX, INT64_MIN}) {
        const std::string what = "arange(" + std::to_string(a) + ", " + std::to_string(b) + ", " +
                                 std::to_string(step) + ")";
        const std::optional<Tensor> range = survives([&] { return arange(a, b, step); }, what);
        ASSERT_TRUE(range.has_value()) << what;
        ASSERT_LE(range->numel(), 4) << what;
        const std::vector<int64_t> values = range->to_vector<int64_t>();
        for (size_t i = 0; i < values.size(); ++i) {
          EXPECT_EQ(static_cast<Int128>(values[i]), Int128{a} + Int128{step} * static_cast<Int128>(i)) << what;
          EXPECT_TRUE(step > 0 ? values[i] < b : values[i] > b) << what;
        }
      }
    }
    // n elements: negative is refused, small is made, 2^62 and more cannot be allocated
    // (more than 2^63 - 1 bytes); sizes in between are machine-dependent and not asked for.
    const std::string what = "n = " + std::to_string(a);
    if (a < 0 || a >= k62) {
      EXPECT_KILN_ERROR(linspace(0, 1, a), "linspace");
      EXPECT_KILN_ERROR(randperm(a), "randperm");
    } else if (a <= 1000) {
      EXPECT_EQ(linspace(0, 1, a).numel(), a) << what;
      EXPECT_EQ(randperm(a).numel(), a) << what;
    }
    if (a < 0 || a >= k31 - 1) {
      EXPECT_KILN_ERROR(eye(a), "eye");  // n * n elements of float32: more than 2^63 - 1 bytes
    } else if (a <= 1000) {
      EXPECT_EQ(eye(a).numel(), a * a) << what;
    }
  }
}

// ---- views -------------------------------------------------------------------------------

// Bases whose storage is iota (value k at storage index k), so every view of them can be
// read back and checked against its own sizes, strides and offset.
std::vector<std::pair<std::string, Tensor>> iota_bases() {
  const Tensor storage = arange(48, {.dtype = DType::Float64});
  return {
      {"contiguous [2, 3, 4]", storage.narrow(0, 0, 24).view({2, 3, 4})},
      {"permuted [4, 2, 3]", storage.narrow(0, 0, 24).view({2, 3, 4}).permute({2, 0, 1})},
      {"offset slice [2, 3, 2]", storage.narrow(0, 0, 24).view({2, 3, 4}).slice(2, 1, 4, 2)},
      {"row [4, 3] of a [4, 12]", storage.view({4, 12}).narrow(1, 5, 3)},
      {"expanded [1] to [2^62]", storage.narrow(0, 7, 1).expand({k62})},
      {"empty [0, 3]", storage.narrow(0, 0, 0).view({0, 3})},
      {"empty [2^32, 0, 2^32]", storage.narrow(0, 0, 0).view({k32, 0, k32})},
      {"scalar", storage.select(0, 5)},
  };
}

// Runs `check(name, base)` for each iota base (a function's parameters, unlike a
// structured binding, may be captured by the lambdas inside under Clang 14).
void for_each_iota_base(const std::function<void(const std::string& name, const Tensor& base)>& check) {
  for (const auto& [name, base] : iota_bases()) check(name, base);
}

// Checks a view of an iota base: a kiln::Error, or a view that keeps the invariants and
// (when small) reads exactly the elements it names. Ops that may copy instead (reshape,
// flatten, squeeze, unsqueeze) are checked against the base's values in order.
void check_view(const Tensor& base, const std::function<Tensor()>& call, const std::string& what) {
  const std::optional<Tensor> view = run(call, what);
  if (!view) return;
  ASSERT_TRUE(keeps_invariants(*view)) << what;
  if (view->numel() == 0 || view->numel() > 4096) return;
  if (view->storage().is_alias_of(base.storage())) {
    EXPECT_TRUE(reads_its_own_storage(*view)) << what;
  } else {
    EXPECT_TRUE(testing::all_equal(view->reshape({-1}), base.reshape({-1}))) << what << " (a copy)";
  }
}

TEST(HostileSizes, SelectNarrowSlice) {
  for_each_iota_base([&](const std::string& name, const Tensor& base) {
    for (const int64_t dim : kDims) {
      for (const int64_t a : kExtremes) {
        const std::string where = name + " dim " + std::to_string(dim) + " a " + std::to_string(a);
        check_view(base, [&] { return base.select(dim, a); }, "select " + where);
        for (const int64_t b : kExtremes) {
          const std::string what = where + " b " + std::to_string(b);
          check_view(base, [&] { return base.narrow(dim, a, b); }, "narrow " + what);
          check_view(base, [&] { return base.slice(dim, a, b, 1); }, "slice " + what);
          check_view(base, [&] { return base.slice(dim, a, b, k31); }, "slice by 2^31 " + what);
          check_view(base, [&] { return base.slice(dim, std::nullopt, a, b); }, "slice step b " + what);
        }
      }
    }
  });
}

TEST(HostileSizes, ViewReshapeExpand) {
  std::vector<std::vector<int64_t>> shapes;
  for (const int64_t a : kExtremes) {
    for (const int64_t b : {int64_t{-1}, int64_t{0}, int64_t{2}, k32, k62, INT64_MAX}) {
      shapes.push_back({a, b});
      shapes.push_back({b, a});
      shapes.push_back({a, b, -1});
      shapes.push_back({a, b, 0});
    }
  }
  for_each_iota_base([&](const std::string& name, const Tensor& base) {
    for (const std::vector<int64_t>& shape : shapes) {
      const std::string what = name + " to " + args_str(shape);
      check_view(base, [&] { return base.view(shape); }, "view " + what);
      check_view(base, [&] { return base.expand(shape); }, "expand " + what);
      // reshape may copy; its result is then a new contiguous tensor of the same values.
      const std::optional<Tensor> reshaped = survives([&] { return base.reshape(shape); }, "reshape " + what);
      if (reshaped && reshaped->numel() > 0 && reshaped->numel() <= 4096) {
        EXPECT_TRUE(testing::all_equal(reshaped->flatten(), base.reshape({-1}))) << "reshape " << what;
      }
    }
  });
}

TEST(HostileSizes, DimArguments) {
  for_each_iota_base([&](const std::string& name, const Tensor& base) {
    for (const int64_t a : kDims) {
      const std::string where = name + " dim " + std::to_string(a);
      check_view(base, [&] { return base.unsqueeze(a); }, "unsqueeze " + where);
      check_view(base, [&] { return base.squeeze(a); }, "squeeze " + where);
      for (const int64_t b : kDims) {
        const std::string what = where + ", " + std::to_string(b);
        check_view(base, [&] { return base.transpose(a, b); }, "transpose " + what);
        check_view(base, [&] { return base.flatten(a, b); }, "flatten " + what);
        check_view(base, [&] { return base.permute({a, b, 0}); }, "permute " + what);
        // Reductions only of bases whose every dim is small, so the result is small too:
        // reducing the 2^62-element expand would take forever, and reducing the empty
        // [2^32, 0, 2^32] over its empty dim gives 2^32 zeros, a 32 GiB fill that is an
        // out-of-memory error on a small machine and takes minutes on a large one.
        if (std::ranges::all_of(base.sizes(), [](int64_t size) { return size <= 4096; })) {
          survives([&] { return base.sum({a, b}); }, "sum " + what);
          survives([&] { return base.amax({a}); }, "amax " + what);
        }
      }
    }
  });
}

TEST(HostileSizes, AsStrided) {
  const Tensor storage = arange(48, {.dtype = DType::Float64});
  for (const int64_t size : kExtremes) {
    for (const int64_t stride : kExtremes) {
      for (const int64_t offset : {INT64_MIN, int64_t{-1}, int64_t{0}, int64_t{1}, int64_t{47}, int64_t{48}, k32,
                                   INT64_MAX}) {
        const std::string what = "size " + std::to_string(size) + " stride " + std::to_string(stride) + " offset " +
                                 std::to_string(offset);
        check_view(storage, [&] { return storage.as_strided({size, 2}, {stride, 1}, offset); }, "as_strided " + what);
        check_view(storage, [&] { return storage.as_strided({2, size}, {1, stride}, offset); }, "as_strided " + what);
      }
    }
  }
}

// ---- shape ops ---------------------------------------------------------------------------

TEST(HostileSizes, SplitChunkCatStack) {
  for_each_iota_base([&](const std::string& name, const Tensor& base) {
    for (const int64_t dim : kDims) {
      for (const int64_t a : kExtremes) {
        const std::string what = name + " dim " + std::to_string(dim) + " a " + std::to_string(a);
        // A split or chunk into more than a few thousand pieces is a valid request the
        // test cannot afford (the [2^62] expand split by 1); only those are skipped.
        const bool valid_dim = dim >= -std::max<int64_t>(base.dim(), 1) && dim < std::max<int64_t>(base.dim(), 1);
        const int64_t size = valid_dim && base.dim() > 0 ? base.size(dim) : 0;
        const bool few_splits = !valid_dim || a <= 0 || size / a <= 4096;
        const bool few_chunks =
            !valid_dim || a <= 0 || (size == 0 ? a <= 4096 || a >= k62 : std::min(a, size) <= 4096);
        if (few_splits) {
          try {
            for (const Tensor& piece : base.split(a, dim)) ASSERT_TRUE(keeps_invariants(piece)) << "split " << what;
          } catch (const Error&) {
          }
        }
        if (few_chunks) {
          try {
            for (const Tensor& piece : base.chunk(a, dim)) ASSERT_TRUE(keeps_invariants(piece)) << "chunk " << what;
          } catch (const Error&) {
          }
        }
        for (const int64_t b : kExtremes) {
          try {
            for (const Tensor& piece : split_with_sizes(base, {a, b}, dim)) {
              ASSERT_TRUE(keeps_invariants(piece)) << "split_with_sizes " << what;
            }
          } catch (const Error&) {
          }
        }
      }
      survives([&] { return cat({base, base}, dim); }, "cat " + name);
      survives([&] { return stack({base, base}, dim); }, "stack " + name);
    }
  });
  // Sizes along the cat dim that add up past int64 are refused, not wrapped.
  const Tensor huge = arange(1, {.dtype = DType::Float64}).expand({k62});
  EXPECT_KILN_ERROR(cat({huge, huge, huge}, 0), "cat: the sizes along dimension 0 add up to more than 2^63 - 1");
  EXPECT_KILN_ERROR(split_with_sizes(arange(4), {INT64_MAX, INT64_MAX, 2, 4}), "split_with_sizes", "add up to more");
  EXPECT_KILN_ERROR(empty({0}).chunk(INT64_MAX), "chunk: 9223372036854775807 empty pieces", "more than a list can hold");
  EXPECT_EQ(arange(5).chunk(INT64_MAX).size(), 5u);
}

// Convolution and pooling parameters are user numbers too: output sizes are computed
// with checked arithmetic, so a huge padding, dilation, stride or kernel is a kiln::Error
// or a correct (tiny) output, never an overflow. (Values near 2^31 are left out: a conv
// padded by 2^31 has a valid output of 2^38 elements, too big to test.)
TEST(HostileSizes, ConvAndPoolParameters) {
  const Tensor x = arange(2 * 3 * 5 * 5, {.dtype = DType::Float64}).view({1, 2, 3, 5, 5}).contiguous();
  const Tensor w = ones({4, 2, 1, 2, 2}, {.dtype = DType::Float64});
  const std::vector<int64_t> extremes = {INT64_MIN, -k62, -1, 0, 1, 2, 3, k62, INT64_MAX - 1, INT64_MAX};
  for (const int64_t v : extremes) {
    const std::string what = std::to_string(v);
    survives([&] { return conv3d(x, w, {}, {1, 1, 1}, {v, 0, 0}); }, "conv3d padding " + what);
    survives([&] { return conv3d(x, w, {}, {1, v, 1}); }, "conv3d stride " + what);
    survives([&] { return conv3d(x, w, {}, {1, 1, 1}, {0, 0, 0}, {1, 1, v}); }, "conv3d dilation " + what);
    survives([&] { return conv3d(x, w, {}, {1, 1, 1}, {0, 0, 0}, {1, 1, 1}, v); }, "conv3d groups " + what);
    survives([&] { return max_pool3d(x, {v, 1, 1}); }, "max_pool3d kernel " + what);
    survives([&] { return max_pool3d(x, {2, 2, 2}, {v, 1, 1}); }, "max_pool3d stride " + what);
    survives([&] { return max_pool3d(x, {1, 2, 2}, {}, {0, 1, 1}, {1, v, 1}, /*ceil_mode=*/true); },
             "max_pool3d dilation " + what);
    survives([&] { return max_pool3d(x, {v, v, v}, {v, v, v}, {v / 2, v / 2, v / 2}, {1, 1, 1}, true); },
             "max_pool3d all " + what);
    survives([&] { return avg_pool3d(x, {v, v, v}, {v, v, v}, {v / 2, 0, 0}, /*ceil_mode=*/true); },
             "avg_pool3d " + what);
    survives([&] { return adaptive_avg_pool3d(x, {v, 1, 1}); }, "adaptive_avg_pool3d " + what);
  }
  EXPECT_KILN_ERROR(conv3d(x, w, {}, {1, 1, 1}, {INT64_MAX, 0, 0}), "conv3d", "overflow int64");
  EXPECT_KILN_ERROR(conv3d(x, w, {}, {1, 1, 1}, {0, 0, 0}, {1, INT64_MAX, 1}), "conv3d", "overflow int64");
  EXPECT_KILN_ERROR(max_pool3d(x, {1, 2, 2}, {}, {0, 1, 1}, {1, INT64_MAX, 1}), "max_pool3d",
                    "overflow the index range");
  EXPECT_KILN_ERROR(max_pool3d(x, {k62, 2, 2}, {}, {k62 / 2, 0, 0}), "max_pool3d", "overflow the index range");
  EXPECT_EQ(conv3d(x, w, {}, {1, INT64_MAX, INT64_MAX}).sizes(), (std::vector<int64_t>{1, 4, 3, 1, 1}));
}

TEST(HostileSizes, IndexOpsWithExtremeIndices) {
  const Tensor x = arange(24, {.dtype = DType::Float64}).view({2, 3, 4});
  for (const int64_t i : kExtremes) {
    const Tensor index = tensor<int64_t>({0, i});
    const bool in_range = i >= -3 && i < 3;  // index_select takes no negative indices
    const std::string what = "index " + std::to_string(i);
    const std::optional<Tensor> selected = run([&] { return index_select(x, 1, index); }, "index_select " + what);
    EXPECT_EQ(selected.has_value(), i >= 0 && in_range) << what;
    survives([&] { return gather(x, 2, tensor<int64_t>({0, i, 1, 2}, {1, 1, 4})); }, "gather " + what);
  }
}

}  // namespace
}  // namespace kiln
