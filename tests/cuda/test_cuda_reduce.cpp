// CUDA reductions against the CPU backend: every ReduceOp, var_mean with corrections
// 0/1/2, argmax/argmin with ties and NaNs, in every supported dtype, over all dims, the
// last, the first, a middle one, two non-adjacent ones and none; odd, size-1, empty,
// long (multi-block) and many-short-row shapes; contiguous, strided, transposed and
// broadcast inputs; poisoned keepdim outputs through the Backend interface (Note
// [Poisoned outputs]) and the public ops. Skips without a GPU.
//
// Tolerance: the GPU sums floats in float where the CPU sums in double (Note [Reduction
// accumulators] (CUDA) in kernels/cuda/reduce_sum.cu). Tree-shaped float sums of n terms of size
// about |x| err by a few float ulps times sqrt(n) |x| at worst in practice, so sums,
// means, norms and variances are compared with the dtype's tolerance scaled by
// 4 sqrt(n) (inputs are in +-[0.5, 1.5]: mean |x| is about 1). Max/min/argmax are exact.
#include <cmath>
#include <limits>

#include "core/backend.h"
#include "tests/cuda/cuda_test_util.h"

namespace kiln {
namespace {

using testing::kCuda;
using testing::kLayouts;
using testing::Layout;
using testing::layout_name;

struct Case {
  std::vector<int64_t> sizes;
  std::vector<int64_t> dims;  // reduced, sorted
};

// all dims, the last, the first, a middle one, two non-adjacent, none; odd, size-1,
// empty, long rows (multi-block), long columns (split outer), many short rows.
const std::vector<Case> kCases = {
    {{7}, {0}},
    {{3, 5}, {1}},
    {{3, 5}, {0}},
    {{3, 5}, {0, 1}},
    {{2, 3, 4}, {1}},
    {{2, 3, 4}, {0, 2}},
    {{2, 3, 4}, {}},
    {{1, 17, 1, 3}, {1, 3}},
    {{129, 65}, {0}},
    {{129, 65}, {1}},
    {{4, 3, 1031}, {2}},
    {{4, 3, 1031}, {0, 1}},
    {{0, 5}, {1}},
    {{3, 0, 2}, {1}},
    {{1 << 20}, {0}},
    {{3, 1 << 18}, {1}},
    {{1 << 17, 3}, {0}},
    {{20000, 7}, {1}},
};

std::vector<int64_t> keepdim_sizes(std::vector<int64_t> sizes, const std::vector<int64_t>& dims) {
  for (int64_t d : dims) sizes[d] = 1;
  return sizes;
}

int64_t reduced_numel(const Case& c) {
  int64_t n = 1;
  for (int64_t d : c.dims) n *= c.sizes[d];
  return n;
}

double sum_slack(int64_t n) { return 4.0 * std::sqrt(static_cast<double>(std::max<int64_t>(1, n))); }

DType reduce_out_dtype(ReduceOp op, DType in) {
  return op == ReduceOp::Sum && !is_floating(in) ? DType::Int64 : in;
}

std::vector<DType> dtypes_of(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Max:
    case ReduceOp::Min: return testing::kAllDTypes;
    default: return testing::kFloatingDTypes;
  }
}

bool has_identity(ReduceOp op) { return op == ReduceOp::Sum || op == ReduceOp::Mean || op == ReduceOp::NormP; }

// One reduction through the Backend interface on both devices; a poisoned CUDA output,
// contiguous or strided (then the gaps must stay poison).
void check_reduce(ReduceOp op, const ReduceParams& params, const Case& c, DType dtype, Layout layout,
                  bool strided_out, int variant) {
  SCOPED_TRACE(::testing::Message() << op_name(op) << " p=" << params.p << " " << dtype << " sizes "
                                    << ::testing::PrintToString(c.sizes) << " dims "
                                    << ::testing::PrintToString(c.dims) << " " << layout_name(layout)
                                    << (strided_out ? " strided out" : "") << " poison " << variant);
  const auto [cpu_in, cuda_in] = testing::parity_input(c.sizes, dtype, layout, 17);
  const std::vector<int64_t> out_sizes = keepdim_sizes(c.sizes, c.dims);
  const DType out_dtype = reduce_out_dtype(op, dtype);
  const Tensor expected = zeros(out_sizes, {.dtype = out_dtype});
  backend(Device::cpu()).reduce(op, cpu_in, c.dims, expected, params);
  Tensor buffer;
  const Tensor actual = strided_out ? testing::poisoned_strided(out_sizes, out_dtype, kCuda, &buffer, variant)
                                    : testing::poisoned(out_sizes, out_dtype, kCuda, variant);
  backend(kCuda).reduce(op, cuda_in, c.dims, actual, params);
  const bool exact = op == ReduceOp::Max || op == ReduceOp::Min || !is_floating(dtype);
  EXPECT_TRUE(testing::matches_cpu(actual, expected, exact ? 1.0 : sum_slack(reduced_numel(c))));
  if (strided_out) {
    EXPECT_TRUE(testing::gaps_untouched(buffer, variant));
  }
}

struct OpWithParams {
  ReduceOp op;
  double p;
};
const std::vector<OpWithParams> kOps = {{ReduceOp::Sum, 2},   {ReduceOp::Mean, 2},  {ReduceOp::Max, 2},
                                        {ReduceOp::Min, 2},   {ReduceOp::NormP, 1}, {ReduceOp::NormP, 2},
                                        {ReduceOp::NormP, 3.5}, {ReduceOp::NormInf, 2}};

TEST(CudaReduce, EveryOpMatchesCpuOnEveryLayoutAndDtype) {
  KILN_REQUIRE_CUDA();
  for (const OpWithParams& o : kOps) {
    for (DType dtype : dtypes_of(o.op)) {
      for (const Case& c : kCases) {
        if (reduced_numel(c) == 0 && !has_identity(o.op)) continue;  // the op layer rejects these
        for (Layout layout : kLayouts) {
          check_reduce(o.op, {.p = o.p}, c, dtype, layout, /*strided_out=*/false, 0);
        }
      }
    }
  }
}

TEST(CudaReduce, StridedPoisonedOutputsAreWrittenExactlyInTheirView) {
  KILN_REQUIRE_CUDA();
  for (const OpWithParams& o : kOps) {
    for (DType dtype : dtypes_of(o.op)) {
      for (const Case& c : {Case{{129, 65}, {0}}, Case{{4, 3, 1031}, {2}}, Case{{6, 4}, {}}}) {
        for (int variant : {0, 1}) {
          if (variant == 1 && dtype != DType::Bool && reduce_out_dtype(o.op, dtype) != DType::Bool) continue;
          check_reduce(o.op, {.p = o.p}, c, dtype, Layout::Contiguous, /*strided_out=*/true, variant);
        }
      }
    }
  }
}

TEST(CudaReduce, EmptyReductionsGiveTheIdentity) {
  KILN_REQUIRE_CUDA();
  const Tensor x = zeros({3, 0, 2}, {.dtype = DType::Float32, .device = kCuda});
  const Tensor s = testing::poisoned({3, 1, 2}, DType::Float32, kCuda);
  backend(kCuda).reduce(ReduceOp::Sum, x, {1}, s, {});
  EXPECT_TRUE(testing::all_equal(s.cpu(), zeros({3, 1, 2})));
  backend(kCuda).reduce(ReduceOp::Mean, x, {1}, s, {});
  EXPECT_TRUE(testing::all_equal(isnan(s).cpu(), ones({3, 1, 2}, {.dtype = DType::Bool})));
}

TEST(CudaReduce, VarMeanMatchesCpuForEveryCorrection) {
  KILN_REQUIRE_CUDA();
  for (int64_t correction : {0, 1, 2}) {
    for (DType dtype : testing::kFloatingDTypes) {
      for (const Case& c : kCases) {
        for (Layout layout : kLayouts) {
          SCOPED_TRACE(::testing::Message() << "var_mean correction " << correction << " " << dtype << " sizes "
                                            << ::testing::PrintToString(c.sizes) << " dims "
                                            << ::testing::PrintToString(c.dims) << " " << layout_name(layout));
          const auto [cpu_in, cuda_in] = testing::parity_input(c.sizes, dtype, layout, 5);
          const std::vector<int64_t> out_sizes = keepdim_sizes(c.sizes, c.dims);
          const Tensor var = zeros(out_sizes, {.dtype = dtype}), mean = zeros(out_sizes, {.dtype = dtype});
          backend(Device::cpu()).var_mean(cpu_in, c.dims, correction, var, mean);
          Tensor buffer;
          const Tensor cuda_var = testing::poisoned_strided(out_sizes, dtype, kCuda, &buffer);
          const Tensor cuda_mean = testing::poisoned(out_sizes, dtype, kCuda);
          backend(kCuda).var_mean(cuda_in, c.dims, correction, cuda_var, cuda_mean);
          const double slack = sum_slack(reduced_numel(c));
          EXPECT_TRUE(testing::matches_cpu(cuda_var, var, slack));
          EXPECT_TRUE(testing::matches_cpu(cuda_mean, mean, slack));
          EXPECT_TRUE(testing::gaps_untouched(buffer));
        }
      }
    }
  }
}

// Small integers (many ties) with some NaNs for floating dtypes, laid out as `layout`
// says. The values are made in memory order first and viewed afterwards: to(dtype) and
// where() return contiguous tensors, so converting a transposed view would have sent a
// contiguous tensor to the GPU and left the transposed case untested.
std::pair<Tensor, Tensor> tie_and_nan_input(const std::vector<int64_t>& sizes, DType dtype, bool with_nans,
                                            Layout layout) {
  const int64_t rank = static_cast<int64_t>(sizes.size());
  const bool transposed = layout == Layout::Transposed && rank >= 2;
  std::vector<int64_t> memory_sizes = sizes;
  if (transposed) std::swap(memory_sizes.front(), memory_sizes.back());
  Tensor values = testing::random_for(memory_sizes, DType::Int32, 23).to(dtype);
  if (with_nans && is_floating(dtype)) {
    Generator gen(99);
    const Tensor keep = ge(rand(memory_sizes, {.dtype = DType::Float64}, &gen), 0.05);
    values = where(keep, values, std::numeric_limits<double>::quiet_NaN());
  }
  const Tensor cuda = testing::on_device(values, kCuda, layout == Layout::Strided);
  if (transposed) return {values.transpose(0, rank - 1), cuda.transpose(0, rank - 1)};
  return {values, cuda};
}

TEST(CudaReduce, ArgReduceTakesTheFirstExtremumAndTheFirstNan) {
  KILN_REQUIRE_CUDA();
  const std::vector<Case> cases = {{{7}, {0}},          {{3, 5}, {1}},        {{3, 5}, {0}},     {{2, 3, 4}, {1}},
                                   {{129, 65}, {0}},    {{4, 3, 1031}, {2}},  {{1 << 20}, {0}},  {{1 << 17, 3}, {0}},
                                   {{20000, 7}, {1}},   {{1, 17, 1, 3}, {2}}, {{0, 5}, {1}}};
  for (ArgReduceOp op : {ArgReduceOp::ArgMax, ArgReduceOp::ArgMin}) {
    for (DType dtype : testing::kAllDTypes) {
      for (bool with_nans : {false, true}) {
        for (const Case& c : cases) {
          for (Layout layout : {Layout::Contiguous, Layout::Strided, Layout::Transposed}) {
            SCOPED_TRACE(::testing::Message() << (op == ArgReduceOp::ArgMax ? "argmax " : "argmin ") << dtype
                                              << (with_nans ? " with NaNs" : "") << " sizes "
                                              << ::testing::PrintToString(c.sizes) << " dim " << c.dims[0] << " "
                                              << layout_name(layout));
            const auto [cpu_in, cuda_in] = tie_and_nan_input(c.sizes, dtype, with_nans, layout);
            const std::vector<int64_t> out_sizes = keepdim_sizes(c.sizes, c.dims);
            const Tensor values = zeros(out_sizes, {.dtype = dtype});
            const Tensor indices = zeros(out_sizes, {.dtype = DType::Int64});
            backend(Device::cpu()).arg_reduce(op, cpu_in, c.dims[0], values, indices);
            Tensor buffer;
            const Tensor cuda_values = testing::poisoned(out_sizes, dtype, kCuda);
            const Tensor cuda_indices = testing::poisoned_strided(out_sizes, DType::Int64, kCuda, &buffer);
            backend(kCuda).arg_reduce(op, cuda_in, c.dims[0], cuda_values, cuda_indices);
            EXPECT_TRUE(testing::all_equal(cuda_indices.cpu(), indices));
            EXPECT_TRUE(testing::matches_cpu(cuda_values, values));
            EXPECT_TRUE(testing::gaps_untouched(buffer));
          }
        }
      }
    }
  }
}

TEST(CudaReduce, NanPropagatesThroughMaxMinAndTheInfNorm) {
  KILN_REQUIRE_CUDA();
  const auto [cpu_in, cuda_in] = tie_and_nan_input({64, 300}, DType::Float32, true, Layout::Contiguous);
  for (ReduceOp op : {ReduceOp::Max, ReduceOp::Min, ReduceOp::NormInf, ReduceOp::Sum}) {
    const Tensor expected = zeros({64, 1});
    backend(Device::cpu()).reduce(op, cpu_in, {1}, expected, {});
    const Tensor actual = testing::poisoned({64, 1}, DType::Float32, kCuda);
    backend(kCuda).reduce(op, cuda_in, {1}, actual, {});
    EXPECT_TRUE(testing::matches_cpu(actual, expected, sum_slack(300))) << op_name(op);
  }
}

// The public ops on CUDA against the same ops on the CPU, forward and backward.
TEST(CudaReduce, PublicOpsAndTheirGradientsMatchCpu) {
  KILN_REQUIRE_CUDA();
  for (DType dtype : {DType::Float32, DType::Float64}) {
    for (bool strided : {false, true}) {
      const Tensor x = testing::random_for({6, 5, 33}, dtype, 3);
      const Tensor cx = testing::on_device(x, kCuda, strided);
      using Fn = std::function<Tensor(const Tensor&)>;
      const std::vector<std::pair<const char*, Fn>> ops = {
          {"sum", [](const Tensor& t) { return sum(t, {2}); }},
          {"sum_all", [](const Tensor& t) { return sum(t); }},
          {"mean", [](const Tensor& t) { return mean(t, {0, 2}, true); }},
          {"amax", [](const Tensor& t) { return amax(t, {1}); }},
          {"amin", [](const Tensor& t) { return amin(t, {0}); }},
          {"var", [](const Tensor& t) { return var(t, {2}); }},
          {"std", [](const Tensor& t) { return kiln::std(t, {0, 1}, 0); }},
          {"norm", [](const Tensor& t) { return norm(t, 2.0, {2}); }},
          {"norm3", [](const Tensor& t) { return norm(t, 3.0, {1}); }},
          {"logsumexp", [](const Tensor& t) { return logsumexp(t, {2}); }},
      };
      for (const auto& [name, fn] : ops) {
        SCOPED_TRACE(::testing::Message() << name << " " << dtype << (strided ? " strided" : ""));
        const Tensor a = x.detach().requires_grad_(true);
        const Tensor b = cx.detach().requires_grad_(true);
        const Tensor ya = fn(a), yb = fn(b);
        EXPECT_TRUE(testing::matches_cpu(yb, ya, sum_slack(200)));
        const Tensor g = testing::random_for(ya.sizes(), dtype, 4);
        ya.backward(g);
        yb.backward(g.to(kCuda));
        EXPECT_TRUE(testing::matches_cpu(b.grad(), a.grad(), sum_slack(200)));
      }
      EXPECT_TRUE(testing::all_equal(argmax(cx, 2).cpu(), argmax(x, 2)));
      EXPECT_TRUE(testing::all_equal(argmin(cx).cpu(), argmin(x)));
    }
  }
}

}  // namespace
}  // namespace kiln
