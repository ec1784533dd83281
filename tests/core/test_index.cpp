// gather, scatter_add and index_select against naive loops along every dim of 3-d
// tensors: every dtype (small integers, so every result is exact), non-contiguous,
// transposed and expanded inputs and indices, indices smaller than the input, repeated
// indices (accumulation), empty and 0-d cases, sizes large enough for the parallel path;
// each validation error; gradient checks.
#include <gtest/gtest.h>

#include "core/ops.h"
#include "tests/gradcheck.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

using testing::all_equal;
using testing::grad_leaf;
using testing::gradcheck;
using testing::non_contiguous;
using testing::random_nonzero;
using testing::strided_grad_leaf;
using Inputs = std::vector<Tensor>;
using Shape = std::vector<int64_t>;

// ---- naive references (3-d, row-major) ------------------------------------------------

int64_t at(const Shape& s, int64_t i0, int64_t i1, int64_t i2) { return (i0 * s[1] + i1) * s[2] + i2; }

// Calls fn(position in index, position in the indexed tensor `other`) for every index
// element, with `other`'s coordinate along dim replaced by the index value.
template <typename Fn>
void for_each_indexed(const Shape& index_sizes, const std::vector<int64_t>& index, const Shape& other_sizes,
                      int64_t dim, const Fn& fn) {
  for (int64_t a = 0; a < index_sizes[0]; ++a)
    for (int64_t b = 0; b < index_sizes[1]; ++b)
      for (int64_t c = 0; c < index_sizes[2]; ++c) {
        int64_t p[3] = {a, b, c};
        const int64_t here = at(index_sizes, a, b, c);
        p[dim] = index[here];
        fn(here, at(other_sizes, p[0], p[1], p[2]));
      }
}

Tensor naive_gather(const Tensor& x, int64_t dim, const Tensor& index) {
  const std::vector<double> xv = x.to_vector<double>();
  std::vector<double> out(index.numel());
  for_each_indexed(index.sizes(), index.to_vector<int64_t>(), x.sizes(), dim,
                   [&](int64_t i, int64_t from) { out[i] = xv[from]; });
  return tensor(out, index.sizes()).to(x.dtype());
}

// Only src's leading index-shaped block is read.
Tensor naive_scatter_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  std::vector<double> out = self.to_vector<double>();
  const std::vector<double> sv = src.to_vector<double>();
  const Shape is = index.sizes(), ss = src.sizes();
  for_each_indexed(is, index.to_vector<int64_t>(), self.sizes(), dim, [&](int64_t i, int64_t to) {
    const Shape p = {i / (is[1] * is[2]), i / is[2] % is[1], i % is[2]};
    out[to] += sv[at(ss, p[0], p[1], p[2])];
  });
  return tensor(out, self.sizes()).to(self.dtype());
}

// index_select is a gather with the 1-d index laid along dim and broadcast.
Tensor naive_index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  Shape along(3, 1), full = x.sizes();
  along[dim] = full[dim] = index.numel();
  return naive_gather(x, dim, index.reshape(along).expand(full).contiguous());
}

// Small integers, exact in every dtype and in every sum below (uint8 included).
Tensor random_values(const Shape& sizes, DType dtype, uint64_t seed) {
  Generator gen(seed);
  if (dtype == DType::Bool) return randint(0, 2, sizes, {}, &gen).to(DType::Bool);
  return randint(1, 8, sizes, {}, &gen).to(dtype);
}

Tensor random_index(int64_t high, const Shape& sizes, uint64_t seed) {
  Generator gen(seed);
  return randint(0, high, sizes, {}, &gen);
}

Tensor reversed_layout(const Tensor& t) { return t.permute({2, 1, 0}).contiguous().permute({2, 1, 0}); }

constexpr DType kAllDTypes[] = {DType::Float64, DType::Float32, DType::Float16, DType::BFloat16,
                                DType::Int64,   DType::Int32,   DType::UInt8,   DType::Bool};

// ---- gather -------------------------------------------------------------------------------

TEST(Index, GatherAlongEveryDimInEveryDtype) {
  for (DType dtype : kAllDTypes) {
    const Tensor x = random_values({4, 5, 6}, dtype, 1);
    for (int64_t dim = 0; dim < 3; ++dim) {
      const Tensor index = random_index(x.size(dim), {3, 4, 5}, dim + 7);  // smaller than x, and repeats
      const Tensor expected = naive_gather(x, dim, index);
      EXPECT_TRUE(all_equal(gather(x, dim, index), expected)) << dtype << " dim " << dim;
      EXPECT_TRUE(all_equal(gather(non_contiguous(x), dim, non_contiguous(index)), expected)) << dtype;
      EXPECT_TRUE(all_equal(gather(reversed_layout(x), dim - 3, reversed_layout(index)), expected)) << dtype;
      EXPECT_TRUE(all_equal(x.gather(dim, index), expected));
    }
  }
}

TEST(Index, GatherWithExpandedIndexAndInput) {
  const Tensor x = random_values({4, 1, 6}, DType::Float32, 2).expand({4, 5, 6});
  const Tensor index = random_index(4, {1, 5, 6}, 3).expand({3, 5, 6});  // stride 0 along dim 0
  EXPECT_TRUE(all_equal(gather(x, 0, index), naive_gather(x.contiguous(), 0, index.contiguous())));
}

TEST(Index, GatherEmptyAndZeroDimCases) {
  const Tensor x = random_values({4, 5, 6}, DType::Float32, 1);
  EXPECT_EQ(gather(x, 1, zeros({4, 0, 6}, {.dtype = DType::Int64})).sizes(), (Shape{4, 0, 6}));
  EXPECT_EQ(gather(x, 1, zeros({0, 3, 6}, {.dtype = DType::Int64})).sizes(), (Shape{0, 3, 6}));
  const Tensor s = scalar_tensor(2.5, {.dtype = DType::Float64});
  EXPECT_TRUE(all_equal(gather(s, 0, scalar_tensor(0, {.dtype = DType::Int64})), s));
  EXPECT_TRUE(all_equal(gather(s, -1, tensor<int64_t>({0})), tensor<double>({2.5})));
  EXPECT_TRUE(all_equal(gather(tensor<double>({1, 2, 3}), 0, tensor<int64_t>({2, 2, 0})), tensor<double>({3, 3, 1})));
}

TEST(Index, GatherLargeEnoughForThreads) {
  const Tensor x = random_values({64, 65, 33}, DType::Float32, 4);
  for (int64_t dim = 0; dim < 3; ++dim) {
    const Tensor index = random_index(x.size(dim), {60, 64, 32}, dim + 1);
    EXPECT_TRUE(all_equal(gather(non_contiguous(x), dim, index), naive_gather(x, dim, index)));
  }
}

// ---- scatter_add --------------------------------------------------------------------------

TEST(Index, ScatterAddAlongEveryDimInEveryNumericDtype) {
  for (DType dtype : kAllDTypes) {
    if (dtype == DType::Bool) continue;  // not a numeric dtype (see the error test)
    const Tensor self = random_values({4, 5, 6}, dtype, 2);
    const Tensor src = random_values({4, 6, 7}, dtype, 3);  // larger than the index: only a block is read
    for (int64_t dim = 0; dim < 3; ++dim) {
      const Tensor index = random_index(self.size(dim), {3, 4, 5}, dim + 11);  // many repeats
      const Tensor expected = naive_scatter_add(self, dim, index, src);
      EXPECT_TRUE(all_equal(scatter_add(self, dim, index, src), expected)) << dtype << " dim " << dim;
      EXPECT_TRUE(all_equal(scatter_add(non_contiguous(self), dim, non_contiguous(index), non_contiguous(src)),
                            expected))
          << dtype << " dim " << dim;
      EXPECT_TRUE(all_equal(self.scatter_add(dim - 3, reversed_layout(index), reversed_layout(src)), expected));
    }
  }
}

TEST(Index, ScatterAddAccumulatesRepeatedIndicesOutOfPlace) {
  const Tensor self = tensor<float>({10, 20, 30});
  const Tensor out = scatter_add(self, 0, tensor<int64_t>({0, 2, 0, 0}), tensor<float>({1, 2, 3, 4}));
  EXPECT_TRUE(all_equal(out, tensor<float>({18, 20, 32})));
  EXPECT_TRUE(all_equal(self, tensor<float>({10, 20, 30})));  // self untouched
  // Expanded (stride-0) self and src.
  const Tensor wide = scatter_add(tensor<float>({1}).expand({2, 3}), 1, tensor<int64_t>({2, 2, 0, 1}, {2, 2}),
                                  tensor<float>({5}).expand({2, 2}));
  EXPECT_TRUE(all_equal(wide, tensor<float>({1, 1, 11, 6, 6, 1}, {2, 3})));
}

TEST(Index, ScatterAddEmptyAndZeroDimCases) {
  const Tensor self = random_values({3, 4}, DType::Float64, 1);
  const Tensor out = scatter_add(self, 1, zeros({3, 0}, {.dtype = DType::Int64}), zeros({3, 2}, {.dtype = DType::Float64}));
  EXPECT_TRUE(all_equal(out, self));
  EXPECT_FALSE(out.storage().is_alias_of(self.storage()));
  const Tensor s = scalar_tensor(1.5, {.dtype = DType::Float64});
  EXPECT_TRUE(all_equal(scatter_add(s, 0, scalar_tensor(0, {.dtype = DType::Int64}),
                                    scalar_tensor(2.0, {.dtype = DType::Float64})),
                        scalar_tensor(3.5, {.dtype = DType::Float64})));
  EXPECT_TRUE(all_equal(scatter_add(s, 0, tensor<int64_t>({0}), tensor<double>({2.0})),
                        scalar_tensor(3.5, {.dtype = DType::Float64})));
}

// Many columns (the parallel path) and long columns with heavy repeats; random floats,
// whose sums depend on the order of accumulation. The naive loop adds in float, in the
// order of the index positions, which is the order the kernel promises whatever the
// number of threads: the results must agree bit for bit.
TEST(Index, ScatterAddIsDeterministicAndInSerialOrder) {
  const Shape sizes = {50, 40, 33};
  const Tensor self = random_nonzero(sizes, DType::Float32, 5);
  const Tensor src = random_nonzero(sizes, DType::Float32, 6);
  for (int64_t dim = 0; dim < 3; ++dim) {
    const Tensor index = random_index(3, sizes, dim + 21);  // every column hits 3 rows many times
    std::vector<float> expected = self.to_vector<float>();
    const std::vector<float> sv = src.to_vector<float>();
    for_each_indexed(sizes, index.to_vector<int64_t>(), sizes, dim,
                     [&](int64_t i, int64_t to) { expected[to] += sv[i]; });
    const Tensor got = scatter_add(self, dim, index, src);
    EXPECT_TRUE(all_equal(got, tensor(expected, sizes))) << "dim " << dim;
    EXPECT_TRUE(all_equal(scatter_add(non_contiguous(self), dim, index, src), got)) << "dim " << dim;
  }
}

// ---- index_select -------------------------------------------------------------------------

TEST(Index, IndexSelectAlongEveryDimInEveryDtype) {
  for (DType dtype : kAllDTypes) {
    const Tensor x = random_values({4, 5, 6}, dtype, 4);
    for (int64_t dim = 0; dim < 3; ++dim) {
      const Tensor index = tensor<int64_t>({3, 0, 0, 2, 3});  // repeats, out of order
      const Tensor expected = naive_index_select(x, dim, index);
      EXPECT_TRUE(all_equal(index_select(x, dim, index), expected)) << dtype << " dim " << dim;
      EXPECT_TRUE(all_equal(index_select(non_contiguous(x), dim - 3, non_contiguous(index)), expected)) << dtype;
      EXPECT_TRUE(all_equal(reversed_layout(x).index_select(dim, index), expected)) << dtype;
    }
  }
}

TEST(Index, IndexSelectEmptyZeroDimAndLargeCases) {
  const Tensor x = random_values({4, 5, 6}, DType::Float32, 4);
  EXPECT_EQ(index_select(x, 1, zeros({0}, {.dtype = DType::Int64})).sizes(), (Shape{4, 0, 6}));
  const Tensor one = index_select(x, 2, scalar_tensor(5, {.dtype = DType::Int64}));  // 0-d index: size 1
  EXPECT_EQ(one.sizes(), (Shape{4, 5, 1}));
  EXPECT_TRUE(all_equal(one, x.narrow(2, 5, 1)));
  const Tensor big = random_values({300, 40, 7}, DType::Float64, 5);
  const Tensor rows = random_index(300, {500}, 6);
  EXPECT_TRUE(all_equal(index_select(non_contiguous(big), 0, rows), naive_index_select(big, 0, rows)));
}

// ---- errors -------------------------------------------------------------------------------

// A tensor that claims to live on cuda:0 (host memory, never read): for device checks,
// which run before any kernel.
Tensor fake_cuda(std::vector<int64_t>& storage, const Shape& sizes, DType dtype) {
  return from_blob(storage.data(), sizes, {.dtype = dtype, .device = Device::cuda(0)});
}

TEST(Index, OutOfRangeIndicesNameTheOpTheIndexAndTheSize) {
  const Tensor x = zeros({3, 4});
  EXPECT_KILN_ERROR(gather(x, 1, tensor<int64_t>({0, 4}, {1, 2})), "gather", "index 4", "dimension 1", "size 4");
  EXPECT_KILN_ERROR(gather(x, 0, tensor<int64_t>({-1}, {1, 1})), "gather", "index -1", "size 3");  // no wrapping
  EXPECT_KILN_ERROR(gather(x, -2, tensor<int64_t>({1, 2, 99}, {3, 1})), "gather", "index 99", "dimension 0");
  EXPECT_KILN_ERROR(scatter_add(x, 0, tensor<int64_t>({3}, {1, 1}), zeros({1, 1})), "scatter_add", "index 3",
                    "size 3");
  EXPECT_KILN_ERROR(scatter_add(x, 1, tensor<int64_t>({0, -4}, {1, 2}), zeros({1, 2})), "scatter_add", "index -4",
                    "size 4");
  EXPECT_KILN_ERROR(index_select(x, 0, tensor<int64_t>({0, 3})), "index_select", "index 3", "size 3");
  EXPECT_KILN_ERROR(index_select(x, 1, tensor<int64_t>({-1})), "index_select", "index -1", "size 4");
  // A bad index among many, on the parallel path.
  Tensor index = random_index(64, {64, 64, 16}, 1);
  index.select(0, 40).select(0, 7).fill_(1000);
  EXPECT_KILN_ERROR(gather(zeros({64, 64, 16}), 0, index), "gather", "index 1000", "size 64");
}

TEST(Index, IndexDtypeDeviceAndShapeErrors) {
  const Tensor x = zeros({3, 4});
  const Tensor i11 = zeros({1, 1}, {.dtype = DType::Int64});
  EXPECT_KILN_ERROR(gather(x, 0, tensor<int32_t>({0}, {1, 1})), "gather", "int64", "int32");
  EXPECT_KILN_ERROR(gather(x, 0, zeros({1, 1})), "gather", "int64", "float32");
  EXPECT_KILN_ERROR(scatter_add(x, 0, zeros({1, 1}, {.dtype = DType::Bool}), zeros({1, 1})), "scatter_add", "int64",
                    "bool");
  EXPECT_KILN_ERROR(index_select(x, 0, tensor<int32_t>({0})), "index_select", "int64", "int32");
  EXPECT_KILN_ERROR(gather(x, 0, Tensor()), "gather", "undefined");

  EXPECT_KILN_ERROR(gather(x, 0, zeros({2}, {.dtype = DType::Int64})), "gather", "1 dimensions", "input has 2");
  EXPECT_KILN_ERROR(gather(x, 0, zeros({1, 5}, {.dtype = DType::Int64})), "gather", "[1, 5]", "larger", "[3, 4]",
                    "dimension 1");
  EXPECT_TRUE(all_equal(gather(x, 0, zeros({5, 4}, {.dtype = DType::Int64})), zeros({5, 4})));  // dim is free
  EXPECT_KILN_ERROR(gather(x, 2, i11), "gather", "out of range");

  EXPECT_KILN_ERROR(scatter_add(x, 0, i11, zeros({1, 1}, {.dtype = DType::Float64})), "scatter_add", "dtype",
                    "float32", "float64");
  EXPECT_KILN_ERROR(scatter_add(x, 0, zeros({1}, {.dtype = DType::Int64}), zeros({1, 1})), "scatter_add",
                    "1 dimensions", "self has 2");
  EXPECT_KILN_ERROR(scatter_add(x, 0, i11, zeros({1})), "scatter_add", "src has 1");
  EXPECT_KILN_ERROR(scatter_add(x, 0, zeros({1, 5}, {.dtype = DType::Int64}), zeros({1, 5})), "scatter_add",
                    "larger than self", "dimension 1");
  EXPECT_KILN_ERROR(scatter_add(x, 0, zeros({2, 2}, {.dtype = DType::Int64}), zeros({1, 2})), "scatter_add",
                    "larger than src", "dimension 0");  // src bounds the index along dim too
  EXPECT_KILN_ERROR(scatter_add(x, -3, i11, zeros({1, 1})), "scatter_add", "out of range");
  EXPECT_KILN_ERROR(scatter_add(zeros({2}, {.dtype = DType::Bool}), 0, zeros({1}, {.dtype = DType::Int64}),
                                zeros({1}, {.dtype = DType::Bool})),
                    "scatter_add", "bool");

  EXPECT_KILN_ERROR(index_select(x, 0, zeros({1, 1}, {.dtype = DType::Int64})), "index_select", "0-d or 1-d",
                    "[1, 1]");
  EXPECT_KILN_ERROR(index_select(scalar_tensor(1.0), 0, tensor<int64_t>({0})), "index_select", "0-d");
  EXPECT_KILN_ERROR(index_select(x, 2, tensor<int64_t>({0})), "index_select", "out of range");

  std::vector<int64_t> storage(4);
  const Tensor cuda_index = fake_cuda(storage, {1, 1}, DType::Int64);
  EXPECT_KILN_ERROR(gather(x, 0, cuda_index), "gather", "cuda:0", "cpu");
  EXPECT_KILN_ERROR(scatter_add(x, 0, cuda_index, zeros({1, 1})), "scatter_add", "cuda:0");
  EXPECT_KILN_ERROR(scatter_add(x, 0, i11, fake_cuda(storage, {1, 1}, DType::Float32)), "scatter_add", "src",
                    "cuda:0");
  EXPECT_KILN_ERROR(index_select(x, 0, fake_cuda(storage, {1}, DType::Int64)), "index_select", "cuda:0");
}

// ---- gradients ----------------------------------------------------------------------------

KILN_GRADCHECK_TEST(gather) {
  for (int64_t dim = 0; dim < 3; ++dim) {
    const Tensor index = random_index(3, {2, 3, 2}, dim + 1);  // smaller than x, with repeats
    EXPECT_TRUE(gradcheck([index, dim](const Inputs& v) { return gather(v[0], dim, index); },
                          {strided_grad_leaf({3, 4, 3}, dim + 1)}))
        << "dim " << dim;
  }
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return gather(v[0], 0, tensor<int64_t>({0, 0})); }, {grad_leaf({}, 1)}));
}

KILN_GRADCHECK_TEST(scatter_add) {
  for (int64_t dim = 0; dim < 3; ++dim) {
    const Tensor index = non_contiguous(random_index(3, {2, 3, 2}, dim + 4));
    EXPECT_TRUE(gradcheck([index, dim](const Inputs& v) { return scatter_add(v[0], dim, index, v[1]); },
                          {grad_leaf({3, 3, 3}, dim + 1), strided_grad_leaf({3, 4, 2}, dim + 2)}))  // src > index
        << "dim " << dim;
  }
  // self alone, then src alone.
  const Tensor index = tensor<int64_t>({0, 2, 2, 1, 0, 0}, {3, 2});
  EXPECT_TRUE(gradcheck([index](const Inputs& v) { return scatter_add(v[0], 0, index, ones({3, 2}, {.dtype = DType::Float64})); },
                        {strided_grad_leaf({3, 2}, 7)}));
  EXPECT_TRUE(gradcheck([index](const Inputs& v) { return scatter_add(zeros({3, 3}, {.dtype = DType::Float64}), 0, index, v[0]); },
                        {strided_grad_leaf({3, 2}, 8)}));
}

KILN_GRADCHECK_TEST(index_select) {
  const Tensor index = tensor<int64_t>({2, 0, 2, 1});  // a repeat: its gradients add up
  for (int64_t dim : {0, 1, -1}) {
    EXPECT_TRUE(gradcheck([index, dim](const Inputs& v) { return index_select(v[0], dim, index); },
                          {strided_grad_leaf({3, 3, 4}, 1)}))
        << "dim " << dim;
  }
  EXPECT_TRUE(gradcheck(
      [](const Inputs& v) { return index_select(v[0], 1, scalar_tensor(1, {.dtype = DType::Int64})); },
      {grad_leaf({2, 3}, 2)}));
}

}  // namespace
}  // namespace kiln
