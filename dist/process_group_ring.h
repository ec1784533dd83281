// ProcessGroupRing: Kiln's own collectives over TCP (dist/ring/): the pipelined ring for
// large messages and a direct exchange for small ones (Note [Ring all-reduce] in
// ring/algorithms.h), on CPU tensors and on GPU tensors staged through pinned memory.
//
// One background thread runs the collectives in the order they were issued; each
// returns a Work at once. The group's connections (a full mesh, ring/mesh.h) are made in
// the constructor, which every rank of the group calls at about the same time.
//
//   auto store = std::make_shared<TCPStore>(TCPStoreOptions{.port = 29500, .is_master = rank == 0});
//   ProcessGroupRing group(store, rank, world_size);
//   group.all_reduce(t)->wait();
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "dist/process_group.h"
#include "dist/ring/algorithms.h"
#include "dist/tcp_store.h"

namespace kiln::dist {

class ProcessGroupRing : public ProcessGroup {
 public:
  // `prefix` keeps the store keys of different groups apart.
  ProcessGroupRing(std::shared_ptr<TCPStore> store, int64_t rank, int64_t size,
                   ProcessGroupOptions options = {}, std::string prefix = "ring/");
  // Finishes the collectives already issued, then closes the connections.
  ~ProcessGroupRing() override;
  std::string backend() const override { return "ring"; }

  // Messages of at most this many bytes per rank use the direct algorithms.
  static constexpr size_t kDirectBytes = 64 << 10;

 protected:
  std::shared_ptr<Work> run_all_reduce(const Tensor& tensor, ReduceOp op) override;
  std::shared_ptr<Work> run_all_reduce_coalesced(const std::vector<Tensor>& tensors, ReduceOp op) override;
  std::shared_ptr<Work> run_broadcast(const Tensor& tensor, int64_t root) override;
  std::shared_ptr<Work> run_all_gather(const Tensor& output, const Tensor& input) override;
  std::shared_ptr<Work> run_reduce_scatter(const Tensor& output, const Tensor& input, ReduceOp op) override;
  std::shared_ptr<Work> run_barrier() override;

 private:
  using Job = std::function<void(const ring::Collective&)>;
  struct Queued {
    CollectiveHeader header;
    Job job;
    std::shared_ptr<Work> work;
  };
  // Queues `job`, which runs `collectives` collectives (sequence numbers from header.sequence).
  std::shared_ptr<Work> enqueue(CollectiveHeader header, Job job, size_t collectives = 1);
  void serve();
  void all_reduce_on_worker(const ring::Collective& c, const Tensor& tensor, ReduceOp op,
                            const std::shared_ptr<Event>& ready);
  // The stream the worker stages a device's tensors on, made at its first use (worker only).
  const Stream& copy_stream(Device device);

  std::shared_ptr<TCPStore> store_;
  std::unique_ptr<Mesh> mesh_;
  std::mutex mutex_;
  std::condition_variable queue_changed_;
  std::deque<Queued> queue_;
  bool stopping_ = false;
  uint32_t issued_ = 0;                 // collectives issued: the next one's sequence number
  std::string abort_reason_;            // the first failure; later collectives fail with it (worker only)
  std::map<int, Stream> copy_streams_;  // by CUDA device index (worker only)
  std::thread worker_;
};

}  // namespace kiln::dist
