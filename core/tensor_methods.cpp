// Tensor methods that are ops: each forwards to the free function of the same name.
#include "core/dispatch.h"
#include "core/host_sync.h"
#include "core/ops.h"

namespace kiln {

Tensor Tensor::to(Device d, bool non_blocking) const { return kiln::to(*this, d, dtype(), non_blocking); }
Tensor Tensor::to(DType t) const { return kiln::to(*this, device(), t); }
Tensor Tensor::to(Device d, DType t, bool non_blocking, bool copy) const {
  return kiln::to(*this, d, t, non_blocking, copy);
}
Tensor Tensor::clone() const { return kiln::clone(*this); }
Tensor Tensor::contiguous() const { return kiln::contiguous(*this); }
Tensor Tensor::contiguous(MemoryFormat format) const { return kiln::contiguous(*this, format); }
bool Tensor::is_contiguous(MemoryFormat format) const {
  return format == MemoryFormat::Contiguous ? is_contiguous() : is_contiguous_as(sizes(), strides(), format);
}
MemoryFormat Tensor::suggest_memory_format() const { return kiln::suggest_memory_format(sizes(), strides()); }
Tensor Tensor::pin_memory() const { return kiln::pin_memory(*this); }
bool Tensor::is_pinned() const { return kiln::is_pinned(*this); }

Scalar Tensor::item() const {
  KILN_CHECK(numel() == 1, "item: a tensor with ", numel(), " elements cannot be converted to a "
             "number (shape ", sizes(), ")");
  note_host_sync(HostSync::Item, device());
  const Tensor host = to(Device::cpu());
  return visit_dtype<kAllTypes>(dtype(), "item", [&]<typename T>() -> Scalar {
    const T v = *static_cast<const T*>(host.data_ptr());
    if constexpr (is_floating_v<T>) {
      return static_cast<double>(static_cast<opmath_t<T>>(v));
    } else {
      return v;
    }
  });
}

Tensor Tensor::view(const Dims& s) const { return kiln::view(*this, s); }
Tensor Tensor::reshape(const Dims& s) const { return kiln::reshape(*this, s); }
Tensor Tensor::permute(const Dims& d) const { return kiln::permute(*this, d); }
Tensor Tensor::transpose(int64_t a, int64_t b) const { return kiln::transpose(*this, a, b); }
Tensor Tensor::t() const {
  KILN_CHECK(dim() <= 2, "t: expects a tensor with <= 2 dimensions, got ", dim());
  return dim() < 2 ? *this : kiln::transpose(*this, 0, 1);
}
Tensor Tensor::narrow(int64_t d, int64_t start, int64_t length) const {
  return kiln::narrow(*this, d, start, length);
}
Tensor Tensor::slice(int64_t d, std::optional<int64_t> start, std::optional<int64_t> end, int64_t step) const {
  return kiln::slice(*this, d, start, end, step);
}
Tensor Tensor::select(int64_t d, int64_t index) const { return kiln::select(*this, d, index); }
Tensor Tensor::expand(const Dims& s) const { return kiln::expand(*this, s); }
Tensor Tensor::expand_as(const Tensor& other) const { return kiln::expand(*this, other.sizes()); }
Tensor Tensor::as_strided(const Dims& s, const Dims& st, int64_t offset) const {
  return kiln::as_strided(*this, s, st, offset);
}
Tensor Tensor::squeeze() const { return kiln::squeeze(*this); }
Tensor Tensor::squeeze(int64_t d) const { return kiln::squeeze(*this, d); }
Tensor Tensor::unsqueeze(int64_t d) const { return kiln::unsqueeze(*this, d); }
Tensor Tensor::flatten(int64_t start, int64_t end) const { return kiln::flatten(*this, start, end); }
std::vector<Tensor> Tensor::split(int64_t size, int64_t d) const { return kiln::split(*this, size, d); }
std::vector<Tensor> Tensor::chunk(int64_t chunks, int64_t d) const { return kiln::chunk(*this, chunks, d); }

Tensor Tensor::add(const Tensor& o, Scalar alpha) const { return kiln::add(*this, o, alpha); }
Tensor Tensor::sub(const Tensor& o, Scalar alpha) const { return kiln::sub(*this, o, alpha); }
Tensor Tensor::mul(const Tensor& o) const { return kiln::mul(*this, o); }
Tensor Tensor::div(const Tensor& o) const { return kiln::div(*this, o); }
Tensor Tensor::neg() const { return kiln::neg(*this); }
Tensor Tensor::pow(Scalar e) const { return kiln::pow(*this, e); }
Tensor Tensor::pow(const Tensor& e) const { return kiln::pow(*this, e); }
Tensor Tensor::sqrt() const { return kiln::sqrt(*this); }
Tensor Tensor::rsqrt() const { return kiln::rsqrt(*this); }
Tensor Tensor::exp() const { return kiln::exp(*this); }
Tensor Tensor::log() const { return kiln::log(*this); }
Tensor Tensor::abs() const { return kiln::abs(*this); }
Tensor Tensor::sign() const { return kiln::sign(*this); }
Tensor Tensor::clamp(std::optional<Scalar> lo, std::optional<Scalar> hi) const { return kiln::clamp(*this, lo, hi); }
Tensor Tensor::maximum(const Tensor& o) const { return kiln::maximum(*this, o); }
Tensor Tensor::minimum(const Tensor& o) const { return kiln::minimum(*this, o); }
Tensor Tensor::relu() const { return kiln::relu(*this); }
Tensor Tensor::sigmoid() const { return kiln::sigmoid(*this); }
Tensor Tensor::tanh() const { return kiln::tanh(*this); }
Tensor Tensor::eq(const Tensor& o) const { return kiln::eq(*this, o); }
Tensor Tensor::ne(const Tensor& o) const { return kiln::ne(*this, o); }
Tensor Tensor::lt(const Tensor& o) const { return kiln::lt(*this, o); }
Tensor Tensor::le(const Tensor& o) const { return kiln::le(*this, o); }
Tensor Tensor::gt(const Tensor& o) const { return kiln::gt(*this, o); }
Tensor Tensor::ge(const Tensor& o) const { return kiln::ge(*this, o); }

Tensor Tensor::sum(Dims d, bool k) const { return kiln::sum(*this, std::move(d), k); }
Tensor Tensor::mean(Dims d, bool k) const { return kiln::mean(*this, std::move(d), k); }
Tensor Tensor::amax(Dims d, bool k) const { return kiln::amax(*this, std::move(d), k); }
Tensor Tensor::amin(Dims d, bool k) const { return kiln::amin(*this, std::move(d), k); }
Tensor Tensor::max() const { return kiln::max(*this); }
Tensor Tensor::min() const { return kiln::min(*this); }
std::tuple<Tensor, Tensor> Tensor::max(int64_t d, bool k) const { return kiln::max(*this, d, k); }
std::tuple<Tensor, Tensor> Tensor::min(int64_t d, bool k) const { return kiln::min(*this, d, k); }
Tensor Tensor::argmax(std::optional<int64_t> d, bool k) const { return kiln::argmax(*this, d, k); }
Tensor Tensor::argmin(std::optional<int64_t> d, bool k) const { return kiln::argmin(*this, d, k); }
Tensor Tensor::var(Dims d, int64_t c, bool k) const { return kiln::var(*this, std::move(d), c, k); }
Tensor Tensor::std(Dims d, int64_t c, bool k) const { return kiln::std(*this, std::move(d), c, k); }
Tensor Tensor::norm(double p, Dims d, bool k) const { return kiln::norm(*this, p, std::move(d), k); }
Tensor Tensor::logsumexp(Dims d, bool k) const { return kiln::logsumexp(*this, std::move(d), k); }
Tensor Tensor::softmax(int64_t d) const { return kiln::softmax(*this, d); }
Tensor Tensor::log_softmax(int64_t d) const { return kiln::log_softmax(*this, d); }

Tensor Tensor::matmul(const Tensor& o) const { return kiln::matmul(*this, o); }
Tensor Tensor::gather(int64_t d, const Tensor& i) const { return kiln::gather(*this, d, i); }
Tensor Tensor::scatter_add(int64_t d, const Tensor& i, const Tensor& s) const {
  return kiln::scatter_add(*this, d, i, s);
}
Tensor Tensor::index_select(int64_t d, const Tensor& i) const { return kiln::index_select(*this, d, i); }

}  // namespace kiln
