// The host-sync counters (host_sync.h): plain counters of the calling thread.
#include "core/host_sync.h"

namespace kiln {
namespace {

thread_local HostSyncs t_counts;

}  // namespace

void note_host_sync(HostSync kind) {
  switch (kind) {
    case HostSync::Item:
      ++t_counts.item;
      return;
    case HostSync::CopyToHost:
      ++t_counts.copy_to_host;
      return;
    case HostSync::Synchronize:
      ++t_counts.synchronize;
      return;
    case HostSync::IndexCheck:
      ++t_counts.index_check;
      return;
    case HostSync::kCount:
      return;
  }
}

HostSyncs host_syncs() { return t_counts; }

}  // namespace kiln
