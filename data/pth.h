// PyTorch checkpoint files (what torch.save writes: .pth, .pt, .ckpt), read without Python
// and without running any of the file's code (the restricted unpickler, data/pickle.h).
//
// Two formats:
//   zip (PyTorch >= 1.6): an archive with one top folder (its name varies) holding
//     data.pkl (the pickled object), byteorder ("little" or "big"), version, and data/<key>
//     for each storage: its raw elements. The pickle names a storage by a persistent id
//     ('storage', torch.FloatStorage, key, location, numel).
//   legacy (earlier, or _use_new_zipfile_serialization=False; MedicalNet's 2019 weights):
//     five pickles back to back: the magic number 0x1950a86a20f9469cfc6c, the protocol
//     version 1001, the system info (byte order), the object (persistent ids ('storage',
//     type, key, location, numel, view) where a view is (key, offset, numel) of another
//     storage), and the list of storage keys; then each storage in that order as an int64
//     element count followed by its elements.
// A tensor is a strided view of a storage (_rebuild_tensor_v2: offset, sizes, strides); it
// loads as a contiguous CPU tensor of the storage's dtype (int8/int16 widened to int32),
// checked to lie inside its storage. Storages shared by several tensors are read once.
// Storages saved from a GPU (torch.cuda.FloatStorage, location "cuda:0") load on the CPU.
//
// Note [pth validation]: the zip container as data/zip.h checks it; exactly one data.pkl;
// every storage member present, and exactly numel x element size bytes; the pickle as
// data/pickle.h refuses it (any global outside the allow list, object-building opcodes,
// truncation, bounds); persistent ids of the expected shape, known storage types, one
// type and count per key; tensor sizes and strides non-negative, their element count and
// furthest element computed with overflow checks and inside the storage (or view); in the
// legacy format the magic number, the protocol version, the declared counts equal to
// the pickled ones, and every byte of every storage inside the file. Memory stays bounded
// by the file's size: the unpickler's values by a byte budget (data/pickle.h); the walk
// by kMaxWalkBytes, with keys of at most kMaxKeyBytes and leaf texts cut at kMaxLeafText;
// the storages (a zip member may be deflated) at kMaxInflation times the file; and, as
// each tensor loads as its own copy, a tensor may not have more elements than its
// storage (an expanded view), and all of them together at most kMaxGrowth times the
// file's bytes. Walking the object
// is bounded in depth (kMaxDepth) and in visits (kMaxVisits), so nesting bombs and shared-
// reference bombs are errors. Dict keys must be strings or ints. Every violation is a
// kiln::Error naming the file.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/safetensors.h"  // NamedTensors

namespace kiln::data::pth {

inline constexpr int kMaxDepth = 200;
inline constexpr int64_t kMaxVisits = 1'000'000;
inline constexpr size_t kMaxKeyBytes = 4096;         // one dict key
inline constexpr size_t kMaxLeafText = 256;          // a leaf's text is cut there ("... (N bytes)")
inline constexpr int64_t kMaxWalkBytes = 256 << 20;  // the paths and texts the walk builds
inline constexpr int64_t kMaxGrowth = 4;             // tensors' bytes at most 4x the file's (+ 64 MiB)
inline constexpr int64_t kMaxInflation = 64;         // storages' bytes at most 64x the file's (+ 64 MiB)

struct Checkpoint {
  std::string format;  // "zip" or "legacy"
  // Every tensor in the object, by its path: dict keys and list indices joined by '.'
  // ("state_dict.module.conv1.weight", "optimizer.state.0.exp_avg"), in the file's order.
  safetensors::NamedTensors tensors;
  // Every other leaf, by path, as Python would print it ("epoch" -> "7", "arch" -> "'resnet50'").
  std::vector<std::pair<std::string, std::string>> others;
  // For each tensor, the key of the top-level dict entry it lies under ("" when the object
  // is not a dict): what state_dict() selects by, never a prefix of the flattened path.
  std::vector<std::string> tensor_roots;
};

Checkpoint load(const std::string& path);
// A checkpoint in memory (tests, fuzzing); `name` is what messages call it.
Checkpoint load_from_bytes(std::span<const uint8_t> bytes, std::string_view name);

// The model weights in a checkpoint: the tensors under the first top-level entry named
// "state_dict", "model_state_dict", "model", "state", "net" or "weights" that holds
// tensors, keys relative to it; or every tensor when there is none (the object itself is
// the state dict: a key "model.weight" of a plain state dict is not an entry "model"). `found_under` gets the
// key used ("" for the top level).
safetensors::NamedTensors state_dict(const Checkpoint& checkpoint, std::string* found_under = nullptr);

}  // namespace kiln::data::pth
