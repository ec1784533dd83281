// 3D transforms (data/transforms.h): each draws what it needs from the sample's generator
// once, then applies the same draw to every key; volumes [C, D, H, W] are changed with core
// ops (index_select for flips, views for crops and rotations, a filled tensor for pads)
// and stored back contiguous.
#include "data/transforms.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/ops.h"
#include "data/transform_util.h"

namespace kiln::data {
namespace {

// splitmix64's finaliser: a bijection that spreads every input bit over the output.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// The tensor `key`, which an intensity transform needs floating.
Tensor& intensities(Sample& sample, const std::string& key, const std::string& transform) {
  const auto it = sample.tensors.find(key);
  KILN_CHECK(it != sample.tensors.end(), transform, ": the sample has no tensor '", key, "'");
  KILN_CHECK(it->second.is_floating_point(), transform, ": '", key, "' is ", it->second.dtype(),
             "; intensity transforms need floating point (put ToFloat first)");
  return it->second;
}

void check_axis(int axis, const std::string& transform) {
  KILN_CHECK(axis >= 0 && axis <= 2, transform, ": spatial axes are 0, 1 and 2, got ", axis);
}


// numpy's rot90(t, k, axes=(a, b)) on tensor dims a and b.
Tensor rot90(const Tensor& t, int k, int64_t a, int64_t b) {
  k = ((k % 4) + 4) % 4;
  if (k == 0) return t;
  if (k == 2) return flip(flip(t, a), b);
  if (k == 1) return flip(t, b).transpose(a, b).contiguous();
  return flip(t.transpose(a, b).contiguous(), b);
}

}  // namespace

Tensor crop(const Tensor& t, const std::array<int64_t, 3>& start, const std::array<int64_t, 3>& size) {
  Tensor out = t;
  for (int axis = 0; axis < 3; ++axis) out = out.narrow(axis + 1, start[axis], size[axis]);
  return out.contiguous();
}

void check_fits(const Tensor& t, const std::array<int64_t, 3>& size, const std::string& transform,
                const std::string& key) {
  for (int axis = 0; axis < 3; ++axis) {
    KILN_CHECK(size[axis] >= 1 && size[axis] <= t.size(axis + 1), transform, ": cannot take [", size[0], ", ",
               size[1], ", ", size[2], "] voxels from '", key, "' of shape ", t.sizes());
  }
}

Tensor flip(const Tensor& t, int64_t dim) {
  const int64_t n = t.size(dim);
  return index_select(t, dim, arange(n - 1, -1, -1, {.dtype = DType::Int64, .device = t.device()}));
}

double uniform(Generator& generator, double low, double high) {
  return low + (high - low) * rand({}, {.dtype = DType::Float64}, &generator).item<double>();
}

Tensor& volume(Sample& sample, const std::string& key, const std::string& transform) {
  const auto it = sample.tensors.find(key);
  KILN_CHECK(it != sample.tensors.end(), transform, ": the sample has no tensor '", key, "'");
  KILN_CHECK(it->second.dim() == 4, transform, ": '", key, "' must be a [C, D, H, W] volume, got shape ",
             it->second.sizes());
  return it->second;
}

Generator sample_generator(uint64_t seed, int64_t epoch, int64_t index) {
  return Generator(mix(mix(mix(seed) ^ static_cast<uint64_t>(epoch)) ^ static_cast<uint64_t>(index)));
}

// ---- Compose, ToFloat, Normalize ------------------------------------------------------------

Compose::Compose(std::vector<TransformPtr> transforms) : transforms_(std::move(transforms)) {
  for (const TransformPtr& t : transforms_) KILN_CHECK(t != nullptr, "Compose: a transform is null");
}

void Compose::apply(Sample& sample, Generator& generator) const {
  for (const TransformPtr& t : transforms_) t->apply(sample, generator);
}

std::string Compose::name() const {
  std::string names;
  for (const TransformPtr& t : transforms_) names += (names.empty() ? "" : ", ") + t->name();
  return "Compose(" + names + ")";
}

ToFloat::ToFloat(double scale, Keys keys) : scale_(scale), keys_(std::move(keys)) {}

void ToFloat::apply(Sample& sample, Generator&) const {
  for (const std::string& key : keys_) {
    const auto it = sample.tensors.find(key);
    KILN_CHECK(it != sample.tensors.end(), "ToFloat: the sample has no tensor '", key, "'");
    Tensor values = it->second.to(DType::Float32);
    it->second = scale_ == 1.0 ? values : mul(values, scale_);
  }
}

Normalize::Normalize(Mode mode, double a, double b, bool given, Keys keys)
    : mode_(mode), a_(a), b_(b), given_(given), keys_(std::move(keys)) {}

Normalize Normalize::zscore(Keys keys) { return Normalize(Mode::ZScore, 0, 1, false, std::move(keys)); }

Normalize Normalize::zscore(double mean, double std, Keys keys) {
  KILN_CHECK(std > 0, "Normalize: std must be positive, got ", std);
  return Normalize(Mode::ZScore, mean, std, true, std::move(keys));
}

Normalize Normalize::min_max(Keys keys) { return Normalize(Mode::MinMax, 0, 1, false, std::move(keys)); }

Normalize Normalize::window(double low, double high, Keys keys) {
  KILN_CHECK(low < high, "Normalize: the window needs low < high, got ", low, " and ", high);
  return Normalize(Mode::Window, low, high, true, std::move(keys));
}

void Normalize::apply(Sample& sample, Generator&) const {
  for (const std::string& key : keys_) {
    Tensor& x = intensities(sample, key, "Normalize");
    if (mode_ == Mode::Window) {
      x = div(sub(clamp(x, a_, b_), a_), b_ - a_);
    } else if (mode_ == Mode::MinMax) {
      const double low = x.min().item<double>(), high = x.max().item<double>();
      x = high > low ? div(sub(x, low), high - low) : zeros_like(x);
    } else {
      double mean = a_, std = b_;
      if (!given_) {  // the population statistics of the sample (MONAI's NormalizeIntensity)
        const Tensor as_double = x.to(DType::Float64);
        mean = as_double.mean().item<double>();
        std = std::sqrt(square(sub(as_double, mean)).mean().item<double>());
      }
      x = std > 0 ? div(sub(x, mean), std) : zeros_like(x);
    }
  }
}

// ---- spatial -----------------------------------------------------------------------------------

RandomFlip::RandomFlip(std::vector<int> axes, double p, Keys keys)
    : axes_(std::move(axes)), p_(p), keys_(std::move(keys)) {
  for (int axis : axes_) check_axis(axis, "RandomFlip");
  KILN_CHECK(p_ >= 0 && p_ <= 1, "RandomFlip: p must be in [0, 1], got ", p_);
}

void RandomFlip::apply(Sample& sample, Generator& generator) const {
  std::vector<int> flipped;
  for (int axis : axes_) {
    if (uniform(generator, 0, 1) < p_) flipped.push_back(axis);
  }
  for (const std::string& key : keys_) {
    Tensor& t = volume(sample, key, "RandomFlip");
    for (int axis : flipped) t = flip(t, axis + 1);
  }
}

RandomRotate90::RandomRotate90(std::array<int, 2> plane, std::vector<int> ks, Keys keys)
    : plane_(plane), ks_(std::move(ks)), keys_(std::move(keys)) {
  check_axis(plane_[0], "RandomRotate90");
  check_axis(plane_[1], "RandomRotate90");
  KILN_CHECK(plane_[0] != plane_[1], "RandomRotate90: the plane needs two different axes");
  KILN_CHECK(!ks_.empty(), "RandomRotate90: no k to draw from");
}

void RandomRotate90::apply(Sample& sample, Generator& generator) const {
  const auto pick = static_cast<size_t>(std::min<double>(
      static_cast<double>(ks_.size()) - 1, uniform(generator, 0, static_cast<double>(ks_.size()))));
  const int k = ks_[pick];
  for (const std::string& key : keys_) {
    Tensor& t = volume(sample, key, "RandomRotate90");
    t = rot90(t, k, plane_[0] + 1, plane_[1] + 1);
  }
}

CenterCrop::CenterCrop(std::array<int64_t, 3> size, Keys keys) : size_(size), keys_(std::move(keys)) {}

void CenterCrop::apply(Sample& sample, Generator&) const {
  for (const std::string& key : keys_) {
    Tensor& t = volume(sample, key, "CenterCrop");
    check_fits(t, size_, "CenterCrop", key);
    std::array<int64_t, 3> start{};
    for (int axis = 0; axis < 3; ++axis) start[axis] = (t.size(axis + 1) - size_[axis]) / 2;
    t = crop(t, start, size_);
  }
}

RandomCrop::RandomCrop(std::array<int64_t, 3> size, Keys keys) : size_(size), keys_(std::move(keys)) {}

void RandomCrop::apply(Sample& sample, Generator& generator) const {
  KILN_CHECK(!keys_.empty(), "RandomCrop: no keys");
  const Tensor& first = volume(sample, keys_[0], "RandomCrop");
  check_fits(first, size_, "RandomCrop", keys_[0]);
  std::array<int64_t, 3> start{};
  for (int axis = 0; axis < 3; ++axis) {
    const int64_t room = first.size(axis + 1) - size_[axis] + 1;
    start[axis] =
        std::min<int64_t>(room - 1, static_cast<int64_t>(uniform(generator, 0, static_cast<double>(room))));
  }
  for (const std::string& key : keys_) {
    Tensor& t = volume(sample, key, "RandomCrop");
    check_fits(t, size_, "RandomCrop", key);
    t = crop(t, start, size_);
  }
}

Pad::Pad(std::array<int64_t, 3> size, double value, Keys keys)
    : size_(size), value_(value), keys_(std::move(keys)) {}

void Pad::apply(Sample& sample, Generator&) const {
  for (const std::string& key : keys_) {
    Tensor& t = volume(sample, key, "Pad");
    std::vector<int64_t> shape = t.sizes();
    std::array<int64_t, 3> before{};
    for (int axis = 0; axis < 3; ++axis) {
      const int64_t extra = std::max<int64_t>(0, size_[axis] - t.size(axis + 1));
      before[axis] = extra / 2;
      shape[axis + 1] += extra;
    }
    if (shape == t.sizes()) continue;
    Tensor padded = full(shape, value_, {.dtype = t.dtype(), .device = t.device()});
    Tensor inside = padded;
    for (int axis = 0; axis < 3; ++axis) inside = inside.narrow(axis + 1, before[axis], t.size(axis + 1));
    inside.copy_(t);
    t = padded;
  }
}

// ---- intensity ---------------------------------------------------------------------------------

RandomIntensity::RandomIntensity(std::string name, double low, double high, Keys keys)
    : name_(std::move(name)), low_(low), high_(high), keys_(std::move(keys)) {
  KILN_CHECK(low_ <= high_, name_, ": low ", low_, " > high ", high_);
}

void RandomIntensity::apply(Sample& sample, Generator& generator) const {
  const double v = uniform(generator, low_, high_);
  for (const std::string& key : keys_) {
    Tensor& x = intensities(sample, key, name_);
    x = change(x, v);
  }
}

RandomIntensityScale::RandomIntensityScale(double low, double high, Keys keys)
    : RandomIntensity("RandomIntensityScale", low, high, std::move(keys)) {}

Tensor RandomIntensityScale::change(const Tensor& x, double s) const { return mul(x, s); }

RandomIntensityShift::RandomIntensityShift(double low, double high, Keys keys)
    : RandomIntensity("RandomIntensityShift", low, high, std::move(keys)) {}

Tensor RandomIntensityShift::change(const Tensor& x, double t) const { return add(x, t); }

RandomGaussianNoise::RandomGaussianNoise(double std, double p, Keys keys)
    : std_(std), p_(p), keys_(std::move(keys)) {
  KILN_CHECK(std_ >= 0, "RandomGaussianNoise: std must be >= 0, got ", std_);
  KILN_CHECK(p_ >= 0 && p_ <= 1, "RandomGaussianNoise: p must be in [0, 1], got ", p_);
}

void RandomGaussianNoise::apply(Sample& sample, Generator& generator) const {
  if (uniform(generator, 0, 1) >= p_) return;
  for (const std::string& key : keys_) {
    Tensor& x = intensities(sample, key, "RandomGaussianNoise");
    x = add(x, mul(randn(x.sizes(), {.dtype = x.dtype()}, &generator), std_));
  }
}

RandomGamma::RandomGamma(double low, double high, Keys keys)
    : low_(low), high_(high), keys_(std::move(keys)) {
  KILN_CHECK(low_ > 0 && low_ <= high_, "RandomGamma: needs 0 < low <= high, got ", low_, " and ", high_);
}

void RandomGamma::apply(Sample& sample, Generator& generator) const {
  const double gamma = uniform(generator, low_, high_);
  for (const std::string& key : keys_) {
    Tensor& x = intensities(sample, key, "RandomGamma");
    const double low = x.min().item<double>(), high = x.max().item<double>();
    if (high <= low) continue;
    x = add(mul(pow(div(sub(x, low), high - low), gamma), high - low), low);
  }
}

MedMnistShapeTransform::MedMnistShapeTransform(bool train, Keys keys)
    : train_(train), keys_(std::move(keys)) {}

void MedMnistShapeTransform::apply(Sample& sample, Generator& generator) const {
  const double factor = train_ ? uniform(generator, 0, 1) : 0.5;
  for (const std::string& key : keys_) {
    Tensor& x = intensities(sample, key, name());
    x = mul(x, factor);
  }
}

}  // namespace kiln::data
