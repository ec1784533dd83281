// The safetensors header reader's memory (Note [safetensors header memory] in
// core/safetensors.cpp): a large valid header is read in memory proportional to its size.
// Built as a json::Value tree, the headers below took 17 and 110 times their size (and a
// valid 99 MB header 7 GB); these tests fail on that reader.
//
// How it is measured: this file replaces the global operator new and delete of the whole
// kiln_tests binary with versions that count the bytes live (the usable size of each
// malloc'd block) and, while a test measures, their peak. Everything the reader keeps is
// allocated through operator new (strings, vectors, hash sets). Elsewhere the cost is one
// relaxed atomic add per allocation. (operator new[] and the nothrow and sized forms call
// these two by default; the aligned forms allocate on their own and are not counted.)
// Under AddressSanitizer the sanitizer's allocation hooks count instead (below).
#include <gtest/gtest.h>
#include <malloc.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <string>
#include <vector>

#include "core/safetensors.h"
#include "tests/test_util.h"

namespace {

std::atomic<int64_t> g_live_bytes{0};
std::atomic<int64_t> g_peak_bytes{0};
std::atomic<bool> g_measuring{false};

void count_bytes(int64_t delta) {
  const int64_t live = g_live_bytes.fetch_add(delta, std::memory_order_relaxed) + delta;
  if (!g_measuring.load(std::memory_order_relaxed)) return;
  int64_t peak = g_peak_bytes.load(std::memory_order_relaxed);
  while (live > peak && !g_peak_bytes.compare_exchange_weak(peak, live, std::memory_order_relaxed)) {
  }
}

}  // namespace

#if defined(__SANITIZE_ADDRESS__)
#define KILN_TEST_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KILN_TEST_UNDER_ASAN 1
#endif
#endif

#ifdef KILN_TEST_UNDER_ASAN
// Under AddressSanitizer (make sanitize) the sanitizer owns malloc and operator new, and a
// replaced operator new would pair with its delete across libraries it does not see; its
// allocation hooks report every block with its size instead.
#include <sanitizer/allocator_interface.h>

namespace {
void on_allocate(const volatile void*, size_t size) { count_bytes(static_cast<int64_t>(size)); }
void on_free(const volatile void* block) {
  count_bytes(-static_cast<int64_t>(__sanitizer_get_allocated_size(const_cast<const void*>(block))));
}
[[maybe_unused]] const int g_hooks_installed = __sanitizer_install_malloc_and_free_hooks(on_allocate, on_free);
}  // namespace
#else
// The standard behaviour (call the new-handler until it gives up, then throw), counted.
void* operator new(std::size_t size) {
  while (true) {
    if (void* block = std::malloc(size == 0 ? 1 : size)) {
      count_bytes(static_cast<int64_t>(malloc_usable_size(block)));
      return block;
    }
    const std::new_handler handler = std::get_new_handler();
    if (handler == nullptr) throw std::bad_alloc();
    handler();
  }
}

void operator delete(void* block) noexcept {
  if (block == nullptr) return;
  count_bytes(-static_cast<int64_t>(malloc_usable_size(block)));
  std::free(block);
}

void operator delete(void* block, std::size_t) noexcept { operator delete(block); }

#endif  // KILN_TEST_UNDER_ASAN

namespace kiln {
namespace {

namespace st = safetensors;

// The most bytes `work` had allocated at once beyond those live when it started.
template <typename Work>
int64_t peak_extra_bytes(const Work& work) {
  struct Measuring {
    Measuring() { g_measuring = true; }
    ~Measuring() { g_measuring = false; }
  };
  const int64_t before = g_live_bytes.load();
  g_peak_bytes = before;
  {
    Measuring measuring;
    work();
  }
  return g_peak_bytes.load() - before;
}

// Header memory, worst case per tensor: its TensorInfo (104 bytes; up to 3 of them while
// the vector of entries grows), its name twice (in the TensorInfo and in the reader's
// duplicate check, a hash-set node each) and its shape's block: about 450 bytes for the
// 80 bytes of JSON of each entry below, plus the header text itself.
TEST(SafetensorsMemory, ManySmallTensorsTakeAFewTimesTheHeader) {
  constexpr int64_t kTensors = 250'000;
  std::string header = "{";
  for (int64_t i = 0; i < kTensors; ++i) {
    header += (i == 0 ? "\"layer." : ",\"layer.") + std::to_string(i) +
              ".weight\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[" + std::to_string(4 * i) + "," +
              std::to_string(4 * i + 4) + "]}";
  }
  header += "}";
  const std::vector<uint8_t> file = testing::safetensors_bytes(header, 4 * kTensors);
  const auto header_bytes = static_cast<int64_t>(header.size());
  header = std::string();

  st::Header read;
  const int64_t peak = peak_extra_bytes([&] { read = st::read_header_from_bytes(file); });
  ASSERT_EQ(read.tensors.size(), static_cast<size_t>(kTensors));
  EXPECT_EQ(read.tensors[12345].name, "layer.12345.weight");
  EXPECT_EQ(read.tensors[12345].data_begin, 4 * 12345);
  EXPECT_LE(peak, 8 * header_bytes) << "header " << header_bytes << " bytes, peak " << peak
                                    << " bytes (" << static_cast<double>(peak) / header_bytes << "x)";
}

// A shape of a million dims of 1 is valid (numel 1). Each "1," becomes an int64: 8 bytes
// for 2, and up to 3 such vectors while it grows (12 times the text), plus the text.
TEST(SafetensorsMemory, ALongShapeTakesAFewTimesTheHeader) {
  constexpr int64_t kDims = 3'000'000;
  std::string header = R"({"t":{"dtype":"F32","data_offsets":[0,4],"shape":[1)";
  header.reserve(header.size() + 2 * kDims + 8);
  for (int64_t i = 1; i < kDims; ++i) header += ",1";
  header += "]}}";
  const std::vector<uint8_t> file = testing::safetensors_bytes(header, 4);
  const auto header_bytes = static_cast<int64_t>(header.size());
  header = std::string();

  st::Header read;
  const int64_t peak = peak_extra_bytes([&] { read = st::read_header_from_bytes(file); });
  ASSERT_EQ(read.tensors.size(), 1u);
  EXPECT_EQ(read.tensors[0].shape.size(), static_cast<size_t>(kDims));
  EXPECT_EQ(read.tensors[0].numel(), 1);
  EXPECT_LE(peak, 14 * header_bytes) << "header " << header_bytes << " bytes, peak " << peak
                                     << " bytes (" << static_cast<double>(peak) / header_bytes << "x)";
}

}  // namespace
}  // namespace kiln
