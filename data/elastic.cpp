// elastic_displacement and RandomElasticDeform (elastic.h): the noise from the sample's
// generator, smoothed by intensity_fields.h's Gaussian, resampled by resample.h's
// displacement_resample (one pass per key).
#include "data/elastic.h"

#include <cmath>

#include "core/error.h"
#include "core/ops.h"
#include "data/intensity_fields.h"
#include "data/resample.h"
#include "data/transform_util.h"

namespace kiln::data {

Tensor elastic_displacement(const Tensor& noise, double sigma, double magnitude) {
  KILN_CHECK(noise.dim() == 4 && noise.size(0) == 3, "elastic_displacement: noise must be [3, D, H, W], got ",
             noise.sizes());
  KILN_CHECK(std::isfinite(magnitude), "elastic_displacement: the magnitude must be finite");
  return mul(gaussian_smooth(noise.to(DType::Float32), {sigma, sigma, sigma}, /*truncated=*/3.0), magnitude);
}

RandomElasticDeform::RandomElasticDeform(std::array<double, 2> sigma_range,
                                         std::array<double, 2> magnitude_range, double p, Keys keys,
                                         Keys nearest_keys)
    : sigma_range_(sigma_range),
      magnitude_range_(magnitude_range),
      p_(p),
      keys_(std::move(keys)),
      nearest_keys_(std::move(nearest_keys)) {
  KILN_CHECK(sigma_range[0] > 0 && sigma_range[0] <= sigma_range[1],
             "RandomElasticDeform: the sigma range must be "
             "positive and ordered, got [",
             sigma_range[0], ", ", sigma_range[1], "]");
  KILN_CHECK(std::isfinite(magnitude_range[0]) && std::isfinite(magnitude_range[1]) &&
                 magnitude_range[0] <= magnitude_range[1],
             "RandomElasticDeform: the magnitude range must be finite and ordered");
  KILN_CHECK(p >= 0 && p <= 1, "RandomElasticDeform: p must be in [0, 1], got ", p);
  KILN_CHECK(!keys_.empty() || !nearest_keys_.empty(), "RandomElasticDeform: no keys");
}

void RandomElasticDeform::apply(Sample& sample, Generator& generator) const {
  if (p_ <= 0 || uniform(generator, 0, 1) >= p_) return;
  const std::string& first = keys_.empty() ? nearest_keys_[0] : keys_[0];
  const Tensor reference = volume(sample, first, name());
  const std::vector<int64_t> shape{3, reference.size(1), reference.size(2), reference.size(3)};
  const Tensor noise = sub(mul(rand(shape, {}, &generator), 2.0), 1.0);
  const double magnitude = uniform(generator, magnitude_range_[0], magnitude_range_[1]);
  const double sigma = uniform(generator, sigma_range_[0], sigma_range_[1]);
  const Tensor displacement = elastic_displacement(noise, sigma, magnitude);
  for (const Keys* keys : {&keys_, &nearest_keys_}) {
    for (const std::string& key : *keys) {
      KILN_CHECK(volume(sample, key, name()).sizes().size() == 4 &&
                     volume(sample, key, name()).size(1) == reference.size(1) &&
                     volume(sample, key, name()).size(2) == reference.size(2) &&
                     volume(sample, key, name()).size(3) == reference.size(3),
                 name(), ": '", key, "' is not on the grid of '", first, "'");
    }
  }
  for (const std::string& key : keys_) {
    Tensor& t = volume(sample, key, name());
    t = displacement_resample(t, displacement, {}, Interpolation::Linear);
  }
  for (const std::string& key : nearest_keys_) {
    Tensor& t = volume(sample, key, name());
    t = displacement_resample(t, displacement, {}, Interpolation::Nearest);
  }
}

}  // namespace kiln::data
