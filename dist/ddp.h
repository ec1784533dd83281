// DistributedDataParallel: data-parallel training of one model replica per rank, as
// torch.nn.parallel.DistributedDataParallel. Each rank runs forward and backward on its
// own part of the batch; DDP averages the gradients over the ranks during backward, so
// after backward every replica holds the gradient of the whole batch and the same
// optimizer step keeps the replicas identical.
//
// - At construction, rank 0's parameters and buffers are broadcast to every rank; with
//   broadcast_buffers (default, as PyTorch) buffers (BatchNorm's running statistics) are
//   broadcast again before each forward.
// - Note [Gradient buckets]: the parameters that require grad are taken in reverse order
//   (roughly the order backward produces their gradients) and grouped into buckets of at
//   most bucket_cap_mb (the first one first_bucket_cap_mb, so communication starts early),
//   one dtype and device per bucket. A bucket is one flat tensor and each parameter's
//   .grad is a view of its slice, so the all-reduce needs no copy in or out.
// - A post-accumulate-grad hook on every parameter marks it ready; when all of a bucket's
//   parameters are ready, its asynchronous all-reduce starts (buckets start in index
//   order, the same on every rank, as collectives must), so communication overlaps the
//   rest of backward. The gradient is divided by the world size first (an average that
//   cannot overflow float16). When the last bucket has started, the hook waits for all of
//   them: backward returns with averaged gradients, ready for GradScaler's unscale_,
//   clipping, and the optimizer, which need nothing DDP-specific.
// - no_sync(): a guard under which backward only accumulates locally (gradient
//   accumulation); the first backward after it averages the accumulated gradients.
// - A parameter that got no gradient in a backward leaves its bucket unfinished; the next
//   forward is then an error naming it, unless find_unused_parameters, which finds the
//   parameters the forward output does not depend on and counts them ready at once (with
//   zero gradient); a parameter unused on every rank keeps the gradient it had.
//
//   DistributedDataParallel ddp(model, {.group = group});
//   Tensor loss = criterion(ddp.forward(x), y);
//   loss.backward();  // returns with gradients averaged over the ranks
//   optimizer.step();
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "dist/process_group.h"
#include "nn/layer.h"

namespace kiln::dist {

struct DDPOptions {
  std::shared_ptr<ProcessGroup> group = nullptr;  // default: the default group
  double bucket_cap_mb = 25.0;
  double first_bucket_cap_mb = 1.0;
  bool broadcast_buffers = true;
  bool find_unused_parameters = false;
};

class DistributedDataParallel : public nn::Layer {
 public:
  DistributedDataParallel(std::shared_ptr<nn::Layer> module, DDPOptions options = {});
  ~DistributedDataParallel() override;
  std::string type_name() const override { return "DistributedDataParallel"; }

  Tensor forward(const Tensor& input) override;
  // For modules with another signature: call before and after their forward.
  void pre_forward();
  void post_forward(const std::vector<Tensor>& outputs);

  // Disables gradient averaging while it lives (gradient accumulation).
  class NoSync {
   public:
    explicit NoSync(DistributedDataParallel& ddp);
    ~NoSync();
    NoSync(const NoSync&) = delete;
    NoSync& operator=(const NoSync&) = delete;

   private:
    DistributedDataParallel& ddp_;
    bool previous_;
  };
  NoSync no_sync() { return NoSync(*this); }

  const std::shared_ptr<nn::Layer>& module() const { return module_; }
  ProcessGroup& process_group() const { return *group_; }
  // Bucket b's parameters, by name (for tests and for people reading how DDP works).
  std::vector<std::vector<std::string>> bucket_parameter_names() const;

 private:
  struct State;
  std::shared_ptr<nn::Layer> module_;
  std::shared_ptr<ProcessGroup> group_;
  DDPOptions options_;
  std::shared_ptr<State> state_;  // the hooks hold it weakly
};

// Broadcasts `tensors` from `root` as one flat message per dtype and device, and writes
// the result back into them (DDP's start-up and buffer broadcasts).
void broadcast_coalesced(ProcessGroup& group, const std::vector<Tensor>& tensors, int64_t root);

}  // namespace kiln::dist
