// kiln::cudnn: the switches and the algorithm cache of cuDNN convolutions, as
// torch.backends.cudnn has them. Core knows nothing of CUDA: the switches live here, and
// the cache operations are part of the Backend interface (core/backend.h, "convolution
// algorithm cache"), answered by the CUDA backend. Without CUDA the counters are zero,
// clearing does nothing, and saving or loading is a "CUDA is not available: ..." error.
//
//   kiln::cudnn::set_benchmark(true);            // time algorithms once per shape
//   ... train ...
//   kiln::cudnn::save_algorithm_cache("algos.txt");
//   // next run: load_algorithm_cache("algos.txt") and no search runs again
//
// How cuDNN's algorithm is chosen: kernels/cuda/cudnn/conv_algorithm_cache.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::cudnn {

// Benchmark mode: the first convolution of each key (shapes, dtype, layout, ...) times
// cuDNN's algorithms (cudnnFind*AlgorithmEx) and later ones reuse the fastest. Off: cuDNN's
// heuristics pick, which costs nothing up front. Off by default.
void set_benchmark(bool enabled);
bool benchmark();

// Deterministic mode: only algorithms that give bit-identical results from run to run
// (some backward algorithms sum with atomics in a varying order). Off by default.
void set_deterministic(bool enabled);
bool deterministic();

// Both switches set for a scope and put back as they were when it ends (a test that fails,
// or a trainer's set-up probe that must not search, leaves no trace).
//
//   const cudnn::ScopedMode heuristics(/*benchmark=*/false, cudnn::deterministic());
class ScopedMode {
 public:
  ScopedMode(bool benchmark, bool deterministic);
  ~ScopedMode();
  ScopedMode(const ScopedMode&) = delete;
  ScopedMode& operator=(const ScopedMode&) = delete;

 private:
  bool benchmark_;
  bool deterministic_;
};

// How each algorithm lookup of one pass was answered.
struct PassStats {
  int64_t finds = 0;              // searches run (benchmark mode, key not searched yet)
  int64_t heuristic_lookups = 0;  // cuDNN heuristics asked (default mode, key not cached)
  int64_t hits = 0;               // answered from the cache
};

struct Stats {
  PassStats forward;
  PassStats backward_data;    // gradient of the input
  PassStats backward_filter;  // gradient of the weight
};

// Counters since the start or the last reset_stats() (which also zeroes conv_uses' calls).
Stats stats();
void reset_stats();

// Note [A step's speed of light]: how fast could a training step be with the convolutions
// cuDNN has for its shapes? Its convolutions take at least the sum, over every one the step
// runs, of the fastest time a benchmark-mode search measured for that key; everything
// else must at least move the bytes no fusion removes (the optimizer's parameters,
// gradients and state) at the copy peak. bench/train_step adds the two for one step
// (kiln_train_step --speed-of-light 1): conv_uses() after reset_stats() and one step says
// which keys ran, how often, and each one's fastest time.
struct ConvUse {
  std::string key;         // pass, dtype, math and shapes, as error messages describe a key
  int64_t calls = 0;       // convolutions of this key since reset_stats()
  double fastest_ms = -1;  // the fastest usable algorithm a search timed; < 0 when none was
                           // timed in this process (heuristics, or loaded from a file)
};
// Every cached key (calls 0 included), ordered by key; empty without CUDA.
std::vector<ConvUse> conv_uses();
// Forgets every cached choice (the next convolution of each key looks up or searches again).
void clear_algorithm_cache();

// What save_algorithm_cache did. The file is written whenever it returns.
struct SaveReport {
  int64_t entries = 0;   // entries written
  bool durable = true;   // false: the folder's fsync failed after the rename (Note [Atomic save])
  std::string message;   // one line: what was written, and the durability warning if any
};

// Writes the cache to `path` atomically (Note [Atomic save] in core/atomic_file.h: a
// temporary file beside it, then a rename; a symlink stays a symlink, the mode is kept).
// (What is saved is the process's one cache, so the path is the only argument: Note [Save
// and load argument order] in core/safetensors.h.)
SaveReport save_algorithm_cache(const std::string& path);

// What load_algorithm_cache did.
struct LoadReport {
  bool loaded = false;     // false when the file is for another GPU or cuDNN version
  int64_t entries = 0;     // entries added to the cache
  // One line per entry left out because the algorithm rules refuse it (deterministic mode,
  // TF32, unknown algorithm numbers): "<file>:<line>: <why>".
  std::vector<std::string> dropped;
  std::string message;     // one line saying what happened and why
};

// Adds the entries of a file written by save_algorithm_cache. A file written on another
// GPU or with another cuDNN version loads nothing (report.loaded false, the message says
// which differs); a corrupt or truncated file is a kiln::Error naming the file, the line
// and the problem; an entry the algorithm rules refuse is left out and listed in
// report.dropped (a search then ranks its key afresh).
LoadReport load_algorithm_cache(const std::string& path);

}  // namespace kiln::cudnn
