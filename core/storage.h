// Storage: a reference-counted buffer of bytes on one device.
//
// Tensors (and their views) share one Storage; the memory goes back to its allocator
// when the last reference drops. A Storage made by from_blob wraps caller memory and
// calls the caller's deleter, if any.
#pragma once

#include <cstddef>
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

 private:
  struct Impl {
    DataPtr data;
    size_t nbytes = 0;
    ~Impl() {
      if (data.deleter) data.deleter(data.data);
    }
  };
  std::shared_ptr<Impl> impl_;
};

}  // namespace kiln
