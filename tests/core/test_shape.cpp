// cat, stack, split, split_with_sizes, chunk and meshgrid against naive loops over
// row-major coordinates: every dim (negative too), every dtype, mixed dtypes (promotion),
// empty and legacy-empty inputs, non-contiguous and expanded inputs, many inputs; split
// and chunk piece sizes; each validation error; gradient checks.
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

constexpr DType kAllDTypes[] = {DType::Float64, DType::Float32, DType::Float16, DType::BFloat16,
                                DType::Int64,   DType::Int32,   DType::UInt8,   DType::Bool};

// ---- naive references -------------------------------------------------------------------

Shape unravel(int64_t flat, const Shape& sizes) {
  Shape coords(sizes.size());
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    coords[d] = flat % sizes[d];
    flat /= sizes[d];
  }
  return coords;
}

int64_t ravel(const Shape& coords, const Shape& sizes) {
  int64_t flat = 0;
  for (size_t d = 0; d < sizes.size(); ++d) flat = flat * sizes[d] + coords[d];
  return flat;
}

// Random values exactly representable in every dtype: non-zero small integers (0/1 for
// bool), converted to `dtype`.
Tensor random_values(const Shape& sizes, DType dtype, uint64_t seed) {
  Generator gen(seed);
  if (dtype == DType::Bool) return randint(0, 2, sizes, {}, &gen).to(DType::Bool);
  return randint(1, 10, sizes, {}, &gen).to(dtype);
}

// The same values with the dims' memory order reversed (a transposed layout).
Tensor reversed_layout(const Tensor& t) {
  Shape reverse(t.dim());
  for (int64_t d = 0; d < t.dim(); ++d) reverse[d] = t.dim() - 1 - d;
  return t.permute(reverse).contiguous().permute(reverse);
}

// Output position p takes input k's element at p - (start of k along dim).
Tensor naive_cat(const std::vector<Tensor>& inputs, int64_t dim, DType dtype) {
  Shape out_sizes = inputs[0].sizes();
  out_sizes[dim] = 0;
  std::vector<std::vector<double>> values;
  for (const Tensor& t : inputs) {
    out_sizes[dim] += t.sizes()[dim];
    values.push_back(t.to_vector<double>());
  }
  std::vector<double> out(checked_numel(out_sizes, "naive_cat"));
  for (int64_t flat = 0; flat < static_cast<int64_t>(out.size()); ++flat) {
    Shape p = unravel(flat, out_sizes);
    size_t k = 0;
    while (p[dim] >= inputs[k].sizes()[dim]) p[dim] -= inputs[k++].sizes()[dim];
    out[flat] = values[k][ravel(p, inputs[k].sizes())];
  }
  return tensor(out, out_sizes).to(dtype);
}

// Output i of meshgrid ("ij") at p is input i at p[i].
Tensor naive_grid(const std::vector<Tensor>& inputs, size_t i) {
  Shape sizes;
  for (const Tensor& t : inputs) sizes.push_back(t.numel());
  const std::vector<double> v = inputs[i].to_vector<double>();
  std::vector<double> out(checked_numel(sizes, "naive_grid"));
  for (int64_t flat = 0; flat < static_cast<int64_t>(out.size()); ++flat) out[flat] = v[unravel(flat, sizes)[i]];
  return tensor(out, sizes).to(inputs[i].dtype());
}

// ---- cat ----------------------------------------------------------------------------------

TEST(Shape, CatAlongEveryDimInEveryDtype) {
  for (DType dtype : kAllDTypes) {
    for (int64_t dim = -3; dim < 3; ++dim) {
      const int64_t d = dim < 0 ? dim + 3 : dim;
      Shape sa = {2, 3, 4}, sb = sa, sc = sa;
      sb[d] = 1;
      sc[d] = 5;
      const Tensor a = random_values(sa, dtype, 1), b = random_values(sb, dtype, 2), c = random_values(sc, dtype, 3);
      const Tensor expected = naive_cat({a, b, c}, d, dtype);
      EXPECT_TRUE(all_equal(cat({a, b, c}, dim), expected)) << dtype << " dim " << dim;
      EXPECT_TRUE(all_equal(cat({non_contiguous(a), reversed_layout(b), c.transpose(0, 2).contiguous().transpose(0, 2)}, dim),
                            expected))
          << dtype << " dim " << dim;
    }
  }
}

TEST(Shape, CatOfExpandedAndOneDimInputs) {
  const Tensor row = random_nonzero({1, 4}, DType::Float32, 1).expand({3, 4});  // stride 0
  const Tensor x = random_nonzero({2, 4}, DType::Float32, 2);
  EXPECT_TRUE(all_equal(cat({row, x}), naive_cat({row.contiguous(), x}, 0, DType::Float32)));
  const Tensor v = tensor<float>({1, 2}), w = tensor<float>({3});
  EXPECT_TRUE(all_equal(cat({v, w, v}, -1), tensor<float>({1, 2, 3, 1, 2})));
}

TEST(Shape, CatOfManyInputs) {
  std::vector<Tensor> parts;
  for (int i = 0; i < 40; ++i) parts.push_back(random_nonzero({3, 1 + i % 4, 2}, DType::Float64, i + 1));
  EXPECT_TRUE(all_equal(cat(parts, 1), naive_cat(parts, 1, DType::Float64)));
}

TEST(Shape, CatResultIsANewTensor) {
  Tensor a = tensor<float>({1, 2});
  const Tensor out = cat({a, a});
  a.fill_(9);
  EXPECT_TRUE(all_equal(out, tensor<float>({1, 2, 1, 2})));
}

TEST(Shape, CatPromotesOverAllInputs) {
  struct Case {
    DType a, b, expected;
  };
  for (const Case& c : {Case{DType::Int32, DType::Float16, DType::Float16}, Case{DType::UInt8, DType::Int32, DType::Int32},
                        Case{DType::Bool, DType::UInt8, DType::UInt8}, Case{DType::Float16, DType::BFloat16, DType::Float32},
                        Case{DType::Int64, DType::Float32, DType::Float32}, Case{DType::Float32, DType::Float64, DType::Float64}}) {
    const Tensor a = random_values({2, 3}, c.a, 1), b = random_values({2, 2}, c.b, 2);
    const Tensor got = cat({a, b}, 1);
    EXPECT_EQ(got.dtype(), c.expected) << c.a << " + " << c.b;
    EXPECT_TRUE(all_equal(got, naive_cat({a, b}, 1, c.expected))) << c.a << " + " << c.b;
  }
  // Three inputs: the promotion folds over all of them, not just the first two.
  const Tensor three = cat({tensor<uint8_t>({1}), tensor<int32_t>({2}), tensor<double>({0.5})});
  EXPECT_TRUE(all_equal(three, tensor<double>({1, 2, 0.5})));
}

TEST(Shape, CatSkipsLegacyEmptyTensorsButPromotesWithThem) {
  const Tensor x = random_nonzero({2, 3}, DType::Float32, 1);
  const Tensor legacy = zeros({0}, {.dtype = DType::Float64});
  const Tensor got = cat({legacy, x, legacy, x, legacy}, 1);
  EXPECT_EQ(got.dtype(), DType::Float64);
  EXPECT_TRUE(all_equal(got, naive_cat({x, x}, 1, DType::Float64)));
  EXPECT_EQ(cat({legacy, legacy}).sizes(), (Shape{0}));
  // A legacy empty tensor needs no matching rank, but the skipped one is not the
  // reference: tensor 1 sets the rank here.
  EXPECT_TRUE(all_equal(cat({zeros({0}), x}, -2), x));
}

TEST(Shape, CatOfEmptyTensorsOfFullRank) {
  const Tensor x = random_nonzero({2, 3}, DType::Float32, 1);
  EXPECT_TRUE(all_equal(cat({zeros({2, 0}), x, zeros({2, 0})}, 1), x));
  EXPECT_EQ(cat({zeros({0, 3}), zeros({0, 3})}).sizes(), (Shape{0, 3}));
  EXPECT_EQ(cat({zeros({0, 3}), zeros({0, 3})}, 1).sizes(), (Shape{0, 6}));
}

// ---- stack --------------------------------------------------------------------------------

TEST(Shape, StackAlongEveryDim) {
  for (DType dtype : {DType::Float64, DType::BFloat16, DType::Int32, DType::Bool}) {
    const Tensor a = random_values({2, 3}, dtype, 1), b = random_values({2, 3}, dtype, 2);
    for (int64_t dim = -3; dim < 3; ++dim) {
      const int64_t d = dim < 0 ? dim + 3 : dim;
      const Tensor expected = naive_cat({a.unsqueeze(d), b.unsqueeze(d), a.unsqueeze(d)}, d, dtype);
      EXPECT_TRUE(all_equal(stack({a, b, a}, dim), expected)) << dtype << " dim " << dim;
      EXPECT_TRUE(all_equal(stack({non_contiguous(a), b.t().contiguous().t(), a}, dim), expected));
    }
  }
  EXPECT_TRUE(all_equal(stack({scalar_tensor(1.0), scalar_tensor(2.0)}), tensor<float>({1, 2})));
  EXPECT_TRUE(all_equal(stack({tensor<int32_t>({1}), tensor<float>({0.5f})}), tensor<float>({1, 0.5f}, {2, 1})));
  EXPECT_EQ(stack({zeros({0}), zeros({0})}).sizes(), (Shape{2, 0}));  // not legacy-skipped
}

// ---- split, split_with_sizes, chunk -----------------------------------------------------

Shape piece_sizes(const std::vector<Tensor>& pieces, int64_t dim) {
  Shape sizes;
  for (const Tensor& p : pieces) sizes.push_back(p.size(dim));
  return sizes;
}

// Each piece is a view of x at the right offset and with the right values.
void expect_pieces_of(const Tensor& x, const std::vector<Tensor>& pieces, int64_t dim) {
  int64_t offset = 0;
  for (const Tensor& p : pieces) {
    EXPECT_TRUE(p.storage().is_alias_of(x.storage()));
    EXPECT_TRUE(all_equal(p, x.narrow(dim, offset, p.size(dim))));
    offset += p.size(dim);
  }
  EXPECT_EQ(offset, x.size(dim));
}

TEST(Shape, SplitGivesViewsOfSplitSize) {
  const Tensor x = non_contiguous(random_nonzero({7, 5}, DType::Float32, 1));
  struct Case {
    int64_t split_size, dim;
    Shape expected;
  };
  for (const Case& c : {Case{3, 0, {3, 3, 1}}, Case{7, 0, {7}}, Case{10, 0, {7}}, Case{1, -1, {1, 1, 1, 1, 1}},
                        Case{2, 1, {2, 2, 1}}, Case{5, -2, {5, 2}}}) {
    const std::vector<Tensor> pieces = split(x, c.split_size, c.dim);
    EXPECT_EQ(piece_sizes(pieces, c.dim), c.expected) << "split_size " << c.split_size;
    expect_pieces_of(x, pieces, c.dim);
  }
  EXPECT_EQ(piece_sizes(x.split(3), 0), (Shape{3, 3, 1}));  // the method form
  // An empty dim gives one empty piece, for split_size 0 too.
  EXPECT_EQ(piece_sizes(split(zeros({0, 2}), 3), 0), (Shape{0}));
  EXPECT_EQ(piece_sizes(split(zeros({0, 2}), 0), 0), (Shape{0}));
}

TEST(Shape, SplitWithSizesGivesViewsOfTheGivenSizes) {
  const Tensor x = random_nonzero({3, 8}, DType::Float64, 2).t();  // [8, 3], transposed layout
  for (const Shape& sizes : {Shape{2, 0, 5, 1}, Shape{8}, Shape{0, 8, 0}, Shape{1, 1, 1, 1, 1, 1, 1, 1}}) {
    const std::vector<Tensor> pieces = split_with_sizes(x, sizes);
    EXPECT_EQ(piece_sizes(pieces, 0), sizes);
    expect_pieces_of(x, pieces, 0);
  }
  expect_pieces_of(x, split_with_sizes(x, {1, 2}, -1), 1);
}

TEST(Shape, ChunkFollowsTorchChunk) {
  // ceil(size / chunks) per piece; the last is smaller, and there may be fewer pieces.
  struct Case {
    int64_t size, chunks;
    Shape expected;
  };
  for (const Case& c : {Case{7, 3, {3, 3, 1}}, Case{6, 4, {2, 2, 2}}, Case{7, 4, {2, 2, 2, 1}}, Case{10, 4, {3, 3, 3, 1}},
                        Case{5, 10, {1, 1, 1, 1, 1}}, Case{6, 3, {2, 2, 2}}, Case{1, 1, {1}}, Case{0, 3, {0, 0, 0}}}) {
    const Tensor x = random_nonzero({2, c.size}, DType::Float32, 3);
    const std::vector<Tensor> pieces = chunk(x, c.chunks, 1);
    EXPECT_EQ(piece_sizes(pieces, 1), c.expected) << c.size << " in " << c.chunks;
    expect_pieces_of(x, pieces, 1);
    EXPECT_EQ(piece_sizes(x.chunk(c.chunks, -1), 1), c.expected);
  }
}

// ---- meshgrid -----------------------------------------------------------------------------

TEST(Shape, MeshgridIjMatchesNaiveGrids) {
  const Tensor x = random_nonzero({3}, DType::Float64, 1), y = non_contiguous(random_nonzero({2}, DType::Float64, 2));
  const Tensor z = random_nonzero({4}, DType::Float64, 3);
  const std::vector<Tensor> grids = meshgrid({x, y, z}, "ij");
  ASSERT_EQ(grids.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(grids[i].sizes(), (Shape{3, 2, 4}));
    EXPECT_TRUE(all_equal(grids[i], naive_grid({x, y, z}, i))) << "grid " << i;
  }
  EXPECT_TRUE(grids[0].storage().is_alias_of(x.storage()));  // expanded views, no copies
  EXPECT_EQ(grids[0].strides()[1], 0);
  // Hand-checked values: ij is matrix indexing.
  const std::vector<Tensor> small = meshgrid({tensor<int64_t>({1, 2, 3}), tensor<int64_t>({4, 5})});
  EXPECT_TRUE(all_equal(small[0], tensor<int64_t>({1, 1, 2, 2, 3, 3}, {3, 2})));
  EXPECT_TRUE(all_equal(small[1], tensor<int64_t>({4, 5, 4, 5, 4, 5}, {3, 2})));
}

TEST(Shape, MeshgridXySwapsTheFirstTwoDims) {
  const Tensor x = random_nonzero({3}, DType::Float32, 1), y = random_nonzero({2}, DType::Float32, 2);
  const Tensor z = random_nonzero({4}, DType::Float32, 3);
  const std::vector<Tensor> ij = meshgrid({x, y, z}, "ij");
  const std::vector<Tensor> xy = meshgrid({x, y, z}, "xy");
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(xy[i].sizes(), (Shape{2, 3, 4}));
    EXPECT_TRUE(all_equal(xy[i], ij[i].transpose(0, 1))) << "grid " << i;
  }
  const std::vector<Tensor> image = meshgrid({tensor<float>({1, 2, 3}), tensor<float>({4, 5})}, "xy");
  EXPECT_TRUE(all_equal(image[0], tensor<float>({1, 2, 3, 1, 2, 3}, {2, 3})));
  EXPECT_TRUE(all_equal(image[1], tensor<float>({4, 4, 4, 5, 5, 5}, {2, 3})));
}

TEST(Shape, MeshgridOfScalarsAndSingleInputs) {
  const Tensor x = tensor<float>({1, 2, 3});
  const std::vector<Tensor> one = meshgrid({x}, "xy");  // nothing to swap
  EXPECT_TRUE(all_equal(one[0], x));
  const std::vector<Tensor> with_scalar = meshgrid({scalar_tensor(7.0f), x});
  EXPECT_EQ(with_scalar[0].sizes(), (Shape{1, 3}));
  EXPECT_TRUE(all_equal(with_scalar[0], full({1, 3}, 7.0f)));
  EXPECT_TRUE(all_equal(with_scalar[1], x.reshape({1, 3})));
  EXPECT_EQ(meshgrid({x, zeros({0})})[0].sizes(), (Shape{3, 0}));
}

// ---- errors -------------------------------------------------------------------------------

// A tensor that claims to live on cuda:0 (host memory, never read): for device checks,
// which run before any kernel.
Tensor fake_cuda(std::vector<float>& storage, const Shape& sizes) {
  return from_blob(storage.data(), sizes, {.dtype = DType::Float32, .device = Device::cuda(0)});
}

TEST(Shape, CatErrorsNameTheOffendingTensor) {
  EXPECT_KILN_ERROR(cat({}), "cat", "non-empty");
  EXPECT_KILN_ERROR(cat({zeros({2}), Tensor()}), "cat", "tensor 1 is undefined");
  EXPECT_KILN_ERROR(cat({zeros({2, 3}), zeros({2, 4})}, 0), "cat", "tensor 1", "[2, 4]", "tensor 0", "[2, 3]",
                    "dimension 1");
  EXPECT_KILN_ERROR(cat({zeros({0}), zeros({2, 3}), zeros({3, 3})}, 1), "cat", "tensor 2", "[3, 3]", "tensor 1",
                    "[2, 3]");
  EXPECT_KILN_ERROR(cat({zeros({2, 3}), zeros({3})}, 0), "cat", "tensor 1 has 1 dimensions", "tensor 0 has 2");
  EXPECT_KILN_ERROR(cat({zeros({2}), scalar_tensor(1.0)}), "cat", "zero-dimensional", "position 1");
  EXPECT_KILN_ERROR(cat({zeros({2})}, 1), "cat", "out of range");
  EXPECT_KILN_ERROR(cat({zeros({2, 2})}, -3), "cat", "out of range");
  std::vector<float> storage(4);
  EXPECT_KILN_ERROR(cat({zeros({2, 2}), fake_cuda(storage, {2, 2})}), "cat", "same device", "tensor 1", "cuda:0");
  EXPECT_KILN_ERROR(cat({zeros({2, 2}), fake_cuda(storage, {0})}), "cat", "same device");  // skipped, still checked
}

TEST(Shape, StackSplitChunkMeshgridErrors) {
  EXPECT_KILN_ERROR(stack({}), "stack", "non-empty");
  EXPECT_KILN_ERROR(stack({zeros({2}), zeros({3})}), "stack", "equal size", "[2]", "entry 0", "[3]", "entry 1");
  EXPECT_KILN_ERROR(stack({zeros({2, 3}), zeros({3, 2})}), "stack", "equal size");
  EXPECT_KILN_ERROR(stack({zeros({2})}, 2), "stack", "out of range");
  EXPECT_KILN_ERROR(split(zeros({4}), 0), "split", "positive", "got 0");
  EXPECT_KILN_ERROR(split(zeros({4}), -1), "split", "positive", "got -1");
  EXPECT_KILN_ERROR(split(scalar_tensor(1.0), 1), "split", "0-d");
  EXPECT_KILN_ERROR(split(zeros({4}), 1, 1), "split", "out of range");
  EXPECT_KILN_ERROR(split_with_sizes(zeros({4}), {1, 2}), "split_with_sizes", "add up to 3", "size 4");
  EXPECT_KILN_ERROR(split_with_sizes(zeros({4}), {5, -1}), "split_with_sizes", "non-negative");
  EXPECT_KILN_ERROR(split_with_sizes(zeros({4}), {4}, -2), "split_with_sizes", "out of range");
  EXPECT_KILN_ERROR(chunk(zeros({4}), 0), "chunk", "positive");
  EXPECT_KILN_ERROR(chunk(scalar_tensor(1.0), 2), "chunk", "0-d");
  EXPECT_KILN_ERROR(chunk(zeros({4}), 2, 1), "chunk", "out of range");
  EXPECT_KILN_ERROR(meshgrid({}), "meshgrid", "non-empty");
  EXPECT_KILN_ERROR(meshgrid({zeros({2}), zeros({2, 2})}), "meshgrid", "0-d or 1-d", "tensor 1", "[2, 2]");
  EXPECT_KILN_ERROR(meshgrid({zeros({2})}, "yx"), "meshgrid", "indexing", "yx");
  EXPECT_KILN_ERROR(meshgrid({zeros({2}), zeros({2}, {.dtype = DType::Float64})}), "meshgrid", "same dtype",
                    "float64", "float32");
  std::vector<float> storage(2);
  EXPECT_KILN_ERROR(meshgrid({zeros({2}), fake_cuda(storage, {2})}), "meshgrid", "same device", "cuda:0");
}

// ---- gradients ----------------------------------------------------------------------------

TEST(Shape, CatGradientsKeepEachInputsDtypeAndSkipLegacyEmpty) {
  Tensor a = random_nonzero({2, 2}, DType::Float32, 1).requires_grad_();
  Tensor b = random_nonzero({1, 2}, DType::Float64, 2).requires_grad_();
  Tensor skipped = zeros({0}, {.dtype = DType::Float16}).requires_grad_();
  const Tensor out = cat({a, skipped, b});
  EXPECT_EQ(out.dtype(), DType::Float64);
  mul(out, arange(6, {.dtype = DType::Float64}).reshape({3, 2})).sum().backward();
  EXPECT_EQ(a.grad().dtype(), DType::Float32);
  EXPECT_TRUE(all_equal(a.grad(), tensor<float>({0, 1, 2, 3}, {2, 2})));
  EXPECT_TRUE(all_equal(b.grad(), tensor<double>({4, 5}, {1, 2})));
  EXPECT_EQ(skipped.grad().sizes(), (Shape{0}));
  EXPECT_EQ(skipped.grad().dtype(), DType::Float16);
}

KILN_GRADCHECK_TEST(cat) {
  for (int64_t dim : {0, 1, -1}) {
    EXPECT_TRUE(gradcheck([dim](const Inputs& v) { return cat(v, dim); },
                          {grad_leaf({2, 3, 2}, 1), strided_grad_leaf({2, 3, 2}, 2), grad_leaf({2, 3, 2}, 3)}))
        << "dim " << dim;
  }
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return cat({v[0], v[1], v[0]}, 1); },  // an input used twice
                        {strided_grad_leaf({2, 3}, 4), grad_leaf({2, 1}, 5)}));
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return cat({v[0], v[1].expand({3, 2})}, 0); },
                        {grad_leaf({2, 2}, 6), grad_leaf({1, 2}, 7)}));
}

KILN_GRADCHECK_TEST(stack) {
  for (int64_t dim : {0, 1, 2, -1}) {
    EXPECT_TRUE(gradcheck([dim](const Inputs& v) { return stack(v, dim); },
                          {grad_leaf({2, 3}, 1), strided_grad_leaf({2, 3}, 2)}))
        << "dim " << dim;
  }
}

KILN_GRADCHECK_TEST(split) {
  // Pieces used unequally (some twice, the last not at all) so each gets its own gradient.
  EXPECT_TRUE(gradcheck(
      [](const Inputs& v) {
        const std::vector<Tensor> p = split(v[0], 2, 1);  // sizes 2, 2, 1
        return add(mul(p[0], p[1]), p[0]);
      },
      {strided_grad_leaf({3, 5}, 1)}));
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return exp(split(v[0], 3, 0)[2]); }, {grad_leaf({7, 2}, 2)}));
}

KILN_GRADCHECK_TEST(split_with_sizes) {
  EXPECT_TRUE(gradcheck(
      [](const Inputs& v) {
        const std::vector<Tensor> p = split_with_sizes(v[0], {1, 0, 3}, 0);
        return mul(exp(p[2]), p[0]);
      },
      {strided_grad_leaf({4, 2}, 1)}));
}

KILN_GRADCHECK_TEST(chunk) {
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return sum(stack(chunk(v[0], 3, 0)), {1}); },
                        {strided_grad_leaf({6, 2}, 1)}));
  EXPECT_TRUE(gradcheck(
      [](const Inputs& v) {
        const std::vector<Tensor> p = chunk(v[0], 4, -1);  // 7 in 4 -> 2, 2, 2, 1
        return mul(p[3], exp(p[1].narrow(1, 0, 1)));
      },
      {grad_leaf({2, 7}, 2)}));
}

KILN_GRADCHECK_TEST(meshgrid) {
  for (const char* indexing : {"ij", "xy"}) {
    EXPECT_TRUE(gradcheck(
        [indexing](const Inputs& v) {
          const std::vector<Tensor> g = meshgrid(v, indexing);
          return mul(mul(g[0], exp(g[1])), g[2]);
        },
        {grad_leaf({3}, 1), strided_grad_leaf({2}, 2), grad_leaf({4}, 3)}))
        << indexing;
  }
}

}  // namespace
}  // namespace kiln
