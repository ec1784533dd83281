// The host-sync counters (host_sync.h): one relaxed atomic per kind.
#include "core/host_sync.h"

#include <array>
#include <atomic>

namespace kiln {
namespace {

std::array<std::atomic<int64_t>, static_cast<size_t>(HostSync::kCount)> g_counts{};

int64_t count(HostSync kind) { return g_counts[static_cast<size_t>(kind)].load(std::memory_order_relaxed); }

}  // namespace

void note_host_sync(HostSync kind) {
  g_counts[static_cast<size_t>(kind)].fetch_add(1, std::memory_order_relaxed);
}

HostSyncs host_syncs() {
  return {count(HostSync::Item), count(HostSync::CopyToHost), count(HostSync::Synchronize),
          count(HostSync::IndexCheck)};
}

}  // namespace kiln
