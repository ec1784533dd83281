// CpuBackend: the Backend interface (core/backend.h) on the host.
//
// Each family of kernels lives in its own file: elementwise.cpp (the engine's users),
// copy.cpp (copy, fill, arange), reduce.cpp, softmax.cpp, matmul.cpp (Eigen), conv.cpp
// (vol2col + Eigen), batch_norm.cpp, pool.cpp, index.cpp, random.cpp, multi_tensor.cpp
// (fused optimizer steps) and multi_tensor_amp.cpp (scale/check, norm, scale update; both
// on the chunked list loop of multi_tensor_apply.h). Parallel loops use OpenMP.
// Float16/BFloat16 compute in float32 and round on store (Note [Opmath]), so
// mixed-precision logic runs without a GPU.
#pragma once

#include "core/backend.h"

namespace kiln::cpu {

class CpuBackend final : public Backend {
 public:
  Allocator& allocator(int device_index) override;
  AllocatorStats memory_stats(int device_index) override;
  void reset_peak_memory_stats(int device_index) override;
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

  void set_threads_of_this_thread(int threads) override;
  int threads_of_this_thread() const override;

  void batch_norm_stats(const Tensor& input, const Tensor& mean, const Tensor& var) override;
  void batch_norm_apply(const Tensor& input, const BatchNormCoefficients& norm, const Tensor& out) override;
  void batch_norm_backward_reduce(const Tensor& grad_out, const Tensor& input,
                                  const BatchNormCoefficients& norm, const Tensor& sum_dy,
                                  const Tensor& sum_dy_xmu, const Tensor& grad_y) override;
  void batch_norm_backward_input(const Tensor& grad_out, const Tensor& input, const BatchNormCoefficients& norm,
                                 const Tensor& sum_dy, const Tensor& sum_dy_xmu, int64_t count,
                                 const Tensor& grad_in) override;

  void bmm(const Tensor& a, const Tensor& b, const Tensor& out) override;

  void conv_forward(const Tensor& input, const Tensor& weight, const ConvParams& params,
                    const Tensor& out) override;
  void conv_backward_input(const Tensor& grad_out, const Tensor& weight, const ConvParams& params,
                           const Tensor& grad_input) override;
  void conv_backward_weight(const Tensor& grad_out, const Tensor& input, const ConvParams& params,
                            const Tensor& grad_weight) override;
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

}  // namespace kiln::cpu
