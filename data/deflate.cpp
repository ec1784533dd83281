// deflated (data/deflate.h): one zlib deflate call over the whole input.
#include "data/deflate.h"

#include <zlib.h>

#include <cstdint>

#include "core/error.h"

namespace kiln::data {

std::string deflated(std::string_view bytes, DeflateWrapper wrapper) {
  KILN_CHECK(bytes.size() < (uint64_t{1} << 32), "deflate: ", bytes.size(),
             " bytes are 4 GiB or more; one zlib call here takes less");
  z_stream stream{};
  const int window_bits = wrapper == DeflateWrapper::Gzip ? MAX_WBITS + 16 : -MAX_WBITS;
  KILN_ASSERT(deflateInit2(&stream, 6, Z_DEFLATED, window_bits, 8, Z_DEFAULT_STRATEGY) == Z_OK,
              "zlib: deflateInit2");
  std::string out(deflateBound(&stream, static_cast<uLong>(bytes.size())) + 32, '\0');  // + the gzip wrapper
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  stream.avail_in = static_cast<uInt>(bytes.size());
  stream.next_out = reinterpret_cast<Bytef*>(out.data());
  stream.avail_out = static_cast<uInt>(out.size());
  const int status = deflate(&stream, Z_FINISH);
  out.resize(stream.total_out);
  deflateEnd(&stream);
  KILN_ASSERT(status == Z_STREAM_END, "zlib: deflate returned ", status);
  return out;
}

}  // namespace kiln::data
