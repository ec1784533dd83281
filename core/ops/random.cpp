// Random factories and dropout: reserve a block range from the generator (Note [Philox
// streams]), then one backend kernel fills the tensor on its own device.
#include "core/ops/random.h"

#include "core/autograd/grad_mode.h"
#include "core/backend.h"
#include "core/host_sync.h"
#include "core/ops/elementwise.h"
#include "core/ops/factory.h"

namespace kiln {
namespace {

Generator& pick(Generator* generator, Device device) {
  return generator != nullptr ? *generator : default_generator(device);
}

// The state a random op on `numel` elements of `device` starts from (Note [Philox
// streams]). Note [Philox under capture]: while this thread captures a CUDA graph, a GPU
// op must draw from a generator the graph captures with (its device's default generator,
// or one given to CudaGraph::register_generator), or its numbers would repeat at every
// replay; and a generator drawing for a capture serves only the capture's device (its
// states point into that device's memory).
PhiloxState reserve(Generator* generator, Device device, uint64_t numel, const char* op) {
  Generator& g = pick(generator, device);
  if (g.capturing()) {
    KILN_CHECK(g.capture_device() == device, op, ": the generator draws for a CUDA graph captured on ",
               g.capture_device(), " and cannot serve ", device, " meanwhile");
  } else {
    KILN_CHECK(!device.is_cuda() || !capturing_on_this_thread(), op, " on ", device,
               " during a CUDA graph capture draws from a generator the graph does not capture with, so every "
               "replay would draw the same numbers; pass CudaGraph::register_generator the generator first");
  }
  return g.reserve(numel);
}

Tensor floating_empty(const std::vector<int64_t>& sizes, const TensorOptions& options, const char* op) {
  const DType dtype = options.dtype.value_or(kDefaultFloat);
  KILN_CHECK(is_floating(dtype), op, ": needs a floating dtype, got ", dtype);
  return empty(sizes, {.dtype = dtype, .device = options.device}, op);
}

Tensor finish(Tensor t, const TensorOptions& options) {
  if (options.requires_grad) t.requires_grad_(true);
  return t;
}

// Whether every integer in [low, high] is exact in `dtype` (no wrap-around, no rounding).
bool holds_integers(DType dtype, int64_t low, int64_t high) {
  switch (dtype) {
    case DType::Int64: return true;
    case DType::Int32: return low >= INT32_MIN && high <= INT32_MAX;
    case DType::UInt8: return low >= 0 && high <= 255;
    default: {  // floating: every integer up to 2^(significand bits)
      const int digits = dtype == DType::Float64 ? 53 : dtype == DType::Float32 ? 24 : dtype == DType::Float16 ? 11 : 8;
      const int64_t limit = int64_t{1} << digits;
      return low >= -limit && high <= limit;
    }
  }
}

}  // namespace

Tensor rand(const std::vector<int64_t>& sizes, TensorOptions options, Generator* generator) {
  Tensor out = floating_empty(sizes, options, "rand");
  const PhiloxState state = reserve(generator, out.device(), static_cast<uint64_t>(out.numel()), "rand");
  if (out.numel() > 0) backend(out.device()).uniform(out, 0.0, 1.0, state);
  return finish(out, options);
}

Tensor randn(const std::vector<int64_t>& sizes, TensorOptions options, Generator* generator) {
  Tensor out = floating_empty(sizes, options, "randn");
  const PhiloxState state = reserve(generator, out.device(), static_cast<uint64_t>(out.numel()), "randn");
  if (out.numel() > 0) backend(out.device()).normal(out, 0.0, 1.0, state);
  return finish(out, options);
}

Tensor randint(int64_t low, int64_t high, const std::vector<int64_t>& sizes, TensorOptions options,
               Generator* generator) {
  KILN_CHECK(low < high, "randint: low (", low, ") must be less than high (", high, ")");
  const DType dtype = options.dtype.value_or(DType::Int64);
  KILN_CHECK(dtype != DType::Bool, "randint: bool is not a valid dtype");
  KILN_CHECK(holds_integers(dtype, low, high - 1), "randint: [", low, ", ", high, ") does not fit in ", dtype);
  Tensor out = empty(sizes, {.dtype = dtype, .device = options.device}, "randint");
  const PhiloxState state = reserve(generator, out.device(), static_cast<uint64_t>(out.numel()), "randint");
  if (out.numel() > 0) backend(out.device()).randint(out, low, high, state);
  return finish(out, options);
}

Tensor randperm(int64_t n, TensorOptions options, Generator* generator) {
  KILN_CHECK(n >= 0, "randperm: n must be non-negative, got ", n);
  const DType dtype = options.dtype.value_or(DType::Int64);
  KILN_CHECK(dtype == DType::Int64 || dtype == DType::Int32 || is_floating(dtype), "randperm: unsupported dtype ",
             dtype);
  KILN_CHECK(holds_integers(dtype, 0, n - 1), "randperm: n = ", n, " does not fit in ", dtype);
  Tensor out = empty({n}, {.dtype = DType::Int64, .device = options.device}, "randperm");
  const PhiloxState state = reserve(generator, out.device(), static_cast<uint64_t>(n), "randperm");
  if (n > 0) backend(out.device()).randperm(out, state);
  return finish(dtype == DType::Int64 ? out : out.to(dtype), options);
}

Tensor rand_like(const Tensor& like, Generator* generator) {
  return rand(like.sizes(), {.dtype = like.dtype(), .device = like.device()}, generator);
}

Tensor randn_like(const Tensor& like, Generator* generator) {
  return randn(like.sizes(), {.dtype = like.dtype(), .device = like.device()}, generator);
}

namespace {
// Fills the new tensor `out` with 0/1 draws of P(1) = p, in its memory order.
void draw_bernoulli(const Tensor& out, double p, Generator* generator) {
  KILN_CHECK(p >= 0.0 && p <= 1.0, "bernoulli: p must be in [0, 1], got ", p);
  const PhiloxState state = reserve(generator, out.device(), static_cast<uint64_t>(out.numel()), "bernoulli");
  if (out.numel() > 0) backend(out.device()).bernoulli(out, p, state);
}
}  // namespace

Tensor bernoulli(const std::vector<int64_t>& sizes, double p, TensorOptions options, Generator* generator) {
  const DType dtype = options.dtype.value_or(kDefaultFloat);
  Tensor out = empty(sizes, {.dtype = dtype, .device = options.device}, "bernoulli");
  draw_bernoulli(out, p, generator);
  return finish(out, options);
}

// Inverted dropout as x * mask with mask = bernoulli(1 - p) / (1 - p): one differentiable
// mul (its backward multiplies g by the same saved mask), so no dedicated node is needed.
// The mask is laid out as x (a channels-last x gets a channels-last mask), its numbers
// drawn in memory order, as PyTorch's bernoulli_ on empty_like(x).
Tensor dropout(const Tensor& x, double p, bool training, Generator* generator) {
  KILN_CHECK(x.defined(), "dropout: undefined tensor");
  KILN_CHECK(p >= 0.0 && p <= 1.0, "dropout: probability has to be between 0 and 1, but got ", p);
  KILN_CHECK(is_floating(x.dtype()), "dropout: expected a floating-point tensor, got ", x.dtype());
  if (!training || p == 0.0) return x;
  Tensor mask;
  {
    NoGradGuard no_grad;
    if (p == 1.0) {
      mask = zeros_like(x);
    } else {
      mask = empty_like(x);  // laid out as x: x * mask then runs in one memory order
      draw_bernoulli(mask, 1.0 - p, generator);
      mask.mul_(Scalar(1.0 / (1.0 - p)));
    }
  }
  return mul(x, mask);
}

}  // namespace kiln
