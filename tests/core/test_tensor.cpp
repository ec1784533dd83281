// Tensor basics: item(), printing, size()/stride() with negative dims, Device parsing, the
// "CUDA is not available" error of a CPU-only run, and every user-error message (those of
// the factories and conversions too; their own tests are test_factory.cpp and test_copy.cpp).
#include <gtest/gtest.h>

#include <sstream>

#include "core/backend.h"
#include "core/ops.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

std::string printed(const Tensor& t) {
  std::ostringstream os;
  os << t;
  return os.str();
}

// ---- item -----------------------------------------------------------------------------

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
  EXPECT_KILN_ERROR(empty({int64_t{1} << 40, int64_t{1} << 40}),
                    "empty: size [1099511627776, 1099511627776] has more than 2^63 - 1 elements");
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
