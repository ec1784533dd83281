// CUDA multi-tensor kernels (kernels/cuda/multi_tensor_*.cu, amp_update_scale.cu) against
// the CPU backend, which tests/core/test_multi_tensor.cpp checks against float64
// references: the same lists, the same values, one call on each backend, every tensor of
// every list compared afterwards.
//
// What the lists exercise (multi_tensor_apply.cuh): odd sizes (1, 3, a chunk plus one,
// several chunks with a short last one, one not a multiple of the vector width), so the
// masked tails and the tensor cut between two launches are reached; a list of 200
// tensors and 400 chunks, more than one launch holds in tensor slots and in blocks;
// "mixed" placement, where some tensors of some lists start one element past a vector
// boundary (a contiguous narrow at offset 1), so chunks take the scalar path while their
// neighbours take the vector path. Every dtype (float32, float64, float16, bfloat16).
//
// Tolerance: both backends run the same per-element functions (kernels/optimizer_math.h,
// Note [Optimizer formulas]) with the hyperparameter combinations rounded the same way,
// so a step differs only where the compilers do: nvcc fuses a * b + c into one
// multiply-add, which GCC does not for the CPU build (SSE2, no FMA), and the device's
// sqrt and pow may round differently. That is the dtype's tolerance times a small slack
// (kStepSlack); the norm sums in another order (kNormSlack). Skipped steps and flags are
// compared exactly. Skips without a GPU.
#include <cmath>
#include <functional>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/ops/multi_tensor.h"  // the step option structs
#include "tests/cuda/cuda_test_util.h"

namespace kiln {
namespace {

using testing::kCuda;
constexpr double kStepSlack = 4.0;
constexpr double kNormSlack = 16.0;

// Sizes of the usual list: odd ones, one of exactly a chunk (64K), chunk + 1, and 200000
// (four chunks, the last one short and not a multiple of 4).
const std::vector<int64_t> kOddSizes = {1, 3, 65537, 200000, 7, 65536, 4099};

// 200 tensors, 400 chunks: alternately 3 chunks (the last of one element) and 1 chunk.
std::vector<int64_t> many_sizes() {
  std::vector<int64_t> sizes;
  for (int64_t i = 0; i < 200; ++i) sizes.push_back(i % 2 == 0 ? 2 * 65536 + 1 : 1 + 37 * i);
  return sizes;
}

enum class Placement { Aligned, Mixed };
const Placement kPlacements[] = {Placement::Aligned, Placement::Mixed};

// Whether tensor i of list `list` starts misaligned under `placement`: under Mixed, the
// odd tensors are aligned in every list (the vector path) and each even one is misaligned
// in every third list (the scalar path), so one launch takes both paths.
bool misaligned(Placement placement, size_t i, int list) {
  return placement == Placement::Mixed && i % 2 == 0 && (i / 2 + static_cast<size_t>(list)) % 3 == 0;
}

// `t` (CPU) on the GPU, contiguous, starting one element past an aligned address when
// `shifted` (the allocator's blocks are aligned far beyond 16 bytes).
Tensor on_gpu(const Tensor& t, bool shifted) {
  if (!shifted) return t.to(kCuda);
  const Tensor buffer = zeros({t.numel() + 1}, {.dtype = t.dtype(), .device = kCuda});
  Tensor view = buffer.narrow(0, 1, t.numel()).view(t.sizes());
  view.copy_(t.to(kCuda));
  return view;
}

// The same tensors on both devices.
struct TensorList {
  std::vector<Tensor> cpu, gpu;
};

using MakeValues = std::function<Tensor(const std::vector<int64_t>& sizes, DType dtype, uint64_t seed)>;

Tensor signed_values(const std::vector<int64_t>& sizes, DType dtype, uint64_t seed) {
  return testing::random_for(sizes, dtype, seed);
}
MakeValues uniform_values(double low, double high) {
  return [=](const std::vector<int64_t>& sizes, DType dtype, uint64_t seed) {
    return testing::random_uniform(sizes, low, high, dtype, seed);
  };
}

// List number `list` (its seeds and its placement) of 1-d tensors of `sizes`.
TensorList make_list(const std::vector<int64_t>& sizes, DType dtype, int list, Placement placement,
                     const MakeValues& values = signed_values) {
  TensorList l;
  for (size_t i = 0; i < sizes.size(); ++i) {
    l.cpu.push_back(values({sizes[i]}, dtype, 1000 * static_cast<uint64_t>(list) + i + 1));
    l.gpu.push_back(on_gpu(l.cpu.back(), misaligned(placement, i, list)));
  }
  return l;
}

// Adam's step counters: Float32 [] holding 1 + i % 5 (already incremented).
TensorList make_steps(size_t count) {
  TensorList l;
  for (size_t i = 0; i < count; ++i) {
    l.cpu.push_back(full({}, static_cast<double>(1 + i % 5), {.dtype = DType::Float32}));
    l.gpu.push_back(l.cpu.back().to(kCuda));
  }
  return l;
}

// A Float32 [1] tensor on both devices.
struct Scalar1 {
  Tensor cpu, gpu;
  explicit Scalar1(double value)
      : cpu(full({1}, value, {.dtype = DType::Float32})), gpu(full({1}, value, {.dtype = DType::Float32, .device = kCuda})) {}
};

::testing::AssertionResult lists_match(const TensorList& l, double slack) {
  for (size_t i = 0; i < l.cpu.size(); ++i) {
    ::testing::AssertionResult r = testing::matches_cpu(l.gpu[i], l.cpu[i], slack);
    if (!r) return r << " (tensor " << i << " of " << l.cpu.size() << ", numel " << l.cpu[i].numel() << ")";
  }
  return ::testing::AssertionSuccess();
}

// Deep copies of the GPU tensors, to prove later that nothing was written.
std::vector<Tensor> snapshot(const TensorList& l) {
  std::vector<Tensor> copies;
  for (const Tensor& t : l.gpu) copies.push_back(t.to(Device::cpu()));
  return copies;
}
::testing::AssertionResult unchanged(const TensorList& l, const std::vector<Tensor>& before) {
  for (size_t i = 0; i < before.size(); ++i) {
    ::testing::AssertionResult r = testing::all_equal(l.gpu[i].to(Device::cpu()), before[i]);
    if (!r) return r << " (tensor " << i << ")";
  }
  return ::testing::AssertionSuccess();
}

std::string trace(DType dtype, Placement placement, size_t tensors) {
  return (::testing::Message() << dtype << (placement == Placement::Mixed ? " mixed alignment" : " aligned") << ", "
                               << tensors << " tensors")
      .GetString();
}

Backend& cpu_kernels() { return backend(Device::cpu()); }
Backend& gpu_kernels() { return backend(kCuda); }

// ==== SGD ========================================================================================

struct SgdCase {
  SgdStepParams params;
  double inv_scale;  // 0: no amp arguments
};

const SgdCase kSgdCases[] = {
    {{.lr = 0.1}, 0},
    {{.lr = 0.1, .momentum = 0.9, .first_step = true}, 0},
    {{.lr = 0.1, .momentum = 0.9, .dampening = 0.1, .weight_decay = 1e-2}, 0},
    {{.lr = 0.05, .momentum = 0.8, .weight_decay = 1e-2, .nesterov = true, .maximize = true}, 0},
    {{.lr = 0.1, .momentum = 0.9, .nesterov = true}, 1.0 / 1024},
};

// One SGD step of every case on both backends; params and buffers compared.
void check_sgd(const std::vector<int64_t>& sizes, DType dtype, Placement placement, const SgdCase& c) {
  TensorList p = make_list(sizes, dtype, 0, placement), g = make_list(sizes, dtype, 1, placement);
  TensorList buf = make_list(sizes, dtype, 2, placement);
  if (c.params.momentum == 0) buf = {};
  const Scalar1 inv_scale(c.inv_scale), found_inf(0);
  const AmpStepArgs cpu_amp = c.inv_scale != 0 ? AmpStepArgs{inv_scale.cpu, found_inf.cpu} : AmpStepArgs{};
  const AmpStepArgs gpu_amp = c.inv_scale != 0 ? AmpStepArgs{inv_scale.gpu, found_inf.gpu} : AmpStepArgs{};
  cpu_kernels().sgd_step(p.cpu, g.cpu, buf.cpu, c.params, cpu_amp);
  gpu_kernels().sgd_step(p.gpu, g.gpu, buf.gpu, c.params, gpu_amp);
  EXPECT_TRUE(lists_match(p, kStepSlack)) << "params";
  EXPECT_TRUE(lists_match(buf, kStepSlack)) << "momentum buffers";
  EXPECT_TRUE(lists_match(g, 0)) << "grads are read only";
}

TEST(CudaMultiTensor, SgdMatchesCpu) {
  KILN_REQUIRE_CUDA();
  for (DType dtype : testing::kFloatingDTypes) {
    for (Placement placement : kPlacements) {
      SCOPED_TRACE(trace(dtype, placement, kOddSizes.size()));
      for (size_t i = 0; i < std::size(kSgdCases); ++i) {
        SCOPED_TRACE(::testing::Message() << "case " << i);
        check_sgd(kOddSizes, dtype, placement, kSgdCases[i]);
      }
    }
  }
}

// ==== Adam ======================================================================================

struct AdamCase {
  AdamStepParams params;
  double inv_scale;
};

const AdamCase kAdamCases[] = {
    {{.lr = 1e-2}, 0},
    {{.lr = 1e-2, .weight_decay = 0.1}, 0},
    {{.lr = 1e-2, .beta1 = 0.8, .beta2 = 0.99, .eps = 1e-6, .weight_decay = 0.1, .decoupled_weight_decay = true}, 0},
    {{.lr = 1e-2, .amsgrad = true}, 0},
    {{.lr = 1e-2, .weight_decay = 1e-2, .decoupled_weight_decay = true, .amsgrad = true, .maximize = true}, 1.0 / 256},
};

void check_adam(const std::vector<int64_t>& sizes, DType dtype, Placement placement, const AdamCase& c) {
  TensorList p = make_list(sizes, dtype, 0, placement), g = make_list(sizes, dtype, 1, placement);
  TensorList m = make_list(sizes, dtype, 2, placement);
  TensorList v = make_list(sizes, dtype, 3, placement, uniform_values(0.1, 1.0));
  TensorList vmax = make_list(sizes, dtype, 4, placement, uniform_values(0.1, 1.0));
  if (!c.params.amsgrad) vmax = {};
  TensorList steps = make_steps(sizes.size());
  const Scalar1 inv_scale(c.inv_scale), found_inf(0);
  const AmpStepArgs cpu_amp = c.inv_scale != 0 ? AmpStepArgs{inv_scale.cpu, found_inf.cpu} : AmpStepArgs{};
  const AmpStepArgs gpu_amp = c.inv_scale != 0 ? AmpStepArgs{inv_scale.gpu, found_inf.gpu} : AmpStepArgs{};
  cpu_kernels().adam_step(p.cpu, g.cpu, m.cpu, v.cpu, vmax.cpu, steps.cpu, c.params, cpu_amp);
  gpu_kernels().adam_step(p.gpu, g.gpu, m.gpu, v.gpu, vmax.gpu, steps.gpu, c.params, gpu_amp);
  EXPECT_TRUE(lists_match(p, kStepSlack)) << "params";
  EXPECT_TRUE(lists_match(m, kStepSlack)) << "exp_avgs";
  EXPECT_TRUE(lists_match(v, kStepSlack)) << "exp_avg_sqs";
  EXPECT_TRUE(lists_match(vmax, kStepSlack)) << "max_exp_avg_sqs";
  EXPECT_TRUE(lists_match(steps, 0)) << "the step counters are read only";
}

TEST(CudaMultiTensor, AdamMatchesCpu) {
  KILN_REQUIRE_CUDA();
  for (DType dtype : testing::kFloatingDTypes) {
    for (Placement placement : kPlacements) {
      SCOPED_TRACE(trace(dtype, placement, kOddSizes.size()));
      for (size_t i = 0; i < std::size(kAdamCases); ++i) {
        SCOPED_TRACE(::testing::Message() << "case " << i);
        check_adam(kOddSizes, dtype, placement, kAdamCases[i]);
      }
    }
  }
}

// ==== RMSprop ===================================================================================

struct RmspropCase {
  RmspropStepParams params;
  double inv_scale;
};

const RmspropCase kRmspropCases[] = {
    {{.lr = 1e-2}, 0},
    {{.lr = 1e-2, .alpha = 0.9, .eps = 1e-6, .centered = true}, 0},
    {{.lr = 1e-2, .weight_decay = 1e-2, .momentum = 0.9}, 0},
    {{.lr = 1e-2, .weight_decay = 1e-2, .momentum = 0.9, .centered = true, .maximize = true}, 1.0 / 128},
    // torch.optim's `if momentum > 0`: a negative momentum has no buffers and is ignored.
    {{.lr = 1e-2, .momentum = -0.5}, 0},
};

void check_rmsprop(const std::vector<int64_t>& sizes, DType dtype, Placement placement, const RmspropCase& c) {
  TensorList p = make_list(sizes, dtype, 0, placement), g = make_list(sizes, dtype, 1, placement);
  // square_avg well above grad_avg^2, so the centered variance stays positive.
  TensorList sq = make_list(sizes, dtype, 2, placement, uniform_values(2.5, 3.0));
  TensorList buf = make_list(sizes, dtype, 3, placement);
  TensorList ga = make_list(sizes, dtype, 4, placement, uniform_values(-1.0, 1.0));
  if (c.params.momentum <= 0) buf = {};
  if (!c.params.centered) ga = {};
  const Scalar1 inv_scale(c.inv_scale), found_inf(0);
  const AmpStepArgs cpu_amp = c.inv_scale != 0 ? AmpStepArgs{inv_scale.cpu, found_inf.cpu} : AmpStepArgs{};
  const AmpStepArgs gpu_amp = c.inv_scale != 0 ? AmpStepArgs{inv_scale.gpu, found_inf.gpu} : AmpStepArgs{};
  cpu_kernels().rmsprop_step(p.cpu, g.cpu, sq.cpu, buf.cpu, ga.cpu, c.params, cpu_amp);
  gpu_kernels().rmsprop_step(p.gpu, g.gpu, sq.gpu, buf.gpu, ga.gpu, c.params, gpu_amp);
  EXPECT_TRUE(lists_match(p, kStepSlack)) << "params";
  EXPECT_TRUE(lists_match(sq, kStepSlack)) << "square_avgs";
  EXPECT_TRUE(lists_match(buf, kStepSlack)) << "momentum buffers";
  EXPECT_TRUE(lists_match(ga, kStepSlack)) << "grad_avgs";
}

TEST(CudaMultiTensor, RmspropMatchesCpu) {
  KILN_REQUIRE_CUDA();
  for (DType dtype : testing::kFloatingDTypes) {
    for (Placement placement : kPlacements) {
      SCOPED_TRACE(trace(dtype, placement, kOddSizes.size()));
      for (size_t i = 0; i < std::size(kRmspropCases); ++i) {
        SCOPED_TRACE(::testing::Message() << "case " << i);
        check_rmsprop(kOddSizes, dtype, placement, kRmspropCases[i]);
      }
    }
  }
}

// More tensors than one launch has slots for and more chunks than it has blocks, so the
// lists are cut over several launches (one tensor in the middle of its chunks).
TEST(CudaMultiTensor, ListsLongerThanOneLaunchMatchCpu) {
  KILN_REQUIRE_CUDA();
  const std::vector<int64_t> sizes = many_sizes();
  for (DType dtype : {DType::Float32, DType::BFloat16}) {
    SCOPED_TRACE(trace(dtype, Placement::Mixed, sizes.size()));
    check_sgd(sizes, dtype, Placement::Mixed, kSgdCases[2]);
    check_adam(sizes, dtype, Placement::Mixed, kAdamCases[4]);
    check_rmsprop(sizes, dtype, Placement::Mixed, kRmspropCases[3]);
  }
}

// ==== skipped steps and step counters ==========================================================

// found_inf != 0: no optimizer writes anything, in any list, and no counter moves.
TEST(CudaMultiTensor, FoundInfSkipsEveryWrite) {
  KILN_REQUIRE_CUDA();
  const std::vector<int64_t> sizes = many_sizes();
  for (DType dtype : testing::kFloatingDTypes) {
    SCOPED_TRACE(trace(dtype, Placement::Mixed, sizes.size()));
    const TensorList p = make_list(sizes, dtype, 0, Placement::Mixed), g = make_list(sizes, dtype, 1, Placement::Mixed);
    const TensorList a = make_list(sizes, dtype, 2, Placement::Mixed);
    const TensorList b = make_list(sizes, dtype, 3, Placement::Mixed, uniform_values(2.5, 3.0));
    const TensorList c = make_list(sizes, dtype, 4, Placement::Mixed, uniform_values(-1.0, 1.0));
    const TensorList steps = make_steps(sizes.size());
    const std::vector<Tensor> p0 = snapshot(p), a0 = snapshot(a), b0 = snapshot(b), c0 = snapshot(c);
    const std::vector<Tensor> steps0 = snapshot(steps);
    const Scalar1 inv_scale(0.5), found_inf(1);
    const AmpStepArgs amp{inv_scale.gpu, found_inf.gpu};
    gpu_kernels().sgd_step(p.gpu, g.gpu, a.gpu, {.lr = 0.1, .momentum = 0.9}, amp);
    gpu_kernels().adam_step(p.gpu, g.gpu, a.gpu, b.gpu, c.gpu, steps.gpu, {.lr = 0.1, .amsgrad = true}, amp);
    gpu_kernels().rmsprop_step(p.gpu, g.gpu, b.gpu, a.gpu, c.gpu, {.lr = 0.1, .momentum = 0.9, .centered = true},
                               amp);
    gpu_kernels().increment_steps(steps.gpu, found_inf.gpu);
    EXPECT_TRUE(unchanged(p, p0));
    EXPECT_TRUE(unchanged(a, a0));
    EXPECT_TRUE(unchanged(b, b0));
    EXPECT_TRUE(unchanged(c, c0));
    EXPECT_TRUE(unchanged(steps, steps0));
    EXPECT_EQ(found_inf.gpu.to(Device::cpu()).item<float>(), 1.0f);
  }
}

TEST(CudaMultiTensor, IncrementStepsMatchesCpu) {
  KILN_REQUIRE_CUDA();
  for (size_t count : {size_t{1}, size_t{7}, size_t{300}}) {
    for (double flag : {-1.0, 0.0}) {  // -1: no found_inf argument
      SCOPED_TRACE(::testing::Message() << count << " counters, found_inf " << flag);
      TensorList steps = make_steps(count);
      const Scalar1 found_inf(flag);
      cpu_kernels().increment_steps(steps.cpu, flag < 0 ? Tensor() : found_inf.cpu);
      gpu_kernels().increment_steps(steps.gpu, flag < 0 ? Tensor() : found_inf.gpu);
      EXPECT_TRUE(lists_match(steps, 0));
      EXPECT_EQ(steps.gpu.back().to(Device::cpu()).item<float>(), static_cast<float>(2 + (count - 1) % 5));
    }
  }
}

// ==== scale and non-finite check ================================================================

// dst = src * scale for every (src, dst) dtype pair, with and without a scale, into a
// separate list and in place; found_inf stays as it was on finite input.
TEST(CudaMultiTensor, ScaleMatchesCpuForEveryDtypePair) {
  KILN_REQUIRE_CUDA();
  for (DType src_dtype : testing::kFloatingDTypes) {
    for (DType dst_dtype : testing::kFloatingDTypes) {
      for (Placement placement : kPlacements) {
        for (double scale_value : {0.0, 0.125, 3.0}) {  // 0: no scale argument
          SCOPED_TRACE(::testing::Message() << src_dtype << " -> " << dst_dtype << ", scale " << scale_value << ", "
                                            << trace(src_dtype, placement, kOddSizes.size()));
          const TensorList src = make_list(kOddSizes, src_dtype, 0, placement);
          TensorList dst = make_list(kOddSizes, dst_dtype, 1, placement);
          const Scalar1 scale(scale_value), found_inf(0);
          const Tensor cpu_scale = scale_value != 0 ? scale.cpu : Tensor(), gpu_scale = scale_value != 0 ? scale.gpu : Tensor();
          cpu_kernels().multi_tensor_scale(src.cpu, dst.cpu, cpu_scale, found_inf.cpu);
          gpu_kernels().multi_tensor_scale(src.gpu, dst.gpu, gpu_scale, found_inf.gpu);
          EXPECT_TRUE(lists_match(dst, 1.0));
          EXPECT_TRUE(lists_match(src, 0)) << "src is read only";
          EXPECT_EQ(found_inf.gpu.to(Device::cpu()).item<float>(), 0.0f);
          if (src_dtype == dst_dtype) {
            TensorList in_place = make_list(kOddSizes, src_dtype, 2, placement);
            cpu_kernels().multi_tensor_scale(in_place.cpu, in_place.cpu, cpu_scale, Tensor());
            gpu_kernels().multi_tensor_scale(in_place.gpu, in_place.gpu, gpu_scale, Tensor());
            EXPECT_TRUE(lists_match(in_place, 1.0)) << "in place";
          }
        }
      }
    }
  }
}

// One list mixing dtypes (grouped by dtype pair inside), longer than one launch.
TEST(CudaMultiTensor, ScaleOfAMixedDtypeListMatchesCpu) {
  KILN_REQUIRE_CUDA();
  const std::vector<int64_t> sizes = many_sizes();
  TensorList src, dst;
  for (size_t i = 0; i < sizes.size(); ++i) {
    const DType dtype = testing::kFloatingDTypes[i % 4];
    const Tensor s = testing::random_for({sizes[i]}, dtype, 7 + i);
    src.cpu.push_back(s);
    src.gpu.push_back(on_gpu(s, i % 5 == 0));
    dst.cpu.push_back(zeros({sizes[i]}, {.dtype = DType::Float32}));
    dst.gpu.push_back(on_gpu(dst.cpu.back(), i % 7 == 0));
  }
  const Scalar1 scale(1.0 / 64), found_inf(0);
  cpu_kernels().multi_tensor_scale(src.cpu, dst.cpu, scale.cpu, found_inf.cpu);
  gpu_kernels().multi_tensor_scale(src.gpu, dst.gpu, scale.gpu, found_inf.gpu);
  EXPECT_TRUE(lists_match(dst, 1.0));
  EXPECT_EQ(found_inf.gpu.to(Device::cpu()).item<float>(), 0.0f);
}

// An Inf or NaN anywhere (first element, deep in a later chunk, in a masked tail, in a
// misaligned tensor) sets found_inf to 1, with and without a dst; a set flag is never
// cleared by a clean list.
TEST(CudaMultiTensor, ScaleFlagsNonFiniteValues) {
  KILN_REQUIRE_CUDA();
  struct Bad {
    size_t tensor;
    int64_t index;
    double value;
  };
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  // Tensors 0 and 6 are misaligned (scalar path), 1, 2, 3 and 4 aligned (vector path;
  // 1 and 4 end in a tail group).
  const Bad kBad[] = {{0, 0, inf},       {3, 150001, -inf}, {3, 199999, nan}, {6, 4098, nan},
                      {2, 65536, inf},   {1, 2, inf},       {4, 6, nan}};
  for (DType dtype : testing::kFloatingDTypes) {
    for (const Bad& bad : kBad) {
      for (bool check_only : {false, true}) {
        SCOPED_TRACE(::testing::Message() << dtype << " tensor " << bad.tensor << "[" << bad.index << "] = "
                                          << bad.value << (check_only ? ", check only" : ""));
        const TensorList src = make_list(kOddSizes, dtype, 0, Placement::Mixed);
        src.gpu[bad.tensor].narrow(0, bad.index, 1).fill_(bad.value);
        const TensorList dst = make_list(kOddSizes, DType::Float32, 1, Placement::Mixed);
        const Scalar1 found_inf(0);
        gpu_kernels().multi_tensor_scale(src.gpu, check_only ? std::vector<Tensor>{} : dst.gpu, Tensor(), found_inf.gpu);
        EXPECT_EQ(found_inf.gpu.to(Device::cpu()).item<float>(), 1.0f);
      }
    }
    const TensorList clean = make_list(kOddSizes, dtype, 0, Placement::Aligned);
    const Scalar1 already_set(1);
    gpu_kernels().multi_tensor_scale(clean.gpu, {}, Tensor(), already_set.gpu);
    EXPECT_EQ(already_set.gpu.to(Device::cpu()).item<float>(), 1.0f) << dtype << ": a set flag stays set";
  }
}

// ==== norm =======================================================================================

const double kNormOrders[] = {1.0, 2.0, 3.0, std::numeric_limits<double>::infinity()};

::testing::AssertionResult norms_match(const std::vector<Tensor>& cpu, const std::vector<Tensor>& gpu, double p,
                                       DType out_dtype) {
  const Tensor cpu_out = empty({}, {.dtype = out_dtype});
  const Tensor gpu_out = testing::poisoned({}, out_dtype, kCuda);
  cpu_kernels().multi_tensor_norm(cpu, p, cpu_out);
  gpu_kernels().multi_tensor_norm(gpu, p, gpu_out);
  return testing::matches_cpu(gpu_out, cpu_out, kNormSlack);
}

TEST(CudaMultiTensor, NormMatchesCpu) {
  KILN_REQUIRE_CUDA();
  for (DType dtype : testing::kFloatingDTypes) {
    const DType out_dtype = dtype == DType::Float64 ? DType::Float64 : DType::Float32;
    for (Placement placement : kPlacements) {
      const TensorList x = make_list(kOddSizes, dtype, 0, placement);
      for (double p : kNormOrders) {
        SCOPED_TRACE(::testing::Message() << "p = " << p << ", " << trace(dtype, placement, kOddSizes.size()));
        EXPECT_TRUE(norms_match(x.cpu, x.gpu, p, out_dtype));
        if (dtype == DType::Float64) {
          EXPECT_TRUE(norms_match(x.cpu, x.gpu, p, DType::Float32)) << "float32 out";
        }
      }
    }
  }
}

// Mixed dtypes (float32 out), more tensors and chunks than one launch holds, and the
// largest value in the last tensor (for p = inf).
TEST(CudaMultiTensor, NormOfALongMixedDtypeListMatchesCpu) {
  KILN_REQUIRE_CUDA();
  const std::vector<int64_t> sizes = many_sizes();
  TensorList x;
  for (size_t i = 0; i < sizes.size(); ++i) {
    x.cpu.push_back(testing::random_for({sizes[i]}, testing::kFloatingDTypes[i % 4], 11 + i));
    x.gpu.push_back(on_gpu(x.cpu.back(), i % 3 == 0));
  }
  x.cpu.back().narrow(0, 0, 1).fill_(40.0);
  x.gpu.back().narrow(0, 0, 1).fill_(40.0);
  for (double p : kNormOrders) {
    SCOPED_TRACE(::testing::Message() << "p = " << p);
    EXPECT_TRUE(norms_match(x.cpu, x.gpu, p, DType::Float32));
  }
}

// A NaN makes every norm NaN (max included); an empty list gives 0.
TEST(CudaMultiTensor, NormPropagatesNanAndIsZeroForNoTensors) {
  KILN_REQUIRE_CUDA();
  const TensorList x = make_list(kOddSizes, DType::Float32, 0, Placement::Mixed);
  x.gpu[3].narrow(0, 131072, 1).fill_(std::numeric_limits<double>::quiet_NaN());
  for (double p : kNormOrders) {
    Tensor out = testing::poisoned({}, DType::Float32, kCuda);
    out.fill_(0.0);
    gpu_kernels().multi_tensor_norm(x.gpu, p, out);
    EXPECT_TRUE(std::isnan(out.to(Device::cpu()).item<float>())) << "p = " << p;
    const Tensor empty_norm = testing::poisoned({}, DType::Float32, kCuda);
    gpu_kernels().multi_tensor_norm({}, p, empty_norm);
    EXPECT_EQ(empty_norm.to(Device::cpu()).item<float>(), 0.0f) << "p = " << p;
  }
}

// ==== loss-scale update ==========================================================================

// A sequence of steps with and without Inf/NaN: the same scales and trackers on both
// devices after every update, through growth, backoff, a growth that would overflow and a
// backoff that stops at min_scale.
TEST(CudaMultiTensor, AmpUpdateScaleMatchesCpu) {
  KILN_REQUIRE_CUDA();
  struct Case {
    double scale;
    int tracker;
    double growth, backoff;  // exact products, and rounded ones
    double min_scale;
  };
  const Case kCases[] = {{65536.0, 0, 2.0, 0.5, 0.0},      {65536.0, 0, 1.7, 0.3, 0.0},
                         {3.0e38, 1, 2.0, 0.5, 0.0},       {3.0e38, 1, 1.7, 0.3, 0.0},
                         {0x1p-24, 1, 2.0, 0.25, 0x1p-24}, {1.0e-7, 0, 1.7, 0.3, 0x1p-24}};
  for (const Case& c : kCases) {
    const Tensor cpu_scale = full({1}, c.scale, {.dtype = DType::Float32});
    const Tensor cpu_tracker = full({1}, c.tracker, {.dtype = DType::Int32});
    const Tensor gpu_scale = cpu_scale.to(kCuda), gpu_tracker = cpu_tracker.to(kCuda);
    const double flags[] = {0, 0, 1, 0, 0, 0, 0, 1, 1, 0, 0};
    for (size_t i = 0; i < std::size(flags); ++i) {
      SCOPED_TRACE(::testing::Message() << "start " << c.scale << ", factors " << c.growth << "/" << c.backoff
                                        << ", min_scale " << c.min_scale << ", update " << i);
      const Scalar1 found_inf(flags[i]);
      cpu_kernels().amp_update_scale(cpu_scale, cpu_tracker, found_inf.cpu, c.growth, c.backoff, 2,
                                     c.min_scale);
      gpu_kernels().amp_update_scale(gpu_scale, gpu_tracker, found_inf.gpu, c.growth, c.backoff, 2,
                                     c.min_scale);
      EXPECT_TRUE(testing::all_equal(gpu_scale.to(Device::cpu()), cpu_scale));
      EXPECT_TRUE(testing::all_equal(gpu_tracker.to(Device::cpu()), cpu_tracker));
    }
  }
}

}  // namespace
}  // namespace kiln
