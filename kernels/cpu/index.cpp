// CpuBackend's index kernels: gather, index_select (a gather whose index is broadcast
// over the non-indexed dims) and scatter_add.
//
// All three run on the elementwise engine's strided loop (elementwise_engine.h) over the
// index's shape, with the indexed tensor seen through a view whose stride along `dim` is
// 0: the engine then hands each element the address of "row 0" along dim, and the kernel
// adds index * stride. Every index is bounds-checked; the first bad one is recorded and
// thrown after the (possibly parallel) loop, since exceptions cannot leave an OpenMP
// region. scatter_add runs on one thread: two positions differing only along dim write
// the same element, and a serial loop keeps the sum race-free and deterministic.
#include <atomic>

#include "core/dispatch.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/elementwise_engine.h"

namespace kiln::cpu {
namespace {

// `t` seen with `sizes`, its own strides, and stride 0 along `dim` (no autograd state).
Tensor dim_zero_view(const Tensor& t, const std::vector<int64_t>& sizes, int64_t dim) {
  std::vector<int64_t> strides = t.strides();
  if (strides.size() != sizes.size()) strides.assign(sizes.size(), 0);  // a 0-d tensor
  if (!sizes.empty()) strides[dim] = 0;
  return Tensor(std::make_shared<TensorImpl>(t.storage(), t.storage_offset(), sizes, strides, t.dtype(), t.device()));
}

// Records the first out-of-range index seen by any thread.
struct BadIndex {
  std::atomic<bool> seen{false};
  int64_t value = 0;
  void record(int64_t v) {
    bool expected = false;
    if (seen.compare_exchange_strong(expected, true)) value = v;
  }
  void throw_if_seen(const char* op, int64_t dim, int64_t size) const {
    KILN_CHECK(!seen.load(), op, ": index ", value, " is out of bounds for dimension ", dim, " with size ", size);
  }
};

// out[p] = src[p with coordinate `dim` replaced by index[p]], over index's shape.
void gather_along(const Tensor& src, int64_t dim, const Tensor& index, const Tensor& out, const char* op) {
  const int64_t size = src.dim() == 0 ? 1 : src.sizes()[dim];
  const Tensor src_rows = dim_zero_view(src, index.sizes(), dim);
  const int64_t dim_stride_bytes = (src.dim() == 0 ? 0 : src.strides()[dim]) * static_cast<int64_t>(src.element_size());
  const StridedLoop loop = make_strided_loop({&out, &index, &src_rows});
  BadIndex bad;
  visit_dtype<kAllTypes>(src.dtype(), op, [&]<typename T>() {
    parallel_for(loop.numel, kGrain, [&](int64_t begin, int64_t end) {
      for_each_run(loop, begin, end, [&](char** p, const int64_t* s, int64_t n) {
        for (int64_t i = 0; i < n; ++i) {
          const int64_t j = *reinterpret_cast<const int64_t*>(p[1] + i * s[1]);
          if (j < 0 || j >= size) {
            bad.record(j);
            continue;
          }
          *reinterpret_cast<T*>(p[0] + i * s[0]) = *reinterpret_cast<const T*>(p[2] + i * s[2] + j * dim_stride_bytes);
        }
      });
    });
  });
  bad.throw_if_seen(op, dim, size);
}

}  // namespace

void CpuBackend::gather(const Tensor& in, int64_t dim, const Tensor& index, const Tensor& out) {
  gather_along(in, dim, index, out, "gather");
}

void CpuBackend::index_select(const Tensor& in, int64_t dim, const Tensor& index, const Tensor& out) {
  // The 1-d index, broadcast to out's shape along every other dim.
  std::vector<int64_t> strides(out.dim(), 0);
  strides[dim] = index.strides()[0];
  const Tensor spread(std::make_shared<TensorImpl>(index.storage(), index.storage_offset(), out.sizes(), strides,
                                                   index.dtype(), index.device()));
  gather_along(in, dim, spread, out, "index_select");
}

void CpuBackend::scatter_add(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src) {
  const int64_t size = out.dim() == 0 ? 1 : out.sizes()[dim];
  const Tensor out_rows = dim_zero_view(out, index.sizes(), dim);
  const Tensor src_view = Tensor(std::make_shared<TensorImpl>(src.storage(), src.storage_offset(), index.sizes(),
                                                              src.strides(), src.dtype(), src.device()));
  const int64_t dim_stride_bytes = (out.dim() == 0 ? 0 : out.strides()[dim]) * static_cast<int64_t>(out.element_size());
  const StridedLoop loop = make_strided_loop({&index, &src_view, &out_rows});
  BadIndex bad;
  visit_dtype<kNumericTypes>(out.dtype(), "scatter_add", [&]<typename T>() {
    if (loop.numel == 0) return;
    for_each_run(loop, 0, loop.numel, [&](char** p, const int64_t* s, int64_t n) {
      for (int64_t i = 0; i < n; ++i) {
        const int64_t j = *reinterpret_cast<const int64_t*>(p[0] + i * s[0]);
        if (j < 0 || j >= size) {
          bad.record(j);
          continue;
        }
        T& target = *reinterpret_cast<T*>(p[2] + i * s[2] + j * dim_stride_bytes);
        target = static_cast<T>(static_cast<opmath_t<T>>(target) +
                                static_cast<opmath_t<T>>(*reinterpret_cast<const T*>(p[1] + i * s[1])));
      }
    });
  });
  bad.throw_if_seen("scatter_add", dim, size);
}

}  // namespace kiln::cpu
