// TimeRange and Timeline (time_range.h): a flag for the cost-free check, the collecting
// state behind a mutex (held by each open range, so a Timeline may go while ranges on
// other threads are still open), per-thread buffers registered on first use, events
// resolved at stop().
#include "core/time_range.h"

#include <algorithm>
#include <atomic>
#include <mutex>

#include "core/error.h"
#include "core/host_sync.h"

namespace kiln {
namespace {

// A range's record with its events still unresolved.
struct PendingRecord {
  TimeRangeRecord record;
  std::shared_ptr<Event> start_event, end_event;
};

struct ThreadBuffer {
  std::mutex mutex;
  std::vector<PendingRecord> records;
};

std::atomic<uint64_t> g_next_id{1};

}  // namespace

struct Timeline::State {
  uint64_t id = g_next_id.fetch_add(1);
  Stopwatch clock;  // the records' times are its readings
  std::mutex mutex;  // buffers, threads
  std::vector<std::shared_ptr<ThreadBuffer>> buffers;
  uint64_t threads = 0;
};

namespace {

std::atomic<bool> g_collecting{false};  // the one load a TimeRange makes while nothing collects
std::mutex g_active_mutex;
std::shared_ptr<Timeline::State> g_active;  // guarded by g_active_mutex

std::shared_ptr<Timeline::State> active() {
  std::lock_guard<std::mutex> lock(g_active_mutex);
  return g_active;
}

// This thread's buffer in the collecting state with id `state_id` (registered on first use).
struct ThreadSlot {
  uint64_t state_id = 0;
  std::shared_ptr<ThreadBuffer> buffer;
  uint64_t thread = 0;
  int depth = 0;
};
thread_local ThreadSlot t_slot;

}  // namespace

Timeline::Timeline() : state_(std::make_shared<State>()) {
  std::lock_guard<std::mutex> lock(g_active_mutex);
  KILN_CHECK(g_active == nullptr, "Timeline: another Timeline is already collecting");
  g_active = state_;
  g_collecting.store(true, std::memory_order_release);
}

Timeline::~Timeline() { stop(); }

std::vector<TimeRangeRecord> Timeline::stop() {
  {
    std::lock_guard<std::mutex> lock(g_active_mutex);
    if (g_active == state_) {
      g_active.reset();
      g_collecting.store(false, std::memory_order_release);
    }
  }
  std::vector<PendingRecord> pending;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    for (const auto& buffer : state_->buffers) {
      std::lock_guard<std::mutex> buffer_lock(buffer->mutex);
      for (PendingRecord& p : buffer->records) pending.push_back(std::move(p));
      buffer->records.clear();
    }
  }
  std::vector<TimeRangeRecord> records;
  for (PendingRecord& p : pending) {
    if (p.end_event) {
      p.end_event->synchronize();
      p.record.device_ms = p.end_event->elapsed_ms_since(*p.start_event);
    }
    records.push_back(std::move(p.record));
  }
  std::sort(records.begin(), records.end(),
            [](const TimeRangeRecord& a, const TimeRangeRecord& b) { return a.start_s < b.start_s; });
  return records;
}

struct TimeRange::Open {
  std::shared_ptr<Timeline::State> state;
  std::shared_ptr<ThreadBuffer> buffer;
  PendingRecord pending;
  std::optional<Device> device;
};

TimeRange::TimeRange(std::string name, std::optional<Device> device) {
  if (!g_collecting.load(std::memory_order_relaxed)) return;
  std::shared_ptr<Timeline::State> state = active();
  if (state == nullptr) return;
  ThreadSlot& slot = t_slot;
  if (slot.state_id != state->id) {  // this thread's first range in this timeline
    slot = {state->id, std::make_shared<ThreadBuffer>(), 0, 0};
    std::lock_guard<std::mutex> lock(state->mutex);
    slot.thread = state->threads++;
    state->buffers.push_back(slot.buffer);
  }
  open_ = std::make_unique<Open>();
  open_->state = std::move(state);
  open_->buffer = slot.buffer;
  open_->device = device;
  TimeRangeRecord& r = open_->pending.record;
  r.name = std::move(name);
  r.thread = slot.thread;
  r.depth = slot.depth++;
  r.start_s = open_->state->clock.seconds();
  // A capture records its work for later (core/cuda_graph.h): an event recorded into it
  // would time nothing, and reading it would fail, so a range within a capture is timed on
  // the host only.
  if (device && !device->is_cpu() && !capturing_on_this_thread()) {
    open_->pending.start_event = std::make_shared<Event>(/*enable_timing=*/true);
    open_->pending.start_event->record(Stream::current(*device));
  }
}

TimeRange::~TimeRange() {
  if (!open_) return;
  if (t_slot.state_id == open_->state->id) --t_slot.depth;
  if (active() != open_->state) return;  // the timeline stopped while the range was open
  PendingRecord& p = open_->pending;
  p.record.end_s = open_->state->clock.seconds();
  if (p.start_event) {
    p.end_event = std::make_shared<Event>(/*enable_timing=*/true);
    p.end_event->record(Stream::current(*open_->device));
  }
  std::lock_guard<std::mutex> lock(open_->buffer->mutex);
  open_->buffer->records.push_back(std::move(p));
}

}  // namespace kiln
