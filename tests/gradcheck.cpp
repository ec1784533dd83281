// gradcheck by central differences (see gradcheck.h).
#include "tests/gradcheck.h"

#include <cmath>

#include "core/ops.h"

namespace kiln::testing {
namespace {

// Storage address of row-major element `i` of t (which may be a strided view).
double* element_address(const Tensor& t, int64_t i) {
  int64_t offset = 0;
  for (int64_t d = t.dim() - 1; d >= 0; --d) {
    const int64_t size = t.sizes()[d];
    offset += (i % size) * t.strides()[d];
    i /= size;
  }
  return static_cast<double*>(t.data_ptr()) + offset;
}

double projected(const GradcheckFn& fn, const std::vector<Tensor>& inputs, const Tensor& v) {
  NoGradGuard no_grad;
  return sum(mul(fn(inputs).to(DType::Float64), v)).item<double>();
}

}  // namespace

std::set<std::string>& gradchecked_ops() {
  static std::set<std::string> ops;
  return ops;
}

bool register_gradchecked(const char* op) {
  gradchecked_ops().insert(op);
  return true;
}

::testing::AssertionResult gradcheck(const GradcheckFn& fn, const std::vector<Tensor>& inputs,
                                     GradcheckOptions options) {
  std::vector<Tensor> differentiable;
  for (const Tensor& x : inputs) {
    if (!x.defined() || !x.requires_grad()) continue;
    if (x.dtype() != DType::Float64 || !x.device().is_cpu() || !x.is_leaf()) {
      return ::testing::AssertionFailure() << "gradcheck needs float64 CPU leaf inputs, got " << x.dtype()
                                           << " on " << x.device();
    }
    differentiable.push_back(x);
  }
  if (differentiable.empty()) return ::testing::AssertionFailure() << "no input requires grad";

  const Tensor out = fn(inputs);
  if (!out.requires_grad()) return ::testing::AssertionFailure() << "the output does not require grad";
  Generator gen(12345);
  const Tensor v = randn(out.sizes(), {.dtype = DType::Float64}, &gen);
  const std::vector<Tensor> analytic =
      autograd::grad({out}, differentiable, {v.to(out.dtype())}, /*retain_graph=*/false, /*allow_unused=*/true);

  for (size_t k = 0; k < differentiable.size(); ++k) {
    const Tensor& x = differentiable[k];
    Tensor a = analytic[k].defined() ? analytic[k] : zeros_like(x);
    if (a.sizes() != x.sizes() || a.dtype() != x.dtype()) {
      return ::testing::AssertionFailure() << "input " << k << ": gradient has shape " << shape_str(a.sizes()) << " and dtype "
                                           << a.dtype() << ", the input " << shape_str(x.sizes()) << " and " << x.dtype();
    }
    const std::vector<double> a_values = a.to_vector<double>();
    for (int64_t i = 0; i < x.numel(); ++i) {
      double* p = element_address(x, i);
      const double saved = *p;
      *p = saved + options.eps;
      const double plus = projected(fn, inputs, v);
      *p = saved - options.eps;
      const double minus = projected(fn, inputs, v);
      *p = saved;
      const double numeric = (plus - minus) / (2 * options.eps);
      if (!(std::abs(a_values[i] - numeric) <= options.atol + options.rtol * std::abs(numeric))) {
        return ::testing::AssertionFailure() << "input " << k << " (shape " << shape_str(x.sizes()) << "), element " << i
                                             << ": analytic " << a_values[i] << " vs numeric " << numeric;
      }
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace kiln::testing
