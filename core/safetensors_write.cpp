// Writing safetensors files (core/safetensors.h): the header is built as Python's writer
// builds it (Note [safetensors write order]), then the header and each tensor's bytes go to
// a sink: a byte vector, or an AtomicFile (Note [Atomic save]).
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <optional>
#include <set>

#include "core/autograd/grad_mode.h"
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
};

class VectorSink final : public ByteSink {
 public:
  void write(const void* data, size_t n) override {
    const auto* bytes = static_cast<const uint8_t*>(data);
    bytes_.insert(bytes_.end(), bytes, bytes + n);
  }
  std::vector<uint8_t>& bytes() { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

// Note [Atomic save]: the bytes go to a new temporary file beside `path` (same folder, so
// the rename cannot cross file systems), which is fsync'd and renamed over `path` only
// when everything was written; the folder is then fsync'd so the rename itself survives a
// crash. Readers see the old file or the new one, never a half-written one. If anything
// fails before commit(), the destructor removes the temporary file. The temporary file is
// created with mode 0666 minus the umask, as a plain open() of `path` would be.
class AtomicFile final : public ByteSink {
 public:
  explicit AtomicFile(std::string path) : path_(std::move(path)) {
    static std::atomic<uint64_t> counter{0};
    const std::filesystem::path target(path_);
    const std::string folder = target.parent_path().empty() ? "." : target.parent_path().string();
    for (int attempt = 0; attempt < 100 && fd_ < 0; ++attempt) {
      temp_path_ = folder + "/." + target.filename().string() + ".tmp-" +
                   std::to_string(::getpid()) + "-" + std::to_string(counter.fetch_add(1));
      fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
      if (fd_ < 0 && errno != EEXIST) break;
    }
    KILN_CHECK(fd_ >= 0, "safetensors: cannot save ", path_, ": cannot create a temporary file in ",
               folder, ": ", std::strerror(errno));
  }
  ~AtomicFile() override {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(temp_path_.c_str());
  }
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, size_t n) override {
    const auto* bytes = static_cast<const char*>(data);
    while (n > 0) {
      const ssize_t written = ::write(fd_, bytes, n);
      if (written < 0 && errno == EINTR) continue;
      KILN_CHECK(written > 0, "safetensors: cannot save ", path_, ": write failed: ", std::strerror(errno));
      bytes += written;
      n -= static_cast<size_t>(written);
    }
  }

  void commit() {
    KILN_CHECK(::fsync(fd_) == 0, "safetensors: cannot save ", path_, ": fsync failed: ", std::strerror(errno));
    const int fd = fd_;
    fd_ = -1;
    KILN_CHECK(::close(fd) == 0, "safetensors: cannot save ", path_, ": close failed: ", std::strerror(errno));
    KILN_CHECK(::rename(temp_path_.c_str(), path_.c_str()) == 0, "safetensors: cannot save ", path_,
               ": rename failed: ", std::strerror(errno));
    committed_ = true;
    sync_folder();
  }

 private:
  void sync_folder() const {
    const std::filesystem::path folder = std::filesystem::path(path_).parent_path();
    const int dir = ::open(folder.empty() ? "." : folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0) return;  // the file is in place; only its durability is not guaranteed
    const int result = ::fsync(dir);
    const int error = errno;
    ::close(dir);
    // Some file systems cannot fsync a folder (EINVAL); the rename is then as durable as
    // they make it.
    KILN_CHECK(result == 0 || error == EINVAL, "safetensors: saved ", path_,
               " but fsync of its folder failed: ", std::strerror(error));
  }

  std::string path_;
  std::string temp_path_;
  int fd_ = -1;
  bool committed_ = false;
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

void write_safetensors(ByteSink& sink, const NamedTensors& tensors, const Metadata& metadata) {
  check_tensors(tensors);
  check_metadata(metadata);
  const std::vector<size_t> order = write_order(tensors);
  const std::string header = header_text(tensors, order, metadata);
  uint8_t length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<uint8_t>(uint64_t{header.size()} >> (8 * i));
  sink.write(length, 8);
  sink.write(header.data(), header.size());
  NoGradGuard no_grad;
  for (const size_t index : order) {
    // One tensor at a time on the host, so saving GPU weights needs no second full copy.
    const Tensor host = tensors[index].second.detach().to(Device::cpu()).contiguous();
    if (host.numel() > 0) sink.write(host.data_ptr(), host.numel() * host.element_size());
  }
}

}  // namespace

void save(const NamedTensors& tensors, const std::string& path, const Metadata& metadata) {
  check_tensors(tensors);  // before a temporary file exists
  AtomicFile file(path);
  write_safetensors(file, tensors, metadata);
  file.commit();
}

std::vector<uint8_t> save_to_bytes(const NamedTensors& tensors, const Metadata& metadata) {
  VectorSink sink;
  write_safetensors(sink, tensors, metadata);
  return std::move(sink.bytes());
}

}  // namespace kiln::safetensors
