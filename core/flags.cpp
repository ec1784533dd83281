// The numerics switches of flags.h: relaxed atomics, read on every matmul.
#include "core/flags.h"

#include <atomic>

namespace kiln {
namespace {
std::atomic<bool> tf32_matmul{false};
}  // namespace

void set_allow_tf32_matmul(bool allow) { tf32_matmul.store(allow, std::memory_order_relaxed); }
bool allow_tf32_matmul() { return tf32_matmul.load(std::memory_order_relaxed); }

}  // namespace kiln
