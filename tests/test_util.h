// Helpers shared by the test suites: random non-zero inputs, non-contiguous copies,
// per-dtype tolerances, closeness checks and error-message assertions, and for tests of
// what a failure part-way leaves behind, snapshots compared bit for bit and a loop that
// fails each allocation of an operation in turn; for tests of saves, a fresh folder and
// concurrent runs.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <utility>
#include <chrono>
#include <functional>
#include <vector>

#include "core/ops.h"

namespace kiln::testing {

// Whether this binary was built with AddressSanitizer (make sanitize), where whole
// end-to-end runs take ten times longer: the few tests that train on real data for
// minutes skip there, saying so, since `make test` runs them.
constexpr bool under_sanitizers() {
#if defined(__SANITIZE_ADDRESS__)
  return true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  return true;
#else
  return false;
#endif
#else
  return false;
#endif
}

// Values uniform in +-[0.5, 1.5] (never zero, away from kinks at 0), in `dtype`.
Tensor random_nonzero(const std::vector<int64_t>& sizes, DType dtype = DType::Float64, uint64_t seed = 1);
// Random values in any `dtype` on the CPU: floats non-zero in +-[0.5, 1.5]
// (random_nonzero), integers in [-9, 9] ([0, 9] for uint8), bools half true.
Tensor random_for(const std::vector<int64_t>& sizes, DType dtype, uint64_t seed);
// Uniform in [low, high).
Tensor random_uniform(const std::vector<int64_t>& sizes, double low, double high,
                      DType dtype = DType::Float64, uint64_t seed = 1);
// The same values laid out non-contiguously (every other element of a larger buffer).
Tensor non_contiguous(const Tensor& t);
// Gradient-check inputs: float64 leaves that require grad, with random non-zero values
// (away from the kinks at 0), contiguous or laid out non-contiguously.
Tensor grad_leaf(const std::vector<int64_t>& sizes, uint64_t seed);
Tensor strided_grad_leaf(const std::vector<int64_t>& sizes, uint64_t seed);
// A float64 leaf that requires grad, uniform in [low, high) (zero and kinks not avoided:
// for smooth functions, and for domains such as sqrt's set by low and high).
Tensor uniform_leaf(const std::vector<int64_t>& sizes, uint64_t seed, double low = -1.5, double high = 1.5);

// The tolerance table (STYLE 10): absolute and relative, per dtype.
struct Tolerance {
  double atol;
  double rtol;
};
Tolerance tolerance_for(DType dtype);

// Elementwise |actual - expected| <= atol + rtol |expected| (NaNs must match), with the
// first mismatch in the failure message. Shapes must be equal.
::testing::AssertionResult all_close(const Tensor& actual, const Tensor& expected, Tolerance tol);
::testing::AssertionResult all_close(const Tensor& actual, const Tensor& expected);
// Exact equality of shape, dtype and every value.
::testing::AssertionResult all_equal(const Tensor& actual, const Tensor& expected);
// Equality of shape, dtype and every byte (-0.0 is not 0.0; a NaN equals the same NaN).
::testing::AssertionResult bitwise_equal(const Tensor& actual, const Tensor& expected);

// The tensor called `name` in a list of named tensors (a state dict), or nullptr.
const Tensor* find_named(const std::vector<std::pair<std::string, Tensor>>& tensors, const std::string& name);

// A safetensors file's bytes from a header text: the 8-byte little-endian length, the
// header, then `data_bytes` bytes of data (0, 1, 0, 1, ...), for tests of the reader.
std::vector<uint8_t> safetensors_bytes(const std::string& header, size_t data_bytes);

// Flips one bit in the middle of the largest tensor's bytes of a safetensors file, in
// place (a failing disk's damage), and returns that tensor's name.
std::string flip_a_bit_of_the_largest_tensor(const std::string& path);

// Named tensors as they are now: which tensor each name holds (its identity), its version
// counter and its bytes, so a test can check after a failed operation that it changed none.
class TensorsSnapshot {
 public:
  using Named = std::vector<std::pair<std::string, Tensor>>;
  explicit TensorsSnapshot(const Named& tensors);
  // The same names in the same order, each the same tensor, at the same version, with the same bytes.
  ::testing::AssertionResult same_as(const Named& tensors) const;

 private:
  struct Entry {
    std::string name;
    Tensor tensor;
    uint32_t version;
    Tensor bytes;  // a CPU copy
  };
  std::vector<Entry> entries_;
};

// Note [Injected allocation failures] (core/fault_injection.h): runs `operation` with its
// allocation n failing, for n = 0, 1, ... until it runs to the end, and calls
// `expect_unchanged` after each failure. Returns the number of failures injected (the
// allocations the operation makes). An error other than the injected one fails the test.
int64_t fail_each_allocation(const std::function<void()>& operation,
                             const std::function<void()>& expect_unchanged);

// Runs `work(i)` on `threads` threads at once (i = 0 .. threads - 1) and returns, per
// thread, the message of the kiln::Error it threw ("" for none): for tests of concurrent
// saves and loads.
std::vector<std::string> errors_of_concurrent_runs(int threads, const std::function<void(int)>& work);

// Sets one of core/flags.h's switches for a scope and restores it, so a failing test
// leaves no trace: `const ScopedFlag tf32(set_allow_tf32_matmul, allow_tf32_matmul, true);`
class ScopedFlag {
 public:
  ScopedFlag(void (*set)(bool), bool (*get)(), bool value) : set_(set), previous_(get()) { set_(value); }
  ~ScopedFlag() { set_(previous_); }
  ScopedFlag(const ScopedFlag&) = delete;
  ScopedFlag& operator=(const ScopedFlag&) = delete;

 private:
  void (*set_)(bool);
  bool previous_;
};

// Runs `body` on a thread of its own and fails the test when it has not finished after
// `limit`: a hang in threaded code (the DataLoader, a parallel region) then fails the
// test instead of CI. The hung thread is abandoned (detached). What the body throws is
// rethrown here.
void with_watchdog(std::chrono::seconds limit, const std::function<void()>& body);

// A TCP port on 127.0.0.1 that was free a moment ago (the OS's pick): for a distributed
// job's store.
uint16_t free_port();

// A fresh empty folder (mkdtemp), removed with everything in it when it goes, also after a
// test took its write permission away.
class TempFolder {
 public:
  TempFolder();
  ~TempFolder();
  TempFolder(const TempFolder&) = delete;
  TempFolder& operator=(const TempFolder&) = delete;

  const std::filesystem::path& path() const { return path_; }
  // The path of `name` inside it.
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  // The names in it, sorted (what a save left behind).
  std::vector<std::string> entries() const;

 private:
  std::filesystem::path path_;
};

}  // namespace kiln::testing

// Expects `statement` to throw kiln::Error whose message contains every given substring.
#define EXPECT_KILN_ERROR(statement, ...)                                                   \
  do {                                                                                       \
    try {                                                                                    \
      statement;                                                                             \
      ADD_FAILURE() << "expected kiln::Error from: " #statement;                             \
    } catch (const ::kiln::Error& kiln_error_) {                                             \
      const std::string kiln_message_ = kiln_error_.what();                                  \
      for (const std::string& kiln_part_ : std::vector<std::string>{__VA_ARGS__}) {          \
        EXPECT_NE(kiln_message_.find(kiln_part_), std::string::npos)                         \
            << "message \"" << kiln_message_ << "\" lacks \"" << kiln_part_ << "\"";         \
      }                                                                                      \
    }                                                                                        \
  } while (0)
