// The factories of core/ops/factory.h: empty, zeros, ones, full, scalar_tensor, the *_like
// forms, arange, linspace, eye, from_blob (no-copy aliasing of caller memory, explicit
// strides, the deleter) and tensor(values): shapes, defaults, values and dtypes. Their
// error messages are checked in test_tensor.cpp's Tensor.Errors.
#include <gtest/gtest.h>

#include <vector>

#include "core/ops.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

constexpr DType kAllDTypes[] = {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16,
                                DType::Int64,   DType::Int32,   DType::UInt8,   DType::Bool};

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
  // A dense non-contiguous `like` gives a result laid out as it (PyTorch's preserve_format):
  // a transpose's twin is a transpose; a strided slice's is dense in its dims' order.
  const Tensor t = zeros_like(like.t());
  EXPECT_EQ(t.sizes(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(t.strides(), like.t().strides());
  EXPECT_EQ(t.to_vector<double>(), std::vector<double>(6, 0.0));
  const Tensor strided = empty_like(like.slice(1, 0, 2, 2));
  EXPECT_TRUE(strided.is_contiguous());
  EXPECT_EQ(strided.sizes(), (std::vector<int64_t>{3, 1}));
  const Tensor cl = full_like(zeros({2, 3, 4, 5, 6}).contiguous(MemoryFormat::ChannelsLast3d), 2.5);
  EXPECT_TRUE(cl.is_contiguous(MemoryFormat::ChannelsLast3d));
  EXPECT_EQ(cl.sum().item<double>(), 2.5 * 720);
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

// Byte and span counts once wrapped: zeros({2^62}) asked for 2^64 = 0 bytes and then
// wrote through them; empty_strided({2^40, 2}, {2^40, 1}) and from_blob overflowed signed
// arithmetic. Each is now an error naming the op and the sizes (Note [Checked sizes]).
TEST(Factory, SizesWhoseBytesOverflowAreErrors) {
  const int64_t big = int64_t{1} << 62;
  EXPECT_KILN_ERROR(zeros({big}), "zeros: 4611686018427387904 elements of float32 are more than 2^63 - 1 bytes");
  EXPECT_KILN_ERROR(empty({int64_t{1} << 61}, {.dtype = DType::Float64}).fill_(1), "empty",
                    "more than 2^63 - 1 bytes");
  EXPECT_KILN_ERROR(ones({big, 4}), "ones: size [4611686018427387904, 4] has more than 2^63 - 1 elements");
  EXPECT_KILN_ERROR(full({INT64_MAX}, 1, {.dtype = DType::UInt8}), "out of memory");
  EXPECT_KILN_ERROR(empty_strided({int64_t{1} << 40, 2}, {int64_t{1} << 40, 1}), "empty_strided",
                    "addresses more than 2^63 - 1 elements");
  EXPECT_KILN_ERROR(empty_strided({3, 2}, {INT64_MAX, 1}), "empty_strided", "addresses more than 2^63 - 1 elements");
  EXPECT_KILN_ERROR(empty_strided({2}, {1, 1}), "empty_strided", "1 sizes but 2 strides");
  EXPECT_KILN_ERROR(empty_strided({2, 2}, {1, -1}), "empty_strided", "negative stride");
  EXPECT_KILN_ERROR(empty_strided({0, 2}, {1, -1}), "empty_strided", "negative stride");
  float one = 1;
  EXPECT_KILN_ERROR(from_blob(&one, {int64_t{1} << 40, 2}, {int64_t{1} << 40, 1}), "from_blob",
                    "addresses more than 2^63 - 1 elements");
  EXPECT_KILN_ERROR(from_blob(&one, {big}), "from_blob", "more than 2^63 - 1 bytes");
  EXPECT_KILN_ERROR(from_blob(&one, {big, big}), "from_blob", "has more than 2^63 - 1 elements");
  EXPECT_KILN_ERROR(from_blob(&one, {2, 2}, {1, -1}), "from_blob", "negative stride");
  EXPECT_KILN_ERROR(eye(int64_t{1} << 32), "eye: size [4294967296, 4294967296] has more than 2^63 - 1 elements");
  // Zero-size dims make any size and stride harmless, in any order.
  EXPECT_EQ(empty_strided({0, 2}, {INT64_MAX, INT64_MAX}).numel(), 0);
  EXPECT_EQ(from_blob(nullptr, {0, big}, {INT64_MAX, 1}).numel(), 0);
  EXPECT_EQ(zeros({0, big, big}).numel(), 0);
  EXPECT_EQ(zeros({big, big, 0}).numel(), 0);
  EXPECT_EQ(zeros({big, big, 0}).sizes(), (std::vector<int64_t>{big, big, 0}));
}

// arange's length once came from end - start and a rounding that overflow int64 (and from
// a double -> int64 cast of inf); now it is computed exactly or refused.
TEST(Factory, ArangeLengthsThatOverflowAreErrors) {
  EXPECT_KILN_ERROR(arange(INT64_MIN, INT64_MAX), "arange: 18446744073709551615 elements", "more than 2^63 - 1");
  EXPECT_KILN_ERROR(arange(-1e308, 1e308, 1e-300), "arange", "more than 2^63 - 1");
  EXPECT_KILN_ERROR(arange(0.0, 1e300, 1.0), "arange", "more than 2^63 - 1");
  EXPECT_KILN_ERROR(arange(0, 10, 0), "arange: step must be nonzero");
  // Huge steps give one element or none, never a wrapped count.
  EXPECT_EQ(arange(INT64_MIN, INT64_MAX, INT64_MAX).to_vector<int64_t>(),
            (std::vector<int64_t>{INT64_MIN, -1, INT64_MAX - 1}));
  EXPECT_EQ(arange(INT64_MAX, INT64_MIN, INT64_MIN).to_vector<int64_t>(), (std::vector<int64_t>{INT64_MAX, -1}));
  EXPECT_EQ(arange(0, 5, INT64_MAX).to_vector<int64_t>(), (std::vector<int64_t>{0}));
  EXPECT_EQ(arange(5, 0, INT64_MIN).to_vector<int64_t>(), (std::vector<int64_t>{5}));
  EXPECT_EQ(arange(0, 10, 3).to_vector<int64_t>(), (std::vector<int64_t>{0, 3, 6, 9}));
  EXPECT_EQ(arange(10, 0, -3).to_vector<int64_t>(), (std::vector<int64_t>{10, 7, 4, 1}));
  EXPECT_EQ(arange(0, 0).numel(), 0);
  EXPECT_EQ(arange(0, -5, 1).numel(), 0);
}

}  // namespace
}  // namespace kiln
