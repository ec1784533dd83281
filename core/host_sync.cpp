// The host-sync counters (host_sync.h): plain counters of the calling thread.
#include "core/host_sync.h"

#include "core/error.h"

namespace kiln {
namespace {

thread_local HostSyncs t_counts;
thread_local bool t_capturing = false;

const char* what_syncs(HostSync kind) {
  switch (kind) {
    case HostSync::Item: return "item() or to_vector(), a number read on the host";
    case HostSync::CopyToHost: return "a blocking copy from the GPU to the host";
    case HostSync::Synchronize: return "a synchronize of the device, a stream or an event";
    case HostSync::IndexCheck: return "an index op's bounds check, which reads a flag back from the GPU";
    case HostSync::kCount: break;
  }
  return "a host sync";
}

}  // namespace

CaptureOnThisThread::CaptureOnThisThread() {
  KILN_CHECK(!t_capturing, "CUDA graph: a capture is already under way on this thread (captures do not nest)");
  t_capturing = true;
}

CaptureOnThisThread::~CaptureOnThisThread() { t_capturing = false; }

bool capturing_on_this_thread() { return t_capturing; }

void note_host_sync(HostSync kind, Device device) {
  KILN_CHECK(!t_capturing || device.is_cpu(), "CUDA graph capture: ", what_syncs(kind), " on ", device,
             " while a graph is being captured. The captured work runs only when the graph is replayed, so the "
             "host cannot wait for it or read its results here; move this out of the captured step (read values "
             "after replay(), or keep them on the device)");
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
