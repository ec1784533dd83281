// CudaBackend::copy: dst = cast(src) between the host and a GPU, within a GPU, and
// between GPUs. The bytes cross the bus (or NVLink) always as one contiguous block, so
// the transfer runs at full DMA speed: casts and layout changes run on a GPU with the
// elementwise engine (copy_on_device in copy.cu), and on the host (the CPU backend's
// copy) only to pack or unpack a strided host tensor.
//
//   host -> device    src made contiguous on the host if needed, then one
//                     cudaMemcpyAsync into dst (same dtype, dst contiguous) or into a
//                     contiguous device temporary that copy_on_device casts/scatters.
//   device -> host    src cast/gathered on the device into a contiguous temporary if
//                     needed, then one cudaMemcpyAsync into dst (contiguous) or into a
//                     host temporary that the CPU backend scatters into dst.
//   same device       cudaMemcpyAsync when both are contiguous with one dtype, else the
//                     engine.
//   across devices    cudaMemcpyPeerAsync of contiguous same-dtype blocks, staged
//                     through temporaries otherwise, ordered by events
//                     (Note [Copies between GPUs]).
// Everything runs on the current streams; temporaries come from the caching allocator
// (core/kernel_memory.h), which is stream-ordered, so freeing one at the end of a call while
// the copy is still queued is safe.
//
// Note [Blocking host copies]: a copy from or into pinned host memory with non_blocking
// returns at once: the DMA engine reads/writes those pages while the host goes on, and
// record_host_use keeps the pinned allocator from handing the block out again before
// the copy has finished. Every other host copy waits for its stream. Pageable memory
// may be paged out or freed by the caller as soon as we return (cudaMemcpyAsync from it
// is not truly asynchronous anyway: the driver stages it through its own pinned buffer),
// and a caller who did not ask for non_blocking expects to read dst, or reuse src, right
// after the call, as with torch's copy_. A host temporary of ours is pageable too, so
// staged copies always wait.
#include "core/kernel_memory.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/elementwise_families.h"
#include "kernels/cuda/event.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/pinned_allocator.h"

namespace kiln::cuda {
namespace {

size_t byte_size(const Tensor& t) { return static_cast<size_t>(t.numel()) * t.element_size(); }

// Whether the bytes of src can be copied as they are into dst: one dtype, and both
// contiguous or both dense in the same layout (a channels-last tensor's to(device), which
// keeps its layout; data_ptr() is then the lowest address of each).
bool same_bytes(const Tensor& src, const Tensor& dst) {
  if (src.dtype() != dst.dtype()) return false;
  if (src.is_contiguous() && dst.is_contiguous()) return true;
  return same_strides_where_it_matters(src.sizes(), src.strides(), dst.strides()) &&
         is_non_overlapping_and_dense(src.sizes(), src.strides());
}

Tensor host_temporary(const Tensor& like, DType dtype) {
  return allocate_tensor(like.sizes(), dtype, Device::cpu());
}

Tensor device_temporary(const Tensor& like, DType dtype, Device device) {
  return allocate_tensor(like.sizes(), dtype, device);
}

// After a host<->device cudaMemcpyAsync of `host_ptr` on `stream`: Note [Blocking host copies].
void finish_host_copy(const void* host_ptr, Stream stream, bool non_blocking) {
  if (non_blocking && is_pinned(host_ptr)) {
    record_host_use(host_ptr, stream);
  } else {
    stream.synchronize();
  }
}

void copy_host_to_device(const Tensor& src, const Tensor& dst, bool non_blocking) {
  Tensor host = src;
  if (!src.is_contiguous()) {
    host = host_temporary(src, src.dtype());
    backend(Device::cpu()).copy(src, host, false);
  }
  const int device = dst.device().index;
  const OnDevice on(device);
  const bool direct = same_bytes(host, dst);
  const Tensor target = direct ? dst : device_temporary(src, src.dtype(), dst.device());
  KILN_CUDA_CHECK(cudaMemcpyAsync(target.data_ptr(), host.data_ptr(), byte_size(host), cudaMemcpyHostToDevice,
                                  on.stream.handle()));
  if (!direct) copy_on_device(target, dst);
  finish_host_copy(host.data_ptr(), on.stream, non_blocking);
}

void copy_device_to_host(const Tensor& src, const Tensor& dst, bool non_blocking) {
  const int device = src.device().index;
  const OnDevice on(device);
  Tensor packed = src;
  if (src.dtype() != dst.dtype() || !src.is_contiguous()) {
    packed = device_temporary(src, dst.dtype(), src.device());
    copy_on_device(src, packed);
  }
  const Tensor target = dst.is_contiguous() ? dst : host_temporary(dst, dst.dtype());
  KILN_CUDA_CHECK(cudaMemcpyAsync(target.data_ptr(), packed.data_ptr(), byte_size(packed), cudaMemcpyDeviceToHost,
                                  on.stream.handle()));
  finish_host_copy(target.data_ptr(), on.stream, non_blocking && target.is_same(dst));
  if (!target.is_same(dst)) backend(Device::cpu()).copy(target, dst, false);
}

void copy_within_device(const Tensor& src, const Tensor& dst) {
  if (!same_bytes(src, dst)) return copy_on_device(src, dst);
  const int device = dst.device().index;
  const OnDevice on(device);
  KILN_CUDA_CHECK(cudaMemcpyAsync(dst.data_ptr(), src.data_ptr(), byte_size(src), cudaMemcpyDeviceToDevice,
                                  on.stream.handle()));
}

// Note [Copies between GPUs]: the copy runs on the destination's current stream, after
// the work already queued on the source's current stream (which may still be writing
// src), and the source stream then waits for the copy, so that src's memory, which the
// caching allocator reuses in the source stream's order, is not overwritten while the
// copy still reads it.
void copy_peer(const Tensor& src, const Tensor& dst) {
  const int src_device = src.device().index, dst_device = dst.device().index;
  const Stream src_stream = current_stream(src_device), dst_stream = current_stream(dst_device);
  Event src_ready;
  src_ready.record(src_stream);
  src_ready.block(dst_stream);
  {
    DeviceGuard guard(dst_device);
    KILN_CUDA_CHECK(cudaMemcpyPeerAsync(dst.data_ptr(), dst_device, src.data_ptr(), src_device, byte_size(src),
                                        dst_stream.handle()));
  }
  Event copied;
  copied.record(dst_stream);
  copied.block(src_stream);
}

void copy_between_devices(const Tensor& src, const Tensor& dst) {
  Tensor packed = src;
  if (src.dtype() != dst.dtype() || !src.is_contiguous()) {
    packed = device_temporary(src, dst.dtype(), src.device());
    copy_on_device(src, packed);
  }
  if (dst.is_contiguous()) return copy_peer(packed, dst);
  const Tensor landed = device_temporary(dst, dst.dtype(), dst.device());
  copy_peer(packed, landed);
  copy_on_device(landed, dst);
}

}  // namespace

void CudaBackend::copy(const Tensor& src, const Tensor& dst, bool non_blocking) {
  KILN_ASSERT(src.sizes() == dst.sizes(), "copy of ", src.sizes(), " into ", dst.sizes());
  if (dst.numel() == 0) return;
  const Device from = src.device(), to = dst.device();
  if (from.is_cpu() && to.is_cpu()) return backend(Device::cpu()).copy(src, dst, non_blocking);
  if (from.is_cpu()) return copy_host_to_device(src, dst, non_blocking);
  if (to.is_cpu()) return copy_device_to_host(src, dst, non_blocking);
  if (from.index == to.index) return copy_within_device(src, dst);
  copy_between_devices(src, dst);
}

}  // namespace kiln::cuda
