// Writing safetensors files (core/safetensors.h): the header is built as Python's writer
// builds it (Note [safetensors write order]), with each tensor's checksum in the metadata
// (Note [Tensor checksums]), then the header and each tensor's bytes go to a sink: a
// byte vector, or an AtomicFile (Note [Atomic save] in core/atomic_file.h).
#include <algorithm>
#include <numeric>
#include <optional>
#include <set>

#include "core/atomic_file.h"
#include "core/autograd/grad_mode.h"
#include "core/crc32c.h"
#include "core/error.h"
#include "core/json.h"
#include "core/safetensors.h"
#include "core/safetensors_format.h"

namespace kiln::safetensors {
namespace {

class ByteSink {
 public:
  virtual ~ByteSink() = default;
  virtual void write(const void* data, size_t n) = 0;
  // Overwrites n bytes written before, from `offset`.
  virtual void write_at(size_t offset, const void* data, size_t n) = 0;
};

class VectorSink final : public ByteSink {
 public:
  void write(const void* data, size_t n) override {
    const auto* bytes = static_cast<const uint8_t*>(data);
    bytes_.insert(bytes_.end(), bytes, bytes + n);
  }
  void write_at(size_t offset, const void* data, size_t n) override {
    std::copy_n(static_cast<const uint8_t*>(data), n, bytes_.begin() + static_cast<std::ptrdiff_t>(offset));
  }
  std::vector<uint8_t>& bytes() { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

// Note [Atomic save] (core/atomic_file.h) as a sink.
class AtomicFileSink final : public ByteSink {
 public:
  explicit AtomicFileSink(AtomicFile& file) : file_(file) {}
  void write(const void* data, size_t n) override { file_.write(data, n); }
  void write_at(size_t offset, const void* data, size_t n) override {
    file_.write_at(static_cast<int64_t>(offset), data, n);
  }

 private:
  AtomicFile& file_;
};

// ---- the header ---------------------------------------------------------------------------

// A header string the reader would refuse (safetensors.cpp parses the header as JSON,
// whose strings must be valid UTF-8) is refused here, in the reader's words, before any
// byte is written.
void check_utf8(std::string_view what, const std::string& text) {
  if (const std::optional<json::Utf8Problem> problem = json::find_invalid_utf8(text)) {
    KILN_CHECK(false, "safetensors: save: ", what, " \"", json::printable(text), "\" is not valid UTF-8: ",
               problem->what, " in a string at byte ", problem->offset);
  }
}

void check_metadata(const Metadata& metadata) {
  for (const auto& [key, value] : metadata) {
    check_utf8("metadata key", key);
    check_utf8("metadata value of \"" + json::printable(key) + "\"", value);
  }
}

void check_tensors(const NamedTensors& tensors) {
  std::set<std::string_view> names;
  for (const auto& [name, tensor] : tensors) {
    check_utf8("tensor name", name);
    KILN_CHECK(name != kMetadataKey, "safetensors: save: the name \"", kMetadataKey,
               "\" is reserved for the metadata");
    KILN_CHECK(names.insert(name).second, "safetensors: save: two tensors are named '", name, "'");
    KILN_CHECK(tensor.defined(), "safetensors: save: tensor '", name, "' is undefined");
  }
}

// Note [safetensors write order]: indices of `tensors` by alignment rank, largest first,
// then by name.
std::vector<size_t> write_order(const NamedTensors& tensors) {
  std::vector<size_t> order(tensors.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const int rank_a = alignment_rank(tensors[a].second.dtype());
    const int rank_b = alignment_rank(tensors[b].second.dtype());
    if (rank_a != rank_b) return rank_a > rank_b;
    return tensors[a].first < tensors[b].first;
  });
  return order;
}

json::Value shape_json(const std::vector<int64_t>& shape) {
  json::Value array = json::Value::array();
  for (const int64_t dim : shape) array.push_back(json::Value::integer(dim));
  return array;
}

std::string header_text(const NamedTensors& tensors, const std::vector<size_t>& order,
                        const Metadata& metadata) {
  json::Value root = json::Value::object();
  if (!metadata.empty()) {
    json::Value entries = json::Value::object();
    for (const auto& [key, value] : metadata) entries.add(key, json::Value::string(value));
    root.add(std::string(kMetadataKey), std::move(entries));
  }
  int64_t offset = 0;
  for (const size_t index : order) {
    const auto& [name, tensor] = tensors[index];
    const int64_t nbytes = tensor.numel() * static_cast<int64_t>(tensor.element_size());
    json::Value entry = json::Value::object();
    entry.add("dtype", json::Value::string(std::string(dtype_code(tensor.dtype()))));
    entry.add("shape", shape_json(tensor.sizes()));
    entry.add("data_offsets", json::Value::array({json::Value::integer(offset),
                                                  json::Value::integer(offset + nbytes)}));
    root.add(name, std::move(entry));
    offset += nbytes;
  }
  std::string text = json::dump(root);
  text.append((8 - text.size() % 8) % 8, ' ');  // the data buffer starts 8-aligned
  KILN_CHECK(static_cast<int64_t>(text.size()) <= kMaxHeaderBytes, "safetensors: save: the header would be ",
             text.size(), " bytes, over the ", kMaxHeaderBytes, "-byte limit readers accept");
  return text;
}

// One tensor at a time on the host, so saving GPU weights needs no second full copy.
Tensor host_bytes_of(const Tensor& tensor) {
  NoGradGuard no_grad;
  return tensor.detach().to(Device::cpu()).contiguous();
}

// Note [Tensor checksums]: the checksums are computed from the bytes as they are written,
// each tensor copied to the host once. The header, written first, holds a placeholder of
// their exact width (8 hex digits each, spaces between), filled in at the end.
void write_safetensors(ByteSink& sink, const NamedTensors& tensors, Metadata metadata, Checksums checksums) {
  check_tensors(tensors);
  check_metadata(metadata);
  const std::vector<size_t> order = write_order(tensors);
  const std::string key(kChecksumKey);
  metadata.erase(key);
  if (checksums == Checksums::Write)
    metadata[key] = order.empty() ? std::string() : std::string(order.size() * 9 - 1, '0');
  const std::string header = header_text(tensors, order, metadata);
  uint8_t length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<uint8_t>(uint64_t{header.size()} >> (8 * i));
  sink.write(length, 8);
  sink.write(header.data(), header.size());
  std::string list;
  for (const size_t index : order) {
    const Tensor host = host_bytes_of(tensors[index].second);
    const size_t bytes = static_cast<size_t>(host.numel()) * host.element_size();
    if (bytes > 0) sink.write(host.data_ptr(), bytes);
    if (checksums == Checksums::Omit) continue;
    if (!list.empty()) list += ' ';
    list += crc32c_hex(crc32c(host.data_ptr(), bytes));
  }
  if (checksums == Checksums::Omit || list.empty()) return;
  // The key's value is the one place its quoted name is followed by ":" unescaped: a name
  // or value holding the same text has its quotes escaped in the header.
  const std::string opening = "\"" + key + "\":\"";
  const size_t at = header.find(opening);
  KILN_ASSERT(at != std::string::npos, "safetensors: the checksum placeholder is missing from the header");
  sink.write_at(8 + at + opening.size(), list.data(), list.size());
}

}  // namespace

SaveStatus save(const NamedTensors& tensors, const std::string& path, const Metadata& metadata,
                Checksums checksums) {
  check_tensors(tensors);  // before a temporary file exists
  AtomicFile file(path, "safetensors");
  AtomicFileSink sink(file);
  write_safetensors(sink, tensors, metadata, checksums);
  return file.commit();
}

std::vector<uint8_t> save_to_bytes(const NamedTensors& tensors, const Metadata& metadata, Checksums checksums) {
  VectorSink sink;
  write_safetensors(sink, tensors, metadata, checksums);
  return std::move(sink.bytes());
}

}  // namespace kiln::safetensors
