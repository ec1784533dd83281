// Reading safetensors files (core/safetensors.h): the header is pulled from a json::Reader
// entry by entry (Note [safetensors header memory]) and checked as in
// Note [safetensors validation] before any tensor is allocated, then each tensor's bytes
// are read straight into a new CPU tensor (through a ByteSource, core/byte_source.h),
// checked against its checksum when the file has them (Note [Tensor checksums]), and
// moved to the requested device. Writing is core/safetensors_write.cpp.
#include "core/safetensors.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "core/byte_source.h"
#include "core/checked_math.h"
#include "core/crc32c.h"
#include "core/error.h"
#include "core/json.h"
#include "core/ops/factory.h"
#include "core/safetensors_format.h"
#include "core/text_list.h"

namespace kiln::safetensors {

static_assert(std::endian::native == std::endian::little,
              "safetensors: Kiln reads and writes tensor bytes as they are in memory, which "
              "matches the format's little-endian layout only on little-endian hosts");

namespace {

template <typename... Parts>
[[noreturn]] void fail(const ByteSource& source, const Parts&... parts) {
  detail::throw_user_error(detail::str_cat("safetensors: ", source.name(), ": ", parts...));
}

// ---- header entries ---------------------------------------------------------------------
//
// Note [safetensors header memory]: the header is read with a json::Reader, never built
// as a json::Value tree: each entry becomes its TensorInfo as it is read and is checked
// then (the tiling, which needs every entry, after the last), so of several problems the
// first in the text is the one reported (a bad entry before a JSON syntax error
// included). What is held at once is the header text (at most kMaxHeaderBytes, the
// 100,000,000 bytes past which Python's reader refuses a header, and so does ours), the
// entries and metadata read so far, and the reader's set of the names seen (its
// duplicate-key check): memory proportional to the header. Measured peaks
// (tests/core/test_safetensors_memory.cpp, and 99 MB headers): 4 to 5.5 times the header
// for many small tensors; about 9 for one long shape, at most 13 (its 2-byte dims, "1,",
// become 8-byte int64s, and a vector holds up to 3 times its size while it doubles). As
// a tree the same headers took 17 to 110 times their size, and a valid 99 MB header 7 GB
// and 23 s.

// The next value must be of `type`; any other fails with `what` (what it must be) and
// ", found <its type>".
template <typename... What>
void expect_next(const ByteSource& source, json::Reader& reader, json::Type type, const What&... what) {
  const json::Type found = reader.peek();
  if (found != type) fail(source, what..., ", found ", json::with_article(found));
}

[[noreturn]] void not_a_size(const ByteSource& source, const std::string& tensor, const char* field,
                             const std::string& found) {
  fail(source, "tensor '", tensor, "': ", field, " must hold non-negative integers, found ", found);
}

// The next value, an element of `field` ("shape" or "data_offsets"): a non-negative integer.
int64_t read_size(const ByteSource& source, json::Reader& reader, const std::string& tensor,
                  const char* field) {
  const json::Type type = reader.peek();
  if (type != json::Type::Integer) not_a_size(source, tensor, field, json::with_article(type));
  const int64_t value = reader.read_integer();
  if (value < 0) not_a_size(source, tensor, field, std::to_string(value));
  return value;
}

// The next value, that of `field`, must be of `type`.
void expect_field(const ByteSource& source, json::Reader& reader, const std::string& tensor,
                  const char* field, json::Type type) {
  expect_next(source, reader, type, "tensor '", tensor, "': \"", field, "\" must be ",
              json::with_article(type));
}

std::string read_dtype(const ByteSource& source, json::Reader& reader, const std::string& tensor) {
  expect_field(source, reader, tensor, "dtype", json::Type::String);
  std::string dtype = reader.read_string();
  if (!format_item_size(dtype)) fail(source, "tensor '", tensor, "' has unknown dtype \"", dtype, "\"");
  return dtype;
}

std::vector<int64_t> read_shape(const ByteSource& source, json::Reader& reader, const std::string& tensor) {
  expect_field(source, reader, tensor, "shape", json::Type::Array);
  std::vector<int64_t> shape;
  reader.begin_array();
  while (reader.next_item()) shape.push_back(read_size(source, reader, tensor, "shape"));
  return shape;
}

// "data_offsets": [begin, end]. Values past the second are checked and counted, not kept.
void read_data_offsets(const ByteSource& source, json::Reader& reader, TensorInfo& info) {
  expect_field(source, reader, info.name, "data_offsets", json::Type::Array);
  int64_t offsets[2] = {0, 0};
  int64_t count = 0;
  reader.begin_array();
  while (reader.next_item()) {
    const int64_t offset = read_size(source, reader, info.name, "data_offsets");
    if (count < 2) offsets[count] = offset;
    ++count;
  }
  if (count != 2) {
    fail(source, "tensor '", info.name, "': data_offsets must be [begin, end], found ", count, " values");
  }
  info.data_begin = offsets[0];
  info.data_end = offsets[1];
}

// numel * itemsize in bytes, or nullopt when a partial product overflows int64 (even when
// a later zero dim would make the product 0: Python's reader refuses that shape too).
std::optional<int64_t> shape_nbytes(const std::vector<int64_t>& shape, int64_t item_size) {
  std::optional<int64_t> bytes = item_size;
  for (const int64_t dim : shape) bytes = bytes ? checked_mul(*bytes, dim) : std::nullopt;
  return bytes;
}

// An entry read in full: its offsets hold exactly its shape's bytes.
void check_entry_bytes(const ByteSource& source, const TensorInfo& info) {
  if (info.data_begin > info.data_end) {
    fail(source, "tensor '", info.name, "': data_offsets [", info.data_begin, ", ", info.data_end,
         "] begin after they end");
  }
  const std::optional<int64_t> nbytes = shape_nbytes(info.shape, *format_item_size(info.dtype));
  if (!nbytes) fail(source, "tensor '", info.name, "': shape ", info.shape, " overflows 64-bit sizes");
  if (*nbytes != info.nbytes()) {
    fail(source, "tensor '", info.name, "': ", info.dtype, " shape ", info.shape, " needs ", *nbytes,
         " bytes but data_offsets [", info.data_begin, ", ", info.data_end, "] hold ", info.nbytes());
  }
}

// The next value, the entry of tensor `name`: {"dtype": ..., "shape": [...],
// "data_offsets": [begin, end]} in any order; other fields are ignored, as Python does.
TensorInfo read_entry(const ByteSource& source, json::Reader& reader, std::string name) {
  expect_next(source, reader, json::Type::Object, "tensor '", name, "' must be a JSON object");
  TensorInfo info;
  info.name = std::move(name);
  bool has_dtype = false, has_shape = false, has_offsets = false;
  reader.begin_object();
  while (const std::optional<std::string> field = reader.next_key()) {
    if (*field == "dtype") {
      info.dtype = read_dtype(source, reader, info.name);
      has_dtype = true;
    } else if (*field == "shape") {
      info.shape = read_shape(source, reader, info.name);
      has_shape = true;
    } else if (*field == "data_offsets") {
      read_data_offsets(source, reader, info);
      has_offsets = true;
    } else {
      reader.skip_value();
    }
  }
  const char* missing = !has_dtype ? "dtype" : !has_shape ? "shape" : !has_offsets ? "data_offsets" : nullptr;
  if (missing != nullptr) fail(source, "tensor '", info.name, "' has no \"", missing, "\" field");
  check_entry_bytes(source, info);
  return info;
}

// The next value, that of "__metadata__": an object of strings, or null for none.
Metadata read_metadata(const ByteSource& source, json::Reader& reader) {
  Metadata metadata;
  if (reader.peek() == json::Type::Null) {  // Python reads null as "no metadata"
    reader.read_null();
    return metadata;
  }
  expect_next(source, reader, json::Type::Object, "\"__metadata__\" must be an object of strings");
  reader.begin_object();
  while (std::optional<std::string> key = reader.next_key()) {
    expect_next(source, reader, json::Type::String, "\"__metadata__\" value of \"", *key,
                "\" must be a string");
    metadata.emplace(std::move(*key), reader.read_string());
  }
  return metadata;
}

// The header's JSON object, read into `header` entry by entry (Note [safetensors header
// memory]). A problem with the JSON itself is reported in the reader's words.
void read_entries(const ByteSource& source, std::string_view text, Header& header) {
  try {
    json::Reader reader(text, {.max_bytes = static_cast<size_t>(kMaxHeaderBytes)});
    expect_next(source, reader, json::Type::Object, "header must be a JSON object");
    reader.begin_object();
    while (std::optional<std::string> key = reader.next_key()) {
      if (*key == kMetadataKey) {
        header.metadata = read_metadata(source, reader);
      } else {
        header.tensors.push_back(read_entry(source, reader, std::move(*key)));
      }
    }
    reader.finish();
  } catch (const json::ParseError& e) {
    fail(source, "header is not valid JSON (", e.what(), ")");
  }
}

// Sorted by offsets, the tensors must tile [0, data_bytes) exactly.
void check_tiling(const ByteSource& source, std::vector<TensorInfo>& tensors, int64_t data_bytes) {
  std::stable_sort(tensors.begin(), tensors.end(), [](const TensorInfo& a, const TensorInfo& b) {
    return std::pair(a.data_begin, a.data_end) < std::pair(b.data_begin, b.data_end);
  });
  int64_t covered = 0;
  const TensorInfo* previous = nullptr;
  for (const TensorInfo& info : tensors) {
    if (info.data_begin < covered) {
      fail(source, "tensors '", previous->name, "' and '", info.name, "' overlap (bytes [",
           info.data_begin, ", ", covered, ") of the data buffer)");
    }
    if (info.data_begin > covered) {
      fail(source, "gap in the data buffer: bytes [", covered, ", ", info.data_begin,
           ") belong to no tensor (before '", info.name, "')");
    }
    if (info.data_end > data_bytes) {
      fail(source, "tensor '", info.name, "' ends at byte ", info.data_end, " of the data buffer, which has only ",
           data_bytes, " bytes (truncated file?)");
    }
    covered = info.data_end;
    previous = &info;
  }
  if (covered != data_bytes) {
    fail(source, "the data buffer has ", data_bytes, " bytes but the tensors cover only ", covered,
         " (trailing bytes after the last tensor)");
  }
}

uint64_t read_le_u64(const uint8_t bytes[8]) {
  uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = (value << 8) | bytes[i];
  return value;
}

// The header text after checking its length field: at most kMaxHeaderBytes (Python's
// MAX_HEADER_SIZE, 100,000,000 bytes: a length past it means no safetensors file, and
// reading stays bounded) and within the file. Sets header_bytes and file_bytes.
std::string read_header_text(const ByteSource& source, Header& header) {
  header.file_bytes = source.size();
  if (header.file_bytes < 8) {
    fail(source, "file is ", header.file_bytes, " bytes, too short for the 8-byte header length");
  }
  uint8_t length_bytes[8];
  source.read(0, length_bytes, 8);
  const uint64_t length = read_le_u64(length_bytes);
  if (length > static_cast<uint64_t>(kMaxHeaderBytes)) {
    fail(source, "header length ", length, " exceeds the limit of ", kMaxHeaderBytes,
         " bytes (not a safetensors file?)");
  }
  if (static_cast<int64_t>(length) > header.file_bytes - 8) {
    fail(source, "header length ", length, " runs past the end of the file (", header.file_bytes,
         " bytes; truncated file?)");
  }
  header.header_bytes = static_cast<int64_t>(length);
  std::string text(static_cast<size_t>(length), '\0');
  source.read(8, text.data(), header.header_bytes);
  return text;
}

Header parse_header(const ByteSource& source) {
  Header header;
  // The text is a temporary: freed once its entries are read, before the tiling check.
  read_entries(source, read_header_text(source, header), header);
  check_tiling(source, header.tensors, header.file_bytes - 8 - header.header_bytes);
  return header;
}

void check_bool_bytes(const ByteSource& source, const TensorInfo& info, const Tensor& tensor) {
  const auto* bytes = static_cast<const uint8_t*>(tensor.data_ptr());
  for (int64_t i = 0; i < info.nbytes(); ++i) {
    if (bytes[i] > 1) {
      fail(source, "BOOL tensor '", info.name, "' holds byte ", int(bytes[i]), " at element ", i,
           " (must be 0 or 1)");
    }
  }
}

// Note [Tensor checksums]: the checksums the metadata lists, one per tensor in
// data-buffer order; nullopt when the file has none.
std::optional<std::vector<uint32_t>> read_checksums(const ByteSource& source, const Header& header) {
  const auto found = header.metadata.find(std::string(kChecksumKey));
  if (found == header.metadata.end()) return std::nullopt;
  const std::vector<std::string> words = split_list(found->second, ' ');
  if (words.size() != header.tensors.size()) {
    fail(source, "metadata \"", kChecksumKey, "\" lists ", words.size(), " checksums for ", header.tensors.size(),
         " tensors");
  }
  std::vector<uint32_t> checksums;
  for (const std::string& word : words) {
    const bool hex = word.size() == 8 && word.find_first_not_of("0123456789abcdef") == std::string::npos;
    if (!hex) fail(source, "metadata \"", kChecksumKey, "\" holds \"", json::printable(word),
                   "\", which is not 8 lowercase hex digits");
    checksums.push_back(static_cast<uint32_t>(std::stoul(word, nullptr, 16)));
  }
  return checksums;
}

void check_checksum(const ByteSource& source, const TensorInfo& info, const Tensor& tensor, uint32_t expected) {
  const uint32_t found = crc32c(tensor.data_ptr(), static_cast<size_t>(info.nbytes()));
  if (found != expected) {
    fail(source, "tensor '", info.name, "' does not match its checksum (CRC-32C ", crc32c_hex(expected),
         " when written, ", crc32c_hex(found), " now): the file was damaged after Kiln wrote it, or rewritten by a "
         "program that kept Kiln's \"", kChecksumKey, "\" metadata with other tensor values");
  }
}

Loaded load_from(const ByteSource& source, Device device) {
  Header header = parse_header(source);
  const std::optional<std::vector<uint32_t>> checksums = read_checksums(source, header);
  header.metadata.erase(std::string(kChecksumKey));
  for (const TensorInfo& info : header.tensors) {
    if (!to_kiln_dtype(info.dtype)) {
      fail(source, "tensor '", info.name, "' has dtype ", info.dtype,
           ", which Kiln tensors cannot hold (they hold F32, F64, F16, BF16, I64, I32, U8, BOOL)");
    }
  }
  Loaded loaded;
  loaded.metadata = std::move(header.metadata);
  const int64_t data_start = 8 + header.header_bytes;
  for (size_t i = 0; i < header.tensors.size(); ++i) {
    const TensorInfo& info = header.tensors[i];
    Tensor tensor = empty(info.shape, {.dtype = *to_kiln_dtype(info.dtype)});
    if (info.nbytes() > 0) source.read(data_start + info.data_begin, tensor.data_ptr(), info.nbytes());
    if (checksums) check_checksum(source, info, tensor, (*checksums)[i]);
    if (tensor.dtype() == DType::Bool) check_bool_bytes(source, info, tensor);
    if (device != Device::cpu()) tensor = tensor.to(device);
    loaded.tensors.emplace_back(info.name, std::move(tensor));
  }
  return loaded;
}

}  // namespace

int64_t TensorInfo::numel() const { return checked_numel(shape, "safetensors"); }

Loaded load(const std::string& path, Device device) { return load_from(FileSource(path, "safetensors"), device); }

Loaded load_from_bytes(std::span<const uint8_t> bytes, Device device, std::string_view source) {
  return load_from(MemorySource(bytes, source), device);
}

Header read_header(const std::string& path) { return parse_header(FileSource(path, "safetensors")); }

Header read_header_from_bytes(std::span<const uint8_t> bytes, std::string_view source) {
  return parse_header(MemorySource(bytes, source));
}

}  // namespace kiln::safetensors
