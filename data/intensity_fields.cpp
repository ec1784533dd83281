// gaussian_smooth and bias_field (intensity_fields.h), and the random transforms on them.
#include "data/intensity_fields.h"

#include <cmath>

#include "core/error.h"
#include "core/ops.h"
#include "data/transform_util.h"

namespace kiln::data {
namespace {

// MONAI's gaussian_1d(sigma, truncated, approx = "erf").
std::vector<double> erf_kernel(double sigma, double truncated) {
  const auto tail = static_cast<int64_t>(std::max(sigma * truncated, 0.5) + 0.5);
  const double t = 1.0 / (std::sqrt(2.0) * sigma);
  std::vector<double> taps;
  for (int64_t i = -tail; i <= tail; ++i) {
    const auto x = static_cast<double>(i);
    taps.push_back(std::max(0.0, 0.5 * (std::erf(t * (x + 0.5)) - std::erf(t * (x - 0.5)))));
  }
  return taps;
}

// P_0 .. P_degree at x (Bonnet's recursion: n P_n = (2n - 1) x P_{n-1} - (n - 1) P_{n-2}).
std::vector<double> legendre(double x, int64_t degree) {
  std::vector<double> p{1.0, x};
  for (int64_t n = 2; n <= degree; ++n) {
    const auto nd = static_cast<double>(n);
    p.push_back(
        ((2 * nd - 1) * x * p[static_cast<size_t>(n - 1)] - (nd - 1) * p[static_cast<size_t>(n - 2)]) / nd);
  }
  p.resize(static_cast<size_t>(degree + 1));
  return p;
}

// numpy's linspace(-1, 1, n, dtype=float32) (MONAI's coordinates), in float64.
std::vector<double> coordinates(int64_t n) {
  std::vector<double> c(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    c[static_cast<size_t>(i)] =
        n == 1 ? -1.0
               : static_cast<double>(
                     static_cast<float>(-1.0 + 2.0 * static_cast<double>(i) / static_cast<double>(n - 1)));
  }
  return c;
}

bool happens(Generator& generator, double p) { return p > 0 && uniform(generator, 0, 1) < p; }

}  // namespace

Tensor gaussian_smooth(const Tensor& volume, const std::array<double, 3>& sigma, double truncated) {
  const char* op = "gaussian_smooth";
  KILN_CHECK(volume.defined() && volume.dim() == 4, op, ": expected a [C, D, H, W] volume, got ",
             volume.defined() ? volume.sizes() : Dims{});
  KILN_CHECK(volume.is_floating_point(), op, ": expected a floating volume, got ", volume.dtype(),
             ". Hint: put ToFloat first");
  KILN_CHECK(std::isfinite(truncated) && truncated > 0, op, ": truncated must be positive, got ", truncated);
  const int64_t channels = volume.size(0);
  Tensor x = volume.unsqueeze(0);
  for (int axis = 0; axis < 3; ++axis) {
    const double s = sigma[static_cast<size_t>(axis)];
    KILN_CHECK(std::isfinite(s) && s > 0, op, ": sigma must be positive, got ", s);
    const std::vector<double> taps = erf_kernel(s, truncated);
    std::vector<int64_t> shape{1, 1, 1, 1, 1};
    shape[static_cast<size_t>(axis) + 2] = static_cast<int64_t>(taps.size());
    const Tensor kernel = tensor<double>(taps, shape)
                              .to(volume.dtype())
                              .expand({channels, 1, shape[2], shape[3], shape[4]})
                              .contiguous();
    std::vector<int64_t> padding{0, 0, 0};
    padding[static_cast<size_t>(axis)] = static_cast<int64_t>(taps.size() / 2);
    x = conv3d(x, kernel, {}, {1}, padding, {1}, channels);
  }
  return x.squeeze(0).contiguous();
}

int64_t bias_field_coefficients(int64_t degree) { return (degree + 1) * (degree + 2) * (degree + 3) / 6; }

Tensor bias_field(const std::array<int64_t, 3>& shape, int64_t degree,
                  const std::vector<double>& coefficients) {
  const char* op = "bias_field";
  KILN_CHECK(degree >= 1, op, ": degree must be at least 1, got ", degree);
  KILN_CHECK(static_cast<int64_t>(coefficients.size()) == bias_field_coefficients(degree), op, ": degree ",
             degree, " takes ", bias_field_coefficients(degree), " coefficients, got ", coefficients.size());
  for (int64_t s : shape) KILN_CHECK(s >= 1, op, ": the shape must be positive, got ", s);
  std::array<std::vector<std::vector<double>>, 3> basis;  // basis[axis][voxel][n] = P_n(coordinate)
  for (size_t axis = 0; axis < 3; ++axis) {
    for (double c : coordinates(shape[axis])) basis[axis].push_back(legendre(c, degree));
  }
  std::vector<float> field(static_cast<size_t>(shape[0] * shape[1] * shape[2]));
  size_t v = 0;
  for (int64_t z = 0; z < shape[0]; ++z) {
    for (int64_t y = 0; y < shape[1]; ++y) {
      for (int64_t x = 0; x < shape[2]; ++x, ++v) {
        double sum = 0;
        size_t k = 0;
        for (int64_t i = 0; i <= degree; ++i) {
          for (int64_t j = 0; j <= degree - i; ++j) {
            for (int64_t l = 0; l <= degree - i - j; ++l, ++k) {
              sum += coefficients[k] * basis[0][static_cast<size_t>(z)][static_cast<size_t>(i)] *
                     basis[1][static_cast<size_t>(y)][static_cast<size_t>(j)] *
                     basis[2][static_cast<size_t>(x)][static_cast<size_t>(l)];
            }
          }
        }
        field[v] = static_cast<float>(std::exp(sum));
      }
    }
  }
  return tensor(field, {shape[0], shape[1], shape[2]});
}

RandomGaussianSmooth::RandomGaussianSmooth(std::array<double, 2> sigma_range, double p, Keys keys)
    : sigma_range_(sigma_range), p_(p), keys_(std::move(keys)) {
  KILN_CHECK(sigma_range[0] > 0 && sigma_range[0] <= sigma_range[1],
             "RandomGaussianSmooth: the sigma range must be "
             "positive and ordered, got [",
             sigma_range[0], ", ", sigma_range[1], "]");
  KILN_CHECK(p >= 0 && p <= 1, "RandomGaussianSmooth: p must be in [0, 1], got ", p);
}

void RandomGaussianSmooth::apply(Sample& sample, Generator& generator) const {
  if (!happens(generator, p_)) return;
  std::array<double, 3> sigma{};
  for (double& s : sigma) s = uniform(generator, sigma_range_[0], sigma_range_[1]);
  for (const std::string& key : keys_) {
    Tensor& t = volume(sample, key, name());
    t = gaussian_smooth(t, sigma);
  }
}

RandomBiasField::RandomBiasField(int64_t degree, std::array<double, 2> coefficient_range, double p, Keys keys)
    : degree_(degree), range_(coefficient_range), p_(p), keys_(std::move(keys)) {
  KILN_CHECK(degree >= 1, "RandomBiasField: degree must be at least 1, got ", degree);
  KILN_CHECK(std::isfinite(range_[0]) && std::isfinite(range_[1]) && range_[0] <= range_[1],
             "RandomBiasField: the coefficient range must be finite and ordered, got [", range_[0], ", ",
             range_[1], "]");
  KILN_CHECK(p >= 0 && p <= 1, "RandomBiasField: p must be in [0, 1], got ", p);
}

void RandomBiasField::apply(Sample& sample, Generator& generator) const {
  if (!happens(generator, p_)) return;
  std::vector<double> coefficients(static_cast<size_t>(bias_field_coefficients(degree_)));
  for (double& c : coefficients) c = uniform(generator, range_[0], range_[1]);
  for (const std::string& key : keys_) {
    Tensor& t = volume(sample, key, name());
    KILN_CHECK(t.is_floating_point(), name(), ": '", key, "' must be floating, got ", t.dtype(),
               ". Hint: put ToFloat first");
    const Tensor field = bias_field({t.size(1), t.size(2), t.size(3)}, degree_, coefficients);
    t = mul(t, field.to(t.dtype()).unsqueeze(0));
  }
}

}  // namespace kiln::data
