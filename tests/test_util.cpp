// Shared test helpers (see test_util.h).
#include "tests/test_util.h"

#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <future>
#include <sstream>
#include <thread>

#include "core/fault_injection.h"
#include "core/safetensors.h"
#include "dist/socket.h"

namespace kiln::testing {

Tensor random_uniform(const std::vector<int64_t>& sizes, double low, double high, DType dtype, uint64_t seed) {
  Generator gen(seed);
  Tensor u = rand(sizes, {.dtype = DType::Float64}, &gen);
  return add(mul(u, high - low), low).to(dtype);
}

Tensor random_nonzero(const std::vector<int64_t>& sizes, DType dtype, uint64_t seed) {
  Generator gen(seed);
  Tensor magnitude = add(rand(sizes, {.dtype = DType::Float64}, &gen), 0.5);
  Tensor sign_bit = lt(rand(sizes, {.dtype = DType::Float64}, &gen), 0.5);
  return where(sign_bit, neg(magnitude), magnitude).to(dtype);
}

uint16_t free_port() { return dist::Socket::listen("127.0.0.1", 0).port(); }

void with_watchdog(std::chrono::seconds limit, const std::function<void()>& body) {
  auto done = std::make_shared<std::promise<void>>();
  std::future<void> finished = done->get_future();
  std::thread worker([done, body] {
    try {
      body();
      done->set_value();
    } catch (...) {
      done->set_exception(std::current_exception());
    }
  });
  if (finished.wait_for(limit) != std::future_status::ready) {
    worker.detach();  // a hang: the test fails, and the stuck thread is left behind
    ADD_FAILURE() << "did not finish within " << limit.count() << " s (a hang?)";
    return;
  }
  // Joined, not detached: the thread's thread-locals (gtest's SCOPED_TRACE stack among
  // them) are gone before the test ends, so a process ending right after cannot race
  // their destruction (LeakSanitizer reported them as leaks when it did).
  worker.join();
  finished.get();
}

Tensor random_for(const std::vector<int64_t>& sizes, DType dtype, uint64_t seed) {
  if (is_floating(dtype)) return random_nonzero(sizes, dtype, seed);
  if (dtype == DType::Bool) return lt(random_uniform(sizes, 0.0, 1.0, DType::Float64, seed), 0.5);
  Generator gen(seed);
  return randint(dtype == DType::UInt8 ? 0 : -9, 10, sizes, {.dtype = dtype}, &gen);
}

Tensor non_contiguous(const Tensor& t) {
  std::vector<int64_t> big = t.sizes();
  if (big.empty()) return t.clone();
  big.back() *= 2;
  Tensor buffer = full(big, 7, {.dtype = t.dtype(), .device = t.device()});
  Tensor view = buffer.slice(-1, 0, std::nullopt, 2);
  {
    NoGradGuard no_grad;
    view.copy_(t);
  }
  EXPECT_TRUE(!view.is_contiguous() || t.numel() <= 1);
  return view;
}

Tensor grad_leaf(const std::vector<int64_t>& sizes, uint64_t seed) {
  return random_nonzero(sizes, DType::Float64, seed).requires_grad_(true);
}

Tensor strided_grad_leaf(const std::vector<int64_t>& sizes, uint64_t seed) {
  return non_contiguous(random_nonzero(sizes, DType::Float64, seed)).detach().requires_grad_(true);
}

Tensor uniform_leaf(const std::vector<int64_t>& sizes, uint64_t seed, double low, double high) {
  Tensor x = random_uniform(sizes, low, high, DType::Float64, seed);
  return x.requires_grad_(true);
}

Tolerance tolerance_for(DType dtype) {
  switch (dtype) {
    case DType::Float64: return {1e-12, 1e-10};
    case DType::Float32: return {1e-5, 1e-5};
    case DType::Float16: return {1e-3, 2e-3};
    case DType::BFloat16: return {1e-2, 1.6e-2};
    default: return {0.0, 0.0};
  }
}

::testing::AssertionResult all_close(const Tensor& actual, const Tensor& expected, Tolerance tol) {
  if (actual.sizes() != expected.sizes()) {
    return ::testing::AssertionFailure() << "shape " << shape_str(actual.sizes()) << " vs expected " << shape_str(expected.sizes());
  }
  const std::vector<double> a = actual.to_vector<double>();
  const std::vector<double> e = expected.to_vector<double>();
  for (size_t i = 0; i < a.size(); ++i) {
    const bool both_nan = std::isnan(a[i]) && std::isnan(e[i]);
    const bool same_inf = std::isinf(a[i]) && a[i] == e[i];
    if (both_nan || same_inf) continue;
    if (!(std::abs(a[i] - e[i]) <= tol.atol + tol.rtol * std::abs(e[i]))) {
      return ::testing::AssertionFailure() << "element " << i << " (row-major) of shape " << shape_str(actual.sizes())
                                           << ": got " << a[i] << ", expected " << e[i] << " (atol " << tol.atol
                                           << ", rtol " << tol.rtol << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult all_close(const Tensor& actual, const Tensor& expected) {
  return all_close(actual, expected, tolerance_for(actual.dtype()));
}

::testing::AssertionResult all_equal(const Tensor& actual, const Tensor& expected) {
  if (actual.dtype() != expected.dtype()) {
    return ::testing::AssertionFailure() << "dtype " << actual.dtype() << " vs expected " << expected.dtype();
  }
  return all_close(actual, expected, {0.0, 0.0});
}

namespace {
Tensor cpu_copy(const Tensor& t) { return t.detach().to(Device::cpu(), t.dtype(), false, /*copy=*/true); }
}  // namespace

::testing::AssertionResult bitwise_equal(const Tensor& actual, const Tensor& expected) {
  if (actual.dtype() != expected.dtype() || actual.sizes() != expected.sizes()) {
    return ::testing::AssertionFailure() << actual.dtype() << " " << shape_str(actual.sizes()) << " vs expected "
                                         << expected.dtype() << " " << shape_str(expected.sizes());
  }
  const Tensor a = cpu_copy(actual), e = cpu_copy(expected);
  const auto* a_bytes = static_cast<const unsigned char*>(a.data_ptr());
  const auto* e_bytes = static_cast<const unsigned char*>(e.data_ptr());
  const size_t nbytes = static_cast<size_t>(a.numel()) * a.element_size();
  for (size_t i = 0; i < nbytes; ++i) {
    if (a_bytes[i] != e_bytes[i]) {
      return ::testing::AssertionFailure() << "element " << i / a.element_size() << " differs in its bytes";
    }
  }
  return ::testing::AssertionSuccess();
}

const Tensor* find_named(const std::vector<std::pair<std::string, Tensor>>& tensors, const std::string& name) {
  for (const auto& entry : tensors) {
    if (entry.first == name) return &entry.second;
  }
  return nullptr;
}

// Sized up front and filled in place: GCC 12 reports a false -Warray-bounds for
// vector::insert after a fixed-size vector, an error in CI's -Werror build.
std::vector<uint8_t> safetensors_bytes(const std::string& header, size_t data_bytes) {
  std::vector<uint8_t> bytes(8 + header.size() + data_bytes);
  for (size_t i = 0; i < 8; ++i) bytes[i] = static_cast<uint8_t>(uint64_t{header.size()} >> (8 * i));
  std::copy(header.begin(), header.end(), bytes.begin() + 8);
  for (size_t i = 0; i < data_bytes; ++i) bytes[8 + header.size() + i] = static_cast<uint8_t>(i % 2);
  return bytes;
}

std::string flip_a_bit_of_the_largest_tensor(const std::string& path) {
  const safetensors::Header header = safetensors::read_header(path);
  const auto largest = std::max_element(header.tensors.begin(), header.tensors.end(),
                                        [](const auto& a, const auto& b) { return a.nbytes() < b.nbytes(); });
  KILN_CHECK(largest != header.tensors.end() && largest->nbytes() > 0, path, " has no tensor bytes to damage");
  std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
  const auto at = static_cast<std::streamoff>(8 + header.header_bytes + largest->data_begin + largest->nbytes() / 2);
  char byte = 0;
  file.seekg(at);
  file.read(&byte, 1);
  byte = static_cast<char>(byte ^ 1);
  file.seekp(at);
  file.write(&byte, 1);
  KILN_CHECK(file.good(), "could not damage ", path);
  return largest->name;
}

TensorsSnapshot::TensorsSnapshot(const Named& tensors) {
  for (const auto& [name, t] : tensors) entries_.push_back({name, t, t.version(), cpu_copy(t)});
}

::testing::AssertionResult TensorsSnapshot::same_as(const Named& tensors) const {
  if (tensors.size() != entries_.size()) {
    return ::testing::AssertionFailure() << tensors.size() << " tensors, " << entries_.size() << " before";
  }
  for (size_t i = 0; i < entries_.size(); ++i) {
    const Entry& before = entries_[i];
    const auto& [name, now] = tensors[i];
    if (name != before.name) {
      return ::testing::AssertionFailure() << "\"" << name << "\" where \"" << before.name << "\" was";
    }
    if (!now.is_same(before.tensor)) {
      return ::testing::AssertionFailure() << "\"" << name << "\" is another tensor";
    }
    if (now.version() != before.version) {
      return ::testing::AssertionFailure() << "\"" << name << "\" is at version " << now.version() << ", was "
                                           << before.version;
    }
    const ::testing::AssertionResult bytes = bitwise_equal(now, before.bytes);
    if (!bytes) return ::testing::AssertionFailure() << "\"" << name << "\": " << bytes.message();
  }
  return ::testing::AssertionSuccess();
}

int64_t fail_each_allocation(const std::function<void()>& operation,
                             const std::function<void()>& expect_unchanged) {
  for (int64_t n = 0;; ++n) {
    {
      FailNthAllocation fail(n);
      try {
        operation();
        EXPECT_FALSE(fail.fired()) << "allocation " << n << " failed, yet the operation ran to the end";
        return n;
      } catch (const Error& e) {
        if (!fail.fired()) {
          ADD_FAILURE() << "with allocation " << n << " set to fail, another error came first: " << e.what();
          return n;
        }
      }
    }
    SCOPED_TRACE(::testing::Message() << "after allocation " << n << " failed");
    expect_unchanged();
  }
}

std::vector<std::string> errors_of_concurrent_runs(int threads, const std::function<void(int)>& work) {
  std::vector<std::string> errors(static_cast<size_t>(threads));
  std::vector<std::thread> running;
  for (int i = 0; i < threads; ++i) {
    running.emplace_back([&, i] {
      try {
        work(i);
      } catch (const Error& e) {
        errors[static_cast<size_t>(i)] = e.what();
      }
    });
  }
  for (std::thread& thread : running) thread.join();
  return errors;
}

TempFolder::TempFolder() {
  std::string pattern = (std::filesystem::temp_directory_path() / "kiln_test_XXXXXX").string();
  KILN_CHECK(::mkdtemp(pattern.data()) != nullptr, "mkdtemp failed");
  path_ = pattern;
}

TempFolder::~TempFolder() {
  std::error_code ignored;
  std::filesystem::permissions(path_, std::filesystem::perms::owner_all, std::filesystem::perm_options::add, ignored);
  std::filesystem::remove_all(path_, ignored);
}

std::vector<std::string> TempFolder::entries() const {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(path_)) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace kiln::testing
