// The switches of flags.h: relaxed atomics, read on every matmul and conv.
#include "core/flags.h"

#include <atomic>

namespace kiln {
namespace {
std::atomic<bool> tf32_matmul{false};
std::atomic<bool> tf32_conv{false};
std::atomic<bool> onednn{true};
}  // namespace

void set_allow_tf32_matmul(bool allow) { tf32_matmul.store(allow, std::memory_order_relaxed); }
bool allow_tf32_matmul() { return tf32_matmul.load(std::memory_order_relaxed); }
void set_allow_tf32_conv(bool allow) { tf32_conv.store(allow, std::memory_order_relaxed); }
bool allow_tf32_conv() { return tf32_conv.load(std::memory_order_relaxed); }
void set_onednn_enabled(bool enabled) { onednn.store(enabled, std::memory_order_relaxed); }
bool onednn_enabled() { return onednn.load(std::memory_order_relaxed); }

}  // namespace kiln
