// Storage construction from an allocation or an allocator (see storage.h).
#include "core/storage.h"

namespace kiln {

Storage::Storage(DataPtr data, size_t nbytes) : impl_(std::make_shared<Impl>()) {
  impl_->data = std::move(data);
  impl_->nbytes = nbytes;
}

Storage Storage::allocate(Allocator& allocator, size_t nbytes) {
  return Storage(allocator.allocate(nbytes), nbytes);
}

}  // namespace kiln
