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

RandomElasticDeform::RandomElasticDeform(Options options) : options_(std::move(options)) {
  const Options& o = options_;
  KILN_CHECK(o.sigma_range[0] > 0 && o.sigma_range[0] <= o.sigma_range[1],
             "RandomElasticDeform: the sigma range "
             "must be positive and ordered, got [",
             o.sigma_range[0], ", ", o.sigma_range[1], "]");
  KILN_CHECK(std::isfinite(o.magnitude_range[0]) && std::isfinite(o.magnitude_range[1]) &&
                 o.magnitude_range[0] <= o.magnitude_range[1],
             "RandomElasticDeform: the magnitude range must be finite and ordered");
  for (const auto* range : {&o.rotate_range, &o.scale_range, &o.translate_range}) {
    for (double r : *range)
      KILN_CHECK(std::isfinite(r) && r >= 0, "RandomElasticDeform: affine ranges must be >= 0");
  }
  KILN_CHECK(o.p >= 0 && o.p <= 1, "RandomElasticDeform: p must be in [0, 1], got ", o.p);
  KILN_CHECK(!o.keys.empty() || !o.nearest_keys.empty(), "RandomElasticDeform: no keys");
}

void RandomElasticDeform::apply(Sample& sample, Generator& generator) const {
  const Options& o = options_;
  if (o.p <= 0 || uniform(generator, 0, 1) >= o.p) return;
  const std::string& first = o.keys.empty() ? o.nearest_keys[0] : o.keys[0];
  const Tensor reference = volume(sample, first, name());
  const std::vector<int64_t> shape{3, reference.size(1), reference.size(2), reference.size(3)};
  const Tensor noise = sub(mul(rand(shape, {}, &generator), 2.0), 1.0);
  const double magnitude = uniform(generator, o.magnitude_range[0], o.magnitude_range[1]);
  const double sigma = uniform(generator, o.sigma_range[0], o.sigma_range[1]);
  const Tensor displacement = elastic_displacement(noise, sigma, magnitude);
  const VoxelAffine map = RandomAffine::draw(
      {.rotate_range = o.rotate_range, .scale_range = o.scale_range, .translate_range = o.translate_range},
      generator);
  for (const Keys* keys : {&o.keys, &o.nearest_keys}) {
    for (const std::string& key : *keys) {
      const Tensor& t = volume(sample, key, name());
      KILN_CHECK(
          t.size(1) == reference.size(1) && t.size(2) == reference.size(2) && t.size(3) == reference.size(3),
          name(), ": '", key, "' is not on the grid of '", first, "'");
    }
  }
  for (const std::string& key : o.keys) {
    Tensor& t = volume(sample, key, name());
    t = displacement_resample(t, displacement, map, Interpolation::Linear);
  }
  for (const std::string& key : o.nearest_keys) {
    Tensor& t = volume(sample, key, name());
    t = displacement_resample(t, displacement, map, Interpolation::Nearest);
  }
}

}  // namespace kiln::data
