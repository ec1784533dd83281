// ProcessGroupNccl (process_group_nccl.h): communicator set-up through the store, one
// launch path for every collective, and the watchdog.
#include "dist/process_group_nccl.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>

#include "core/autograd/grad_mode.h"
#include "core/error.h"
#include "core/ops/factory.h"
#include "core/stream.h"
#include "dist/ring/exchange.h"

namespace kiln::dist {
namespace {

using Clock = std::chrono::steady_clock;

ncclDataType_t nccl_dtype(DType dtype) {
  switch (dtype) {
    case DType::Float32:
      return ncclFloat32;
    case DType::Float64:
      return ncclFloat64;
    case DType::Float16:
      return ncclFloat16;
    case DType::BFloat16:
      return ncclBfloat16;
    case DType::Int64:
      return ncclInt64;
    case DType::Int32:
      return ncclInt32;
    case DType::UInt8:
      return ncclUint8;
    default:
      break;
  }
  KILN_CHECK(false, "nccl: no NCCL type for ", dtype);
  return ncclFloat32;
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return ncclSum;
    case ReduceOp::Avg:
      return ncclAvg;
    case ReduceOp::Max:
      return ncclMax;
    case ReduceOp::Min:
      return ncclMin;
  }
  return ncclSum;
}

void check_cuda(cudaError_t status, const char* what) {
  KILN_CHECK(status == cudaSuccess, "nccl: ", what, ": ", cudaGetErrorString(status));
}

// A collective issued and not yet known to be finished.
struct Pending {
  std::shared_ptr<Work> work;
  Event done;
  Clock::time_point deadline;
  std::string description;
};

class ProcessGroupNccl final : public ProcessGroup {
 public:
  ProcessGroupNccl(std::shared_ptr<TCPStore> store, int64_t rank, int64_t size, ProcessGroupOptions options,
                   std::string prefix, int device_index)
      : ProcessGroup(rank, size, options),
        store_(std::move(store)),
        prefix_(std::move(prefix)),
        device_(Device::cuda(device_index)),
        stream_(Stream::create(device_)) {
    KILN_CHECK(store_ != nullptr, "ProcessGroupNccl: no store");
    check_cuda(cudaSetDevice(device_index), "cudaSetDevice");
    ncclUniqueId id{};
    const std::string key = prefix_ + "nccl/unique_id";
    if (rank == 0) {
      check(ncclGetUniqueId(&id), "ncclGetUniqueId");
      store_->set(key, std::string(id.internal, sizeof id.internal));
    } else {
      const std::string bytes = store_->get(key);
      KILN_CHECK(bytes.size() == sizeof id.internal, "nccl: the unique id in the store has ", bytes.size(),
                 " bytes, not ", sizeof id.internal);
      std::copy(bytes.begin(), bytes.end(), id.internal);
    }
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;  // so set-up and collectives can be abandoned at the timeout
    check(ncclCommInitRankConfig(&comm_, static_cast<int>(size), id, static_cast<int>(rank), &config),
          "ncclCommInitRankConfig");
    wait_while_in_progress("setting up the communicator", Clock::now() + options.timeout);
    watchdog_ = std::thread([this] { watch(); });
  }

  ~ProcessGroupNccl() override {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      // Issued work finishes (or the watchdog fails it at its deadline) before the communicator goes.
      pending_changed_.wait(lock, [this] { return pending_.empty(); });
      stopping_ = true;
    }
    pending_changed_.notify_all();
    watchdog_.join();
    std::lock_guard<std::mutex> comm_lock(comm_mutex_);
    if (!aborted_) ncclCommDestroy(comm_);
  }

  std::string backend() const override { return "nccl"; }

 protected:
  std::shared_ptr<Work> run_all_reduce(const Tensor& tensor, ReduceOp op) override {
    return launch(header(CollectiveKind::AllReduce, tensor, op), {tensor}, {tensor},
                  [&](const std::vector<Tensor>& in, const std::vector<Tensor>& out, cudaStream_t s) {
                    return ncclAllReduce(in[0].data_ptr(), out[0].data_ptr(),
                                         static_cast<size_t>(in[0].numel()), nccl_dtype(in[0].dtype()),
                                         nccl_op(op), comm_, s);
                  });
  }
  std::shared_ptr<Work> run_all_reduce_coalesced(const std::vector<Tensor>& tensors, ReduceOp op) override {
    // One group call: NCCL fuses the launches (and a rank's calls stay one unit).
    return launch(header(CollectiveKind::AllReduce, tensors.front(), op), tensors, tensors,
                  [&](const std::vector<Tensor>& in, const std::vector<Tensor>& out, cudaStream_t s) {
                    ncclResult_t result = ncclGroupStart();
                    for (size_t i = 0; i < in.size() && result == ncclSuccess; ++i)
                      result = ncclAllReduce(in[i].data_ptr(), out[i].data_ptr(),
                                             static_cast<size_t>(in[i].numel()), nccl_dtype(in[i].dtype()),
                                             nccl_op(op), comm_, s);
                    const ncclResult_t ended = ncclGroupEnd();
                    return result != ncclSuccess ? result : ended;
                  });
  }
  std::shared_ptr<Work> run_broadcast(const Tensor& tensor, int64_t root) override {
    CollectiveHeader h = header(CollectiveKind::Broadcast, tensor, ReduceOp::Sum);
    h.root = root;
    return launch(h, {tensor}, {tensor},
                  [&](const std::vector<Tensor>& in, const std::vector<Tensor>& out, cudaStream_t s) {
                    return ncclBroadcast(in[0].data_ptr(), out[0].data_ptr(),
                                         static_cast<size_t>(in[0].numel()), nccl_dtype(in[0].dtype()),
                                         static_cast<int>(root), comm_, s);
                  });
  }
  std::shared_ptr<Work> run_all_gather(const Tensor& output, const Tensor& input) override {
    return launch(header(CollectiveKind::AllGather, input, ReduceOp::Sum), {input}, {output},
                  [&](const std::vector<Tensor>& in, const std::vector<Tensor>& out, cudaStream_t s) {
                    return ncclAllGather(in[0].data_ptr(), out[0].data_ptr(),
                                         static_cast<size_t>(in[0].numel()), nccl_dtype(in[0].dtype()), comm_,
                                         s);
                  });
  }
  std::shared_ptr<Work> run_reduce_scatter(const Tensor& output, const Tensor& input, ReduceOp op) override {
    return launch(header(CollectiveKind::ReduceScatter, input, op), {input}, {output},
                  [&](const std::vector<Tensor>& in, const std::vector<Tensor>& out, cudaStream_t s) {
                    return ncclReduceScatter(in[0].data_ptr(), out[0].data_ptr(),
                                             static_cast<size_t>(out[0].numel()), nccl_dtype(in[0].dtype()),
                                             nccl_op(op), comm_, s);
                  });
  }
  std::shared_ptr<Work> run_barrier() override {
    // As torch.distributed's NCCL barrier: an all-reduce of one value.
    const Tensor token = zeros({1}, {.dtype = DType::Int32, .device = device_});
    CollectiveHeader h = header(CollectiveKind::Barrier, token, ReduceOp::Sum);
    return launch(h, {token}, {token},
                  [&](const std::vector<Tensor>& in, const std::vector<Tensor>& out, cudaStream_t s) {
                    return ncclAllReduce(in[0].data_ptr(), out[0].data_ptr(), 1, ncclInt32, ncclSum, comm_,
                                         s);
                  });
  }

 private:
  using Call = std::function<ncclResult_t(const std::vector<Tensor>& in, const std::vector<Tensor>& out,
                                          cudaStream_t stream)>;

  CollectiveHeader header(CollectiveKind kind, const Tensor& t, ReduceOp op) {
    return {.sequence = issued_++,
            .kind = static_cast<uint8_t>(kind),
            .dtype = static_cast<uint8_t>(t.dtype()),
            .op = static_cast<uint8_t>(op),
            .numel = t.numel()};
  }

  void check(ncclResult_t result, const char* what) const {
    if (result == ncclSuccess || result == ncclInProgress) return;
    const char* detail = comm_ != nullptr ? ncclGetLastError(comm_) : nullptr;
    KILN_CHECK(false, "nccl: ", what, " failed: ", ncclGetErrorString(result),
               detail != nullptr && *detail != '\0' ? std::string(" (") + detail + ")" : std::string());
  }

  // A non-blocking communicator's calls may return before they are done: poll its state.
  void wait_while_in_progress(const char* what, Clock::time_point deadline) {
    while (true) {
      ncclResult_t state = ncclSuccess;
      check(ncclCommGetAsyncError(comm_, &state), "ncclCommGetAsyncError");
      if (state != ncclInProgress) {
        check(state, what);
        return;
      }
      if (Clock::now() >= deadline) {
        ncclCommAbort(comm_);
        aborted_ = true;
        KILN_CHECK(false, "nccl: ", what, " on rank ", rank(), " timed out after ", timeout().count(),
                   " ms (is every rank running, on its own GPU?)");
      }
      std::this_thread::yield();
    }
  }

  std::shared_ptr<Work> failed(const CollectiveHeader& h, const std::string& why) {
    auto work = std::make_shared<Work>(h.describe());
    work->complete(std::make_exception_ptr(Error("nccl: " + h.describe() + " cannot run: " + why)));
    return work;
  }

  std::shared_ptr<Work> launch(const CollectiveHeader& h, std::vector<Tensor> inputs,
                               std::vector<Tensor> outputs, const Call& call) {
    for (const Tensor& t : inputs)
      KILN_CHECK(t.device() == device_, "nccl: ", h.describe(), " needs tensors on ", device_,
                 " (this group's GPU); got ", t.device());
    for (const Tensor& t : outputs)
      KILN_CHECK(t.device() == device_, "nccl: ", h.describe(), " needs tensors on ", device_,
                 " (this group's GPU); got ", t.device());
    std::lock_guard<std::mutex> comm_lock(comm_mutex_);
    if (aborted_) return failed(h, "the group was aborted after an earlier failure: " + abort_reason_);
    // NCCL takes contiguous buffers: strided tensors go through copies (in place of the
    // caller's when an input is also an output).
    NoGradGuard no_grad;
    std::vector<Tensor> staged_outputs;
    for (Tensor& t : outputs) staged_outputs.push_back(t.is_contiguous() ? t : t.contiguous());
    for (Tensor& t : inputs) {
      if (t.is_contiguous()) continue;
      Tensor staged = t.contiguous();
      for (size_t i = 0; i < outputs.size(); ++i)
        if (outputs[i].is_same(t)) staged = staged_outputs[i];
      t = staged;
    }
    const Stream current = Stream::current(device_);
    Event ready;
    ready.record(current);
    stream_.wait(ready);
    check_cuda(cudaSetDevice(device_.index), "cudaSetDevice");
    try {
      check(call(inputs, staged_outputs, reinterpret_cast<cudaStream_t>(stream_.id())), h.describe().c_str());
      wait_while_in_progress(h.describe().c_str(), Clock::now() + timeout());
    } catch (const Error& e) {
      abort_locked(e.what());
      return failed(h, e.what());
    }
    for (const Tensor& t : inputs) record_stream(t, stream_);
    for (const Tensor& t : staged_outputs) record_stream(t, stream_);
    Pending pending{.work = std::make_shared<Work>(h.describe()),
                    .done = Event(),
                    .deadline = Clock::now() + timeout(),
                    .description = h.describe()};
    pending.done.record(stream_);
    pending.work->set_device_done(pending.done);  // wait_stream() waits on the device, not the host
    bool waited = false;  // the copies back, ordered after the collective on the caller's stream
    for (size_t i = 0; i < outputs.size(); ++i) {
      if (staged_outputs[i].is_same(outputs[i])) continue;
      if (!waited) current.wait(pending.done);
      waited = true;
      outputs[i].copy_(staged_outputs[i]);
    }
    const std::shared_ptr<Work> work = pending.work;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      pending_.push_back(std::move(pending));
    }
    pending_changed_.notify_all();
    return work;
  }

  // Aborts the communicator, publishes why, fails every pending Work. comm_mutex_ held.
  void abort_locked(const std::string& reason) {
    if (aborted_) return;
    aborted_ = true;
    abort_reason_ = reason;
    ncclCommAbort(comm_);
    try {
      store_->set(prefix_ + "abort/" + std::to_string(rank()), reason);
      store_->add(prefix_ + "aborts", 1);
    } catch (const Error&) {
    }
    std::deque<Pending> failing;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      failing.swap(pending_);
    }
    for (Pending& p : failing)
      p.work->complete(std::make_exception_ptr(
          Error("nccl: " + p.description + " failed on rank " + std::to_string(rank()) + ": " + reason)));
    pending_changed_.notify_all();
  }

  // Another rank's published abort, if any (one store request).
  std::optional<std::string> peer_abort() {
    try {
      if (store_->add(prefix_ + "aborts", 0) == 0) return std::nullopt;
      for (int64_t r = 0; r < size(); ++r) {
        const std::string key = prefix_ + "abort/" + std::to_string(r);
        if (r != rank() && store_->check({key}))
          return "rank " + std::to_string(r) + " aborted: " + store_->get(key);
      }
    } catch (const Error&) {
    }
    return std::nullopt;
  }

  void watch() {
    auto next_store_check = Clock::now();
    while (true) {
      {
        std::unique_lock<std::mutex> lock(mutex_);
        pending_changed_.wait_for(lock, std::chrono::milliseconds(2), [this] { return stopping_; });
        if (stopping_ && pending_.empty()) return;
        while (!pending_.empty() && pending_.front().done.query()) {
          pending_.front().work->complete();
          pending_.pop_front();
          pending_changed_.notify_all();
        }
        if (pending_.empty()) continue;
      }
      std::string reason;
      ncclResult_t state = ncclSuccess;
      ncclCommGetAsyncError(comm_, &state);
      Clock::time_point deadline;
      std::string what;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (pending_.empty()) continue;
        deadline = pending_.front().deadline;
        what = pending_.front().description;
      }
      if (state != ncclSuccess && state != ncclInProgress) {
        const char* detail = ncclGetLastError(comm_);
        reason = std::string("NCCL reported ") + ncclGetErrorString(state) +
                 (detail != nullptr ? std::string(": ") + detail : "");
      } else if (Clock::now() >= deadline) {
        reason = what + " timed out after " + std::to_string(timeout().count()) +
                 " ms (a rank that is stopped, stuck, dead, or not calling this collective)";
      } else if (Clock::now() >= next_store_check) {
        next_store_check = Clock::now() + std::chrono::seconds(1);
        if (const auto peer = peer_abort()) reason = *peer;
      }
      if (!reason.empty()) {
        std::lock_guard<std::mutex> comm_lock(comm_mutex_);
        abort_locked(reason);
      }
    }
  }

  std::shared_ptr<TCPStore> store_;
  std::string prefix_;
  Device device_;
  Stream stream_;
  ncclComm_t comm_ = nullptr;
  uint32_t issued_ = 0;
  std::mutex comm_mutex_;  // launches and the abort
  bool aborted_ = false;
  std::string abort_reason_;
  std::mutex mutex_;  // pending_ and stopping_
  std::condition_variable pending_changed_;
  std::deque<Pending> pending_;
  bool stopping_ = false;
  std::thread watchdog_;
};

}  // namespace

bool built_with_nccl() { return true; }

std::shared_ptr<ProcessGroup> make_nccl_process_group(std::shared_ptr<TCPStore> store, int64_t rank,
                                                      int64_t size, ProcessGroupOptions options,
                                                      const std::string& prefix, int device_index) {
  return std::make_shared<ProcessGroupNccl>(std::move(store), rank, size, options, prefix, device_index);
}

}  // namespace kiln::dist
