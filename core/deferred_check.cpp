// DeferIndexChecks and CapturedIndexChecks (core/deferred_check.h): thread-local pointers
// to the scope and the capture in force.
#include "core/deferred_check.h"

#include <utility>

#include "core/error.h"

namespace kiln {
namespace {

thread_local DeferIndexChecks* t_scope = nullptr;
thread_local CapturedIndexChecks* t_capture = nullptr;

}  // namespace

DeferIndexChecks::DeferIndexChecks() {
  KILN_CHECK(t_scope == nullptr, "DeferIndexChecks: this thread already defers its index checks");
  t_scope = this;
}

DeferIndexChecks::~DeferIndexChecks() { t_scope = nullptr; }

void DeferIndexChecks::check() {
  std::vector<Pending> checks;
  checks.swap(pending_);  // cleared even when one throws
  for (const Pending& run : checks) run.check();
}

bool defer_index_check(DeferredCheck check) {
  if (t_capture != nullptr) {  // Note [Index checks in a CUDA graph]
    t_capture->checks_.push_back(std::move(check));
    return true;
  }
  if (t_scope == nullptr) return false;
  t_scope->pending_.push_back({nullptr, std::move(check)});
  return true;
}

bool defer_index_check_once(const void* key, DeferredCheck check) {
  if (t_capture != nullptr || t_scope == nullptr) return defer_index_check(std::move(check));
  for (const DeferIndexChecks::Pending& waiting : t_scope->pending_) {
    if (waiting.key == key) return true;
  }
  t_scope->pending_.push_back({key, std::move(check)});
  return true;
}

CapturedIndexChecks::CapturedIndexChecks(Tensor flags) : flags_(std::move(flags)) {
  KILN_CHECK(t_capture == nullptr, "CUDA graph: this thread already captures (captures do not nest)");
  KILN_CHECK(flags_.defined() && flags_.dtype() == DType::Int64 && flags_.numel() == 2 * kMaxCapturedIndexChecks,
             "CapturedIndexChecks: needs an Int64 tensor of ", 2 * kMaxCapturedIndexChecks, " zeros");
  t_capture = this;
}

CapturedIndexChecks::~CapturedIndexChecks() {
  if (t_capture == this) t_capture = nullptr;  // a graph destroyed from another thread leaves that thread's alone
}

std::vector<DeferredCheck> CapturedIndexChecks::take() { return std::exchange(checks_, {}); }

Tensor captured_index_flag(Device device, const char* op) {
  CapturedIndexChecks* c = t_capture;
  if (c == nullptr) return Tensor();
  KILN_CHECK(c->flags_.device() == device, op, ": a bounds-checked index op on ", device,
             " while this thread captures a CUDA graph on ", c->flags_.device());
  KILN_CHECK(c->used_ < kMaxCapturedIndexChecks, op, ": the captured step has more than ", kMaxCapturedIndexChecks,
             " bounds-checked index ops, the most a CUDA graph keeps flags for (Note [Index checks in a CUDA "
             "graph]); capture a shorter step");
  const Tensor flag = c->flags_.narrow(0, 2 * c->used_, 2);
  ++c->used_;
  return flag;
}

}  // namespace kiln
