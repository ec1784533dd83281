// NPY reading and writing (data/npy.h): the fixed prefix, the header's dict literal read by
// a small parser of the Python subset numpy writes (strings, True/False, tuples of
// integers), the descr mapped to a Kiln dtype (Note [NPY dtypes]), every size checked
// against the file (Note [NPY validation]) before the tensor is allocated; then the bytes
// read into it.
#include "data/npy.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <optional>

#include "core/checked_math.h"
#include "core/error.h"
#include "core/ops/factory.h"
#include "core/ops/view.h"
#include "core/tensor_impl.h"  // checked_numel

namespace kiln::data::npy {

static_assert(std::endian::native == std::endian::little,
              "npy: little-endian data is read as it is in memory, which needs a little-endian host");

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr int64_t kMagicBytes = 6;
constexpr int64_t kAlign = 64;  // numpy's ARRAY_ALIGN: the data starts at a multiple of it

template <typename... Parts>
[[noreturn]] void fail(const ByteSource& source, const Parts&... parts) {
  detail::throw_user_error(detail::str_cat("npy: ", source.name(), ": ", parts...));
}

// ---- the header's dict literal ----------------------------------------------------------------

// Reads the dict numpy writes: {'key': value, ...} with string, True/False and tuple-of-int
// values, Python's whitespace and trailing commas.
class DictParser {
 public:
  DictParser(const ByteSource& source, std::string_view text) : source_(source), text_(text) {}

  template <typename Fn>  // fn(key) reads the key's value with the methods below
  void for_each_entry(const Fn& fn) {
    expect('{');
    while (!consume('}')) {
      const std::string key = read_string();
      expect(':');
      fn(key);
      if (!consume(',')) {
        expect('}');
        break;
      }
    }
    skip_space();
    if (pos_ != text_.size()) fail_here("unexpected text after the dict");
  }

  std::string read_string() {
    skip_space();
    if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"'))
      fail_here("expected a quoted string");
    const char quote = text_[pos_++];
    const size_t begin = pos_;
    while (pos_ < text_.size() && text_[pos_] != quote) {
      if (text_[pos_] == '\\') fail_here("escapes in strings are not supported");
      ++pos_;
    }
    if (pos_ >= text_.size()) fail_here("unterminated string");
    return std::string(text_.substr(begin, pos_++ - begin));
  }

  bool read_bool() {
    skip_space();
    for (const auto& [word, value] :
         {std::pair{std::string_view("True"), true}, {std::string_view("False"), false}}) {
      if (text_.substr(pos_, word.size()) == word) {
        pos_ += word.size();
        return value;
      }
    }
    fail_here("expected True or False");
  }

  // A tuple of non-negative integers: (), (n,), (a, b, ...), a trailing comma allowed.
  std::vector<int64_t> read_shape() {
    expect('(');
    std::vector<int64_t> dims;
    while (!consume(')')) {
      dims.push_back(read_dim());
      if (static_cast<int64_t>(dims.size()) > kMaxDims) fail_here("more than ", kMaxDims, " dims");
      if (!consume(',')) {
        if (dims.size() == 1) fail_here("a one-element shape must be written (n,)");
        expect(')');
        break;
      }
    }
    return dims;
  }

 private:
  int64_t read_dim() {
    skip_space();
    const size_t begin = pos_;
    int64_t value = 0;
    while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
      const int digit = text_[pos_++] - '0';
      if (value > (INT64_MAX - digit) / 10) fail_here("a dimension does not fit in 64 bits");
      value = value * 10 + digit;
    }
    if (pos_ == begin) fail_here("expected a non-negative integer dimension");
    if (pos_ < text_.size() && text_[pos_] == 'L') ++pos_;  // Python 2's long literal
    return value;
  }

  void skip_space() {
    while (pos_ < text_.size() &&
           (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' || text_[pos_] == '\r')) {
      ++pos_;
    }
  }
  bool consume(char c) {
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!consume(c)) fail_here("expected '", c, "'");
  }
  template <typename... Parts>
  [[noreturn]] void fail_here(const Parts&... parts) const {
    fail(source_, "bad header at character ", pos_, ": ", parts..., " (header: ", printable(text_), ")");
  }
  // The header as text fit for a message: at most 200 characters, bytes outside
  // printable ASCII as \xNN.
  static std::string printable(std::string_view text) {
    std::string out;
    for (size_t i = 0; i < text.size() && i < 200; ++i) {
      const auto c = static_cast<unsigned char>(text[i]);
      if (c >= 0x20 && c < 0x7f) {
        out += static_cast<char>(c);
      } else {
        constexpr char kHex[] = "0123456789abcdef";
        out += "\\x";
        out += kHex[c >> 4];
        out += kHex[c & 15];
      }
    }
    if (text.size() > 200) out += "...";
    return out;
  }

  const ByteSource& source_;
  std::string_view text_;
  size_t pos_ = 0;
};

// ---- dtypes (Note [NPY dtypes]) --------------------------------------------------------------

struct StoredType {
  DType dtype;       // what it loads as
  char code;         // numpy's kind: f, i, u, b
  int64_t itemsize;  // bytes in the file
  bool big_endian;
};

// Note [NPY dtypes] as a table: numpy's type codes and the Kiln dtype each loads as. The
// first seven are Kiln's own types (stored as they are), the rest widen; the writer takes
// a dtype's code from the same table.
struct CodeEntry {
  std::string_view code;
  DType dtype;
};
constexpr CodeEntry kCodes[] = {
    {"f4", DType::Float32}, {"f8", DType::Float64}, {"f2", DType::Float16}, {"i8", DType::Int64},
    {"i4", DType::Int32},   {"u1", DType::UInt8},   {"b1", DType::Bool},    {"i2", DType::Int32},
    {"u2", DType::Int32},   {"i1", DType::Int32},   {"u4", DType::Int64},
};

std::optional<StoredType> stored_type(std::string_view descr) {
  if (descr.size() < 3) return std::nullopt;
  const char order = descr[0];
  if (order != '<' && order != '>' && order != '|' && order != '=') return std::nullopt;
  const std::string_view code = descr.substr(1);
  for (const CodeEntry& e : kCodes) {
    if (code == e.code) {
      const int64_t size = e.code[1] - '0';
      if (order == '|' && size != 1) return std::nullopt;  // '|' only where order does not apply
      return StoredType{e.dtype, e.code[0], size, order == '>' && size > 1};
    }
  }
  return std::nullopt;
}

StoredType checked_type(const ByteSource& source, const std::string& descr) {
  const std::optional<StoredType> type = stored_type(descr);
  if (!type) {
    fail(source, "dtype '", descr,
         "' is not one Kiln loads (it loads f4 f8 f2 i8 i4 i2 i1 u4 u2 u1 b1, little- or big-endian)");
  }
  return *type;
}

// ---- the prefix and header ---------------------------------------------------------------------

uint32_t little_endian(const uint8_t* bytes, int n) {
  uint32_t value = 0;
  for (int i = n - 1; i >= 0; --i) value = value << 8 | bytes[i];
  return value;
}

}  // namespace

int64_t Header::numel() const { return checked_numel(shape, "npy"); }

Header read_header(const ByteSource& source) {
  Header header;
  const int64_t file_bytes = source.size();
  uint8_t prefix[12] = {};
  if (file_bytes < 10) fail(source, "too short for an NPY file (", file_bytes, " bytes)");
  source.read(0, prefix, 10);
  if (std::memcmp(prefix, kMagic, kMagicBytes) != 0) fail(source, "not an NPY file (no \\x93NUMPY magic)");
  header.major_version = prefix[6];
  header.minor_version = prefix[7];
  if (header.minor_version != 0 || header.major_version < 1 || header.major_version > 3) {
    fail(source, "unknown NPY format version ", header.major_version, ".", header.minor_version,
         " (Kiln reads 1.0, 2.0 and 3.0)");
  }
  int64_t length_bytes = 2;
  if (header.major_version >= 2) {
    length_bytes = 4;
    if (file_bytes < 12)
      fail(source, "truncated: the header length ends past the file's ", file_bytes, " bytes");
    source.read(10, prefix + 10, 2);
  }
  const int64_t header_bytes = little_endian(prefix + 8, static_cast<int>(length_bytes));
  if (header_bytes > kMaxHeaderBytes) {
    fail(source, "header of ", header_bytes, " bytes, more than the ", kMaxHeaderBytes,
         " an NPY reader accepts");
  }
  header.data_offset = 8 + length_bytes + header_bytes;
  if (header.data_offset > file_bytes) {
    fail(source, "truncated: the header ends at byte ", header.data_offset, " of a ", file_bytes,
         "-byte file");
  }
  std::string text(static_cast<size_t>(header_bytes), '\0');
  source.read(8 + length_bytes, text.data(), header_bytes);

  bool has_descr = false, has_order = false, has_shape = false;
  DictParser parser(source, text);
  parser.for_each_entry([&](const std::string& key) {
    bool* seen = key == "descr"           ? &has_descr
                 : key == "fortran_order" ? &has_order
                 : key == "shape"         ? &has_shape
                                          : nullptr;
    if (seen == nullptr)
      fail(source, "unexpected header key '", key, "' (an NPY header has descr, fortran_order, shape)");
    if (*seen) fail(source, "header key '", key, "' appears twice");
    *seen = true;
    if (key == "descr") header.descr = parser.read_string();
    if (key == "fortran_order") header.fortran_order = parser.read_bool();
    if (key == "shape") header.shape = parser.read_shape();
  });
  if (!has_descr || !has_order || !has_shape) {
    fail(source, "header lacks '", !has_descr ? "descr" : !has_order ? "fortran_order" : "shape", "'");
  }
  const StoredType type = checked_type(source, header.descr);
  header.dtype = type.dtype;
  header.stored_itemsize = type.itemsize;
  int64_t numel = 1;
  for (int64_t d : header.shape) {
    const std::optional<int64_t> next = checked_mul(numel, d);
    if (!next) fail(source, "shape ", header.shape, " has more elements than fit in 64 bits");
    numel = *next;
  }
  const std::optional<int64_t> data_bytes = checked_mul(numel, type.itemsize);
  if (!data_bytes || *data_bytes != file_bytes - header.data_offset) {
    fail(source, "shape ", header.shape, " of '", header.descr, "' needs ",
         data_bytes ? std::to_string(*data_bytes) : std::string("more than 2^63"),
         " bytes of data, the file has ", file_bytes - header.data_offset, " after its header",
         data_bytes && *data_bytes > file_bytes - header.data_offset ? " (truncated?)" : "");
  }
  return header;
}

Header read_header(const std::string& path) { return read_header(FileSource(path, "npy")); }

Header read_header_from_bytes(std::span<const uint8_t> bytes, std::string_view name) {
  return read_header(MemorySource(bytes, name));
}

namespace {

// Reverses the bytes of each `itemsize`-byte item in place (big-endian to the host's order).
void swap_items(uint8_t* data, int64_t numel, int64_t itemsize) {
  for (int64_t i = 0; i < numel; ++i) std::reverse(data + i * itemsize, data + (i + 1) * itemsize);
}

// The values of `raw` (numel items of the stored type T, in the host's order) converted
// into `out`, of Kiln's wider type U.
template <typename T, typename U>
void widen(const uint8_t* raw, int64_t numel, U* out) {
  for (int64_t i = 0; i < numel; ++i) {
    T value;
    std::memcpy(&value, raw + i * static_cast<int64_t>(sizeof(T)), sizeof(T));
    out[i] = static_cast<U>(value);
  }
}

// The stored values read into `tensor` (contiguous, Header::dtype, numel items).
void read_values(const ByteSource& source, const Header& header, const Tensor& tensor) {
  const StoredType type = checked_type(source, header.descr);
  const int64_t numel = tensor.numel(), bytes = header.data_bytes();
  if (numel == 0) return;
  if (type.itemsize == static_cast<int64_t>(itemsize(tensor.dtype()))) {  // stored as Kiln holds it
    auto* data = static_cast<uint8_t*>(tensor.data_ptr());
    source.read(header.data_offset, data, bytes);
    if (type.big_endian) swap_items(data, numel, type.itemsize);
    if (tensor.dtype() == DType::Bool) {
      const uint8_t* bad = std::find_if(data, data + numel, [](uint8_t b) { return b > 1; });
      if (bad != data + numel) {
        fail(source, "bool array holds byte ", int(*bad), " at element ", bad - data, " (must be 0 or 1)");
      }
    }
    return;
  }
  std::vector<uint8_t> raw(static_cast<size_t>(bytes));  // a narrower type, widened below
  source.read(header.data_offset, raw.data(), bytes);
  if (type.big_endian) swap_items(raw.data(), numel, type.itemsize);
  void* out = tensor.data_ptr();
  const std::string code = header.descr.substr(1);
  if (code == "i1") widen<int8_t>(raw.data(), numel, static_cast<int32_t*>(out));
  if (code == "i2") widen<int16_t>(raw.data(), numel, static_cast<int32_t*>(out));
  if (code == "u2") widen<uint16_t>(raw.data(), numel, static_cast<int32_t*>(out));
  if (code == "u4") widen<uint32_t>(raw.data(), numel, static_cast<int64_t*>(out));
}

}  // namespace

Tensor load(const ByteSource& source) {
  const Header header = read_header(source);
  if (!header.fortran_order) {
    Tensor tensor = empty(header.shape, {.dtype = header.dtype});
    read_values(source, header, tensor);
    return tensor;
  }
  // Fortran order: the bytes are the C-order array of the reversed shape; its reversed
  // view is the array (numpy's own F-ordered result).
  std::vector<int64_t> reversed(header.shape.rbegin(), header.shape.rend());
  Tensor tensor = empty(reversed, {.dtype = header.dtype});
  read_values(source, header, tensor);
  std::vector<int64_t> order(reversed.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int64_t>(order.size() - 1 - i);
  return tensor.permute(order);
}

Tensor load(const std::string& path) { return load(FileSource(path, "npy")); }

bool can_map(const Header& header) {
  const std::optional<StoredType> type = stored_type(header.descr);
  return type.has_value() && !type->big_endian &&
         type->itemsize == static_cast<int64_t>(itemsize(header.dtype)) && header.dtype != DType::Bool &&
         header.numel() > 0 && header.data_offset % 64 == 0;
}

Tensor load(const std::string& path, const LoadOptions& options) {
  if (!options.mmap) return load(path);
  // The header is checked in the mapped bytes themselves, so what was checked is what is
  // used (a file replaced between a check and a second open could not slip in).
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  KILN_CHECK(fd >= 0, "npy: ", path, ": cannot open: ", std::strerror(errno));
  struct stat status {};
  if (::fstat(fd, &status) != 0 || status.st_size <= 0) {
    ::close(fd);
    return load(path);  // the plain reader says what is wrong
  }
  const auto length = static_cast<size_t>(status.st_size);
  void* base = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  const int map_errno = errno;
  ::close(fd);
  KILN_CHECK(base != MAP_FAILED, "npy: ", path, ": cannot map ", length,
             " bytes: ", std::strerror(map_errno));
  const auto unmap = [base, length](void*) { ::munmap(base, length); };
  Header header;
  try {
    header = read_header(MemorySource(std::span(static_cast<const uint8_t*>(base), length), path));
  } catch (...) {
    unmap(nullptr);
    throw;
  }
  if (!can_map(header)) {
    unmap(nullptr);
    return load(path);
  }
  void* data = static_cast<uint8_t*>(base) + header.data_offset;
  if (!header.fortran_order) return from_blob(data, header.shape, {.dtype = header.dtype}, unmap);
  // Fortran order: the reversed view of the C-order array of the reversed shape.
  std::vector<int64_t> reversed(header.shape.rbegin(), header.shape.rend());
  std::vector<int64_t> order(reversed.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int64_t>(order.size() - 1 - i);
  return from_blob(data, reversed, {.dtype = header.dtype}, unmap).permute(order);
}

Tensor load_from_bytes(std::span<const uint8_t> bytes, std::string_view name) {
  return load(MemorySource(bytes, name));
}

// ---- writing -----------------------------------------------------------------------------------

namespace {

// The descr Kiln writes for `dtype`: its own code from kCodes (the entry of its item size),
// little-endian ('|' for one byte).
std::string descr_of(DType dtype) {
  const int64_t size = static_cast<int64_t>(itemsize(dtype));
  for (const CodeEntry& e : kCodes) {
    if (e.dtype == dtype && e.code[1] - '0' == size) return std::string(size == 1 ? "|" : "<").append(e.code);
  }
  KILN_CHECK(false, "npy: numpy has no ", dtype_name(dtype),
             " dtype; convert the tensor first, e.g. t.to(DType::Float32)");
}

// numpy's header: its dict with sorted keys, the shape as Python's tuple repr.
std::string header_dict(const Tensor& tensor) {
  std::string shape = "(";
  for (int64_t i = 0; i < tensor.dim(); ++i) shape += (i ? ", " : "") + std::to_string(tensor.size(i));
  shape += tensor.dim() == 1 ? ",)" : ")";
  return "{'descr': '" + descr_of(tensor.dtype()) + "', 'fortran_order': False, 'shape': " + shape + ", }";
}

// `dict` padded with spaces and a newline so that the data, after a prefix of
// `prefix_bytes`, starts at a multiple of kAlign (numpy's padding).
std::string padded(std::string dict, int64_t prefix_bytes) {
  const int64_t unpadded = prefix_bytes + static_cast<int64_t>(dict.size()) + 1;
  dict.append(static_cast<size_t>((kAlign - unpadded % kAlign) % kAlign), ' ');
  dict += '\n';
  return dict;
}

}  // namespace

std::string to_bytes(const Tensor& tensor) {
  KILN_CHECK(tensor.defined(), "npy: cannot save an undefined tensor");
  const Tensor host = tensor.to(Device::cpu()).contiguous();
  const std::string dict = header_dict(host);
  // Version 1.0 unless its 2-byte length cannot hold the padded header (numpy's rule).
  std::string text = padded(dict, 10);
  const int version = text.size() <= 65535 ? 1 : 2;
  if (version == 2) text = padded(dict, 12);
  std::string out(kMagic, kMagicBytes);
  out += static_cast<char>(version);
  out += '\0';
  for (int i = 0; i < (version == 1 ? 2 : 4); ++i) out += static_cast<char>((text.size() >> (8 * i)) & 0xff);
  out += text;
  const int64_t data_bytes = host.numel() * static_cast<int64_t>(itemsize(host.dtype()));
  if (data_bytes > 0) out.append(static_cast<const char*>(host.data_ptr()), static_cast<size_t>(data_bytes));
  return out;
}

SaveStatus save(const Tensor& tensor, const std::string& path) {
  const std::string bytes = to_bytes(tensor);
  AtomicFile file(path, "npy");
  file.write(bytes);
  return file.commit();
}

}  // namespace kiln::data::npy
