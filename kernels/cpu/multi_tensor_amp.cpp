// CpuBackend multi-tensor kernels for mixed precision and gradient clipping: scale (and
// check for Inf/NaN) a list, the p-norm of a list, and GradScaler's scale update.
//
// Math:
//   multi_tensor_scale  dst[i] = src[i] * scale, converting dtypes; found_inf = 1 when any
//                       src element is Inf/NaN (never cleared). Computed in double when
//                       src or dst is float64, else in float (Note [Opmath]).
//   multi_tensor_norm   (sum |x|^p)^(1/p) over every element of every tensor, or max |x|
//                       for p = inf (NaN propagates). Note [Reduction accumulators]: sums
//                       accumulate in double whatever the dtype.
//   amp_update_scale    PyTorch's _amp_update_scale_ with a floor, min_scale
//                       (kernels/amp_scale_update.h).
// Layout: contiguous tensors (Note [Multi-tensor kernels]); src and dst may be the same
// tensor (GradScaler's in-place unscale_), each element is read before it is written.
//
// Parallelism: one work list of chunks (multi_tensor_apply.h). The scale kernel keeps one
// Inf/NaN flag per chunk and the norm one partial per chunk, combined in chunk order after
// the loop, so the norm's bits do not depend on the thread count. Per-tensor kernels are
// picked by dtype before the parallel loop (nothing inside it can throw).
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/dispatch.h"
#include "kernels/amp_scale_update.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/multi_tensor_apply.h"

namespace kiln::cpu {
namespace {

// ---- scale and check --------------------------------------------------------------------

// Scales elements [begin, end) of src into dst (dst null: check only); returns whether one
// of them was Inf or NaN.
using ScaleRangeFn = bool (*)(const void* src, void* dst, int64_t begin, int64_t end, float scale);

// 1 when x is Inf or NaN (|x| <= max fails for both), as an integer: summing these
// vectorises, where or-ing bools from std::isfinite does not.
template <typename M>
int64_t is_non_finite(M x) {
  return !(std::abs(x) <= std::numeric_limits<M>::max());
}

template <typename S, typename D>
bool scale_range(const void* src_ptr, void* dst_ptr, int64_t begin, int64_t end, float scale) {
  using M = std::conditional_t<std::is_same_v<S, double> || std::is_same_v<D, double>, double, float>;
  const S* src = static_cast<const S*>(src_ptr);
  D* dst = static_cast<D*>(dst_ptr);
  const M factor = static_cast<M>(scale);
  int64_t non_finite = 0;
  for (int64_t j = begin; j < end; ++j) {  // vectorised: tests/kernels/check_vectorized.cmake
    const M x = static_cast<M>(static_cast<opmath_t<S>>(src[j]));
    non_finite += is_non_finite(x);
    dst[j] = static_cast<D>(x * factor);
  }
  return non_finite != 0;
}

template <typename S>
bool check_range(const void* src_ptr, void*, int64_t begin, int64_t end, float) {
  const S* src = static_cast<const S*>(src_ptr);
  int64_t non_finite = 0;
  for (int64_t j = begin; j < end; ++j) non_finite += is_non_finite(static_cast<opmath_t<S>>(src[j]));  // vectorised: tests/kernels/check_vectorized.cmake
  return non_finite != 0;
}

ScaleRangeFn pick_scale_fn(DType src, const DType* dst) {
  return visit_dtype<kFloatingTypes>(src, "multi_tensor_scale", [&]<typename S>() -> ScaleRangeFn {
    if (dst == nullptr) return &check_range<S>;
    return visit_dtype<kFloatingTypes>(*dst, "multi_tensor_scale",
                                       [&]<typename D>() -> ScaleRangeFn { return &scale_range<S, D>; });
  });
}

// ---- norm -------------------------------------------------------------------------------

enum class NormKind { One, Two, Inf, General };

// The partial of elements [begin, end): sum |x|^p in double, or max |x| for p = inf.
using NormRangeFn = double (*)(const void* data, int64_t begin, int64_t end, double p);

// max(acc, a) where a NaN on either side wins and stays.
double nan_max(double acc, double a) {
  if (std::isnan(acc) || std::isnan(a)) return std::isnan(acc) ? acc : a;
  return a > acc ? a : acc;
}

template <NormKind kKind>
double fold(double acc, double a, double p) {
  if constexpr (kKind == NormKind::One) return acc + a;
  else if constexpr (kKind == NormKind::Two) return acc + a * a;
  else if constexpr (kKind == NormKind::Inf) return nan_max(acc, a);
  else return acc + std::pow(a, p);
}

// kLanes interleaved accumulators (element j goes to lane j % kLanes), merged in lane
// order: a vectorisable loop with a fixed order of additions.
inline constexpr int64_t kLanes = 8;

template <typename T, NormKind kKind>
double norm_range(const void* data_ptr, int64_t begin, int64_t end, double p) {
  const T* data = static_cast<const T*>(data_ptr);
  const auto abs_at = [&](int64_t j) { return std::abs(static_cast<double>(static_cast<opmath_t<T>>(data[j]))); };
  double lanes[kLanes] = {};
  int64_t j = begin;
  for (; j + kLanes <= end; j += kLanes) {
    for (int64_t l = 0; l < kLanes; ++l) lanes[l] = fold<kKind>(lanes[l], abs_at(j + l), p);
  }
  for (; j < end; ++j) lanes[j % kLanes] = fold<kKind>(lanes[j % kLanes], abs_at(j), p);
  double acc = 0;
  for (double lane : lanes) acc = fold<kKind == NormKind::Inf ? NormKind::Inf : NormKind::One>(acc, lane, p);
  return acc;
}

NormKind norm_kind(double p) {
  if (p == 1) return NormKind::One;
  if (p == 2) return NormKind::Two;
  if (std::isinf(p)) return NormKind::Inf;
  return NormKind::General;
}

NormRangeFn pick_norm_fn(DType dtype, NormKind kind) {
  return visit_dtype<kFloatingTypes>(dtype, "multi_tensor_norm", [&]<typename T>() -> NormRangeFn {
    switch (kind) {
      case NormKind::One: return &norm_range<T, NormKind::One>;
      case NormKind::Two: return &norm_range<T, NormKind::Two>;
      case NormKind::Inf: return &norm_range<T, NormKind::Inf>;
      case NormKind::General: break;
    }
    return &norm_range<T, NormKind::General>;
  });
}

// Combines the per-chunk partials in chunk order and finishes the norm.
double finish_norm(const std::vector<double>& partials, NormKind kind, double p) {
  double total = 0;
  for (double partial : partials) total = kind == NormKind::Inf ? nan_max(total, partial) : total + partial;
  switch (kind) {
    case NormKind::One:
    case NormKind::Inf: return total;
    case NormKind::Two: return std::sqrt(total);
    case NormKind::General: break;
  }
  return std::pow(total, 1.0 / p);
}

}  // namespace

void CpuBackend::multi_tensor_scale(const std::vector<Tensor>& src, const std::vector<Tensor>& dst,
                                    const Tensor& scale, const Tensor& found_inf) {
  const bool check_only = dst.empty();
  std::vector<ScaleRangeFn> fns;
  for (size_t i = 0; i < src.size(); ++i) {
    const DType dst_dtype = check_only ? src[i].dtype() : dst[i].dtype();
    fns.push_back(pick_scale_fn(src[i].dtype(), check_only ? nullptr : &dst_dtype));
  }
  const float factor = scale.defined() ? scale.data_ptr<float>()[0] : 1.0f;
  const std::vector<ListChunk> chunks = chunk_list(src);
  std::vector<char> non_finite(chunks.size(), 0);
  multi_tensor_apply(chunks, [&](int64_t k, const ListChunk& c) {
    const size_t i = static_cast<size_t>(c.tensor);
    void* out = check_only ? nullptr : dst[i].data_ptr();
    non_finite[static_cast<size_t>(k)] = fns[i](src[i].data_ptr(), out, c.begin, c.end, factor);
  });
  if (!found_inf.defined()) return;
  for (char flag : non_finite) {
    if (flag) found_inf.data_ptr<float>()[0] = 1.0f;
  }
}

void CpuBackend::multi_tensor_norm(const std::vector<Tensor>& tensors, double p, const Tensor& out) {
  const NormKind kind = norm_kind(p);
  std::vector<NormRangeFn> fns;
  for (const Tensor& t : tensors) fns.push_back(pick_norm_fn(t.dtype(), kind));
  const std::vector<ListChunk> chunks = chunk_list(tensors);
  std::vector<double> partials(chunks.size(), 0.0);
  multi_tensor_apply(chunks, [&](int64_t k, const ListChunk& c) {
    const size_t i = static_cast<size_t>(c.tensor);
    partials[static_cast<size_t>(k)] = fns[i](tensors[i].data_ptr(), c.begin, c.end, p);
  });
  const double norm = finish_norm(partials, kind, p);
  if (out.dtype() == DType::Float64) out.data_ptr<double>()[0] = norm;
  else out.data_ptr<float>()[0] = static_cast<float>(norm);
}

void CpuBackend::amp_update_scale(const Tensor& scale, const Tensor& growth_tracker, const Tensor& found_inf,
                                  double growth_factor, double backoff_factor, int64_t growth_interval,
                                  double min_scale) {
  amp::update_scale(scale.data_ptr<float>()[0], growth_tracker.data_ptr<int32_t>()[0],
                    found_inf.data_ptr<float>()[0] != 0.0f, growth_factor, backoff_factor, growth_interval,
                    min_scale);
}

}  // namespace kiln::cpu
