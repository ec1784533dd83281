// Test helper: a process group of `world` ranks inside this process, one thread per rank,
// each with its own store client and ProcessGroupRing connected over the loopback
// address, exactly as separate processes would be. Returns each rank's error message
// ("" when its body returned). The caller puts it under a watchdog.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "dist/process_group_ring.h"
#include "dist/tcp_store.h"

namespace kiln::testing {

// A non-owning shared pointer to a rank's group, for DDPOptions and SyncBatchNorm (the
// group outlives what is given it inside the rank's body).
inline std::shared_ptr<dist::ProcessGroup> handle(dist::ProcessGroup& group) {
  return std::shared_ptr<dist::ProcessGroup>(&group, [](dist::ProcessGroup*) {});
}

inline std::vector<std::string> run_ranks_in_threads(
    int world, const std::function<void(dist::ProcessGroupRing& group)>& body,
    std::chrono::milliseconds timeout = std::chrono::seconds(30),
    std::chrono::milliseconds delay_per_collective = std::chrono::milliseconds(0)) {
  const auto server = std::make_shared<dist::TCPStore>(
      dist::TCPStoreOptions{.port = 0, .is_master = true, .timeout = timeout});
  std::vector<std::string> errors(static_cast<size_t>(world));
  std::vector<std::thread> threads;
  for (int rank = 0; rank < world; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        auto store = std::make_shared<dist::TCPStore>(
            dist::TCPStoreOptions{.port = server->port(), .timeout = timeout});
        dist::ProcessGroupRing group(store, rank, world,
                                     {.timeout = timeout, .delay_per_collective = delay_per_collective});
        body(group);
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(rank)] = e.what();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  return errors;
}

}  // namespace kiln::testing
