// Storage construction from an allocation or an allocator (see storage.h).
#include "core/storage.h"

#include "core/fault_injection.h"
#include "core/pooled.h"

namespace kiln {

Storage::Storage(DataPtr data, size_t nbytes) : impl_(make_pooled<Impl>()) {
  impl_->data = std::move(data);
  impl_->nbytes = nbytes;
}

Storage Storage::allocate(Allocator& allocator, size_t nbytes) {
  detail::before_allocation(nbytes);  // Note [Injected allocation failures]
  return Storage(allocator.allocate(nbytes), nbytes);
}

}  // namespace kiln
