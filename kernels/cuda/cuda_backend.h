// CudaBackend: the Backend interface (core/backend.h) on NVIDIA GPUs.
//
// Each family of kernels lives in its own file, as in kernels/cpu/:
//   copy.cu            copy (host<->device<->device, dtype casts), fill, arange
//   unary.cu, binary*.cu, where.cu   the elementwise engine's users (elementwise.cuh)
//   reduce*.cu         the reduction engine (reduce.cuh) with the ops of
//                      kernels/reduce_ops.h: reduce_sum.cu (sum/mean/amax/amin),
//                      reduce_norm.cu (norms, Welford var_mean), reduce_arg.cu
//                      (argmax/argmin); entry points in reduce.cpp
//   softmax.cu         fused softmax / log_softmax, forward and backward
//   batch_norm.cu      batch-norm statistics (Welford), apply, backward reduce and input
//   pool.cu            max / average / adaptive average pooling, forward and backward
//   index.cu           gather, scatter_add, index_select
//   random.cu          Philox uniform/normal/randint/bernoulli, randperm
//   cublas/matmul.cpp  bmm through cuBLAS (integer dtypes through a tiled kernel)
//   cudnn/conv.cpp     convolution forward and backward through cuDNN, with the
//                      algorithm cache of cudnn/conv_algorithm_cache.h
// Every call runs on the tensors' device (a DeviceGuard), on the calling thread's current
// stream there (stream.h), and returns without waiting for the GPU, except copies to
// pageable host memory and calls whose result the host needs (index bounds errors).
// Memory comes from the caching allocator (caching_allocator.h).
#pragma once

#include "core/backend.h"

namespace kiln::cuda {

class CudaBackend final : public Backend {
 public:
  int device_count() const override;
  Allocator& allocator(int device_index) override;
  Allocator* pinned_allocator() override;
  AllocatorStats memory_stats(int device_index) override;
  void reset_peak_memory_stats(int device_index) override;
  bool is_pinned(const void* ptr) const override;
  void synchronize(int device_index) override;

  // streams and events (cuda_backend_streams.cpp)
  std::uintptr_t create_stream(int device_index) override;
  void destroy_stream(int device_index, std::uintptr_t stream) override;
  std::uintptr_t current_stream(int device_index) const override;
  void set_current_stream(int device_index, std::uintptr_t stream) override;
  void synchronize_stream(int device_index, std::uintptr_t stream) override;
  void* create_event(int device_index, bool enable_timing) override;
  void destroy_event(void* event) override;
  void record_event(void* event, int device_index, std::uintptr_t stream) override;
  void stream_wait_event(int device_index, std::uintptr_t stream, void* event) override;
  bool event_query(void* event) override;
  void event_synchronize(void* event) override;
  double event_elapsed_ms(void* start, void* end) override;
  void record_stream(const Storage& storage, int device_index, std::uintptr_t stream) override;
  // CUDA graphs (kernels/cuda/graph.h).
  void* create_graph(int device_index) override;
  void destroy_graph(void* graph) override;
  void graph_capture_begin(void* graph) override;
  void graph_capture_end(void* graph) override;
  void graph_capture_abandon(void* graph) override;
  void graph_replay(void* graph) override;
  int64_t graph_captures(void* graph) const override;
  int64_t graph_updates(void* graph) const override;

  void copy(const Tensor& src, const Tensor& dst, bool non_blocking) override;
  void fill(const Tensor& dst, Scalar value) override;
  void write_words(const Tensor& dst, const uint64_t* words, int64_t count) override;
  void arange(const Tensor& dst, Scalar start, Scalar step) override;

  void unary(UnaryOp op, const Tensor& in, const Tensor& out, const ElementwiseParams& params) override;
  void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out,
              const ElementwiseParams& params) override;
  void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) override;

  void reduce(ReduceOp op, const Tensor& in, const Dims& reduce_dims, const Tensor& out,
              const ReduceParams& params) override;
  void var_mean(const Tensor& in, const Dims& reduce_dims, int64_t correction,
                const Tensor& var_out, const Tensor& mean_out) override;
  void arg_reduce(ArgReduceOp op, const Tensor& in, int64_t dim, const Tensor& values_out,
                  const Tensor& indices_out) override;

  void softmax(const Tensor& in, int64_t dim, bool log, const Tensor& out) override;
  void softmax_backward(const Tensor& grad_out, const Tensor& out, int64_t dim, bool log,
                        const Tensor& grad_in) override;

  void batch_norm_stats(const Tensor& input, const Tensor& mean, const Tensor& var) override;
  void batch_norm_apply(const Tensor& input, const BatchNormCoefficients& norm, const Tensor& out) override;
  void batch_norm_backward_reduce(const Tensor& grad_out, const Tensor& input,
                                  const BatchNormCoefficients& norm, const Tensor& sum_dy,
                                  const Tensor& sum_dy_xmu, const Tensor& grad_y) override;
  void batch_norm_backward_input(const Tensor& grad_out, const Tensor& input, const BatchNormCoefficients& norm,
                                 const Tensor& sum_dy, const Tensor& sum_dy_xmu, int64_t count,
                                 const Tensor& grad_in) override;

  void bmm(const Tensor& a, const Tensor& b, const Tensor& out) override;

  void conv_forward(const Tensor& input, const Tensor& weight, const ConvParams& params, const Tensor& out) override;
  void conv_backward_input(const Tensor& grad_out, const Tensor& weight, const ConvParams& params,
                           const Tensor& grad_input) override;
  void conv_backward_weight(const Tensor& grad_out, const Tensor& input, const ConvParams& params,
                            const Tensor& grad_weight) override;
  // The process's cuDNN algorithm cache (cudnn/conv_algorithms.cpp); files are keyed by
  // this machine's GPU names and cuDNN version (cudnn/conv_algorithm_file.h).
  cudnn::Stats conv_algorithm_stats() override;
  void reset_conv_algorithm_stats() override;
  std::vector<cudnn::ConvUse> conv_uses() override;
  void clear_conv_algorithm_cache() override;
  cudnn::SaveReport save_conv_algorithm_cache(const std::string& path) override;
  cudnn::LoadReport load_conv_algorithm_cache(const std::string& path) override;
  void max_pool_forward(const Tensor& input, const PoolParams& params, const Tensor& out,
                        const Tensor& indices) override;
  void max_pool_backward(const Tensor& grad_out, const Tensor& indices, const PoolParams& params,
                         const Tensor& grad_in) override;
  void avg_pool_forward(const Tensor& input, const PoolParams& params, const Tensor& out) override;
  void avg_pool_backward(const Tensor& grad_out, const PoolParams& params, const Tensor& grad_in) override;
  void adaptive_avg_pool_forward(const Tensor& input, const Tensor& out) override;
  void adaptive_avg_pool_backward(const Tensor& grad_out, const Tensor& grad_in) override;

  void gather(const Tensor& in, int64_t dim, const Tensor& index, const Tensor& out,
              IndexBounds bounds) override;
  void scatter_add(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src,
                   IndexBounds bounds) override;
  void index_select(const Tensor& in, int64_t dim, const Tensor& index, const Tensor& out) override;

  void uniform(const Tensor& out, double low, double high, PhiloxState state) override;
  void normal(const Tensor& out, double mean, double std, PhiloxState state) override;
  void randint(const Tensor& out, int64_t low, int64_t high, PhiloxState state) override;
  void randperm(const Tensor& out, PhiloxState state) override;
  void bernoulli(const Tensor& out, double p, PhiloxState state) override;

  // multi-tensor: optimizers and mixed precision (multi_tensor.*)
  void sgd_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                const std::vector<Tensor>& momentum_buffers, const SgdStepParams& options,
                const AmpStepArgs& amp) override;
  void adam_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                 const std::vector<Tensor>& exp_avgs, const std::vector<Tensor>& exp_avg_sqs,
                 const std::vector<Tensor>& max_exp_avg_sqs, const std::vector<Tensor>& steps,
                 const AdamStepParams& options, const AmpStepArgs& amp) override;
  void rmsprop_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                    const std::vector<Tensor>& square_avgs, const std::vector<Tensor>& momentum_buffers,
                    const std::vector<Tensor>& grad_avgs, const RmspropStepParams& options,
                    const AmpStepArgs& amp) override;
  void increment_steps(const std::vector<Tensor>& steps, const Tensor& found_inf) override;
  void multi_tensor_scale(const std::vector<Tensor>& src, const std::vector<Tensor>& dst, const Tensor& scale,
                          const Tensor& found_inf) override;
  void multi_tensor_norm(const std::vector<Tensor>& tensors, double p, const Tensor& out) override;
  void amp_update_scale(const Tensor& scale, const Tensor& growth_tracker, const Tensor& found_inf,
                        double growth_factor, double backoff_factor, int64_t growth_interval,
                        double min_scale) override;
};

}  // namespace kiln::cuda
