// CudaBackend::multi_tensor_scale: dst[i] = src[i] * scale over a list of tensors, with a
// non-finite check (core/backend.h). GradScaler's unscale_ (dst = src), its check-only
// pass (dst empty), O2's casts between float16 model and float32 master copies, and
// gradient clipping (scale = the clip coefficient) all run through it.
//
// Math: v = src (in float, or double when src or dst is double) * scale, rounded to dst's
// dtype; `scale` is a Float32 [1] tensor read on the device (undefined = 1). found_inf
// (Float32 [1]) is set to 1 when a src element is Inf or NaN, by any thread that saw one
// (atomicExch), and otherwise left alone (never cleared: GradScaler clears it between
// steps). dst may alias src: each element is read and written by the same thread.
//
// The list may mix dtypes (the float16 and float32 gradients of one model): tensors are
// grouped by (src dtype, dst dtype) and each group is one multi-tensor apply
// (multi_tensor_apply.cuh: 64K-element chunks, 512 threads, 4 elements per thread per
// iteration, vector accesses when src and dst are aligned). Current stream, no host sync.
#include <array>
#include <cmath>
#include <map>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/dispatch.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/multi_tensor_apply.cuh"

namespace kiln::cuda {
namespace {

using multi_tensor::Chunk;
using multi_tensor::for_each_lane_group;
using multi_tensor::kIlp;
using multi_tensor::load_lanes;
using multi_tensor::store_lanes;
using multi_tensor::vector_aligned;

// ==== kernels ===================================================================================

// Lists: 0 src, 1 dst (nullptr when the call only checks). D is ignored then.
template <typename S, typename D>
struct ScaleFunctor {
  // double when either side is double, else float (Note [Opmath]).
  using V = std::conditional_t<std::is_same_v<S, double> || std::is_same_v<D, double>, double, float>;
  const float* scale;  // nullptr = 1
  float* found_inf;    // nullptr = no check

  __device__ void operator()(const Chunk<2>& c) const {
    const S* src = c.list<S>(0);
    D* dst = c.ptrs[1] != nullptr ? c.list<D>(1) : nullptr;
    const V s = scale != nullptr ? static_cast<V>(*scale) : V(1);
    const bool aligned = vector_aligned(src) && (dst == nullptr || vector_aligned(dst));
    bool non_finite = false;
    for_each_lane_group(c.n, aligned, [&](auto lanes) {
      V r[kIlp];
      load_lanes(r, src, lanes);
#pragma unroll
      for (int k = 0; k < kIlp; ++k) {
        non_finite |= !std::isfinite(r[k]);  // masked lanes read as 0
        r[k] *= s;
      }
      if (dst != nullptr) store_lanes(dst, r, lanes);
    });
    // Every thread that saw an Inf/NaN writes the same 1; atomically, so the concurrent
    // writes are well defined.
    if (non_finite && found_inf != nullptr) atomicExch(found_inf, 1.0f);
  }
};

// ==== launchers =================================================================================

template <typename S, typename D>
void launch_scale(const std::vector<Tensor>& src, const std::vector<Tensor>& dst, const float* scale,
                  float* found_inf, cudaStream_t stream) {
  multi_tensor::multi_tensor_apply<2>({&src, &dst}, ScaleFunctor<S, D>{scale, found_inf}, stream);
}

}  // namespace

void CudaBackend::multi_tensor_scale(const std::vector<Tensor>& src, const std::vector<Tensor>& dst,
                                     const Tensor& scale, const Tensor& found_inf) {
  if (src.empty()) return;
  KILN_ASSERT(dst.empty() || dst.size() == src.size(), "multi_tensor_scale: ", src.size(), " sources and ",
              dst.size(), " destinations");
  const int device = src[0].device().index;
  const OnDevice on(device);
  const float* scale_ptr = scale.defined() ? static_cast<const float*>(scale.data_ptr()) : nullptr;
  float* found_inf_ptr = found_inf.defined() ? static_cast<float*>(found_inf.data_ptr()) : nullptr;
  // Group by (src dtype, dst dtype), keeping list order within a group; check-only calls
  // group by src dtype alone (dst dtype = src's, unused).
  std::map<std::pair<DType, DType>, std::pair<std::vector<Tensor>, std::vector<Tensor>>> groups;
  for (size_t i = 0; i < src.size(); ++i) {
    auto& [group_src, group_dst] = groups[{src[i].dtype(), dst.empty() ? src[i].dtype() : dst[i].dtype()}];
    group_src.push_back(src[i]);
    if (!dst.empty()) group_dst.push_back(dst[i]);
  }
  for (const auto& group : groups) {
    const DType src_dtype = group.first.first, dst_dtype = group.first.second;
    const std::vector<Tensor>& group_src = group.second.first;
    const std::vector<Tensor>& group_dst = group.second.second;
    visit_dtype<kFloatingTypes>(src_dtype, "multi_tensor_scale", [&]<typename S>() {
      visit_dtype<kFloatingTypes>(dst_dtype, "multi_tensor_scale", [&]<typename D>() {
        launch_scale<S, D>(group_src, group_dst, scale_ptr, found_inf_ptr, on.stream.handle());
      });
    });
  }
}

}  // namespace kiln::cuda
