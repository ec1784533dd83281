// core/checked_math.h and the Scalar conversions built on it (Note [Floating scalars as
// integers]): overflow reported instead of wrapped, every double turned into an integer
// or refused with a kiln::Error, never the undefined behaviour of a plain cast.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/checked_math.h"
#include "core/ops.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kTwoTo63 = 9223372036854775808.0;

TEST(CheckedMath, MultiplyAndAddReportOverflow) {
  EXPECT_EQ(checked_mul(int64_t{1} << 31, int64_t{1} << 31), int64_t{1} << 62);
  EXPECT_FALSE(checked_mul(int64_t{1} << 32, int64_t{1} << 32));
  EXPECT_FALSE(checked_mul(INT64_MIN, -1));
  EXPECT_EQ(checked_mul(-(int64_t{1} << 31), int64_t{1} << 32), INT64_MIN);
  EXPECT_EQ(checked_mul(0, INT64_MAX), 0);
  EXPECT_EQ(checked_add(INT64_MAX - 1, 1), INT64_MAX);
  EXPECT_FALSE(checked_add(INT64_MAX, 1));
  EXPECT_FALSE(checked_add(INT64_MIN, -1));
}

TEST(CheckedMath, FitsIntegerIsExactAtTheBounds) {
  EXPECT_TRUE(fits_integer<int64_t>(-kTwoTo63));
  EXPECT_FALSE(fits_integer<int64_t>(kTwoTo63));  // INT64_MAX rounds up to 2^63 as a double
  EXPECT_TRUE(fits_integer<int64_t>(std::nextafter(kTwoTo63, 0.0)));
  EXPECT_FALSE(fits_integer<int64_t>(std::nextafter(-kTwoTo63, -kInf)));
  EXPECT_TRUE(fits_integer<int32_t>(2147483647.9));  // truncates to INT32_MAX
  EXPECT_FALSE(fits_integer<int32_t>(2147483648.0));
  EXPECT_TRUE(fits_integer<int32_t>(-2147483648.9));
  EXPECT_FALSE(fits_integer<int32_t>(-2147483649.0));
  EXPECT_TRUE(fits_integer<uint8_t>(255.5));
  EXPECT_TRUE(fits_integer<uint8_t>(-0.9));  // truncates to 0
  EXPECT_FALSE(fits_integer<uint8_t>(-1.0));
  EXPECT_FALSE(fits_integer<uint8_t>(256.0));
  for (const double bad : {kNan, kInf, -kInf}) {
    EXPECT_FALSE(fits_integer<int64_t>(bad));
    EXPECT_FALSE(fits_integer<uint8_t>(bad));
  }
}

TEST(CheckedMath, SaturatingCastClampsAndSendsNanToZero) {
  EXPECT_EQ(saturating_cast<int64_t>(kNan), 0);
  EXPECT_EQ(saturating_cast<int64_t>(kInf), INT64_MAX);
  EXPECT_EQ(saturating_cast<int64_t>(-kInf), INT64_MIN);
  EXPECT_EQ(saturating_cast<int64_t>(1e300), INT64_MAX);
  EXPECT_EQ(saturating_cast<int64_t>(-2.9), -2);
  EXPECT_EQ(saturating_cast<uint8_t>(-5.0), 0);
}

TEST(ScalarConversion, FloatingValuesTruncateTowardZeroAsPyTorch) {
  EXPECT_EQ(Scalar(2.9).to<int64_t>(), 2);
  EXPECT_EQ(Scalar(-2.9).to<int32_t>(), -2);
  EXPECT_EQ(Scalar(255.7).to<uint8_t>(), 255);
  EXPECT_TRUE(testing::all_equal(full({3}, -7.5, {.dtype = DType::Int64}), tensor<int64_t>({-7, -7, -7})));
}

TEST(ScalarConversion, ValuesNoIntegerHoldsAreErrorsNamingTheOp) {
  for (const double bad : {kNan, kInf, -kInf, 1e30, kTwoTo63}) {
    EXPECT_KILN_ERROR(full({2}, bad, {.dtype = DType::Int64}), "full", "cannot be converted to int64");
    Tensor t = zeros({2}, {.dtype = DType::Int32});
    EXPECT_KILN_ERROR(t.fill_(bad), "fill_", "cannot be converted to int32");
    EXPECT_KILN_ERROR(Scalar(bad).to<int64_t>(), "cannot be converted to int64");
  }
  EXPECT_KILN_ERROR(full({2}, 256.0, {.dtype = DType::UInt8}), "full", "cannot be converted to uint8");
  EXPECT_KILN_ERROR(full({2}, -1.0, {.dtype = DType::UInt8}), "full", "cannot be converted to uint8");
  // The tensor is left as it was.
  Tensor t = full({2}, 5, {.dtype = DType::Int64});
  EXPECT_KILN_ERROR(t.fill_(kNan), "fill_");
  EXPECT_EQ(t.sum().item<int64_t>(), 10);
}

TEST(ScalarConversion, ItemOfANonFiniteFloatAsAnIntegerIsAnError) {
  EXPECT_KILN_ERROR(scalar_tensor(kNan).item<int64_t>(), "cannot be converted to int64");
  EXPECT_KILN_ERROR(scalar_tensor(kInf).item<int32_t>(), "cannot be converted to int32");
  EXPECT_EQ(scalar_tensor(-3.5).item<int64_t>(), -3);
  // Scalars of any double are made and printed without undefined behaviour.
  for (const double v : {kNan, kInf, -kInf, 1e300, -1e300}) {
    const Scalar s(v);
    EXPECT_TRUE(s.is_floating());
    EXPECT_EQ(std::isnan(s.to_double()), std::isnan(v));
  }
}

TEST(ScalarConversion, FloatingAndBoolDtypesAcceptAnyDouble) {
  EXPECT_TRUE(std::isnan(full({1}, kNan, {.dtype = DType::Float32}).item<float>()));
  EXPECT_TRUE(std::isinf(full({1}, kInf, {.dtype = DType::Float64}).item<double>()));
  EXPECT_TRUE(full({1}, kNan, {.dtype = DType::Bool}).item<bool>());
}

}  // namespace
}  // namespace kiln
