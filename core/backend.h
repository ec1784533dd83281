// Backend: the whole kernel surface of Kiln in one interface.
//
// Public ops (core/ops/) validate their arguments, pick the result dtype and shape,
// allocate the output, then call `backend(device).kernel(...)`. Backends never see
// broadcasting or type promotion: the op layer hands them operands already expanded to
// the output shape (stride 0 where broadcast) and already cast to the compute dtype,
// with arbitrary strides. A backend must handle any strides, including outputs that
// alias an input elementwise (in-place ops pass `out` == `a`).
//
// Backends are registered explicitly by kiln::init() (kiln/init.h), never by static
// initializers; `backend(device)` looks them up (core/backend.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/allocator.h"
#include "core/cudnn.h"
#include "core/device.h"
#include "core/generator.h"
#include "core/op_table.h"
#include "core/scalar.h"
#include "core/tensor.h"

namespace kiln {

// ---- op codes -----------------------------------------------------------------------------
// The elementwise codes (UnaryOp, BinaryOp), their ElementwiseParams and the table saying
// each code's name, dtypes and result kind are core/op_table.h.

enum class ReduceOp : uint8_t {
  Sum,     // out = sum x (integers and bool accumulate in int64)
  Mean,    // out = sum x / count
  Max,     // amax
  Min,     // amin
  NormP,   // (sum |x|^p)^(1/p), p = params.p (p = 1 and 2 are special-cased)
  NormInf, // max |x|
};

struct ReduceParams {
  double p = 2.0;  // NormP
};

enum class ArgReduceOp : uint8_t { ArgMax, ArgMin };

// Convolution geometry (Note [Convolution layout]): one entry per spatial dim (1, 2 or 3).
struct ConvParams {
  Dims stride;
  Dims padding;   // zeros added on both sides
  Dims dilation;
  int64_t groups = 1;
};

// Pooling geometry: one entry per spatial dim. Output size along a dim is
// floor_or_ceil((s + 2 p - d (k - 1) - 1) / stride) + 1, where with ceil_mode the last
// window must still start inside the input or its left padding (PyTorch's rule); see
// pool_output_size and the Notes in core/pool_geometry.h.
struct PoolParams {
  std::vector<int64_t> kernel;
  std::vector<int64_t> stride;
  std::vector<int64_t> padding;   // implicit -inf (max) or 0 (avg) on both sides
  std::vector<int64_t> dilation;  // max pooling only (1 for avg)
  bool ceil_mode = false;
  bool count_include_pad = true;  // avg: divide by the window size including padding
  int64_t divisor_override = 0;   // avg: divide by this instead, when > 0
};

// The per-channel normalisation of batch norm's kernels, y = (x - mean) invstd weight +
// bias ([C] tensors in the statistics dtype; weight and bias undefined: 1 and 0), and
// whether a ReLU follows it, fused into the kernels. Note [Batch norm with ReLU]: with
// relu the output is max(y, 0) and the gradient passes where y > 0, y recomputed from the
// saved input in both backward kernels, so the fused op saves no output and reads no
// mask: forward is stats + apply (the separate relu's read and write of the activation
// gone), backward the same two passes as without relu (its read of grad and output and
// write of the masked grad gone). Each backend evaluates y with the same expression in
// apply and backward, so the mask matches the forward's output exactly; only a half
// output that rounds a positive y below its smallest subnormal to 0 still passes its
// gradient (the derivative of max(y, 0) at that y), where relu on the rounded output
// would not. Outputs equal relu(batch_norm(...))'s; gradients too, up to the order in
// which the CPU adds up the per-channel sums of long runs (a fixed order either way:
// the fused reduction keeps 16 partial sums where the plain one keeps 32).
//
// Note [Batch norm, add and ReLU]: the tail of a residual block, relu(bn(x) + residual),
// fused the same way. apply takes `residual` (relu must be on) and writes max(y + r, 0),
// y and the sum in the opmath type, rounded once. Its backward masks by the forward's
// output (saved: it is the next block's input, kept anyway, where the residual of a
// downsampling block would be kept only for this), so backward_reduce takes `output`
// instead of `residual`, and also writes the masked gradient to `grad_y`: that is the
// residual's gradient (the fork) and the dy that backward_input then reads, without a
// mask. Forward: stats + apply (4 passes over memory, against 8 for bn, add and relu
// apart); backward: reduce (reads grad_out, x, output, writes grad_y) + input (reads
// grad_y and x, writes grad_in): 7 passes against 8. Outputs equal relu(bn(x) +
// residual)'s where bn's output is not rounded (float64), and otherwise differ only by
// that one rounding fewer.
struct BatchNormCoefficients {
  Tensor mean{}, invstd{}, weight{}, bias{};
  bool relu = false;
  Tensor residual{};  // apply only: added before the ReLU (Note [Batch norm, add and ReLU])
  Tensor output{};    // backward_reduce only: the fused add's output, whose sign is the mask
};

// The most 64-bit words one Backend::write_words call writes (they travel in a kernel's
// arguments on CUDA).
inline constexpr int64_t kMaxWrittenWords = 16;

// Name of a reduction for error messages ("sum", "amax").
const char* op_name(ReduceOp op);

class Backend {
 public:
  virtual ~Backend() = default;

  // ---- devices and memory ---------------------------------------------------------------
  // Devices of this type (the CPU backend has one).
  virtual int device_count() const { return 1; }
  // Waits until all work queued on the device has finished (the CPU runs synchronously).
  virtual void synchronize(int /*device_index*/) {}
  virtual Allocator& allocator(int device_index) = 0;
  // Page-locked host memory for fast, asynchronous host<->device copies, from a backend
  // that has it (CUDA); null otherwise. is_pinned: whether `ptr` lies in such memory.
  virtual Allocator* pinned_allocator() { return nullptr; }
  virtual bool is_pinned(const void* /*ptr*/) const { return false; }
  // The device allocator's statistics (kiln::memory_stats, core/allocator.h).
  virtual AllocatorStats memory_stats(int device_index) = 0;
  virtual void reset_peak_memory_stats(int device_index) = 0;
  // ---- streams and events (core/stream.h is the public face) ----------------------------
  // A backend whose device runs work in queues (CUDA) answers these; the defaults are a
  // device that runs everything at once: one stream (0), events always complete.
  // Streams are named by an integer (CUDA: the cudaStream_t; 0 is the default stream),
  // events by an opaque handle from create_event.
  virtual std::uintptr_t create_stream(int /*device_index*/) { return 0; }
  // Waits for the stream's queued work, then destroys it.
  virtual void destroy_stream(int /*device_index*/, std::uintptr_t /*stream*/) {}
  virtual std::uintptr_t current_stream(int /*device_index*/) const { return 0; }
  virtual void set_current_stream(int /*device_index*/, std::uintptr_t /*stream*/) {}
  virtual void synchronize_stream(int /*device_index*/, std::uintptr_t /*stream*/) {}
  // Timing events cost more to record; ordering-only ones do not time.
  virtual void* create_event(int /*device_index*/, bool /*enable_timing*/) { return nullptr; }
  virtual void destroy_event(void* /*event*/) {}
  virtual void record_event(void* /*event*/, int /*device_index*/, std::uintptr_t /*stream*/) {}
  // Later work queued on `stream` waits for `event` (no host block).
  virtual void stream_wait_event(int /*device_index*/, std::uintptr_t /*stream*/, void* /*event*/) {}
  virtual bool event_query(void* /*event*/) { return true; }
  virtual void event_synchronize(void* /*event*/) {}
  // Milliseconds between two completed timing events.
  virtual double event_elapsed_ms(void* /*start*/, void* /*end*/) { return 0.0; }
  // The memory of `storage` (from this backend's allocator) is also used by work queued
  // on `stream`: the allocator must not reuse it before that work is done.
  virtual void record_stream(const Storage& /*storage*/, int /*device_index*/, std::uintptr_t /*stream*/) {}
  // ---- CUDA graphs (core/cuda_graph.h is the public face) --------------------------------
  // A graph is an opaque handle from create_graph. A backend without graphs refuses with an
  // error (these defaults); the CUDA backend records the calling thread's work between
  // capture_begin and capture_end and replays it on the current stream.
  virtual void* create_graph(int device_index);
  virtual void destroy_graph(void* /*graph*/) {}
  virtual void graph_capture_begin(void* graph);
  virtual void graph_capture_end(void* graph);
  virtual void graph_capture_abandon(void* graph);
  virtual void graph_replay(void* graph);
  // How many times the graph was captured, and how many of those updated the previous
  // instantiation in place instead of making a new one (cudaGraphExecUpdate).
  virtual int64_t graph_captures(void* /*graph*/) const { return 0; }
  virtual int64_t graph_updates(void* /*graph*/) const { return 0; }

  // How many threads this backend's kernels may use when called from the calling thread
  // (the CPU backend: OpenMP's team size, a per-thread setting); other threads keep
  // theirs. The DataLoader's workers take 1, as PyTorch's workers call
  // torch.set_num_threads(1): the workers are the parallelism, and teams inside each of
  // them would fight them for the cores. A backend without threads ignores it.
  virtual void set_threads_of_this_thread(int /*threads*/) {}
  virtual int threads_of_this_thread() const { return 1; }
  // dst[i] = cast(src[i]); same shape, any strides and dtypes. Copies between this
  // backend's device and the CPU are this backend's job too (the CUDA backend's).
  virtual void copy(const Tensor& src, const Tensor& dst, bool non_blocking) = 0;
  virtual void fill(const Tensor& dst, Scalar value) = 0;
  // dst (contiguous, 8-byte elements, `count` <= kMaxWrittenWords of them) = words, in
  // stream order and from the call's own arguments: no host buffer is read after the call
  // returns (Note [Per-step values on the device], core/device_values.h).
  virtual void write_words(const Tensor& dst, const uint64_t* words, int64_t count) = 0;
  // dst[i] = start + i * step over dst in row-major order (dst contiguous).
  virtual void arange(const Tensor& dst, Scalar start, Scalar step) = 0;

  // ---- elementwise (one engine per backend) ---------------------------------------------
  virtual void unary(UnaryOp op, const Tensor& in, const Tensor& out,
                     const ElementwiseParams& params) = 0;
  virtual void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out,
                      const ElementwiseParams& params) = 0;
  // out = cond ? a : b; cond is Bool, a/b/out share a dtype.
  virtual void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) = 0;

  // ---- reductions (one engine per backend) ----------------------------------------------
  // `out` has the input's rank with size 1 in every reduced dim (keepdim form);
  // `reduce_dims` is sorted and unique. An empty reduction gives the op's identity
  // (Sum 0, Max -inf ...); the op layer rejects those without one.
  virtual void reduce(ReduceOp op, const Tensor& in, const Dims& reduce_dims,
                      const Tensor& out, const ReduceParams& params) = 0;
  // Welford: var with `correction` (1 = unbiased) and the mean, both in keepdim form.
  virtual void var_mean(const Tensor& in, const Dims& reduce_dims,
                        int64_t correction, const Tensor& var_out, const Tensor& mean_out) = 0;
  // Index (Int64) of the first max/min along `dim`, and the value; keepdim form.
  virtual void arg_reduce(ArgReduceOp op, const Tensor& in, int64_t dim, const Tensor& values_out,
                          const Tensor& indices_out) = 0;

  // ---- softmax (fused, numerically stable: subtract the row max) -------------------------
  virtual void softmax(const Tensor& in, int64_t dim, bool log, const Tensor& out) = 0;
  // grad_in = softmax: out * (g - sum(g * out)); log_softmax: g - exp(out) * sum(g).
  virtual void softmax_backward(const Tensor& grad_out, const Tensor& out, int64_t dim, bool log,
                                const Tensor& grad_in) = 0;

  // ---- matrix products ------------------------------------------------------------------
  // out[b] = a[b] @ bmat[b]: a [B, M, K], bmat [B, K, N], out [B, M, N], any strides.
  virtual void bmm(const Tensor& a, const Tensor& b, const Tensor& out) = 0;

  // ---- convolution (Note [Convolution layout]) -------------------------------------------
  // Note [Convolution layout]: channels first, k = 1, 2 or 3 spatial dims. input
  // [N, C_in, s...], weight [C_out, C_in / groups, k...], output [N, C_out, o...] with
  // o = (s + 2 padding - dilation (k - 1) - 1) / stride + 1. Group g maps input channels
  // [g C_in/groups, (g+1) C_in/groups) to output channels [g C_out/groups, ...). The op
  // layer (core/ops/conv.h) validates shapes, passes tensors of one floating dtype, all
  // dense in one layout (row-major, or channels-last: Note [Convolution memory format] in
  // core/ops/conv_arguments.h), and adds the bias itself. Every kernel overwrites its
  // output (=).
  virtual void conv_forward(const Tensor& input, const Tensor& weight, const ConvParams& params,
                            const Tensor& out) = 0;
  // grad_input [N, C_in, s...] = the gradient of the forward with respect to input.
  virtual void conv_backward_input(const Tensor& grad_out, const Tensor& weight,
                                   const ConvParams& params, const Tensor& grad_input) = 0;
  // grad_weight [C_out, C_in / groups, k...] = the gradient with respect to weight.
  virtual void conv_backward_weight(const Tensor& grad_out, const Tensor& input,
                                    const ConvParams& params, const Tensor& grad_weight) = 0;

  // ---- convolution algorithm cache (kiln::cudnn, core/cudnn.h) ---------------------------
  // A backend that picks convolution algorithms by measuring them (CUDA: cuDNN, with its
  // benchmark mode) caches its choices per convolution key; these reach that cache. A
  // backend without one has no counters and nothing to clear, save or load.
  virtual cudnn::Stats conv_algorithm_stats() { return {}; }
  virtual void reset_conv_algorithm_stats() {}
  // Each cached key's calls since the reset and fastest searched time (cudnn::conv_uses).
  virtual std::vector<cudnn::ConvUse> conv_uses() { return {}; }
  virtual void clear_conv_algorithm_cache() {}
  // Writes the cache to `path` atomically (cudnn::SaveReport).
  virtual cudnn::SaveReport save_conv_algorithm_cache(const std::string& path);
  // Adds the entries of a file written by save_conv_algorithm_cache (cudnn::LoadReport).
  virtual cudnn::LoadReport load_conv_algorithm_cache(const std::string& path);

  // ---- batch normalisation (Note [Batch norm pieces]) ------------------------------------
  // Note [Batch norm pieces]: training-mode batch norm is three passes, split so that
  // SyncBatchNorm can all-reduce per-channel numbers between them: statistics, apply, and
  // for backward a per-channel reduction then an elementwise pass. input and grad_out are
  // [N, C, *], all big operands contiguous or all channels-last; per-channel tensors are [C] in the
  // statistics dtype (float32 for float16/bfloat16/float32 input, float64 for float64). Every kernel
  // overwrites its outputs. The normalisation y = (x - mean[c]) invstd[c] weight[c] + bias[c] comes as
  // BatchNormCoefficients (weight and bias undefined, affine = false: 1 and 0), with
  // `relu` when a ReLU follows it, fused (Note [Batch norm with ReLU]).
  // mean and biased variance of each channel over N and the spatial dims (Welford).
  virtual void batch_norm_stats(const Tensor& input, const Tensor& mean, const Tensor& var) = 0;
  // out = y, or max(y, 0) with relu (a NaN stays NaN, as relu), or max(y + norm.residual, 0)
  // when the residual is given (relu on; Note [Batch norm, add and ReLU]).
  virtual void batch_norm_apply(const Tensor& input, const BatchNormCoefficients& norm, const Tensor& out) = 0;
  // sum_dy[c] = sum dy, sum_dy_xmu[c] = sum dy (x - mean[c]) over N and the spatial dims;
  // with relu, dy is grad_out where y > 0 and 0 elsewhere (norm.invstd, weight and bias
  // are read only then); with norm.output (relu on), grad_out where output > 0, and dy is
  // also written to grad_y (defined exactly then; laid out as the input).
  virtual void batch_norm_backward_reduce(const Tensor& grad_out, const Tensor& input,
                                          const BatchNormCoefficients& norm, const Tensor& sum_dy,
                                          const Tensor& sum_dy_xmu, const Tensor& grad_y) = 0;
  // grad_in = (dy - sum_dy/count - (x - mean) invstd^2 sum_dy_xmu/count) invstd weight, dy
  // as in backward_reduce (the fused add's backward passes grad_y, relu off: norm.output is
  // never read here), where count is the number of elements per channel (over every
  // rank for SyncBatchNorm).
  virtual void batch_norm_backward_input(const Tensor& grad_out, const Tensor& input,
                                         const BatchNormCoefficients& norm, const Tensor& sum_dy,
                                         const Tensor& sum_dy_xmu, int64_t count, const Tensor& grad_in) = 0;

  // ---- pooling (PoolParams; input [N, C, s...], 1-3 spatial dims) -----------------------
  // Every operand of a call is contiguous, or every one channels-last (the indices laid out
  // as the output); an index is a flat offset in the spatial volume in either layout.
  // out = the max of each window; indices (Int64) = where it was, as a flat offset within
  // the input's spatial volume (PyTorch's return_indices). NaN wins; ties keep the first.
  // A window with no tap inside the input (dilation only) gives -inf and index -1.
  virtual void max_pool_forward(const Tensor& input, const PoolParams& params, const Tensor& out,
                                const Tensor& indices) = 0;
  // grad_in (overwritten) = the sum of the grad_out elements whose index points at it.
  virtual void max_pool_backward(const Tensor& grad_out, const Tensor& indices,
                                 const PoolParams& params, const Tensor& grad_in) = 0;
  virtual void avg_pool_forward(const Tensor& input, const PoolParams& params, const Tensor& out) = 0;
  // grad_in (overwritten): each grad_out element spread evenly over its window.
  virtual void avg_pool_backward(const Tensor& grad_out, const PoolParams& params,
                                 const Tensor& grad_in) = 0;
  // Adaptive: output element i of o along a dim of size s averages the input window
  // [floor(i s / o), ceil((i + 1) s / o)).
  virtual void adaptive_avg_pool_forward(const Tensor& input, const Tensor& out) = 0;
  virtual void adaptive_avg_pool_backward(const Tensor& grad_out, const Tensor& grad_in) = 0;

  // ---- indexing --------------------------------------------------------------------------
  // Every index value must lie in [0, size of dim); one outside is a kiln::Error naming the
  // op, the value and the size, and is never dereferenced.
  // Note [Checked indices]: checking costs the CUDA backend a host-device sync (it has to
  // read back what the kernel found). The backward of gather, scatter_add and index_select
  // reuses the forward's index, which the forward kernel already checked against the same
  // size (and the saved tensor's version counter proves it is unchanged), so the op layer
  // passes IndexBounds::Checked there and a backend may skip the check.
  enum class IndexBounds : uint8_t { Check, Checked };
  // out[..i..] = in[..index[..i..]..] along dim (index Int64, shaped like out).
  virtual void gather(const Tensor& in, int64_t dim, const Tensor& index, const Tensor& out,
                      IndexBounds bounds) = 0;
  // out[..index[..i..]..] += src[..i..] along dim (accumulates; index shaped like src).
  virtual void scatter_add(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src,
                           IndexBounds bounds) = 0;
  // out = in with dim `dim` picked by the 1-d Int64 `index`.
  virtual void index_select(const Tensor& in, int64_t dim, const Tensor& index,
                            const Tensor& out) = 0;

  // ---- multi-tensor kernels: optimizers and mixed precision -------------------------------
  // Note [Multi-tensor kernels]: one call works on a whole list of tensors, so a training
  // step costs a few kernel launches instead of a few per parameter (on CUDA the list is
  // cut into chunks whose addresses travel in the kernel's arguments). The op layer
  // (core/ops/multi_tensor.h) validates and groups the lists; a backend may assume:
  //  - every tensor lies on this backend's device, is dense (contiguous or another dense
  //    layout, e.g. channels-last: it is read as one flat run from data_ptr()) and
  //    non-empty;
  //  - the i-th entries of the parallel lists have the same numel and are laid out alike;
  //  - in an optimizer step, params, grads and every state list share one floating dtype
  //    (float16/bfloat16 are computed in float32, float64 in float64);
  //  - `steps` entries are Float32 [] tensors holding the step number to use, already
  //    incremented (Note [Step counters on the device] in core/ops/multi_tensor.h);
  //  - `amp.inv_scale` and `amp.found_inf`, when defined, are Float32 [1] tensors.
  // `amp.inv_scale` defined: each gradient element is multiplied by it as it is read (the
  // gradient itself is not written). `amp.found_inf` defined and non-zero: the call writes
  // nothing at all (GradScaler's skipped step, decided on the device with no host sync).
  struct AmpStepArgs {
    Tensor inv_scale;
    Tensor found_inf;
  };
  // PyTorch's torch.optim formulas; a maximize flag negates the gradient first.
  // Note [Scheduled options on the device]: `scheduled`, when defined, is a Float64 [2]
  // tensor on the parameters' device holding {lr, m}, where m is the option schedulers
  // cycle as momentum (SGD's and RMSprop's momentum, Adam's beta1); the kernel reads both
  // from it as it runs, in place of the lr and momentum/beta1 fields. The fields still
  // decide the kernel's shape (momentum on or off). A step captured by a CUDA graph thus
  // uses the values written before each replay (optim/optimizer.h, set_capturable).
  struct SgdStepParams {
    double lr = 0, momentum = 0, dampening = 0, weight_decay = 0;
    bool nesterov = false, maximize = false;
    // The momentum buffers hold nothing yet: buf = g (PyTorch's clone on the first step)
    // instead of buf = momentum buf + (1 - dampening) g.
    bool first_step = false;
    Tensor scheduled{};  // {lr, momentum}
  };
  struct AdamStepParams {
    double lr = 0, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
    bool decoupled_weight_decay = false;  // AdamW: p *= 1 - lr wd, instead of g += wd p
    bool amsgrad = false, maximize = false;
    Tensor scheduled{};  // {lr, beta1}
  };
  struct RmspropStepParams {
    double lr = 0, alpha = 0.99, eps = 1e-8, weight_decay = 0, momentum = 0;
    bool centered = false, maximize = false;
    Tensor scheduled{};  // {lr, momentum}
  };
  // momentum_buffers is empty when momentum == 0.
  virtual void sgd_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                        const std::vector<Tensor>& momentum_buffers, const SgdStepParams& options,
                        const AmpStepArgs& amp) = 0;
  // max_exp_avg_sqs is empty unless amsgrad. Bias correction uses steps[i].
  virtual void adam_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                         const std::vector<Tensor>& exp_avgs, const std::vector<Tensor>& exp_avg_sqs,
                         const std::vector<Tensor>& max_exp_avg_sqs, const std::vector<Tensor>& steps,
                         const AdamStepParams& options, const AmpStepArgs& amp) = 0;
  // momentum_buffers is empty when momentum == 0; grad_avgs is empty unless centered.
  virtual void rmsprop_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                            const std::vector<Tensor>& square_avgs, const std::vector<Tensor>& momentum_buffers,
                            const std::vector<Tensor>& grad_avgs, const RmspropStepParams& options,
                            const AmpStepArgs& amp) = 0;
  // steps[i] += 1 for every i, unless found_inf is defined and non-zero.
  virtual void increment_steps(const std::vector<Tensor>& steps, const Tensor& found_inf) = 0;
  // dst[i] = src[i] * scale (dtypes may differ between src[i] and dst[i]; dst[i] may be
  // src[i] itself; scale undefined = 1). When found_inf is defined, it is set to 1 if any
  // element of any src is Inf or NaN, and left as it was otherwise (never cleared).
  // dst may be empty: then only the check runs. Serves GradScaler's unscale_ (dst = src),
  // its check-only pass, O2's f16 grads -> f32 master grads and f32 masters -> f16 model
  // weights, and gradient clipping (scale = the clip coefficient, on the device).
  virtual void multi_tensor_scale(const std::vector<Tensor>& src, const std::vector<Tensor>& dst,
                                  const Tensor& scale, const Tensor& found_inf) = 0;
  // out (Float32 [], or Float64 [] for float64 tensors) = the p-norm of all elements of all
  // tensors taken as one vector: (sum |x|^p)^(1/p), p > 0, or max |x| for p = inf. Any
  // dtype mix of floating tensors; accumulation in float32 (float64 if `out` is).
  virtual void multi_tensor_norm(const std::vector<Tensor>& tensors, double p, const Tensor& out) = 0;
  // GradScaler's update (Float32 [1] scale, Int32 [1] growth_tracker, Float32 [1] found_inf),
  // on the device: if found_inf != 0, scale = max(scale * backoff_factor, min_scale) and
  // growth_tracker = 0; else growth_tracker += 1, and when it reaches growth_interval,
  // scale *= growth_factor (unless that would overflow to inf) and growth_tracker = 0.
  // Both backends run kernels/amp_scale_update.h.
  virtual void amp_update_scale(const Tensor& scale, const Tensor& growth_tracker, const Tensor& found_inf,
                                double growth_factor, double backoff_factor, int64_t growth_interval,
                                double min_scale) = 0;

  // ---- random numbers (Note [Philox streams] in core/generator.h) ----------------------
  // out is dense (contiguous or another dense layout); element i in memory order draws
  // the numbers of index i.
  virtual void uniform(const Tensor& out, double low, double high, PhiloxState state) = 0;
  virtual void normal(const Tensor& out, double mean, double std, PhiloxState state) = 0;
  // Integers uniform in [low, high).
  virtual void randint(const Tensor& out, int64_t low, int64_t high, PhiloxState state) = 0;
  // out (Int64, 1-d) = a random permutation of 0..n-1: argsort of 64-bit random keys.
  virtual void randperm(const Tensor& out, PhiloxState state) = 0;
  // out[i] = 1 with probability p else 0, in out's dtype.
  virtual void bernoulli(const Tensor& out, double p, PhiloxState state) = 0;
};

// Registers the backend of a device type (kiln::init() does this; the registry does not
// own it). Registering again replaces the previous one.
void register_backend(DeviceType type, Backend* backend);
// The backend of `device`; a clear error when none is registered ("CUDA is not available").
Backend& backend(Device device);
bool has_backend(DeviceType type);

// Whether CUDA tensors can be used (a CUDA backend is registered: a CUDA build on a
// machine with a driver and a GPU), and how many GPUs there are (0 when unavailable).
bool cuda_is_available();
int cuda_device_count();
// Waits for all queued work on `device` (torch.cuda.synchronize); a no-op on the CPU.
void synchronize(Device device);

// Why CUDA is unavailable, for the error above; the CUDA backend sets it when it finds no
// driver or device.
void set_cuda_unavailable_reason(std::string reason);
std::string cuda_unavailable_reason();

}  // namespace kiln
