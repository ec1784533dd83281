// Float32 convolutions on oneDNN: plans cached per key, reorders to and from oneDNN's
// blocked layouts, buffers from the CPU allocator's cache (Note [oneDNN convolutions] in
// conv_onednn.h). Without oneDNN in the build, handles() is false and nothing else runs.
#include "kernels/cpu/conv_onednn.h"

#include "core/error.h"
#include "core/flags.h"

#if defined(KILN_WITH_ONEDNN)
#include <omp.h>

#include <compare>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/kernel_memory.h"
#include "core/memory_format.h"
#endif

namespace kiln::cpu::onednn {

#if defined(KILN_WITH_ONEDNN)
namespace {

using dnnl::memory;

enum class Pass : int { Forward, BackwardInput, BackwardWeight };

const char* pass_name(Pass pass) {
  switch (pass) {
    case Pass::Forward: return "conv_forward";
    case Pass::BackwardInput: return "conv_backward_input";
    case Pass::BackwardWeight: return "conv_backward_weight";
  }
  return "conv";
}

// Everything a plan depends on. The thread count is part of it: oneDNN sizes a
// primitive's scratchpad and work split for the threads there are when it is made.
struct ConvKey {
  Pass pass;
  Dims input, weight, output;  // [N, C_in, s...], [C_out, C_in/G, k...], [N, C_out, o...]
  Dims input_strides, weight_strides, output_strides;  // our tensors' layouts
  Dims stride, padding, dilation;
  int64_t groups;
  int threads;
  auto operator<=>(const ConvKey&) const = default;
};

// One argument of the primitive: our plain layout, the one the primitive chose, and the
// reorder between them (plain -> chosen for the inputs, chosen -> plain for the output),
// absent when they are the same.
struct Operand {
  int arg = 0;
  memory::desc plain;
  memory::desc chosen;
  std::optional<dnnl::reorder> reorder;
};

struct Plan {
  dnnl::primitive primitive;
  Operand a, b, out;  // forward: src, weights -> dst; backward-input: diff_dst, weights ->
                      // diff_src; backward-weight: diff_dst, src -> diff_weights
  memory::desc scratchpad;
};

// The engine and the plan cache are made on first use and never destroyed (as the
// allocators, Note [Leaked allocators] in kernels/cuda/caching_allocator.cpp): a
// convolution on another thread during exit still finds them, and no primitive outlives
// the engine it was made on.
const dnnl::engine& engine() {
  static const dnnl::engine* const cpu = new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return *cpu;
}

memory::desc plain_desc(const memory::dims& dims, const memory::dims& strides) {
  return memory::desc(dims, memory::data_type::f32, strides);
}
memory::desc any_desc(const memory::dims& dims) {
  return memory::desc(dims, memory::data_type::f32, memory::format_tag::any);
}

// The weight as oneDNN sees it: [C_out, C_in/G, k...], or [G, C_out/G, C_in/G, k...] with
// groups (the same memory: group g's C_out/G filters start g C_out/G filters in).
memory::dims weight_dims(const ConvKey& key) {
  memory::dims dims = key.weight;
  if (key.groups > 1) {
    dims[0] /= key.groups;
    dims.insert(dims.begin(), key.groups);
  }
  return dims;
}
memory::dims weight_strides(const ConvKey& key) {
  memory::dims strides = key.weight_strides;
  if (key.groups > 1) strides.insert(strides.begin(), strides[0] * (key.weight[0] / key.groups));
  return strides;
}

// Note [oneDNN and channels-last]: a channels-last (NDHWC / NHWC) call runs oneDNN's own
// channels-last ("nspc") kernels on our activations as they are: the source and
// destination descriptors are fixed to the plain channel-innermost layout instead of
// format_tag::any, so the plan has no activation reorders at all (the weights still go
// to the primitive's blocked layout, a reorder of kilobytes). An NCDHW call keeps the
// blocked layouts and their reorders (Note [oneDNN convolutions]). Measured on the
// 2-core AVX-512 machine (bench/results/2026-12-02-cpu-onednn-nspc.md): a ResNet-18 28^3
// batch-8 step 2.96-3.03 -> 2.83-2.90 s, a DenseNet-121 28^3 batch-4 step 3.15 -> 2.70 s.
// An earlier trial saw a test ResNet-18's first gradients differ from NCDHW's by a few
// percent and blamed these kernels. The kernels were right (every forward output within
// float32 rounding of the blocked kernels'); the network's backward is that sensitive:
// scaling the NCDHW run's convolution weights by random factors within 1 +- 1e-6 moved
// its gradients as much (Note [Float32 agreement of deep networks] in
// tests/nn/models/test_channels_last_training.cpp).
// The activations are described by format tag rather than by strides: a tensor with
// one channel, or no spatial extent, is dense in both layouts (its strides may say
// either), and the tag names the memory the nspc kernels expect.
memory::format_tag channels_last_tag(size_t rank) {
  return rank == 5 ? memory::format_tag::ndhwc : memory::format_tag::nhwc;
}

// Whether a call runs channels-last: its activations (input and output, or their
// gradients) are dense channel-innermost 4-D or 5-D tensors, as the key's sizes and
// strides say. The convolution op has made every operand dense in one format (Note
// [Convolution memory format] in core/ops/conv_arguments.h), so the two agree; an
// activation with one channel, or no spatial extent, is both.
bool runs_channels_last(const ConvKey& key) {
  const int64_t rank = static_cast<int64_t>(key.input.size());
  if (rank != 4 && rank != 5) return false;
  const MemoryFormat format = channels_last_format(rank);
  return is_contiguous_as(key.input, key.input_strides, format) &&
         is_contiguous_as(key.output, key.output_strides, format);
}

memory::desc activation_desc(bool channels_last, const memory::dims& dims, const memory::dims& strides) {
  return channels_last ? memory::desc(dims, memory::data_type::f32, channels_last_tag(dims.size()))
                       : plain_desc(dims, strides);
}

Operand operand(int arg, const memory::desc& plain, const memory::desc& chosen, bool is_output) {
  Operand op{.arg = arg, .plain = plain, .chosen = chosen, .reorder = std::nullopt};
  if (op.plain != op.chosen) {
    op.reorder = is_output ? dnnl::reorder(dnnl::reorder::primitive_desc(engine(), op.chosen, engine(), op.plain))
                           : dnnl::reorder(dnnl::reorder::primitive_desc(engine(), op.plain, engine(), op.chosen));
  }
  return op;
}

Plan make_plan(const ConvKey& key) {
  const memory::dims src = key.input, dst = key.output, wei = weight_dims(key);
  const bool channels_last = runs_channels_last(key);
  const memory::desc src_plain = activation_desc(channels_last, src, key.input_strides),
                     dst_plain = activation_desc(channels_last, dst, key.output_strides);
  const memory::desc wei_plain = plain_desc(wei, weight_strides(key));
  // Note [oneDNN and channels-last]: channels-last activations as they are, else blocked.
  const memory::desc src_asked = channels_last ? src_plain : any_desc(src),
                     dst_asked = channels_last ? dst_plain : any_desc(dst);
  memory::dims dilation = key.dilation;
  for (int64_t& d : dilation) d -= 1;  // oneDNN counts the gaps between taps
  // PyTorch's symmetric padding: oneDNN checks the output size with the same floor
  // division, so the right padding may exceed what the last window reaches.
  const memory::dims pad = key.padding, stride = key.stride;
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  const auto alg = dnnl::algorithm::convolution_direct;
  const dnnl::convolution_forward::primitive_desc forward(
      dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, alg, src_asked, any_desc(wei),
                                      dst_asked, stride, dilation, pad, pad),
      attr, engine());
  Plan plan;
  switch (key.pass) {
    case Pass::Forward:
      plan.primitive = dnnl::convolution_forward(forward);
      plan.a = operand(DNNL_ARG_SRC, src_plain, forward.src_desc(), false);
      plan.b = operand(DNNL_ARG_WEIGHTS, wei_plain, forward.weights_desc(), false);
      plan.out = operand(DNNL_ARG_DST, dst_plain, forward.dst_desc(), true);
      plan.scratchpad = forward.scratchpad_desc();
      break;
    case Pass::BackwardInput: {
      const dnnl::convolution_backward_data::primitive_desc pd(
          dnnl::convolution_backward_data::desc(alg, src_asked, any_desc(wei), dst_asked, stride, dilation,
                                                pad, pad),
          attr, engine(), forward);
      plan.primitive = dnnl::convolution_backward_data(pd);
      plan.a = operand(DNNL_ARG_DIFF_DST, dst_plain, pd.diff_dst_desc(), false);
      plan.b = operand(DNNL_ARG_WEIGHTS, wei_plain, pd.weights_desc(), false);
      plan.out = operand(DNNL_ARG_DIFF_SRC, src_plain, pd.diff_src_desc(), true);
      plan.scratchpad = pd.scratchpad_desc();
      break;
    }
    case Pass::BackwardWeight: {
      const dnnl::convolution_backward_weights::primitive_desc pd(
          dnnl::convolution_backward_weights::desc(alg, src_asked, any_desc(wei), dst_asked, stride, dilation,
                                                   pad, pad),
          attr, engine(), forward);
      plan.primitive = dnnl::convolution_backward_weights(pd);
      plan.a = operand(DNNL_ARG_DIFF_DST, dst_plain, pd.diff_dst_desc(), false);
      plan.b = operand(DNNL_ARG_SRC, src_plain, pd.src_desc(), false);
      plan.out = operand(DNNL_ARG_DIFF_WEIGHTS, wei_plain, pd.diff_weights_desc(), true);
      plan.scratchpad = pd.scratchpad_desc();
      break;
    }
  }
  return plan;
}

// The plans, by key. Bounded: past kMaxPlans (a model with that many distinct conv shapes,
// or a stream of ever-changing input sizes) the cache starts over. Plans are shared, so a
// thread still running one when another clears the cache keeps it alive.
constexpr size_t kMaxPlans = 1024;

struct PlanCache {
  std::mutex mutex;
  std::map<ConvKey, std::shared_ptr<const Plan>> plans;
};

PlanCache& plan_cache() {
  static PlanCache* const cache = new PlanCache;
  return *cache;
}

std::shared_ptr<const Plan> plan_for(const ConvKey& key) {
  PlanCache* const cache = &plan_cache();
  {
    std::lock_guard<std::mutex> lock(cache->mutex);
    if (const auto it = cache->plans.find(key); it != cache->plans.end()) return it->second;
  }
  auto plan = std::make_shared<const Plan>(make_plan(key));  // outside the lock: ~0.1-1 ms
  std::lock_guard<std::mutex> lock(cache->mutex);
  if (cache->plans.size() >= kMaxPlans) cache->plans.clear();
  return cache->plans.emplace(key, std::move(plan)).first->second;
}

// Note [oneDNN calls without allocations]: a call used to make its stream, a oneDNN memory
// per operand and per blocked copy, and the argument maps of each reorder and of the
// primitive: about 65 heap blocks, most of a small convolution's host cost
// (bench/host_cost). Each thread now keeps, per plan, the memories and argument maps
// (CallState) and only points the memories at this call's buffers (set_data_handle); a
// small plan keeps its blocked copies and scratchpad too (kMaxKeptBuffers), a large one
// takes them from the CPU allocator's cache at each call, as before. The states are
// bounded (kMaxCallStates per thread, then they start over) and hold their plan, so a plan
// the cache dropped lives as long as a thread may still run it.
constexpr size_t kMaxCallStates = 256;
// Bytes of blocked copies and scratchpad a state keeps: below the CPU allocator's cached
// sizes (64 KiB), so kept buffers never sit in its cache's statistics.
constexpr int64_t kMaxKeptBuffers = 32 << 10;

struct CallState {
  std::shared_ptr<const Plan> plan;
  memory user_a, user_b, user_out;           // our tensors, pointed at each call's buffers
  memory blocked_a, blocked_b, blocked_out;  // where the plan reorders (else the user memory)
  memory scratchpad;
  std::vector<Tensor> kept;                  // a small plan's buffers, kept across calls
  bool keeps_buffers = false;
  std::unordered_map<int, memory> args, reorder_a, reorder_b, reorder_out;
};

dnnl::stream& thread_stream() {
  thread_local dnnl::stream stream(engine());
  return stream;
}

int64_t buffer_bytes(const Plan& plan) {
  int64_t bytes = static_cast<int64_t>(plan.scratchpad.get_size());
  for (const Operand* op : {&plan.a, &plan.b, &plan.out}) {
    if (op->reorder) bytes += static_cast<int64_t>(op->chosen.get_size());
  }
  return bytes;
}

CallState make_call_state(std::shared_ptr<const Plan> plan) {
  CallState c;
  c.plan = std::move(plan);
  const Plan& p = *c.plan;
  c.keeps_buffers = buffer_bytes(p) <= kMaxKeptBuffers;
  const auto buffer = [&](const memory::desc& desc) {
    if (!c.keeps_buffers) return memory(desc, engine(), DNNL_MEMORY_NONE);
    c.kept.push_back(allocate_workspace(static_cast<int64_t>(desc.get_size()), Device::cpu()));
    return memory(desc, engine(), c.kept.back().data_ptr());
  };
  c.user_a = memory(p.a.plain, engine(), DNNL_MEMORY_NONE);
  c.user_b = memory(p.b.plain, engine(), DNNL_MEMORY_NONE);
  c.user_out = memory(p.out.plain, engine(), DNNL_MEMORY_NONE);
  c.blocked_a = p.a.reorder ? buffer(p.a.chosen) : c.user_a;
  c.blocked_b = p.b.reorder ? buffer(p.b.chosen) : c.user_b;
  c.blocked_out = p.out.reorder ? buffer(p.out.chosen) : c.user_out;
  c.args = {{p.a.arg, c.blocked_a}, {p.b.arg, c.blocked_b}, {p.out.arg, c.blocked_out}};
  if (p.scratchpad.get_size() > 0) {
    c.scratchpad = buffer(p.scratchpad);
    c.args.emplace(DNNL_ARG_SCRATCHPAD, c.scratchpad);
  }
  c.reorder_a = {{DNNL_ARG_FROM, c.user_a}, {DNNL_ARG_TO, c.blocked_a}};
  c.reorder_b = {{DNNL_ARG_FROM, c.user_b}, {DNNL_ARG_TO, c.blocked_b}};
  c.reorder_out = {{DNNL_ARG_FROM, c.blocked_out}, {DNNL_ARG_TO, c.user_out}};
  return c;
}

// This thread's state for `plan` (made at its first call here).
CallState& call_state(const std::shared_ptr<const Plan>& plan) {
  thread_local std::unordered_map<const Plan*, CallState> states;
  if (const auto it = states.find(plan.get()); it != states.end()) return it->second;
  if (states.size() >= kMaxCallStates) states.clear();
  return states.emplace(plan.get(), make_call_state(plan)).first->second;
}

// Runs one planned convolution on float32 buffers laid out as the plan's key says.
void run(const std::shared_ptr<const Plan>& planned, const void* a, const void* b, void* out) {
  const Plan& plan = *planned;
  CallState& c = call_state(planned);
  dnnl::stream& stream = thread_stream();
  std::vector<Tensor> buffers;  // a large plan's blocked copies and scratchpad, for this call
  const auto point_at_buffer = [&](memory& m, const memory::desc& desc) {
    buffers.push_back(allocate_workspace(static_cast<int64_t>(desc.get_size()), Device::cpu()));
    m.set_data_handle(buffers.back().data_ptr());
  };
  if (!c.keeps_buffers) {
    if (plan.a.reorder) point_at_buffer(c.blocked_a, plan.a.chosen);
    if (plan.b.reorder) point_at_buffer(c.blocked_b, plan.b.chosen);
    if (plan.out.reorder) point_at_buffer(c.blocked_out, plan.out.chosen);
    if (plan.scratchpad.get_size() > 0) point_at_buffer(c.scratchpad, plan.scratchpad);
  }
  c.user_a.set_data_handle(const_cast<void*>(a));  // only read
  c.user_b.set_data_handle(const_cast<void*>(b));
  c.user_out.set_data_handle(out);
  if (plan.a.reorder) plan.a.reorder->execute(stream, c.reorder_a);
  if (plan.b.reorder) plan.b.reorder->execute(stream, c.reorder_b);
  plan.primitive.execute(stream, c.args);
  if (plan.out.reorder) plan.out.reorder->execute(stream, c.reorder_out);
  stream.wait();
}

void convolve(Pass pass, const Tensor& input_like, const Tensor& weight_like, const Tensor& output_like,
              const ConvParams& params, const void* a, const void* b, void* out) {
  const ConvKey key{.pass = pass,
                    .input = input_like.sizes(),
                    .weight = weight_like.sizes(),
                    .output = output_like.sizes(),
                    .input_strides = input_like.strides(),
                    .weight_strides = weight_like.strides(),
                    .output_strides = output_like.strides(),
                    .stride = params.stride,
                    .padding = params.padding,
                    .dilation = params.dilation,
                    .groups = params.groups,
                    .threads = omp_get_max_threads()};
  try {
    run(plan_for(key), a, b, out);
  } catch (const dnnl::error& error) {
    KILN_CHECK(false, pass_name(pass), ": oneDNN failed (", error.what(), ", status ", static_cast<int>(error.status),
               ") for input ", input_like.sizes(), ", weight ", weight_like.sizes(), ", output ",
               output_like.sizes());
  }
}

}  // namespace

// Not inside an OpenMP parallel region: oneDNN sizes its work split by
// omp_get_max_threads(), which there still says N while the region's nested team has one
// thread, and its JIT backward-weight kernel then waits at a barrier for threads that never
// come (a hang, reproduced). Such calls take the reference path, which runs serially there.
bool handles(const Tensor& a, const Tensor& b, const Tensor& out) {
  return onednn_enabled() && !omp_in_parallel() && a.dtype() == DType::Float32 && a.numel() > 0 &&
         b.numel() > 0 && out.numel() > 0;
}

void conv_forward(const Tensor& input, const Tensor& weight, const ConvParams& params, const Tensor& out) {
  convolve(Pass::Forward, input, weight, out, params, input.data_ptr(), weight.data_ptr(), out.data_ptr());
}

void conv_backward_input(const Tensor& grad_out, const Tensor& weight, const ConvParams& params,
                         const Tensor& grad_input) {
  convolve(Pass::BackwardInput, grad_input, weight, grad_out, params, grad_out.data_ptr(), weight.data_ptr(),
           grad_input.data_ptr());
}

void conv_backward_weight(const Tensor& grad_out, const Tensor& input, const ConvParams& params,
                          const Tensor& grad_weight) {
  convolve(Pass::BackwardWeight, input, grad_weight, grad_out, params, grad_out.data_ptr(), input.data_ptr(),
           grad_weight.data_ptr());
}

size_t cached_plans() {
  std::lock_guard<std::mutex> lock(plan_cache().mutex);
  return plan_cache().plans.size();
}

size_t cached_channels_last_plans() {
  std::lock_guard<std::mutex> lock(plan_cache().mutex);
  size_t count = 0;
  for (const auto& [key, plan] : plan_cache().plans) count += runs_channels_last(key);
  return count;
}

const char* version() {
  static const std::string text = [] {
    const dnnl_version_t* v = dnnl_version();
    return std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
  }();
  return text.c_str();
}

#else  // no oneDNN in this build: the reference path runs every convolution

bool handles(const Tensor&, const Tensor&, const Tensor&) { return false; }

void conv_forward(const Tensor&, const Tensor&, const ConvParams&, const Tensor&) {
  KILN_ASSERT(false, "conv_forward: this build has no oneDNN (handles() is false)");
}
void conv_backward_input(const Tensor&, const Tensor&, const ConvParams&, const Tensor&) {
  KILN_ASSERT(false, "conv_backward_input: this build has no oneDNN (handles() is false)");
}
void conv_backward_weight(const Tensor&, const Tensor&, const ConvParams&, const Tensor&) {
  KILN_ASSERT(false, "conv_backward_weight: this build has no oneDNN (handles() is false)");
}
const char* version() { return "not built"; }
size_t cached_plans() { return 0; }
size_t cached_channels_last_plans() { return 0; }

#endif

}  // namespace kiln::cpu::onednn
