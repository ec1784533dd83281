// safetensors files: the weights and checkpoint format (docs/design.md), spec-compatible with
// Python's `safetensors` package (github.com/huggingface/safetensors).
//
// Layout of a file:
//   bytes [0, 8)        N, the header length, a little-endian uint64
//   bytes [8, 8 + N)    the header: a UTF-8 JSON object, maybe padded with trailing spaces
//                       {"__metadata__": {"k": "v", ...},            (optional)
//                        "name": {"dtype": "F32", "shape": [2, 3],
//                                 "data_offsets": [begin, end]}, ...}
//   bytes [8 + N, end)  the data buffer; each tensor's bytes are [begin, end) of it,
//                       row-major, little-endian
//
// Note [safetensors validation] (what Python's reader enforces, and so do we): N at most
// 100,000,000 bytes (the Rust crate's MAX_HEADER_SIZE) and within the file; the header
// valid UTF-8 JSON; each entry with a known dtype, non-negative integer shape, and
// data_offsets [begin, end] with end - begin = numel * itemsize (no overflow); sorted by
// offsets, the entries tile the data buffer exactly from 0 to its end: no gap, no
// overlap, nothing after the last.
// On top of Python we reject duplicate names (Python keeps the last one silently) and,
// in load(), BOOL bytes other than 0 and 1 (a C++ bool holds nothing else).
// Every violation is a kiln::Error naming the file and the problem; nothing is allocated
// before the sizes it depends on are checked against the file's size, and the header is
// read in memory proportional to its size (Note [safetensors header memory]).
//
// Note [safetensors write order] (Python's writer, reproduced byte for byte): tensors are
// laid out by dtype alignment, largest first (I64, F64, F32, I32, BF16, F16, U8, BOOL,
// the order of the Rust crate's Dtype enum), then by name (bytewise); the header lists
// "__metadata__" first (its keys sorted: Python's order is a hash map's) then the tensors
// in that order, as compact JSON, padded with spaces to a multiple of 8 bytes so the data
// buffer starts 8-aligned.
//
// Note [Tensor checksums]: a bit flipped in a tensor's bytes (a failing disk, a bad copy)
// leaves a file every reader accepts, and a resumed run would train on silently wrong
// weights. So Kiln's writer stores the CRC-32C (core/crc32c.h) of each tensor's bytes in
// the metadata, under "kiln.crc32c": 8 lowercase hex digits per tensor, in data-buffer
// order, separated by spaces. load() checks each tensor against it as it is read and
// names the one that differs; a file without the key (written by Python, or with
// Checksums::Omit) loads unchecked, as before. The key is the writer's own: one given in
// `metadata` is replaced, and load() does not return it (read_header, which describes
// the file, does). It is metadata, so Python's safetensors reads these files unchanged;
// with Checksums::Omit the bytes are Python's own, byte for byte. Cost: one CRC pass
// over each tensor when written and when read (the SSE4.2 instruction: several GB/s). The
// writer checksums each tensor's host copy as it writes it: the header goes first with a
// placeholder of the list's exact width (8 hex digits per tensor, spaces between), filled
// in at the end.
//
// Note [Save and load argument order]: every save and load function in Kiln takes what is
// saved (or what is loaded into) first, then the path, then options, as PyTorch's
// torch.save(obj, f) and Python safetensors' save_file(tensors, filename, metadata):
//   safetensors::save(tensors, path, metadata)    nn::save_weights(module, path, metadata)
//   optim::save_state_dict(state, path)           nn::load_weights(module, path, strict)
// A function given nothing but the path (and options) takes the path first:
// safetensors::load(path, device), optim::load_state_dict_file(path, device),
// cudnn::save_algorithm_cache(path).
//
// Note [All-or-nothing loads]: every load_state_dict (nn::Module, optim::Optimizer, the
// learning-rate schedulers, GradScaler) loads everything or changes nothing, whatever
// fails part-way: a bad entry, or memory running out. Each runs in two phases:
//   stage   everything that can fail, with nothing of the object changed yet: parse and
//           check every entry; allocate every new tensor (an optimizer's state copies and
//           float32 masters); convert every source into a fresh tensor of its
//           destination's dtype, shape and layout, so that what is left is a plain copy;
//   commit  only steps that cannot fail: moves and swaps of the staged values, and
//           copy_ of each staged source into its parameter or buffer, which allocates
//           nothing then (same dtype, same shape, contiguous: one memcpy on the CPU,
//           within a GPU, or from the host into a GPU).
// Parameters and buffers keep their identity (an optimizer and a layer hold handles to
// them): the values are copied in under no-grad, bumping their version counters, as
// PyTorch's load_state_dict does. What a commit cannot rule out is a GPU that has
// already failed (a sticky CUDA error, which every later call reports and nothing
// survives), user code it runs (CyclicLR's custom scale_fn) and std::bad_alloc from
// small host bookkeeping, which Kiln, like PyTorch, does not try to survive. The cost is
// memory: a converted source exists twice until the commit (loading float64 weights into
// a float32 model holds both). A host source for a GPU tensor is converted on the host,
// so loading a weights file into a GPU model takes no extra device memory. The tests
// inject an allocation failure at every point of each load and compare the object bit
// for bit (Note [Injected allocation failures] in core/fault_injection.h).
//
// Big-endian hosts are not supported (a static_assert in safetensors.cpp).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/atomic_file.h"
#include "core/device.h"
#include "core/dtype.h"
#include "core/tensor.h"

namespace kiln::safetensors {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;
using Metadata = std::map<std::string, std::string>;

// Note [Tensor checksums]: the metadata key, and whether save() writes it.
inline constexpr std::string_view kChecksumKey = "kiln.crc32c";
enum class Checksums { Write, Omit };

// One header entry. `dtype` is the file's code ("F32", "I8", ...): every whole-byte
// safetensors dtype is accepted here, so read_header describes any valid file; load()
// then needs one Kiln holds (to_kiln_dtype).
struct TensorInfo {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  int64_t data_begin = 0;  // byte offsets within the data buffer
  int64_t data_end = 0;
  int64_t numel() const;
  int64_t nbytes() const { return data_end - data_begin; }
};

struct Header {
  std::vector<TensorInfo> tensors;  // in data-buffer order (by offset)
  Metadata metadata;
  int64_t header_bytes = 0;         // N, padding included
  int64_t file_bytes = 0;           // 8 + N + data buffer
};

struct Loaded {
  NamedTensors tensors;  // in data-buffer order, i.e. Note [safetensors write order]
  Metadata metadata;
};

// "F32" <-> DType for the eight dtypes Kiln holds; nullopt for other codes.
std::optional<DType> to_kiln_dtype(std::string_view code);
std::string_view dtype_code(DType dtype);

// Writes `tensors` (any device, any layout: each is copied to the CPU and made contiguous
// while writing, one at a time) with `metadata`, atomically (Note [Atomic save] in
// core/atomic_file.h): into a temporary file beside the target, fsync'd, renamed over it,
// then the folder fsync'd; a symlink stays a symlink and an existing file keeps its mode.
// On any error the temporary file is removed and an existing `path` is left as it was.
// Returns whether the save is durable: a folder fsync failing after the rename is not an
// error (the file is in place) but status.warning, for the caller to show.
// Names must be unique, and "__metadata__" is reserved. Each tensor's checksum goes in the
// metadata unless Checksums::Omit (Note [Tensor checksums]). Argument order: Note [Save
// and load argument order].
SaveStatus save(const NamedTensors& tensors, const std::string& path, const Metadata& metadata = {},
                Checksums checksums = Checksums::Write);
// The same bytes in memory.
std::vector<uint8_t> save_to_bytes(const NamedTensors& tensors, const Metadata& metadata = {},
                                   Checksums checksums = Checksums::Write);

// Reads every tensor onto `device` (through the CPU). Validates the whole file first, and
// each tensor against its checksum when the file has them (Note [Tensor checksums]).
Loaded load(const std::string& path, Device device = Device::cpu());
// From a whole file's bytes; `source` names it in error messages.
Loaded load_from_bytes(std::span<const uint8_t> bytes, Device device = Device::cpu(),
                       std::string_view source = "<memory>");

// Reads and validates the header only (no tensor data is read): for `kiln inspect`.
Header read_header(const std::string& path);
Header read_header_from_bytes(std::span<const uint8_t> bytes, std::string_view source = "<memory>");

}  // namespace kiln::safetensors
