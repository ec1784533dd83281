// Autocast (autocast.h): this thread's state, the guards that set it, and the casts the
// op layer asks for, with the cast cache of Note [Autocast cast cache].
//
// The state is a plain thread_local struct (constant-initialised, so reading it is one
// load, no lazy-init call): when autocast is off, autocast_input is one bool test. The
// cache is a separate thread_local map from (parameter, target dtype) to the cast.
#include "core/autocast.h"

#include <map>
#include <utility>

#include "core/autograd/grad_mode.h"
#include "core/autograd/node.h"
#include "core/error.h"
#include "core/host_sync.h"

namespace kiln {
namespace {

thread_local AutocastState t_state;
// How many AutocastGuards are alive on this thread, enabled or not; the cache is cleared
// when the outermost one exits (as torch.autocast's nesting counter).
thread_local int t_guard_depth = 0;

struct CachedCast {
  Tensor source;     // keeps the parameter alive, so its address cannot be reused
  Storage storage;   // the storage it had then (set_data may have given it another)
  uint32_t version;  // that storage's version when it was cast
  Tensor cast;       // a differentiable to() of it
};
using CastCache = std::map<std::pair<const TensorImpl*, DType>, CachedCast>;
thread_local CastCache t_cache;

bool is_lower(DType dtype) { return dtype == DType::Float16 || dtype == DType::BFloat16; }

// Only parameters are cached (PyTorch's rule): other tensors are new at every step.
bool cacheable(const Tensor& t) { return t.requires_grad() && t.is_leaf(); }

// Note [Autocast cast cache]. A cached cast is stale, and made again, when the parameter
// was modified in place since (its version moved, e.g. by an optimizer step) or was given
// other data (Note [Set data]: another storage, whose version may be anything), when a
// backward already ran through the cast's node and freed it (gradient accumulation over
// several forwards in one region), or when it was made without a graph (under
// NoGradGuard) and one is needed now.
bool fresh(const CachedCast& entry) {
  if (!entry.source.storage().is_alias_of(entry.storage) || entry.version != entry.source.version()) return false;
  const auto& node = entry.cast.grad_fn();
  if (node) return !node->released;
  return !autograd::grad_mode_enabled();
}

// Turns autocast off on this thread for a scope, without counting as a region (the
// cache is not touched when it ends).
class SuspendAutocast {
 public:
  SuspendAutocast() : saved_(t_state.enabled) { t_state.enabled = false; }
  ~SuspendAutocast() { t_state.enabled = saved_; }
  SuspendAutocast(const SuspendAutocast&) = delete;
  SuspendAutocast& operator=(const SuspendAutocast&) = delete;

 private:
  bool saved_;
};

// The cast itself runs with autocast off, so nothing it calls can cast again.
Tensor cast_without_autocast(const Tensor& t, DType dtype) {
  SuspendAutocast off;
  return t.to(dtype);
}

Tensor cached_lower_cast(const Tensor& t, DType dtype) {
  // During a CUDA graph capture every cast must be recorded into the graph: a cast cached
  // before it would be read by every replay, stale after the next optimizer step, from
  // memory the graph does not own (Note [No host syncs in a capture] is the sibling rule).
  if (capturing_on_this_thread()) return cast_without_autocast(t, dtype);
  const auto key = std::make_pair(static_cast<const TensorImpl*>(t.impl()), dtype);
  if (auto it = t_cache.find(key); it != t_cache.end() && fresh(it->second)) return it->second.cast;
  Tensor cast = cast_without_autocast(t, dtype);
  t_cache[key] = CachedCast{.source = t, .storage = t.storage(), .version = t.version(), .cast = cast};
  return cast;
}

}  // namespace

AutocastState autocast_state() { return t_state; }

bool autocast_enabled() { return t_state.enabled; }

AutocastGuard::AutocastGuard(DType dtype, bool enabled) : previous_(t_state) {
  KILN_CHECK(is_lower(dtype), "autocast: the autocast dtype must be float16 or bfloat16, got ", dtype);
  t_state = AutocastState{.enabled = enabled, .dtype = dtype};
  ++t_guard_depth;
}

AutocastGuard::~AutocastGuard() {
  t_state = previous_;
  if (--t_guard_depth == 0) clear_autocast_cache();
}

Tensor autocast_input(const Tensor& t, AutocastPolicy policy) {
  if (!t_state.enabled || !t.defined()) return t;
  const DType from = t.dtype();
  if (policy == AutocastPolicy::Float32) {
    return is_lower(from) ? cast_without_autocast(t, DType::Float32) : t;
  }
  const DType to = t_state.dtype;
  if (from == to || !(from == DType::Float32 || is_lower(from))) return t;
  if (from == DType::Float32 && cacheable(t)) return cached_lower_cast(t, to);
  return cast_without_autocast(t, to);
}

size_t autocast_cache_size() { return t_cache.size(); }

void clear_autocast_cache() { t_cache.clear(); }

}  // namespace kiln
