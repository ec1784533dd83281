// The two verdicts every fuzz harness here gives (tests/fuzz/README.md), written once.
//
// fail(): the reader broke its contract on this input: say which harness and what on
// stderr, then abort, so libFuzzer (or replay_main.cpp) stops and keeps the input.
// expect_refusal(): a kiln::Error is the expected answer to bad input only when it is the
// reader's own refusal, which names the input it read ("safetensors: <fuzz>: ...");
// any other kiln::Error, such as a failed KILN_ASSERT, is a Kiln bug and a finding.
// same_bytes(): the round-trip check of the readers that load tensors.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <string>
#include <string_view>

#include "core/error.h"
#include "core/tensor.h"

namespace kiln::fuzz {

[[noreturn]] inline void fail(const char* harness, const char* what, const std::string& detail) {
  std::fprintf(stderr, "%s: %s: %s\n", harness, what, detail.c_str());
  std::abort();
}

inline void expect_refusal(const char* harness, const Error& error, std::string_view prefix) {
  if (!std::string_view(error.what()).starts_with(prefix)) {
    fail(harness, "an error that is not the reader's refusal of its input", error.what());
  }
}

// The same for a reader over other readers (a container and what it holds), each of which
// names the input its own way: any of `prefixes` will do.
inline void expect_refusal(const char* harness, const Error& error,
                           std::initializer_list<std::string_view> prefixes) {
  for (std::string_view prefix : prefixes) {
    if (std::string_view(error.what()).starts_with(prefix)) return;
  }
  fail(harness, "an error that is not a reader's refusal of its input", error.what());
}

// Same dtype, shape and element bytes (compared in C order).
inline bool same_bytes(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.sizes() != b.sizes()) return false;
  const size_t nbytes = static_cast<size_t>(a.numel()) * a.element_size();
  return nbytes == 0 || std::memcmp(a.contiguous().data_ptr(), b.contiguous().data_ptr(), nbytes) == 0;
}

}  // namespace kiln::fuzz
