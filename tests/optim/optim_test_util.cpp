// The optimizer tests' helpers (tests/optim/optim_test_util.h). The references are
// written from PyTorch's documented algorithms (and its single-tensor code paths where
// the docs are ambiguous, e.g. maximize with weight decay), one scalar at a time.
#include "tests/optim/optim_test_util.h"

#include <algorithm>
#include <cmath>

namespace kiln::testing {

RefUpdate sgd_reference(const optim::SGDOptions& o) {
  return [o](RefParam& param, const std::vector<double>& grad, double lr) {
    const bool first = param.state.count("momentum_buffer") == 0;
    std::vector<double>& buf = param.state["momentum_buffer"];
    if (first) buf.assign(grad.size(), 0.0);
    for (size_t i = 0; i < grad.size(); ++i) {
      double& p = param.value[i];
      double g = o.maximize ? -grad[i] : grad[i];
      if (o.weight_decay != 0) g += o.weight_decay * p;
      if (o.momentum != 0) {
        buf[i] = first ? g : o.momentum * buf[i] + (1 - o.dampening) * g;
        g = o.nesterov ? g + o.momentum * buf[i] : buf[i];
      }
      p -= lr * g;
    }
    if (o.momentum == 0) param.state.erase("momentum_buffer");
  };
}

RefUpdate adam_reference(const optim::AdamOptions& o, bool decoupled_weight_decay) {
  return [o, decoupled_weight_decay](RefParam& param, const std::vector<double>& grad, double lr) {
    param.step += 1;
    const double t = static_cast<double>(param.step);
    std::vector<double>& m = param.state["exp_avg"];
    std::vector<double>& v = param.state["exp_avg_sq"];
    std::vector<double>& v_max = param.state["max_exp_avg_sq"];
    m.resize(grad.size(), 0.0);
    v.resize(grad.size(), 0.0);
    v_max.resize(grad.size(), 0.0);
    const double bias_correction1 = 1 - std::pow(o.beta1, t);
    const double bias_correction2 = 1 - std::pow(o.beta2, t);
    for (size_t i = 0; i < grad.size(); ++i) {
      double& p = param.value[i];
      double g = o.maximize ? -grad[i] : grad[i];
      if (decoupled_weight_decay) {
        p *= 1 - lr * o.weight_decay;
      } else if (o.weight_decay != 0) {
        g += o.weight_decay * p;
      }
      m[i] = o.beta1 * m[i] + (1 - o.beta1) * g;
      v[i] = o.beta2 * v[i] + (1 - o.beta2) * g * g;
      v_max[i] = std::max(v_max[i], v[i]);
      const double second = o.amsgrad ? v_max[i] : v[i];
      const double denom = std::sqrt(second) / std::sqrt(bias_correction2) + o.eps;
      p -= lr / bias_correction1 * m[i] / denom;
    }
  };
}

RefUpdate rmsprop_reference(const optim::RMSpropOptions& o) {
  return [o](RefParam& param, const std::vector<double>& grad, double lr) {
    param.step += 1;
    std::vector<double>& square_avg = param.state["square_avg"];
    std::vector<double>& grad_avg = param.state["grad_avg"];
    std::vector<double>& buf = param.state["momentum_buffer"];
    square_avg.resize(grad.size(), 0.0);
    grad_avg.resize(grad.size(), 0.0);
    buf.resize(grad.size(), 0.0);
    for (size_t i = 0; i < grad.size(); ++i) {
      double& p = param.value[i];
      double g = o.maximize ? -grad[i] : grad[i];
      if (o.weight_decay != 0) g += o.weight_decay * p;
      square_avg[i] = o.alpha * square_avg[i] + (1 - o.alpha) * g * g;
      double avg = 0;
      if (o.centered) {
        grad_avg[i] = o.alpha * grad_avg[i] + (1 - o.alpha) * g;
        avg = std::sqrt(square_avg[i] - grad_avg[i] * grad_avg[i]) + o.eps;
      } else {
        avg = std::sqrt(square_avg[i]) + o.eps;
      }
      if (o.momentum > 0) {
        buf[i] = o.momentum * buf[i] + g / avg;
        p -= lr * buf[i];
      } else {
        p -= lr * g / avg;
      }
    }
  };
}

std::vector<Tensor> make_params(DType dtype, uint64_t seed) {
  const std::vector<std::vector<int64_t>> shapes = {{5}, {3, 4}, {2, 2, 3}};
  std::vector<Tensor> params;
  for (size_t i = 0; i < shapes.size(); ++i) {
    Tensor p = random_nonzero(shapes[i], dtype, seed + i);
    p.requires_grad_(true);
    params.push_back(p);
  }
  return params;
}

std::vector<Tensor> clone_params(const std::vector<Tensor>& params) {
  std::vector<Tensor> out;
  for (const Tensor& p : params) {
    Tensor copy = p.detach().clone();
    copy.requires_grad_(true);
    out.push_back(copy);
  }
  return out;
}

Tensor step_grad(const Tensor& param, int64_t index, int64_t step) {
  const uint64_t seed = 1000 + 37 * static_cast<uint64_t>(step) + static_cast<uint64_t>(index);
  return random_nonzero(param.sizes(), param.dtype(), seed);
}

void set_step_grads(const std::vector<Tensor>& params, int64_t step) {
  for (size_t i = 0; i < params.size(); ++i) params[i].set_grad(step_grad(params[i], static_cast<int64_t>(i), step));
}

void expect_matches_reference(optim::Optimizer& optimizer, const std::vector<Tensor>& params,
                              const RefUpdate& reference, int steps, Tolerance tol) {
  std::vector<RefParam> ref(params.size());
  for (size_t i = 0; i < params.size(); ++i) ref[i].value = params[i].to_vector<double>();
  for (int s = 0; s < steps; ++s) {
    set_step_grads(params, s);
    for (size_t i = 0; i < params.size(); ++i)
      reference(ref[i], params[i].grad().to_vector<double>(), optimizer.param_groups()[0].lr());
    optimizer.step();
    for (size_t i = 0; i < params.size(); ++i) {
      const Tensor expected = tensor<double>(ref[i].value, params[i].sizes());
      EXPECT_TRUE(all_close(params[i].detach().to(DType::Float64), expected, tol))
          << "parameter " << i << " after step " << s + 1;
    }
  }
}

Tolerance optim_tolerance(DType dtype) {
  switch (dtype) {
    case DType::Float64: return {.atol = 1e-12, .rtol = 1e-10};
    case DType::Float32: return {.atol = 1e-5, .rtol = 1e-5};
    default: return {.atol = 2e-2, .rtol = 2e-2};  // float16/bfloat16: state rounded every step
  }
}

}  // namespace kiln::testing
