// Storage: a reference-counted buffer of bytes on one device.
//
// Tensors (and their views) share one Storage; the memory goes back to its allocator
// when the last reference drops. A Storage made by from_blob wraps caller memory and
// calls the caller's deleter, if any. The storage also holds the version counter every
// tensor on it shares (Note [Version counter] in core/tensor.h): views, detached aliases
// and saved tensors see the same bytes, so they see the same count of in-place writes,
// and a tensor costs no separate allocation for it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/allocator.h"

namespace kiln {

class Storage {
 public:
  Storage() = default;
  Storage(DataPtr data, size_t nbytes);
  // Allocates nbytes from `allocator`: every tensor's memory comes through here, and a
  // test can make it fail (Note [Injected allocation failures] in core/fault_injection.h).
  static Storage allocate(Allocator& allocator, size_t nbytes);

  void* data() const { return impl_ ? impl_->data.data : nullptr; }
  size_t nbytes() const { return impl_ ? impl_->nbytes : 0; }
  Device device() const { return impl_ ? impl_->data.device : Device::cpu(); }
  bool defined() const { return impl_ != nullptr; }
  bool is_alias_of(const Storage& other) const { return impl_ == other.impl_; }
  // The in-place write count of every tensor on this storage (defined storages only).
  std::atomic<uint32_t>& version() const { return impl_->version; }

 private:
  struct Impl {
    DataPtr data;
    size_t nbytes = 0;
    std::atomic<uint32_t> version{0};
    ~Impl() {
      if (data.deleter) data.deleter(data.data);
    }
  };
  std::shared_ptr<Impl> impl_;
};

}  // namespace kiln
