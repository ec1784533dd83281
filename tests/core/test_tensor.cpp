// Tensor basics: the factories of core/ops/factory.h (defaults, values, dtypes),
// from_blob's no-copy aliasing and deleter, item(), conversions between every pair of
// dtypes, clone/contiguous, printing, size()/stride() with negative dims, Device parsing,
// the "CUDA is not available" error of a CPU-only run, and every user-error message.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <sstream>

#include "core/backend.h"
#include "core/ops.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

using testing::all_equal;

constexpr DType kAllDTypes[] = {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16,
                                DType::Int64,   DType::Int32,   DType::UInt8,   DType::Bool};

std::string printed(const Tensor& t) {
  std::ostringstream os;
  os << t;
  return os.str();
}

// ---- factories ------------------------------------------------------------------------

TEST(Factory, EmptyHasShapeDefaultDTypeAndContiguousStrides) {
  const Tensor t = empty({2, 3, 4});
  EXPECT_EQ(t.sizes(), (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(t.strides(), (std::vector<int64_t>{12, 4, 1}));
  EXPECT_EQ(t.dtype(), DType::Float32);
  EXPECT_EQ(t.device(), Device::cpu());
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(t.dim(), 3);
  EXPECT_EQ(t.storage_offset(), 0);
  EXPECT_EQ(t.element_size(), 4u);
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_FALSE(t.requires_grad());
  EXPECT_EQ(empty({}).numel(), 1);   // 0-d: one element
  EXPECT_EQ(empty({}).dim(), 0);
  EXPECT_EQ(empty({3, 0, 2}).numel(), 0);
  EXPECT_EQ(empty({2}, {.dtype = DType::Int32}).dtype(), DType::Int32);
  EXPECT_TRUE(empty({2}, {.dtype = std::nullopt, .requires_grad = true}).requires_grad());
}

TEST(Factory, ZerosAndOnesInEveryDType) {
  for (DType dtype : kAllDTypes) {
    const Tensor z = zeros({2, 3}, {.dtype = dtype});
    const Tensor o = ones({2, 3}, {.dtype = dtype});
    EXPECT_EQ(z.dtype(), dtype);
    EXPECT_EQ(z.to_vector<double>(), std::vector<double>(6, 0.0)) << dtype;
    EXPECT_EQ(o.to_vector<double>(), std::vector<double>(6, 1.0)) << dtype;
  }
  EXPECT_EQ(zeros({1}).dtype(), DType::Float32);
  EXPECT_EQ(ones({1}).dtype(), DType::Float32);
}

TEST(Factory, FullTakesItsDTypeFromTheScalarKind) {
  const Tensor b = full({2}, true);
  EXPECT_EQ(b.dtype(), DType::Bool);
  EXPECT_EQ(b.to_vector<bool>(), (std::vector<bool>{true, true}));
  const Tensor i = full({2}, 7);
  EXPECT_EQ(i.dtype(), DType::Int64);
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{7, 7}));
  const Tensor d = full({2}, 2.5);
  EXPECT_EQ(d.dtype(), DType::Float32);
  EXPECT_EQ(d.to_vector<float>(), (std::vector<float>{2.5f, 2.5f}));
  EXPECT_EQ(full({1}, 2.5f).dtype(), DType::Float32);
  EXPECT_EQ(full({1}, int32_t{3}).dtype(), DType::Int64);
  // Integers keep all 64 bits (a double would round 2^53 + 1).
  const int64_t big = (int64_t{1} << 53) + 1;
  EXPECT_EQ(full({1}, big).item<int64_t>(), big);
  // An explicit dtype wins, converting the value.
  EXPECT_EQ(full({1}, true, {.dtype = DType::Float64}).item<double>(), 1.0);
  EXPECT_EQ(full({1}, 2.75, {.dtype = DType::Int32}).item<int64_t>(), 2);
  EXPECT_EQ(full({1}, 0.1, {.dtype = DType::Float16}).item<double>(), static_cast<double>(static_cast<float>(Half(0.1f))));
  EXPECT_EQ(full({1}, 0.1, {.dtype = DType::Float64}).item<double>(), 0.1);
  EXPECT_EQ(full({1}, 3, {.dtype = DType::Bool}).item<bool>(), true);
}

TEST(Factory, ScalarTensorIsZeroDim) {
  const Tensor s = scalar_tensor(4.5);
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.numel(), 1);
  EXPECT_EQ(s.dtype(), DType::Float32);
  EXPECT_EQ(s.item<double>(), 4.5);
  EXPECT_EQ(scalar_tensor(3).dtype(), DType::Int64);
  EXPECT_EQ(scalar_tensor(3, {.dtype = DType::Float64}).dtype(), DType::Float64);
}

TEST(Factory, LikeFactoriesCopyShapeDTypeAndDeviceButNotRequiresGrad) {
  const Tensor like = ones({3, 2}, {.dtype = DType::Float64, .requires_grad = true});
  for (const Tensor& t : {empty_like(like), zeros_like(like), ones_like(like), full_like(like, 9)}) {
    EXPECT_EQ(t.sizes(), like.sizes());
    EXPECT_EQ(t.dtype(), DType::Float64);
    EXPECT_EQ(t.device(), like.device());
    EXPECT_FALSE(t.requires_grad());
  }
  EXPECT_EQ(zeros_like(like).to_vector<double>(), std::vector<double>(6, 0.0));
  EXPECT_EQ(ones_like(like).to_vector<double>(), std::vector<double>(6, 1.0));
  EXPECT_EQ(full_like(like, 9).to_vector<double>(), std::vector<double>(6, 9.0));
  EXPECT_EQ(zeros_like(like, {.dtype = DType::Int32}).dtype(), DType::Int32);
  EXPECT_TRUE(ones_like(like, {.dtype = std::nullopt, .requires_grad = true}).requires_grad());
  // A non-contiguous `like` gives a contiguous result of the same shape.
  const Tensor t = zeros_like(like.t());
  EXPECT_EQ(t.sizes(), (std::vector<int64_t>{2, 3}));
  EXPECT_TRUE(t.is_contiguous());
}

TEST(Factory, ArangeIntegers) {
  EXPECT_EQ(arange(5).to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(arange(5).dtype(), DType::Int64);
  EXPECT_EQ(arange(2, 11, 3).to_vector<int64_t>(), (std::vector<int64_t>{2, 5, 8}));
  EXPECT_EQ(arange(2, 12, 3).to_vector<int64_t>(), (std::vector<int64_t>{2, 5, 8, 11}));
  EXPECT_EQ(arange(5, 0, -2).to_vector<int64_t>(), (std::vector<int64_t>{5, 3, 1}));
  EXPECT_EQ(arange(-3, 3, 2).to_vector<int64_t>(), (std::vector<int64_t>{-3, -1, 1}));
  EXPECT_EQ(arange(3, 3).numel(), 0);
  EXPECT_EQ(arange(5, 0).numel(), 0);         // positive step, decreasing range: empty
  EXPECT_EQ(arange(0, 5, -1).numel(), 0);     // negative step, increasing range: empty
  EXPECT_EQ(arange(4, {.dtype = DType::Float64}).to_vector<double>(), (std::vector<double>{0, 1, 2, 3}));
  EXPECT_EQ(arange(4, {.dtype = DType::UInt8}).dtype(), DType::UInt8);
}

TEST(Factory, ArangeFloats) {
  const Tensor a = arange(0.0, 1.0, 0.25);
  EXPECT_EQ(a.dtype(), DType::Float32);
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{0.0f, 0.25f, 0.5f, 0.75f}));
  EXPECT_EQ(arange(0, 2, 0.5).numel(), 4);  // one float argument makes it floating
  EXPECT_EQ(arange(0, 2, 0.5).dtype(), DType::Float32);
  const Tensor down = arange(1.0, 0.0, -0.3, {.dtype = DType::Float64});
  ASSERT_EQ(down.numel(), 4);
  const std::vector<double> v = down.to_vector<double>();
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(v[i], 1.0 - 0.3 * i, 1e-15);
  EXPECT_EQ(arange(1.5, 1.5, 0.1).numel(), 0);
  EXPECT_EQ(arange(2.0, 1.0, 0.1).numel(), 0);
}

TEST(Factory, Linspace) {
  EXPECT_EQ(linspace(0, 1, 5).to_vector<float>(), (std::vector<float>{0.0f, 0.25f, 0.5f, 0.75f, 1.0f}));
  EXPECT_EQ(linspace(0, 1, 5).dtype(), DType::Float32);
  EXPECT_EQ(linspace(2, -2, 3, {.dtype = DType::Float64}).to_vector<double>(), (std::vector<double>{2, 0, -2}));
  EXPECT_EQ(linspace(3, 7, 1).to_vector<float>(), (std::vector<float>{3.0f}));
  EXPECT_EQ(linspace(3, 7, 0).numel(), 0);
  const std::vector<double> v = linspace(-1, 1, 101, {.dtype = DType::Float64}).to_vector<double>();
  ASSERT_EQ(v.size(), 101u);
  for (int i = 0; i <= 100; ++i) EXPECT_NEAR(v[i], -1 + 0.02 * i, 1e-14);
  EXPECT_NEAR(v.back(), 1.0, 1e-15);
}

TEST(Factory, Eye) {
  EXPECT_EQ(eye(3).to_vector<float>(), (std::vector<float>{1, 0, 0, 0, 1, 0, 0, 0, 1}));
  EXPECT_EQ(eye(3).sizes(), (std::vector<int64_t>{3, 3}));
  EXPECT_EQ(eye(3).dtype(), DType::Float32);
  EXPECT_EQ(eye(2, {.dtype = DType::Int64}).to_vector<int64_t>(), (std::vector<int64_t>{1, 0, 0, 1}));
  EXPECT_EQ(eye(0).sizes(), (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(eye(1).to_vector<float>(), (std::vector<float>{1}));
}

TEST(Factory, FromBlobAliasesCallerMemory) {
  std::vector<float> buffer = {1, 2, 3, 4, 5, 6};
  const Tensor t = from_blob(buffer.data(), {2, 3});
  EXPECT_EQ(t.dtype(), DType::Float32);
  EXPECT_EQ(t.data_ptr(), buffer.data());
  buffer[4] = 50;  // visible through the tensor
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 50, 6}));
  Tensor alias = t;
  alias.fill_(0.5);  // and the other way
  EXPECT_EQ(buffer, std::vector<float>(6, 0.5f));
  // Explicit strides: a transposed view of the same memory.
  std::vector<int32_t> ints = {1, 2, 3, 4, 5, 6};
  const Tensor tr = from_blob(ints.data(), {3, 2}, {1, 3}, {.dtype = DType::Int32});
  EXPECT_EQ(tr.to_vector<int32_t>(), (std::vector<int32_t>{1, 4, 2, 5, 3, 6}));
  EXPECT_FALSE(tr.is_contiguous());
  EXPECT_EQ(from_blob(nullptr, {0, 4}).numel(), 0);
}

TEST(Factory, FromBlobDeleterRunsOnceWhenTheLastViewDies) {
  int calls = 0;
  void* freed = nullptr;
  auto* memory = new double[4]{1, 2, 3, 4};
  {
    Tensor view;
    {
      const Tensor t = from_blob(memory, {4}, {.dtype = DType::Float64}, [&](void* p) {
        ++calls;
        freed = p;
        delete[] static_cast<double*>(p);
      });
      view = t.narrow(0, 1, 2);
    }
    EXPECT_EQ(calls, 0) << "a view still holds the memory";
    EXPECT_EQ(view.to_vector<double>(), (std::vector<double>{2, 3}));
    const Tensor copy = view.clone();
    view = Tensor();
    EXPECT_EQ(calls, 1);
    EXPECT_EQ(freed, memory);
    EXPECT_EQ(copy.to_vector<double>(), (std::vector<double>{2, 3}));  // the clone owns its own data
  }
  EXPECT_EQ(calls, 1);
}

TEST(Factory, TensorFromValues) {
  const Tensor f = tensor<float>({1.5f, -2.0f, 3.0f});
  EXPECT_EQ(f.dtype(), DType::Float32);
  EXPECT_EQ(f.sizes(), (std::vector<int64_t>{3}));
  EXPECT_EQ(f.to_vector<float>(), (std::vector<float>{1.5f, -2.0f, 3.0f}));
  const Tensor m = tensor<double>({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(m.dtype(), DType::Float64);
  EXPECT_EQ(m.sizes(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(tensor<int64_t>({7, 8}).dtype(), DType::Int64);
  EXPECT_EQ(tensor<int32_t>({7, 8}).dtype(), DType::Int32);
  EXPECT_EQ(tensor<uint8_t>({255, 0}).to_vector<int64_t>(), (std::vector<int64_t>{255, 0}));
  const Tensor b = tensor<bool>({true, false, true});
  EXPECT_EQ(b.dtype(), DType::Bool);
  EXPECT_EQ(b.to_vector<bool>(), (std::vector<bool>{true, false, true}));
  EXPECT_EQ(tensor<int64_t>({1, 2}, {}, {.dtype = DType::Float16}).dtype(), DType::Float16);
  EXPECT_TRUE(tensor<double>({1}, {}, {.dtype = std::nullopt, .requires_grad = true}).requires_grad());
  EXPECT_EQ(tensor<float>({3.0f}, {}).dim(), 1);
  EXPECT_EQ(tensor<float>({}, {0}).numel(), 0);
}

// ---- item and conversions -------------------------------------------------------------

TEST(Tensor, ItemKeepsTheCategory) {
  const Scalar f = scalar_tensor(2.5).item();
  EXPECT_TRUE(f.is_floating());
  EXPECT_EQ(f.to_double(), 2.5);
  const Scalar i = full({1, 1}, 41).item();
  EXPECT_EQ(i.kind(), DType::Int64);
  EXPECT_EQ(i.to_int(), 41);
  EXPECT_EQ(scalar_tensor(true).item().kind(), DType::Bool);
  EXPECT_EQ(scalar_tensor(int64_t{-9}, {.dtype = DType::Int32}).item<int32_t>(), -9);
  EXPECT_EQ(scalar_tensor(200, {.dtype = DType::UInt8}).item<int64_t>(), 200);
  EXPECT_EQ(scalar_tensor(0.1, {.dtype = DType::BFloat16}).item<double>(), static_cast<double>(static_cast<float>(BFloat16(0.1f))));
  EXPECT_EQ(scalar_tensor(2.75).item<int>(), 2);
  // item() of one element of a bigger tensor (a view with an offset).
  EXPECT_EQ(arange(10).select(0, 7).item<int64_t>(), 7);
}

// Floating -> uint8 truncates toward zero and wraps modulo 256 (through int64, as PyTorch),
// on every platform (kernels/copy_cast.h); the CUDA copy gives the same bytes.
TEST(Tensor, FloatingToUInt8WrapsOnEveryPlatform) {
  for (DType dtype : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16}) {
    const Tensor values = full({3}, -1.5, {.dtype = dtype});
    values.select(0, 1).fill_(300.0);
    values.select(0, 2).fill_(-0.5);
    const Tensor bytes = values.to(DType::UInt8);
    EXPECT_EQ(bytes.select(0, 0).item<int64_t>(), 255) << dtype;
    EXPECT_EQ(bytes.select(0, 1).item<int64_t>(), 44) << dtype;
    EXPECT_EQ(bytes.select(0, 2).item<int64_t>(), 0) << dtype;
  }
}

// Small non-negative integers are exact in every dtype, so every pair converts exactly.
TEST(Tensor, ToConvertsBetweenEveryPairOfDTypes) {
  const std::vector<double> values = {0, 1, 2, 3, 100, 7};
  for (DType from : kAllDTypes) {
    const std::vector<double> in = from == DType::Bool ? std::vector<double>{0, 1, 1, 0, 1, 1} : values;
    const Tensor src = tensor<double>(in, {2, 3}).to(from);
    for (DType to_dtype : kAllDTypes) {
      const Tensor out = src.to(to_dtype);
      EXPECT_EQ(out.dtype(), to_dtype);
      EXPECT_EQ(out.sizes(), src.sizes());
      std::vector<double> expected = in;
      if (to_dtype == DType::Bool) for (double& e : expected) e = e != 0;
      EXPECT_EQ(out.to_vector<double>(), expected) << from << " -> " << to_dtype;
      // And through a non-contiguous view.
      EXPECT_EQ(src.t().to(to_dtype).to_vector<double>(), src.t().to(DType::Float64).to(to_dtype).to_vector<double>())
          << from << " -> " << to_dtype << " (transposed)";
    }
  }
}

TEST(Tensor, ToTruncatesFloatsAndTestsNonZeroForBool) {
  const Tensor x = tensor<double>({-2.7, -0.5, 0.0, 0.5, 2.9, 1e3});
  EXPECT_EQ(x.to(DType::Int64).to_vector<int64_t>(), (std::vector<int64_t>{-2, 0, 0, 0, 2, 1000}));
  EXPECT_EQ(x.to(DType::Int32).to_vector<int32_t>(), (std::vector<int32_t>{-2, 0, 0, 0, 2, 1000}));
  EXPECT_EQ(x.to(DType::Float16).to(DType::Int64).to_vector<int64_t>(), (std::vector<int64_t>{-2, 0, 0, 0, 2, 1000}));
  const Tensor y = tensor<float>({0.0f, -0.0f, 0.25f, -3.0f, std::numeric_limits<float>::quiet_NaN(),
                                  std::numeric_limits<float>::infinity()});
  EXPECT_EQ(y.to(DType::Bool).to_vector<bool>(), (std::vector<bool>{false, false, true, true, true, true}));
  EXPECT_EQ(tensor<int64_t>({0, -5, 3}).to(DType::Bool).to_vector<bool>(), (std::vector<bool>{false, true, true}));
  // Rounding into the 16-bit types is to nearest.
  EXPECT_EQ(tensor<float>({0.1f}).to(DType::Float16).item<float>(), static_cast<float>(Half(0.1f)));
  EXPECT_EQ(tensor<float>({0.1f}).to(DType::BFloat16).item<float>(), static_cast<float>(BFloat16(0.1f)));
  EXPECT_EQ(tensor<float>({1e5f}).to(DType::Float16).item<float>(), std::numeric_limits<float>::infinity());
  // Large integers keep their bits through int64 <-> float64 where they fit.
  EXPECT_EQ(tensor<int64_t>({int64_t{1} << 52}).to(DType::Float64).item<double>(), std::ldexp(1.0, 52));
}

TEST(Tensor, ToTheSameDTypeReturnsTheSameTensor) {
  const Tensor x = ones({3});
  EXPECT_TRUE(x.to(DType::Float32).is_same(x));
  EXPECT_TRUE(x.to(Device::cpu()).is_same(x));
  EXPECT_FALSE(x.to(Device::cpu(), DType::Float32, false, /*copy=*/true).is_same(x));
}

TEST(Tensor, CloneIsIndependent) {
  Tensor x = tensor<float>({1, 2, 3, 4}, {2, 2});
  Tensor c = x.clone();
  EXPECT_FALSE(c.storage().is_alias_of(x.storage()));
  c.fill_(9);
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{1, 2, 3, 4}));
  x.zero_();
  EXPECT_EQ(c.to_vector<float>(), std::vector<float>(4, 9));
  const Tensor ct = tensor<float>({1, 2, 3, 4}, {2, 2}).t().clone();
  EXPECT_EQ(ct.to_vector<float>(), (std::vector<float>{1, 3, 2, 4}));
}

TEST(Tensor, ContiguousCopiesOnlyWhenNeeded) {
  const Tensor x = arange(6).view({2, 3});
  EXPECT_TRUE(x.contiguous().is_same(x));
  const Tensor xt = x.t();
  EXPECT_FALSE(xt.is_contiguous());
  const Tensor c = xt.contiguous();
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_FALSE(c.storage().is_alias_of(x.storage()));
  EXPECT_EQ(c.strides(), (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(c.to_vector<int64_t>(), (std::vector<int64_t>{0, 3, 1, 4, 2, 5}));
}

// ---- printing -------------------------------------------------------------------------

TEST(Tensor, PrintingShowsValuesShapeAndDType) {
  EXPECT_EQ(printed(tensor<int64_t>({1, -2, 3})), "tensor([ 1, -2,  3], shape=[3], dtype=int64)");
  const std::string f = printed(tensor<float>({1.5f, 2.0f, -0.25f, 4.0f}, {2, 2}));
  EXPECT_NE(f.find("1.5000"), std::string::npos) << f;
  EXPECT_NE(f.find("-0.2500"), std::string::npos) << f;
  EXPECT_NE(f.find("shape=[2, 2]"), std::string::npos) << f;
  EXPECT_NE(f.find("dtype=float32"), std::string::npos) << f;
  EXPECT_EQ(f.find("requires_grad"), std::string::npos) << f;
  EXPECT_NE(printed(ones({2}, {.dtype = DType::Float64, .requires_grad = true})).find("requires_grad=true"),
            std::string::npos);
  EXPECT_NE(printed(scalar_tensor(true)).find("dtype=bool"), std::string::npos);
  EXPECT_NE(printed(scalar_tensor(3.0)).find("shape=[]"), std::string::npos);
  EXPECT_NE(printed(zeros({2000})).find("2000 elements"), std::string::npos);
  EXPECT_EQ(printed(Tensor()), "tensor(undefined)");
  std::ostringstream os;
  os << Device::cuda(2) << ' ' << Device::cpu();
  EXPECT_EQ(os.str(), "cuda:2 cpu");
}

// ---- metadata -------------------------------------------------------------------------

TEST(Tensor, SizeAndStrideAcceptNegativeDims) {
  const Tensor t = zeros({2, 3, 4});
  EXPECT_EQ(t.size(0), 2);
  EXPECT_EQ(t.size(-1), 4);
  EXPECT_EQ(t.size(-3), 2);
  EXPECT_EQ(t.stride(-1), 1);
  EXPECT_EQ(t.stride(-2), 4);
  EXPECT_EQ(t.stride(0), 12);
  EXPECT_EQ(t.shape(), t.sizes());
  EXPECT_KILN_ERROR(t.size(3), "size: dimension 3 out of range for a 3-d tensor (expected in [-3, 2])");
  EXPECT_KILN_ERROR(t.size(-4), "size: dimension -4 out of range");
  EXPECT_KILN_ERROR(t.stride(5), "stride: dimension 5 out of range");
  EXPECT_KILN_ERROR(scalar_tensor(1.0).size(0), "size: a 0-d tensor has no dimensions");
}

TEST(Device, Parse) {
  EXPECT_EQ(Device::parse("cpu"), Device::cpu());
  EXPECT_EQ(Device::parse("cuda"), Device::cuda(0));
  EXPECT_EQ(Device::parse("cuda:1"), Device::cuda(1));
  EXPECT_EQ(Device::parse("cuda:12").index, 12);
  EXPECT_TRUE(Device::parse("cuda:3").is_cuda());
  EXPECT_TRUE(Device::parse("cpu").is_cpu());
  EXPECT_EQ(Device::cuda(1).str(), "cuda:1");
  EXPECT_EQ(Device::cpu().str(), "cpu");
  for (const char* bad : {"gpu", "", "CPU", "cuda:", "cuda:-1", "cuda:1x", "cuda1", "cpu:0", " cuda"}) {
    EXPECT_KILN_ERROR(Device::parse(bad), "Device: cannot parse '" + std::string(bad) + "'",
                      "expected cpu, cuda or cuda:N");
  }
}

TEST(Device, UsingCudaWithoutItIsAClearError) {
  if (has_backend(DeviceType::CUDA)) GTEST_SKIP() << "this build has a CUDA backend";
  EXPECT_KILN_ERROR(zeros({2}, {.dtype = std::nullopt, .device = Device::cuda()}), "CUDA is not available", "cuda:0");
  EXPECT_KILN_ERROR(ones({2}).to(Device::cuda(1)), "CUDA is not available", "cuda:1");
  EXPECT_KILN_ERROR(rand({2}, {.dtype = std::nullopt, .device = Device::cuda()}), "CUDA is not available");
}

// ---- errors ---------------------------------------------------------------------------

TEST(Tensor, Errors) {
  const Tensor undefined;
  EXPECT_FALSE(undefined.defined());
  EXPECT_KILN_ERROR(undefined.sizes(), "Tensor: operation on an undefined tensor");
  EXPECT_KILN_ERROR(undefined.dtype(), "Tensor: operation on an undefined tensor");
  EXPECT_KILN_ERROR(undefined.numel(), "Tensor: operation on an undefined tensor");
  EXPECT_KILN_ERROR(undefined.clone(), "clone: undefined tensor");
  EXPECT_KILN_ERROR(undefined.to(DType::Float64), "undefined tensor");
  EXPECT_KILN_ERROR(zeros_like(undefined), "*_like: undefined tensor");
  EXPECT_KILN_ERROR(empty({2, -1}), "empty: negative dimension in size [2, -1]");
  EXPECT_KILN_ERROR(zeros({-3}), "negative dimension in size [-3]");
  EXPECT_KILN_ERROR(empty({int64_t{1} << 40, int64_t{1} << 40}), "overflows int64");
  EXPECT_KILN_ERROR(zeros({2, 3}).item(), "item: a tensor with 6 elements cannot be converted to a number",
                    "shape [2, 3]");
  EXPECT_KILN_ERROR(empty({0}).item(), "item: a tensor with 0 elements");
  EXPECT_KILN_ERROR(zeros({2}).data_ptr<double>(), "data_ptr: tensor has dtype float32, asked for float64");
  EXPECT_KILN_ERROR(zeros({2}, {.dtype = DType::Int64}).data_ptr<int32_t>(),
                    "data_ptr: tensor has dtype int64, asked for int32");
  EXPECT_KILN_ERROR(tensor<float>({1, 2, 3, 4, 5}, {2, 3}), "tensor: 5 values for shape [2, 3]");
  EXPECT_KILN_ERROR(from_blob(nullptr, {3}), "from_blob: null data for 3 elements");
  EXPECT_KILN_ERROR(arange(0, 5, 0), "arange: step must be nonzero");
  EXPECT_KILN_ERROR(arange(0.0, 5.0, 0.0), "arange: step must be finite and nonzero");
  EXPECT_KILN_ERROR(linspace(0, 1, -1), "linspace: number of steps must be non-negative, got -1");
  EXPECT_KILN_ERROR(eye(-2), "eye: n must be non-negative, got -2");
  EXPECT_KILN_ERROR(ones({2}, {.dtype = std::nullopt, .requires_grad = true}).to(DType::Int64),
                    "to: cannot convert a tensor that requires grad to int64");
  EXPECT_KILN_ERROR(ones({2}, {.dtype = DType::Int64, .requires_grad = true}),
                    "requires_grad_: only floating-point tensors can require gradients, got int64");
}

}  // namespace
}  // namespace kiln
