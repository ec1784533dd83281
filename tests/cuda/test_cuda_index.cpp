// CUDA index kernels (kernels/cuda/index.cu) against the CPU backend: gather, index_select
// and scatter_add in every dtype each supports, along every dim of 1-d..4-d inputs, with
// contiguous and non-contiguous operands, expanded (stride-0) indices, repeated indices,
// empty and 0-d cases, poisoned outputs (Note [Poisoned outputs]), out-of-range indices
// (a kiln::Error, after which the device still works), and gradients through the public
// ops. gather/index_select move elements, so they must equal the CPU exactly; scatter_add
// is exact for integers and within a few roundings for floats (atomics add in any order).
#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "core/ops.h"
#include "tests/cuda/cuda_test_util.h"

namespace kiln {
namespace {

using testing::all_equal;
using testing::gaps_untouched;
using testing::kCuda;
using testing::matches_cpu;
using testing::on_device;
using testing::poisoned_strided;
using testing::random_for;
using Shape = std::vector<int64_t>;

const std::vector<Shape> kShapes = {{7}, {3, 5}, {2, 3, 4}, {2, 3, 1, 5}};

Tensor random_index(int64_t high, const Shape& sizes, uint64_t seed) {
  Generator gen(seed);
  return randint(0, high, sizes, {.dtype = DType::Int64}, &gen);
}

// An index shape for `x_shape` along dim: `extent` along dim, one less elsewhere where it
// can be (the index may be smaller than the other operands outside dim).
Shape index_shape(const Shape& x_shape, int64_t dim, int64_t extent) {
  Shape s = x_shape;
  s[dim] = extent;
  for (size_t d = 0; d < s.size(); ++d) {
    if (static_cast<int64_t>(d) != dim && s[d] > 1) {
      --s[d];
      break;
    }
  }
  return s;
}

// "float32 [2, 3] dim 1 strided", for SCOPED_TRACE.
std::string describe(DType dtype, const Shape& shape, int64_t dim, bool strided) {
  std::ostringstream os;
  os << dtype << " " << shape << " dim " << dim << (strided ? " strided" : " contiguous");
  return os.str();
}

int variants(DType dtype) { return dtype == DType::Bool ? 2 : 1; }

// Calls body(dtype, shape, dim, seed) for every dtype of `dtypes`, shape of kShapes and
// dim of the shape, with a fresh seed each time.
template <typename Body>
void for_each_case(const std::vector<DType>& dtypes, uint64_t seed, const Body& body) {
  for (DType dtype : dtypes) {
    for (const Shape& shape : kShapes) {
      for (int64_t dim = 0; dim < static_cast<int64_t>(shape.size()); ++dim) body(dtype, shape, dim, seed += 3);
    }
  }
}

// `kernel(out)` (a direct backend call) writes `expected` into a poisoned, strided `out`,
// and nothing between its elements, for each poison of Note [Poisoned outputs].
template <typename Kernel>
void expect_kernel_writes(const Tensor& expected, const Kernel& kernel) {
  for (int variant = 0; variant < variants(expected.dtype()); ++variant) {
    Tensor buffer;
    const Tensor out = poisoned_strided(expected.sizes(), expected.dtype(), kCuda, &buffer, variant);
    kernel(out);
    EXPECT_TRUE(all_equal(out.cpu(), expected));
    EXPECT_TRUE(gaps_untouched(buffer, variant));
  }
}

// ---- gather ------------------------------------------------------------------------------

TEST(CudaIndex, GatherMatchesCpuAlongEveryDimInEveryDtype) {
  KILN_REQUIRE_CUDA();
  for_each_case(testing::kAllDTypes, 1, [](DType dtype, const Shape& shape, int64_t dim, uint64_t seed) {
    const Tensor x = random_for(shape, dtype, seed);
    const Tensor index = random_index(shape[dim], index_shape(shape, dim, shape[dim] + 2), seed + 1);
    const Tensor expected = gather(x, dim, index);
    for (bool strided : {false, true}) {
      SCOPED_TRACE(describe(dtype, shape, dim, strided));
      const Tensor x_cuda = on_device(x, kCuda, strided), index_cuda = on_device(index, kCuda, strided);
      EXPECT_TRUE(all_equal(gather(x_cuda, dim, index_cuda).cpu(), expected));
      // Both bounds modes (Note [Checked indices]): the checked-already path skips only the
      // flag and the sync, never the work.
      for (const Backend::IndexBounds bounds : {Backend::IndexBounds::Check, Backend::IndexBounds::Checked}) {
        expect_kernel_writes(expected,
                             [&](const Tensor& out) { backend(kCuda).gather(x_cuda, dim, index_cuda, out, bounds); });
      }
    }
  });
}

TEST(CudaIndex, GatherWithExpandedIndexAndInput) {
  KILN_REQUIRE_CUDA();
  const Tensor x = random_for({1, 6}, DType::Float32, 3).expand({4, 6});  // stride 0 along dim 0
  const Tensor index = random_index(6, {1, 5}, 4).expand({4, 5});
  const Tensor expected = gather(x, 1, index);
  EXPECT_TRUE(all_equal(gather(x.to(kCuda).expand({4, 6}), 1, index.to(kCuda).expand({4, 5})).cpu(), expected));
  const Tensor x_cuda = random_for({1, 6}, DType::Float32, 3).to(kCuda).expand({4, 6});
  const Tensor index_cuda = random_index(6, {1, 5}, 4).to(kCuda).expand({4, 5});
  EXPECT_TRUE(all_equal(gather(x_cuda, 1, index_cuda).cpu(), expected));
}

TEST(CudaIndex, GatherEmptyAndZeroDimCases) {
  KILN_REQUIRE_CUDA();
  const Tensor x = random_for({3, 4}, DType::Float32, 5);
  const Tensor empty_index = zeros({0, 4}, {.dtype = DType::Int64});
  EXPECT_EQ(gather(x.to(kCuda), 0, empty_index.to(kCuda)).sizes(), Shape({0, 4}));
  const Tensor scalar = random_for({}, DType::Float64, 6);
  const Tensor zero = zeros({}, {.dtype = DType::Int64});
  const Tensor expected = gather(scalar, 0, zero);
  const Tensor got = gather(scalar.to(kCuda), 0, zero.to(kCuda));
  EXPECT_EQ(got.dim(), 0);
  EXPECT_TRUE(all_equal(got.cpu(), expected));
}

TEST(CudaIndex, GatherLargeInputNeedsManyBlocks) {
  KILN_REQUIRE_CUDA();
  const Tensor x = random_for({129, 1031}, DType::Float32, 7);
  const Tensor index = random_index(1031, {129, 2000}, 8);
  EXPECT_TRUE(all_equal(gather(x.to(kCuda), 1, index.to(kCuda)).cpu(), gather(x, 1, index)));
}

// ---- index_select ------------------------------------------------------------------------

TEST(CudaIndex, IndexSelectMatchesCpuAlongEveryDimInEveryDtype) {
  KILN_REQUIRE_CUDA();
  for_each_case(testing::kAllDTypes, 100, [](DType dtype, const Shape& shape, int64_t dim, uint64_t seed) {
    const Tensor x = random_for(shape, dtype, seed);
    const Tensor index = random_index(shape[dim], {6}, seed + 1);  // repeats likely
    const Tensor expected = index_select(x, dim, index);
    for (bool strided : {false, true}) {
      SCOPED_TRACE(describe(dtype, shape, dim, strided));
      const Tensor x_cuda = on_device(x, kCuda, strided), index_cuda = on_device(index, kCuda, strided);
      EXPECT_TRUE(all_equal(index_select(x_cuda, dim, index_cuda).cpu(), expected));
      expect_kernel_writes(expected,
                           [&](const Tensor& out) { backend(kCuda).index_select(x_cuda, dim, index_cuda, out); });
    }
  });
}

TEST(CudaIndex, IndexSelectEmbeddingRowsEmptyAndZeroDimIndex) {
  KILN_REQUIRE_CUDA();
  const Tensor table = random_for({1000, 64}, DType::BFloat16, 9);
  const Tensor tokens = random_index(1000, {4096}, 10);
  EXPECT_TRUE(all_equal(index_select(table.to(kCuda), 0, tokens.to(kCuda)).cpu(), index_select(table, 0, tokens)));
  const Tensor none = zeros({0}, {.dtype = DType::Int64});
  EXPECT_EQ(index_select(table.to(kCuda), 0, none.to(kCuda)).sizes(), Shape({0, 64}));
  const Tensor one = full({}, Scalar(int64_t{3}), {.dtype = DType::Int64});
  EXPECT_TRUE(all_equal(index_select(table.to(kCuda), 1, one.to(kCuda)).cpu(), index_select(table, 1, one)));
}

// ---- scatter_add -------------------------------------------------------------------------

// Integer sums are exact; floating ones may round differently (atomics in any order),
// by up to one rounding per term: up to ~15 terms here, and Half/BFloat16 round on every
// add, so they get twice the slack of float32/64.
::testing::AssertionResult sums_match(const Tensor& cuda_result, const Tensor& cpu_result) {
  if (!is_floating(cpu_result.dtype())) return all_equal(cuda_result.cpu(), cpu_result);
  const bool half_type = cpu_result.dtype() == DType::Float16 || cpu_result.dtype() == DType::BFloat16;
  return matches_cpu(cuda_result, cpu_result, /*slack=*/half_type ? 8.0 : 4.0);
}

TEST(CudaIndex, ScatterAddMatchesCpuAlongEveryDimInEveryNumericDtype) {
  KILN_REQUIRE_CUDA();
  for_each_case(testing::kNumericDTypes, 200, [](DType dtype, const Shape& shape, int64_t dim, uint64_t seed) {
    const Tensor self = random_for(shape, dtype, seed);
    const Shape idx_shape = index_shape(shape, dim, 2 * shape[dim] + 1);  // repeated targets
    Shape src_shape = idx_shape;
    for (int64_t& s : src_shape) ++s;  // only the index-shaped block of src is used
    const Tensor src = random_for(src_shape, dtype, seed + 1);
    const Tensor index = random_index(shape[dim], idx_shape, seed + 2);
    const Tensor expected = scatter_add(self, dim, index, src);
    for (bool strided : {false, true}) {
      SCOPED_TRACE(describe(dtype, shape, dim, strided));
      const Tensor self_cuda = on_device(self, kCuda, strided), index_cuda = on_device(index, kCuda, strided);
      const Tensor src_cuda = on_device(src, kCuda, strided);
      EXPECT_TRUE(sums_match(scatter_add(self_cuda, dim, index_cuda, src_cuda), expected));
      // The kernel directly, accumulating into a strided view of a poisoned buffer, in both
      // bounds modes (Note [Checked indices]).
      for (const Backend::IndexBounds bounds : {Backend::IndexBounds::Check, Backend::IndexBounds::Checked}) {
        Tensor buffer;
        Tensor out = poisoned_strided(shape, dtype, kCuda, &buffer);
        {
          NoGradGuard no_grad;
          out.copy_(self_cuda);
        }
        backend(kCuda).scatter_add(out, dim, index_cuda, src_cuda, bounds);
        EXPECT_TRUE(sums_match(out, expected));
        EXPECT_TRUE(gaps_untouched(buffer));
      }
    }
  });
}

// Thousands of contributions to a few elements: the atomics must not lose any.
TEST(CudaIndex, ScatterAddAccumulatesHeavilyRepeatedIndices) {
  KILN_REQUIRE_CUDA();
  for (DType dtype : {DType::Int64, DType::Int32, DType::UInt8, DType::Float32, DType::Float64}) {
    SCOPED_TRACE(::testing::Message() << dtype);
    const Tensor self = zeros({3, 4}, {.dtype = dtype});
    const Tensor src = ones({5000, 4}, {.dtype = dtype});
    const Tensor index = random_index(3, {5000, 4}, 11);
    const Tensor expected = scatter_add(self, 0, index, src);  // uint8 wraps mod 256 on both
    EXPECT_TRUE(all_equal(scatter_add(self.to(kCuda), 0, index.to(kCuda), src.to(kCuda)).cpu(), expected));
  }
  // Neighbouring bytes of one 32-bit word hit at once: the uint8 CAS loop keeps each.
  const Tensor bytes = zeros({8}, {.dtype = DType::UInt8});
  Tensor index = empty({4096}, {.dtype = DType::Int64});
  for (int64_t i = 0; i < 4096; ++i) index.data_ptr<int64_t>()[i] = i % 8;
  const Tensor src = ones({4096}, {.dtype = DType::UInt8});
  EXPECT_TRUE(all_equal(scatter_add(bytes.to(kCuda), 0, index.to(kCuda), src.to(kCuda)).cpu(),
                        scatter_add(bytes, 0, index, src)));
  // Half and bfloat16: small integers, whose sums are exact in any order.
  for (DType dtype : {DType::Float16, DType::BFloat16}) {
    const Tensor self = zeros({2, 3}, {.dtype = dtype});
    const Tensor src = ones({100, 3}, {.dtype = dtype});
    const Tensor idx = random_index(2, {100, 3}, 12);
    EXPECT_TRUE(all_equal(scatter_add(self.to(kCuda), 0, idx.to(kCuda), src.to(kCuda)).cpu(),
                          scatter_add(self, 0, idx, src)));
  }
}

TEST(CudaIndex, ScatterAddEmptyAndZeroDimCases) {
  KILN_REQUIRE_CUDA();
  const Tensor self = random_for({3, 4}, DType::Float32, 13);
  const Tensor none = zeros({0, 4}, {.dtype = DType::Int64});
  const Tensor src = random_for({2, 4}, DType::Float32, 14);
  EXPECT_TRUE(all_equal(scatter_add(self.to(kCuda), 0, none.to(kCuda), src.to(kCuda)).cpu(), self));
  const Tensor scalar = random_for({}, DType::Float64, 15);
  const Tensor zero = zeros({}, {.dtype = DType::Int64});
  const Tensor add = random_for({}, DType::Float64, 16);
  const Tensor got = scatter_add(scalar.to(kCuda), 0, zero.to(kCuda), add.to(kCuda));
  EXPECT_EQ(got.dim(), 0);
  EXPECT_TRUE(all_equal(got.cpu(), scatter_add(scalar, 0, zero, add)));
}

// ---- bounds ------------------------------------------------------------------------------

TEST(CudaIndex, OutOfRangeIndicesAreErrorsAndTheDeviceStillWorks) {
  KILN_REQUIRE_CUDA();
  const Tensor x = random_for({5, 3}, DType::Float32, 17).to(kCuda);
  // A valid index for dim 0 (size 5) or dim 1 (size 3), with one bad value.
  const auto index_with = [](int64_t bad, int64_t size = 5) {
    Tensor index = random_index(size, {4, 3}, 18);
    index.data_ptr<int64_t>()[7] = bad;
    return index.to(kCuda);
  };
  EXPECT_KILN_ERROR(gather(x, 0, index_with(5)), "gather: index 5 is out of bounds for dimension 0 with size 5");
  EXPECT_KILN_ERROR(gather(x, 0, index_with(-1)), "gather: index -1 is out of bounds for dimension 0 with size 5");
  EXPECT_KILN_ERROR(gather(x, 1, index_with(1 << 30, 3)), "gather: index 1073741824 is out of bounds", "size 3");
  const Tensor rows = full({3}, Scalar(int64_t{9}), {.dtype = DType::Int64}).to(kCuda);
  EXPECT_KILN_ERROR(index_select(x, 0, rows), "index_select: index 9 is out of bounds for dimension 0 with size 5");
  const Tensor src = random_for({4, 3}, DType::Float32, 19).to(kCuda);
  EXPECT_KILN_ERROR(scatter_add(x, 0, index_with(-7), src),
                    "scatter_add: index -7 is out of bounds for dimension 0 with size 5");
  // The context is intact: the same ops with good indices run and match the CPU.
  const Tensor good = random_index(5, {4, 3}, 20);
  EXPECT_TRUE(all_equal(gather(x, 0, good.to(kCuda)).cpu(), gather(x.cpu(), 0, good)));
  EXPECT_TRUE(sums_match(scatter_add(x, 0, good.to(kCuda), src), scatter_add(x.cpu(), 0, good, src.cpu())));
  synchronize(kCuda);
}

// Backward passes skip the check (Note [Checked indices]); were a bad index to reach the
// kernel anyway, it is still never dereferenced: no error, no fault, the element is left.
TEST(CudaIndex, CheckedModeSkipsBadIndicesWithoutTouchingMemory) {
  KILN_REQUIRE_CUDA();
  const Tensor x = random_for({5, 3}, DType::Float32, 21).to(kCuda);
  Tensor index = random_index(5, {4, 3}, 22);
  index.data_ptr<int64_t>()[7] = 1 << 30;  // element (2, 1)
  Tensor out = full({4, 3}, 42.0, {.dtype = DType::Float32, .device = kCuda});
  backend(kCuda).gather(x, 0, index.to(kCuda), out, Backend::IndexBounds::Checked);
  EXPECT_EQ(out.cpu().select(0, 2).select(0, 1).item<float>(), 42.0f);
  synchronize(kCuda);  // a fault would surface here
  EXPECT_TRUE(all_equal(gather(x, 0, random_index(5, {4, 3}, 23).to(kCuda)).cpu(),
                        gather(x.cpu(), 0, random_index(5, {4, 3}, 23))));
}

// ---- gradients through the public ops ----------------------------------------------------

// Runs f on x (on `device`, requiring grad), backpropagates `g`, returns x's gradient.
template <typename F>
Tensor grad_of(const Tensor& x_cpu, Device device, const Tensor& g_cpu, const F& f) {
  Tensor x = x_cpu.to(device).detach();
  x.requires_grad_(true);
  const Tensor y = f(x);
  y.backward(g_cpu.to(device));
  return x.grad().cpu();
}

TEST(CudaIndex, GradientsMatchCpu) {
  KILN_REQUIRE_CUDA();
  for (DType dtype : {DType::Float32, DType::Float64}) {
    SCOPED_TRACE(::testing::Message() << dtype);
    const Tensor x = random_for({4, 6}, dtype, 21);
    const Tensor index = random_index(6, {4, 9}, 22);  // repeats: the backward sums
    const Tensor rows = random_index(4, {7}, 23);
    const auto on = [](const Tensor& t, Device device) { return t.to(device); };

    const Tensor g_gather = random_for({4, 9}, dtype, 24);
    const auto gathered = [&](Device device) {
      return grad_of(x, device, g_gather, [&](const Tensor& t) { return gather(t, 1, on(index, device)); });
    };
    EXPECT_TRUE(matches_cpu(gathered(kCuda).to(kCuda), gathered(Device::cpu()), 4.0));

    const Tensor g_select = random_for({7, 6}, dtype, 25);
    const auto selected = [&](Device device) {
      return grad_of(x, device, g_select, [&](const Tensor& t) { return index_select(t, 0, on(rows, device)); });
    };
    EXPECT_TRUE(matches_cpu(selected(kCuda).to(kCuda), selected(Device::cpu()), 4.0));

    // scatter_add: gradients for self (g) and for src (gather of g).
    const Tensor src = random_for({4, 9}, dtype, 26);
    const Tensor g_scatter = random_for({4, 6}, dtype, 27);
    const auto src_grad = [&](Device device) {
      return grad_of(src, device, g_scatter,
                     [&](const Tensor& s) { return scatter_add(on(x, device), 1, on(index, device), s); });
    };
    EXPECT_TRUE(all_equal(src_grad(kCuda), src_grad(Device::cpu())));
    const auto self_grad = [&](Device device) {
      return grad_of(x, device, g_scatter,
                     [&](const Tensor& t) { return scatter_add(t, 1, on(index, device), on(src, device)); });
    };
    EXPECT_TRUE(all_equal(self_grad(kCuda), self_grad(Device::cpu())));
  }
}

}  // namespace
}  // namespace kiln
