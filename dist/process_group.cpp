// ProcessGroup (process_group.h): the argument checks every backend shares, and the list
// forms of all_gather and reduce_scatter on top of the flat ones.
#include "dist/process_group.h"

#include <string>

#include "core/autograd/grad_mode.h"
#include "core/error.h"
#include "core/ops/factory.h"
#include "core/ops/shape.h"

namespace kiln::dist {
namespace {

// `what`: "output", "input", or "" for a collective's one tensor.
void check_tensor(const Tensor& t, const char* op, const std::string& what) {
  const std::string name = what.empty() ? "the tensor" : "the " + what + " tensor";
  KILN_CHECK(t.defined(), op, ": ", name, " is undefined");
  const DType d = t.dtype();
  KILN_CHECK(is_floating(d) || d == DType::Int64 || d == DType::Int32 || d == DType::UInt8, op, ": ", name,
             " is ", d, "; collectives take float32/64, float16, bfloat16, int64, int32 or uint8");
}

void check_op(const Tensor& t, ReduceOp op, const char* name) {
  KILN_CHECK(static_cast<int>(op) <= static_cast<int>(ReduceOp::Min), name, ": unknown ReduceOp ",
             static_cast<int>(op));
  KILN_CHECK(op != ReduceOp::Avg || t.is_floating_point(), name, ": avg needs a floating-point tensor, got ",
             t.dtype(), " (an integer average would round; reduce with sum and divide)");
}

void check_same_kind(const Tensor& a, const Tensor& b, const char* op) {
  KILN_CHECK(a.dtype() == b.dtype() && a.device() == b.device(), op, ": output is ", a.dtype(), " on ",
             a.device(), " but input is ", b.dtype(), " on ", b.device());
}

}  // namespace

ProcessGroup::ProcessGroup(int64_t rank, int64_t size, ProcessGroupOptions options)
    : rank_(rank), size_(size), options_(options) {
  KILN_CHECK(size >= 1 && rank >= 0 && rank < size, "process group: rank ", rank, " in a group of ", size);
  KILN_CHECK(options.timeout.count() > 0, "process group: the timeout must be positive");
}

std::shared_ptr<Work> ProcessGroup::all_reduce(const Tensor& tensor, ReduceOp op) {
  check_tensor(tensor, "all_reduce", "");
  check_op(tensor, op, "all_reduce");
  return run_all_reduce(tensor, op);
}

std::shared_ptr<Work> ProcessGroup::all_reduce_coalesced(const std::vector<Tensor>& tensors, ReduceOp op) {
  KILN_CHECK(!tensors.empty(), "all_reduce_coalesced: no tensors");
  for (const Tensor& t : tensors) {
    check_tensor(t, "all_reduce_coalesced", "");
    check_op(t, op, "all_reduce_coalesced");
  }
  return run_all_reduce_coalesced(tensors, op);
}

std::shared_ptr<Work> ProcessGroup::broadcast(const Tensor& tensor, int64_t root) {
  check_tensor(tensor, "broadcast", "");
  KILN_CHECK(root >= 0 && root < size_, "broadcast: root ", root, " is not a rank of this group of ", size_);
  return run_broadcast(tensor, root);
}

std::shared_ptr<Work> ProcessGroup::all_gather_into_tensor(const Tensor& output, const Tensor& input) {
  check_tensor(output, "all_gather", "output");
  check_tensor(input, "all_gather", "input");
  check_same_kind(output, input, "all_gather");
  KILN_CHECK(output.numel() == input.numel() * size_, "all_gather: the output has ", output.numel(),
             " elements; it needs ", size_, " x ", input.numel());
  return run_all_gather(output, input);
}

std::shared_ptr<Work> ProcessGroup::all_gather(const std::vector<Tensor>& outputs, const Tensor& input) {
  check_tensor(input, "all_gather", "input");
  KILN_CHECK(static_cast<int64_t>(outputs.size()) == size_, "all_gather: ", outputs.size(),
             " output tensors for a group of ", size_);
  for (const Tensor& out : outputs) {
    check_tensor(out, "all_gather", "output");
    check_same_kind(out, input, "all_gather");
    KILN_CHECK(out.sizes() == input.sizes(), "all_gather: an output of shape ", out.sizes(),
               " for an input of ", input.sizes());
  }
  const Tensor flat = empty({size_ * input.numel()}, {.dtype = input.dtype(), .device = input.device()});
  std::shared_ptr<Work> work = run_all_gather(flat, input);
  work->finish_in_wait([flat, outputs, n = input.numel()] {
    NoGradGuard no_grad;
    for (size_t r = 0; r < outputs.size(); ++r) {
      Tensor out = outputs[r];
      out.copy_(flat.narrow(0, static_cast<int64_t>(r) * n, n).view(out.sizes()));
    }
  });
  return work;
}

std::shared_ptr<Work> ProcessGroup::reduce_scatter_tensor(const Tensor& output, const Tensor& input,
                                                          ReduceOp op) {
  check_tensor(output, "reduce_scatter", "output");
  check_tensor(input, "reduce_scatter", "input");
  check_same_kind(output, input, "reduce_scatter");
  check_op(input, op, "reduce_scatter");
  KILN_CHECK(input.numel() == output.numel() * size_, "reduce_scatter: the input has ", input.numel(),
             " elements; it needs ", size_, " x ", output.numel());
  return run_reduce_scatter(output, input, op);
}

std::shared_ptr<Work> ProcessGroup::reduce_scatter(const Tensor& output, const std::vector<Tensor>& inputs,
                                                   ReduceOp op) {
  check_tensor(output, "reduce_scatter", "output");
  KILN_CHECK(static_cast<int64_t>(inputs.size()) == size_, "reduce_scatter: ", inputs.size(),
             " input tensors for a group of ", size_);
  std::vector<Tensor> flat_inputs;
  for (const Tensor& in : inputs) {
    check_tensor(in, "reduce_scatter", "input");
    check_same_kind(output, in, "reduce_scatter");
    KILN_CHECK(in.sizes() == output.sizes(), "reduce_scatter: an input of shape ", in.sizes(),
               " for an output of ", output.sizes());
    flat_inputs.push_back(in.reshape({-1}));
  }
  NoGradGuard no_grad;
  return reduce_scatter_tensor(output, cat(flat_inputs, 0), op);
}

std::shared_ptr<Work> ProcessGroup::barrier() { return run_barrier(); }

}  // namespace kiln::dist
