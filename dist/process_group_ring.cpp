// ProcessGroupRing (process_group_ring.h): the worker thread, the choice between ring and
// direct algorithms by size, staging, and the reductions, done by the CPU backend's own
// elementwise kernels.
#include "dist/process_group_ring.h"

#include "core/autograd/grad_mode.h"
#include "core/backend.h"
#include "core/error.h"
#include "core/ops/factory.h"
#include "dist/ring/host_stage.h"

namespace kiln::dist {
namespace {

using ring::HostStage;

ring::Reducer reducer(DType dtype, ReduceOp op) {
  const BinaryOp binary = op == ReduceOp::Max   ? BinaryOp::Maximum
                          : op == ReduceOp::Min ? BinaryOp::Minimum
                                                : BinaryOp::Add;
  return [dtype, binary](void* dst, const void* src, int64_t count) {
    const Tensor into = from_blob(dst, {count}, {.dtype = dtype});
    const Tensor from = from_blob(const_cast<void*>(src), {count}, {.dtype = dtype});
    backend(Device::cpu()).binary(binary, into, from, into, {});
  };
}

CollectiveHeader header_for(CollectiveKind kind, const Tensor& t, int64_t numel, ReduceOp op = ReduceOp::Sum,
                            int64_t root = -1) {
  return {.kind = static_cast<uint8_t>(kind),
          .dtype = static_cast<uint8_t>(t.dtype()),
          .op = static_cast<uint8_t>(op),
          .numel = numel,
          .root = root};
}

bool small(const Tensor& t) {
  return static_cast<size_t>(t.numel()) * t.element_size() <= ProcessGroupRing::kDirectBytes;
}

}  // namespace

ProcessGroupRing::ProcessGroupRing(std::shared_ptr<TCPStore> store, int64_t rank, int64_t size,
                                   ProcessGroupOptions options, std::string prefix)
    : ProcessGroup(rank, size, options), store_(std::move(store)) {
  KILN_CHECK(store_ != nullptr, "ProcessGroupRing: no store");
  mesh_ = std::make_unique<Mesh>(*store_, std::move(prefix), rank, size, Deadline::after(options.timeout));
  worker_ = std::thread([this] { serve(); });
}

ProcessGroupRing::~ProcessGroupRing() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  queue_changed_.notify_all();
  worker_.join();
}

std::shared_ptr<Work> ProcessGroupRing::enqueue(CollectiveHeader header, Job job, size_t collectives) {
  std::lock_guard<std::mutex> lock(mutex_);
  header.sequence = issued_;
  issued_ += static_cast<uint32_t>(collectives);
  auto work = std::make_shared<Work>(header.describe());
  queue_.push_back({header, std::move(job), work});
  queue_changed_.notify_all();
  return work;
}

void ProcessGroupRing::serve() {
  while (true) {
    Queued next;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      queue_changed_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and everything issued has run
      next = std::move(queue_.front());
      queue_.pop_front();
    }
    if (!abort_reason_.empty()) {
      next.work->complete(std::make_exception_ptr(Error("process group: " + next.header.describe() +
                                                        " cannot run: the group was aborted after an earlier "
                                                        "failure: " +
                                                        abort_reason_)));
      continue;
    }
    try {
      if (options().delay_per_collective.count() > 0)
        std::this_thread::sleep_for(options().delay_per_collective);
      next.job({*mesh_, next.header, timeout()});
      next.work->complete();
    } catch (const std::exception& e) {
      abort_reason_ = e.what();
      mesh_->abort(e.what());
      next.work->complete(std::current_exception());
    }
  }
}

const Stream& ProcessGroupRing::copy_stream(Device device) {
  auto it = copy_streams_.find(device.index);
  if (it == copy_streams_.end()) it = copy_streams_.emplace(device.index, Stream::create(device)).first;
  return it->second;
}

// One all-reduce of `tensor`, on the worker: the direct exchange or the ring, staged.
void ProcessGroupRing::all_reduce_on_worker(const ring::Collective& c, const Tensor& tensor, ReduceOp op,
                                            const std::shared_ptr<Event>& ready) {
  HostStage stage(tensor, ready);
  const ring::Reducer reduce = reducer(tensor.dtype(), op);
  const int64_t n = c.mesh.size();
  // Avg: the sum, divided (on the host, before the copy back).
  const auto average = [&](const Tensor& part) {
    if (op != ReduceOp::Avg) return;
    Tensor host = part;
    host.div_(scalar_tensor(static_cast<double>(n), {.dtype = tensor.dtype()}));
  };
  if (!stage.on_gpu() || small(tensor) || n == 1) {
    stage.copy_in();
    if (small(tensor))
      ring::direct_all_reduce(c, stage.buffer(), reduce);
    else
      ring::ring_all_reduce(c, stage.buffer(), reduce);
    average(stage.host());
    stage.copy_out();
    return;
  }
  // A GPU tensor on the ring: copies by chunk, overlapped (Note [Overlapped staging]).
  const std::vector<int64_t> bounds = ring::chunk_bounds(tensor.numel(), n);
  stage.copy_in_async(copy_stream(tensor.device()), bounds, ring::all_reduce_chunk_order(c.mesh.rank(), n));
  const ring::ChunkHooks hooks{
      .before_use = [&](int64_t chunk) { stage.wait_in(chunk); },
      .chunk_final =
          [&](int64_t chunk) {
            const auto i = static_cast<size_t>(chunk);
            average(stage.host().reshape({-1}).narrow(0, bounds[i], bounds[i + 1] - bounds[i]));
            stage.copy_out_async(chunk);
          }};
  ring::ring_all_reduce(c, stage.buffer(), reduce, &hooks);
  stage.finish();
}

std::shared_ptr<Work> ProcessGroupRing::run_all_reduce(const Tensor& tensor, ReduceOp op) {
  const auto ready = ring::record_ready(tensor);
  return enqueue(
      header_for(CollectiveKind::AllReduce, tensor, tensor.numel(), op),
      [this, tensor, op, ready](const ring::Collective& c) { all_reduce_on_worker(c, tensor, op, ready); });
}

std::shared_ptr<Work> ProcessGroupRing::run_all_reduce_coalesced(const std::vector<Tensor>& tensors,
                                                                 ReduceOp op) {
  std::vector<std::shared_ptr<Event>> ready;
  for (const Tensor& t : tensors) ready.push_back(ring::record_ready(t));
  // One job, one Work; each all-reduce keeps its own sequence number and header.
  return enqueue(
      header_for(CollectiveKind::AllReduce, tensors.front(), tensors.front().numel(), op),
      [this, tensors, op, ready](const ring::Collective& c) {
        for (size_t i = 0; i < tensors.size(); ++i) {
          ring::Collective one = c;
          one.header.sequence = c.header.sequence + static_cast<uint32_t>(i);
          one.header.dtype = static_cast<uint8_t>(tensors[i].dtype());
          one.header.numel = tensors[i].numel();
          all_reduce_on_worker(one, tensors[i], op, ready[i]);
        }
      },
      tensors.size());
}

std::shared_ptr<Work> ProcessGroupRing::run_broadcast(const Tensor& tensor, int64_t root) {
  const auto ready = ring::record_ready(tensor);
  const bool is_root = root == rank();
  return enqueue(header_for(CollectiveKind::Broadcast, tensor, tensor.numel(), ReduceOp::Sum, root),
                 [tensor, root, ready, is_root](const ring::Collective& c) {
                   HostStage stage(tensor, ready);
                   if (is_root) stage.copy_in();
                   if (small(tensor))
                     ring::direct_broadcast(c, stage.buffer(), root);
                   else
                     ring::chain_broadcast(c, stage.buffer(), root);
                   if (!is_root) stage.copy_out();
                 });
}

std::shared_ptr<Work> ProcessGroupRing::run_all_gather(const Tensor& output, const Tensor& input) {
  const auto ready = ring::record_ready(input);
  const int64_t rank_ = rank();
  return enqueue(header_for(CollectiveKind::AllGather, input, input.numel()),
                 [output, input, ready, rank_](const ring::Collective& c) {
                   HostStage stage(output, ready);
                   Tensor own = stage.host().reshape({-1}).narrow(0, rank_ * input.numel(), input.numel());
                   {
                     NoGradGuard no_grad;
                     own.copy_(input.reshape({-1}));
                   }
                   if (small(input))
                     ring::direct_all_gather(c, stage.buffer());
                   else
                     ring::ring_all_gather(c, stage.buffer());
                   stage.copy_out();
                 });
}

std::shared_ptr<Work> ProcessGroupRing::run_reduce_scatter(const Tensor& output, const Tensor& input,
                                                           ReduceOp op) {
  const auto ready = ring::record_ready(input);
  const int64_t rank_ = rank(), n = size();
  return enqueue(header_for(CollectiveKind::ReduceScatter, input, input.numel(), op),
                 [output, input, op, ready, rank_, n](const ring::Collective& c) {
                   // The algorithms reduce in place: work on a copy, never on the caller's input.
                   Tensor scratch = empty({input.numel()}, {.dtype = input.dtype()});
                   {
                     NoGradGuard no_grad;
                     if (ready) ready->synchronize();
                     scratch.copy_(input.reshape({-1}));
                   }
                   const ring::HostBuffer buffer{static_cast<char*>(scratch.data_ptr()), scratch.numel(),
                                                 scratch.element_size()};
                   const ring::Reducer reduce = reducer(input.dtype(), op);
                   if (small(output))
                     ring::direct_reduce_scatter(c, buffer, reduce);
                   else
                     ring::ring_reduce_scatter(c, buffer, reduce);
                   Tensor mine = scratch.narrow(0, rank_ * output.numel(), output.numel());
                   NoGradGuard no_grad;
                   if (op == ReduceOp::Avg)
                     mine.div_(scalar_tensor(static_cast<double>(n), {.dtype = input.dtype()}));
                   Tensor out = output;
                   out.copy_(mine.view(output.sizes()));
                 });
}

std::shared_ptr<Work> ProcessGroupRing::run_barrier() {
  return enqueue({.kind = static_cast<uint8_t>(CollectiveKind::Barrier)},
                 [](const ring::Collective& c) { ring::barrier(c); });
}

}  // namespace kiln::dist
