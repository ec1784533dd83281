// Tensor's own accessors, printing and dimension wrapping. Methods that are ops live in
// tensor_methods.cpp; autograd methods in autograd/tensor_autograd.cpp.
#include "core/tensor.h"

#include <cmath>
#include <iomanip>
#include <sstream>

namespace kiln {

int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op) {
  const int64_t rank = std::max<int64_t>(ndim, 1);  // a 0-d tensor accepts dim 0 and -1
  KILN_CHECK(dim >= -rank && dim < rank, op, ": dimension ", dim, " out of range for a ", ndim,
             "-d tensor (expected in [", -rank, ", ", rank - 1, "])");
  return dim < 0 ? dim + rank : dim;
}

int64_t Tensor::size(int64_t d) const {
  KILN_CHECK(dim() > 0, "size: a 0-d tensor has no dimensions");
  return sizes()[wrap_dim(d, dim(), "size")];
}

int64_t Tensor::stride(int64_t d) const {
  KILN_CHECK(dim() > 0, "stride: a 0-d tensor has no dimensions");
  return strides()[wrap_dim(d, dim(), "stride")];
}

void* Tensor::data_ptr() const {
  const TensorImpl& t = checked_impl();
  if (t.storage.data() == nullptr) return nullptr;
  return static_cast<char*>(t.storage.data()) + t.storage_offset * static_cast<int64_t>(itemsize(t.dtype));
}

void Tensor::set_data(const Tensor& data) const {
  KILN_CHECK(data.defined(), "set_data: undefined data");
  TensorImpl& self = const_cast<TensorImpl&>(checked_impl());
  const TensorImpl& src = *data.impl();
  KILN_CHECK(&self != &src, "set_data: a tensor cannot take its own data");
  self.storage = src.storage;
  self.storage_offset = src.storage_offset;
  self.sizes = src.sizes;
  self.strides = src.strides;
  self.refresh_layout();  // Note [Cached layout]
  self.dtype = src.dtype;
  self.device = src.device;
  self.view_base = src.view_base;
  self.wrapped_number = false;
}

namespace {

// Prints `values` (a contiguous float64 copy) as nested brackets, PyTorch-like.
void print_nested(std::ostream& os, const std::vector<double>& values, const std::vector<int64_t>& sizes,
                  size_t dim, int64_t& index, bool integral, int width) {
  if (dim == sizes.size()) {
    const double v = values[index++];
    if (integral) {
      os << std::setw(width) << static_cast<int64_t>(v);
    } else {
      os << std::setw(width) << std::setprecision(4) << std::fixed << v;
    }
    return;
  }
  os << '[';
  for (int64_t i = 0; i < sizes[dim]; ++i) {
    if (i > 0) {
      os << ',';
      if (dim + 1 < sizes.size()) {
        os << '\n' << std::string(dim + 8, ' ');
      } else {
        os << ' ';
      }
    }
    print_nested(os, values, sizes, dim + 1, index, integral, width);
  }
  os << ']';
}

}  // namespace

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
  if (!t.defined()) return os << "tensor(undefined)";
  constexpr int64_t kMaxPrinted = 1000;
  std::ostringstream body;
  if (t.numel() > kMaxPrinted) {
    body << "[... " << t.numel() << " elements ...]";
  } else {
    const std::vector<double> values = t.to_vector<double>();
    const bool integral = !t.is_floating_point();
    int width = 1;
    for (double v : values) {
      std::ostringstream one;
      if (integral) one << static_cast<int64_t>(v);
      else one << std::setprecision(4) << std::fixed << v;
      width = std::max(width, static_cast<int>(one.str().size()));
    }
    int64_t index = 0;
    print_nested(body, values, t.sizes(), 0, index, integral, width);
  }
  os << "tensor(" << body.str() << ", shape=" << t.sizes() << ", dtype=" << t.dtype();
  if (!t.device().is_cpu()) os << ", device=" << t.device();
  if (t.requires_grad()) os << ", requires_grad=true";
  return os << ')';
}

}  // namespace kiln
