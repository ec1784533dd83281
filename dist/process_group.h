// ProcessGroup: the collectives of a set of ranks, as torch.distributed's ProcessGroup.
// Every rank of the group calls the same collectives in the same order; each returns a
// Work handle at once and runs in the background, in issue order.
//
//   all_reduce(t, op)                     t = op over every rank's t (sum, avg, max, min)
//   all_reduce_coalesced(ts, op)          the same for several tensors, as one call
//   broadcast(t, root)                    t = root's t
//   all_gather_into_tensor(out, in)       out = every rank's `in`, concatenated in rank order
//   all_gather(outs, in)                  outs[r] = rank r's `in`
//   reduce_scatter_tensor(out, in, op)    out = chunk `rank` of op over every rank's `in`
//   reduce_scatter(out, ins, op)          out = op over every rank's ins[rank]
//   barrier()                             returns once every rank has called it
//
// Tensors are any float dtype, int64, int32 or uint8, on the CPU or (where the backend
// supports it) a GPU, contiguous or not; results are written in place, and must not be
// read or written until wait() returns (the list forms copy into `outs` in wait()).
// Arguments are checked on the calling thread (a kiln::Error there); a failure while the
// collective runs (a peer that died, a timeout, ranks that disagree on the call) is an
// error from wait() and leaves the group aborted: later collectives fail at once.
//
// Every collective has a timeout (ProcessGroupOptions, default 10 minutes).
//
//   auto work = group.all_reduce(gradient, ReduceOp::Avg);
//   work->wait();
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "dist/reduce_op.h"
#include "dist/work.h"

namespace kiln::dist {

struct ProcessGroupOptions {
  std::chrono::milliseconds timeout = std::chrono::minutes(10);
  // Waits this long before each collective: a slow network on demand, for the test and
  // the benchmark that show DDP overlapping communication with backward.
  std::chrono::milliseconds delay_per_collective = std::chrono::milliseconds(0);
};

class ProcessGroup {
 public:
  ProcessGroup(int64_t rank, int64_t size, ProcessGroupOptions options);
  virtual ~ProcessGroup() = default;
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int64_t rank() const { return rank_; }
  int64_t size() const { return size_; }
  std::chrono::milliseconds timeout() const { return options_.timeout; }
  const ProcessGroupOptions& options() const { return options_; }
  virtual std::string backend() const = 0;

  std::shared_ptr<Work> all_reduce(const Tensor& tensor, ReduceOp op = ReduceOp::Sum);
  // Several all-reduces issued as one, with one Work (NCCL launches them in one group
  // call); DDP uses it for buckets that become ready together.
  std::shared_ptr<Work> all_reduce_coalesced(const std::vector<Tensor>& tensors, ReduceOp op = ReduceOp::Sum);
  std::shared_ptr<Work> broadcast(const Tensor& tensor, int64_t root);
  std::shared_ptr<Work> all_gather_into_tensor(const Tensor& output, const Tensor& input);
  std::shared_ptr<Work> all_gather(const std::vector<Tensor>& outputs, const Tensor& input);
  std::shared_ptr<Work> reduce_scatter_tensor(const Tensor& output, const Tensor& input,
                                              ReduceOp op = ReduceOp::Sum);
  std::shared_ptr<Work> reduce_scatter(const Tensor& output, const std::vector<Tensor>& inputs,
                                       ReduceOp op = ReduceOp::Sum);
  std::shared_ptr<Work> barrier();

 protected:
  // The backend's part: arguments already checked (same dtype and device; sizes agree).
  virtual std::shared_ptr<Work> run_all_reduce(const Tensor& tensor, ReduceOp op) = 0;
  virtual std::shared_ptr<Work> run_all_reduce_coalesced(const std::vector<Tensor>& tensors, ReduceOp op) = 0;
  virtual std::shared_ptr<Work> run_broadcast(const Tensor& tensor, int64_t root) = 0;
  virtual std::shared_ptr<Work> run_all_gather(const Tensor& output, const Tensor& input) = 0;
  virtual std::shared_ptr<Work> run_reduce_scatter(const Tensor& output, const Tensor& input,
                                                   ReduceOp op) = 0;
  virtual std::shared_ptr<Work> run_barrier() = 0;

 private:
  int64_t rank_;
  int64_t size_;
  ProcessGroupOptions options_;
};

}  // namespace kiln::dist
