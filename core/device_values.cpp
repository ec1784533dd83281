// write_words_ and write_doubles_ (core/device_values.h): checks, then one backend call.
#include "core/device_values.h"

#include <bit>

#include "core/backend.h"
#include "core/error.h"

namespace kiln {

void write_words_(const Tensor& dst, std::span<const uint64_t> words) {
  KILN_CHECK(dst.defined(), "write_words_: undefined tensor");
  KILN_CHECK(dst.element_size() == 8, "write_words_: needs a tensor of 8-byte elements, got ", dst.dtype());
  KILN_CHECK(dst.is_contiguous(), "write_words_: the tensor (strides ", dst.strides(), ") is not contiguous");
  const auto count = static_cast<int64_t>(words.size());
  KILN_CHECK(dst.numel() == count, "write_words_: ", count, " words for a tensor of ", dst.numel(),
             " elements");
  KILN_CHECK(count <= kMaxWrittenWords, "write_words_: at most ", kMaxWrittenWords, " words per call, got ",
             count);
  if (count > 0) backend(dst.device()).write_words(dst, words.data(), count);
}

void write_doubles_(const Tensor& dst, std::span<const double> values) {
  KILN_CHECK(!dst.defined() || dst.dtype() == DType::Float64, "write_doubles_: needs a float64 tensor, got ",
             dst.dtype());
  uint64_t words[kMaxWrittenWords];
  KILN_CHECK(values.size() <= static_cast<size_t>(kMaxWrittenWords), "write_doubles_: at most ",
             kMaxWrittenWords, " values per call, got ", values.size());
  for (size_t i = 0; i < values.size(); ++i) words[i] = std::bit_cast<uint64_t>(values[i]);
  write_words_(dst, std::span<const uint64_t>(words, values.size()));
}

}  // namespace kiln
