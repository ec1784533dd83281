// DeferIndexChecks (core/deferred_check.h): a thread-local pointer to the scope in force.
#include "core/deferred_check.h"

#include "core/error.h"

namespace kiln {
namespace {

thread_local DeferIndexChecks* t_scope = nullptr;

}  // namespace

DeferIndexChecks::DeferIndexChecks() {
  KILN_CHECK(t_scope == nullptr, "DeferIndexChecks: this thread already defers its index checks");
  t_scope = this;
}

DeferIndexChecks::~DeferIndexChecks() { t_scope = nullptr; }

void DeferIndexChecks::check() {
  std::vector<DeferredCheck> checks;
  checks.swap(pending_);  // cleared even when one throws
  for (const DeferredCheck& run : checks) run();
}

bool defer_index_check(DeferredCheck check) {
  if (t_scope == nullptr) return false;
  t_scope->pending_.push_back(std::move(check));
  return true;
}

}  // namespace kiln
