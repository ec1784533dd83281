// Pooling output sizes and the 3-d geometry the kernels see (pool_geometry.h, Note [Pool
// geometry]).
#include "core/pool_geometry.h"

#include "core/backend.h"
#include "core/checked_math.h"
#include "core/error.h"

namespace kiln {
namespace {

// floor(a / b) for b > 0 and any sign of a (C++ division truncates toward zero), without
// negating a (which overflows for INT64_MIN).
int64_t floor_div(int64_t a, int64_t b) {
  const int64_t q = a / b;
  return a % b != 0 && a < 0 ? q - 1 : q;
}

// The 3-d view's first spatial slot used by an input of `rank` (3, 4 or 5).
int first_slot(size_t rank) {
  KILN_ASSERT(rank >= 3 && rank <= 5, "pool_geometry: rank ", rank);
  return 5 - static_cast<int>(rank);
}

}  // namespace

std::optional<int64_t> pool_output_size(int64_t size, int64_t kernel, int64_t stride, int64_t padding,
                                        int64_t dilation, bool ceil_mode) {
  // Every intermediate is checked (Note [Checked sizes]): the parameters are user numbers.
  // The padded size, the window's reach and the stride must also sum to at most
  // kPoolIndexLimit, so that the kernels' index arithmetic (a few such terms added) fits.
  const std::optional<int64_t> twice_padding = checked_mul(2, padding);
  const std::optional<int64_t> reach = checked_mul(dilation, kernel - 1);
  const std::optional<int64_t> padded = twice_padding ? checked_add(size, *twice_padding) : std::nullopt;
  const std::optional<int64_t> extent = padded && reach ? checked_add(*padded, *reach) : std::nullopt;
  const std::optional<int64_t> total = extent ? checked_add(*extent, stride) : std::nullopt;
  if (!total || *total > kPoolIndexLimit) return std::nullopt;
  const int64_t span = *padded - *reach - 1;  // both operands >= 0: no overflow
  const std::optional<int64_t> numerator = checked_add(span, ceil_mode ? stride - 1 : 0);
  const std::optional<int64_t> out = numerator ? checked_add(floor_div(*numerator, stride), 1) : std::nullopt;
  if (!out) return std::nullopt;
  // PyTorch's rule: the last window must start inside the input or its left padding.
  // (out - 1) * stride <= numerator and size + padding <= padded, so neither overflows.
  if (ceil_mode && *out >= 1 && (*out - 1) * stride >= size + padding) return *out - 1;
  return out;
}

PoolGeometry pool_geometry(const std::vector<int64_t>& input, const std::vector<int64_t>& output,
                           const PoolParams& params) {
  PoolGeometry g = adaptive_pool_geometry(input, output);
  const int first = first_slot(input.size());
  for (int k = first; k < 3; ++k) {
    const size_t d = static_cast<size_t>(k - first);
    g.kernel[k] = params.kernel[d];
    g.stride[k] = params.stride[d];
    g.pad[k] = params.padding[d];
    g.dilation[k] = params.dilation.empty() ? 1 : params.dilation[d];
  }
  g.count_include_pad = params.count_include_pad;
  g.divisor_override = params.divisor_override;
  return g;
}

PoolGeometry adaptive_pool_geometry(const std::vector<int64_t>& input, const std::vector<int64_t>& output) {
  KILN_ASSERT(input.size() == output.size() && input[0] == output[0] && input[1] == output[1],
              "pool_geometry: input ", input, " and output ", output, " differ in rank, N or C");
  PoolGeometry g;
  g.planes = input[0] * input[1];
  const int first = first_slot(input.size());
  for (int k = first; k < 3; ++k) {
    g.in[k] = input[static_cast<size_t>(2 + k - first)];
    g.out[k] = output[static_cast<size_t>(2 + k - first)];
  }
  return g;
}

}  // namespace kiln
