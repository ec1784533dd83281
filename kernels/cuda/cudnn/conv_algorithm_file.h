// Saving and loading the conv algorithm cache (conv_algorithm_cache.h) as a text file,
// so that a second run of the same model searches nothing. Host C++ with no CUDA header:
// like conv_algorithm_cache.cpp it is built in every configuration (the object library
// kiln_conv_algorithm_cache), so its tests, and a fuzzer of read_algorithm_bytes, run in a
// CPU-only build.
//
// Note [Algorithm cache file]: a few header lines, then one line per entry:
//
//   kiln-cudnn-algorithms 1
//   gpu NVIDIA H200
//   cudnn 91900
//   entries 2
//   pass=forward device=0 dtype=float16 math=tensor_op deterministic=0 groups=1
//     input=8,64,28,28,28 input_strides=1404928,21952,784,28,1 weight=64,64,3,3,3
//     stride=1,1,1 padding=1,1,1 dilation=1,1,1 searched=1 algos=1:tensor_op:1048576:1,0:default:0:1
//
// (an entry is one line; it is wrapped here). Fields come in this order, separated by
// single spaces; each algorithm is algo:math:workspace_bytes:deterministic, best first. Algorithm numbers
// and their speeds belong to one GPU model and one cuDNN version, so the file says which:
// a file for another GPU or cuDNN loads nothing (a report says so; it is not an error).
// Writing goes through Kiln's one atomic writer (Note [Atomic save] in core/atomic_file.h):
// a crash leaves the old file or the new one, never half of one; two threads saving one
// path each write their own temporary file; a symlink stays a symlink and the mode is
// kept; a failing folder fsync after the rename is reported (SaveReport.durable), not
// thrown. Reading trusts nothing: every field is checked, sizes are bounded before
// anything is allocated, and a malformed file is a kiln::Error naming the file, the line
// and what is wrong, which leaves the cache as it was.
//
// A well-formed entry then passes the algorithm rules, through the same usable_ranking
// that cuDNN's heuristics and a search pass through (Note [Usable algorithms]): an
// algorithm number cuDNN does not define for the pass, a non-deterministic algorithm in a
// deterministic key, a tensor-op algorithm in an FMA key (which would let TF32 in). An
// entry holding any of them is left out whole, with a line in LoadReport.dropped naming
// the file, the line and why, and the rest of the file loads: the line is well formed, so
// the file is ours, maybe from a Kiln whose rules were looser (loaded entries were once
// cached and saved again unchecked), and leaving the entry out costs one search of its
// key, while refusing the file would cost a search of every key. Each kept algorithm is
// kept as it runs (run_as: FMA math in an FMA key), as a search's are.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/cudnn.h"
#include "kernels/cuda/cudnn/conv_algorithm_cache.h"

namespace kiln::cuda {

// Which GPU and cuDNN a file's algorithms were measured on.
struct AlgorithmCacheIdentity {
  std::string gpu;            // the device names, e.g. "NVIDIA H200"
  int64_t cudnn_version = 0;  // cudnnGetVersion(), e.g. 91900

  friend bool operator==(const AlgorithmCacheIdentity&, const AlgorithmCacheIdentity&) = default;
};

// A file larger than this is not an algorithm cache (a model has hundreds of entries).
inline constexpr int64_t kMaxAlgorithmFileBytes = int64_t{64} << 20;

// Writes `entries` to `path` atomically; the report says how many and whether the save is
// durable. Arguments in the order of Note [Save and load argument order]
// (core/safetensors.h): what, path, options.
cudnn::SaveReport write_algorithm_file(const std::vector<std::pair<ConvKey, ConvAlgorithmCache::Entry>>& entries,
                                       const std::string& path, const AlgorithmCacheIdentity& identity);

// Adds the entries of `path` that the rules accept to `cache` when the file's identity is
// `identity`.
cudnn::LoadReport read_algorithm_file(ConvAlgorithmCache& cache, const std::string& path,
                                      const AlgorithmCacheIdentity& identity);

// The same from a whole file's bytes, `source` naming it in messages: the parser without
// a file system, e.g. for a fuzzer.
cudnn::LoadReport read_algorithm_bytes(ConvAlgorithmCache& cache, std::string_view bytes,
                                       const AlgorithmCacheIdentity& identity, std::string_view source = "<memory>");

}  // namespace kiln::cuda
