// The default group (init_process_group.h): one mutex-guarded record per process.
#include "dist/init_process_group.h"

#include <algorithm>
#include <mutex>

#include "core/backend.h"
#include "core/error.h"
#include "dist/process_group_nccl.h"
#include "dist/process_group_ring.h"

namespace kiln::dist {
namespace {

struct World {
  RendezvousInfo info;
  std::shared_ptr<TCPStore> store;
  std::shared_ptr<ProcessGroup> group;
  std::string backend;
  std::chrono::milliseconds timeout{};
  int64_t groups_made = 0;  // new_group calls so far: the next group's key prefix
  int device_index = -1;    // nccl: this rank's GPU
};

std::mutex g_mutex;
std::unique_ptr<World> g_world;

World& world_or_throw(const char* op) {
  KILN_CHECK(g_world != nullptr, op,
             ": the default process group is not initialized (call init_process_group)");
  return *g_world;
}

}  // namespace

#if !defined(KILN_WITH_NCCL)
// A build without NCCL (process_group_nccl.cpp is not compiled) says so.
bool built_with_nccl() { return false; }

std::shared_ptr<ProcessGroup> make_nccl_process_group(std::shared_ptr<TCPStore>, int64_t, int64_t,
                                                      ProcessGroupOptions, const std::string&, int) {
  KILN_CHECK(false,
             "init_process_group: this build of Kiln has no NCCL backend (NCCL was not found when it was "
             "configured: a CPU-only build, or a CUDA toolkit without NCCL); use backend \"ring\"");
  return nullptr;
}
#endif

std::shared_ptr<ProcessGroup> make_process_group(const std::string& backend, std::shared_ptr<TCPStore> store,
                                                 int64_t rank, int64_t size, ProcessGroupOptions options,
                                                 const std::string& prefix, int device_index) {
  if (backend == "ring")
    return std::make_shared<ProcessGroupRing>(std::move(store), rank, size, options, prefix);
  KILN_CHECK(backend == "nccl", "init_process_group: unknown backend '", backend, "' (\"ring\" or \"nccl\")");
  return make_nccl_process_group(std::move(store), rank, size, options, prefix, device_index);
}

RendezvousInfo init_process_group(const InitOptions& options) {
  std::lock_guard<std::mutex> lock(g_mutex);
  KILN_CHECK(g_world == nullptr, "init_process_group: the default process group is already initialized");
  auto world = std::make_unique<World>();
  world->info = resolve_rendezvous(options.rendezvous);
  world->backend = options.backend;
  world->timeout = options.timeout;
  const RendezvousInfo& info = world->info;
  world->store = std::make_shared<TCPStore>(TCPStoreOptions{.host_name = info.master_addr,
                                                            .port = info.master_port,
                                                            .world_size = info.world_size,
                                                            .is_master = info.rank == 0,
                                                            .timeout = options.timeout});
  world->device_index = options.device_index;
  if (world->device_index < 0 && options.backend == "nccl" && built_with_nccl()) {
    const int gpus = cuda_device_count();
    KILN_CHECK(gpus > 0,
               "init_process_group: the nccl backend needs a GPU, and this machine has none Kiln can use");
    world->device_index = static_cast<int>(info.local_rank % gpus);
  }
  world->group = make_process_group(options.backend, world->store, info.rank, info.world_size,
                                    {.timeout = options.timeout}, "default/", world->device_index);
  g_world = std::move(world);
  return g_world->info;
}

void destroy_process_group() {
  std::unique_ptr<World> world;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    world = std::move(g_world);
  }
  // The group first (it finishes its collectives and may publish through the store).
  if (world) world->group.reset();
}

bool is_initialized() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_world != nullptr;
}

ProcessGroup& default_group() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return *world_or_throw("default_group").group;
}

std::shared_ptr<ProcessGroup> world_group() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return world_or_throw("world_group").group;
}

const RendezvousInfo& rendezvous_info() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return world_or_throw("rendezvous_info").info;
}

int64_t get_rank() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return world_or_throw("get_rank").info.rank;
}

int64_t get_world_size() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return world_or_throw("get_world_size").info.world_size;
}

TCPStore& default_store() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return *world_or_throw("default_store").store;
}

std::shared_ptr<ProcessGroup> new_group(const std::vector<int64_t>& ranks) {
  std::lock_guard<std::mutex> lock(g_mutex);
  World& world = world_or_throw("new_group");
  const std::string prefix = "group" + std::to_string(world.groups_made++) + "/";
  std::vector<int64_t> sorted = ranks;
  std::sort(sorted.begin(), sorted.end());
  KILN_CHECK(!sorted.empty(), "new_group: no ranks");
  KILN_CHECK(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end(),
             "new_group: a rank is listed twice");
  KILN_CHECK(sorted.front() >= 0 && sorted.back() < world.info.world_size, "new_group: rank ",
             sorted.front() < 0 ? sorted.front() : sorted.back(), " is outside the world of ",
             world.info.world_size);
  const auto it = std::find(ranks.begin(), ranks.end(), world.info.rank);
  if (it == ranks.end()) return nullptr;
  // The group's rank of this process: its position in `ranks`, as torch.distributed.
  const auto group_rank = static_cast<int64_t>(it - ranks.begin());
  return make_process_group(world.backend, world.store, group_rank, static_cast<int64_t>(ranks.size()),
                            {.timeout = world.timeout}, prefix, world.device_index);
}

}  // namespace kiln::dist
