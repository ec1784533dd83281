// gather, scatter_add and index_select against naive loops along every dim of 3-d
// tensors, with non-contiguous inputs and indices, repeated indices, each dtype; bounds
// and shape errors; gradient checks.
#include <gtest/gtest.h>

#include "core/ops.h"
#include "tests/gradcheck.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

using testing::all_close;
using testing::all_equal;
using testing::gradcheck;
using testing::non_contiguous;
using testing::random_nonzero;
using Inputs = std::vector<Tensor>;

// Row-major position of (i0, i1, i2) in `sizes`.
int64_t at(const std::vector<int64_t>& s, int64_t i0, int64_t i1, int64_t i2) { return (i0 * s[1] + i1) * s[2] + i2; }

Tensor naive_gather(const Tensor& x, int64_t dim, const Tensor& index) {
  const std::vector<double> xv = x.to_vector<double>();
  const std::vector<int64_t> iv = index.to_vector<int64_t>();
  const std::vector<int64_t> xs = x.sizes(), is = index.sizes();
  std::vector<double> out(iv.size());
  for (int64_t a = 0; a < is[0]; ++a)
    for (int64_t b = 0; b < is[1]; ++b)
      for (int64_t c = 0; c < is[2]; ++c) {
        int64_t p[3] = {a, b, c};
        p[dim] = iv[at(is, a, b, c)];
        out[at(is, a, b, c)] = xv[at(xs, p[0], p[1], p[2])];
      }
  return tensor(out, is).to(x.dtype());
}

Tensor naive_scatter_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  std::vector<double> out = self.to_vector<double>();
  const std::vector<double> sv = src.contiguous().to_vector<double>();
  const std::vector<int64_t> iv = index.to_vector<int64_t>();
  const std::vector<int64_t> ss = self.sizes(), is = index.sizes(), srcs = src.sizes();
  for (int64_t a = 0; a < is[0]; ++a)
    for (int64_t b = 0; b < is[1]; ++b)
      for (int64_t c = 0; c < is[2]; ++c) {
        int64_t p[3] = {a, b, c};
        p[dim] = iv[at(is, a, b, c)];
        out[at(ss, p[0], p[1], p[2])] += sv[at(srcs, a, b, c)];
      }
  return tensor(out, ss).to(self.dtype());
}

TEST(Index, GatherAlongEveryDim) {
  for (DType dtype : {DType::Float64, DType::Float32, DType::Float16, DType::Int64, DType::UInt8}) {
    const Tensor x = mul(random_nonzero({4, 5, 6}, DType::Float64, 1), 10.0).to(dtype);
    for (int64_t dim = 0; dim < 3; ++dim) {
      std::vector<int64_t> is = {3, 4, 5};
      Generator gen(dim + 7);
      const Tensor index = randint(0, x.size(dim), is, {}, &gen);
      EXPECT_TRUE(all_equal(gather(x, dim, index), naive_gather(x, dim, index)));
      EXPECT_TRUE(all_equal(gather(non_contiguous(x), dim, non_contiguous(index)), naive_gather(x, dim, index)));
      EXPECT_TRUE(all_equal(x.gather(dim - 3, index), naive_gather(x, dim, index)));
    }
  }
}

TEST(Index, ScatterAddAccumulatesRepeatedIndices) {
  for (DType dtype : {DType::Float64, DType::Float32, DType::Int64}) {
    const Tensor self = mul(random_nonzero({4, 5, 6}, DType::Float64, 2), 10.0).to(dtype);
    const Tensor src = mul(random_nonzero({4, 5, 7}, DType::Float64, 3), 10.0).to(dtype);
    for (int64_t dim = 0; dim < 3; ++dim) {
      Generator gen(dim + 11);
      const Tensor index = randint(0, self.size(dim), {3, 4, 5}, {}, &gen);  // many repeats
      const Tensor expected = naive_scatter_add(self, dim, index, src);
      EXPECT_TRUE(all_close(scatter_add(self, dim, index, src), expected));
      EXPECT_TRUE(all_close(scatter_add(non_contiguous(self), dim, index, non_contiguous(src)), expected));
    }
  }
  const Tensor base = zeros({3});
  const Tensor out = scatter_add(base, 0, tensor<int64_t>({0, 2, 0, 0}), tensor<float>({1, 2, 3, 4}));
  EXPECT_TRUE(all_equal(out, tensor<float>({8, 0, 2})));
  EXPECT_TRUE(all_equal(base, zeros({3})));  // out of place
}

TEST(Index, IndexSelectAlongEveryDim) {
  const Tensor x = random_nonzero({4, 5, 6}, DType::Float32, 4);
  const Tensor index = tensor<int64_t>({3, 0, 0, 2});
  for (int64_t dim = 0; dim < 3; ++dim) {
    std::vector<int64_t> shape(3, 1);
    shape[dim] = 4;
    std::vector<int64_t> full_shape = x.sizes();
    full_shape[dim] = 4;
    const Tensor expected = naive_gather(x, dim, index.reshape(shape).expand(full_shape).contiguous());
    EXPECT_TRUE(all_equal(index_select(x, dim, index), expected));
    EXPECT_TRUE(all_equal(index_select(non_contiguous(x), dim, index), expected));
  }
  EXPECT_EQ(index_select(x, 1, zeros({0}, {.dtype = DType::Int64})).sizes(), (std::vector<int64_t>{4, 0, 6}));
}

TEST(Index, ErrorsNameTheOpTheIndexAndTheSize) {
  const Tensor x = zeros({3, 4});
  EXPECT_KILN_ERROR(gather(x, 1, tensor<int64_t>({0, 4}, {1, 2})), "gather", "index 4", "size 4");
  EXPECT_KILN_ERROR(gather(x, 0, tensor<int64_t>({-1}, {1, 1})), "gather", "index -1");
  EXPECT_KILN_ERROR(gather(x, 0, tensor<int32_t>({0}, {1, 1})), "gather", "int64", "int32");
  EXPECT_KILN_ERROR(gather(x, 0, zeros({1}, {.dtype = DType::Int64})), "gather", "1 dimensions");
  EXPECT_KILN_ERROR(gather(x, 0, zeros({1, 5}, {.dtype = DType::Int64})), "gather", "exceeds");
  EXPECT_KILN_ERROR(scatter_add(x, 0, tensor<int64_t>({3}, {1, 1}), zeros({1, 1})), "scatter_add", "index 3",
                    "size 3");
  EXPECT_KILN_ERROR(scatter_add(x, 0, zeros({1, 1}, {.dtype = DType::Int64}), zeros({1, 1}, {.dtype = DType::Float64})),
                    "scatter_add", "dtype");
  EXPECT_KILN_ERROR(index_select(x, 0, tensor<int64_t>({0, 3})), "index_select", "index 3", "size 3");
  EXPECT_KILN_ERROR(index_select(x, 0, zeros({1, 1}, {.dtype = DType::Int64})), "index_select", "1-d");
  EXPECT_KILN_ERROR(index_select(x, 2, tensor<int64_t>({0})), "index_select", "out of range");
}



KILN_GRADCHECK_TEST(gather) {
  const Tensor index = tensor<int64_t>({0, 2, 2, 1, 0, 0}, {2, 3});
  EXPECT_TRUE(gradcheck([index](const Inputs& v) { return gather(v[0], 1, index); }, {testing::strided_grad_leaf({2, 4}, 1)}));
}

KILN_GRADCHECK_TEST(scatter_add) {
  const Tensor index = tensor<int64_t>({0, 2, 2, 1, 0, 0}, {3, 2});
  EXPECT_TRUE(gradcheck([index](const Inputs& v) { return scatter_add(v[0], 0, index, v[1]); },
                        {testing::grad_leaf({3, 3}, 1), testing::strided_grad_leaf({3, 2}, 2)}));
}

KILN_GRADCHECK_TEST(index_select) {
  const Tensor index = tensor<int64_t>({2, 0, 2});
  EXPECT_TRUE(gradcheck([index](const Inputs& v) { return index_select(v[0], 1, index); }, {testing::strided_grad_leaf({2, 3}, 1)}));
}

}  // namespace
}  // namespace kiln
