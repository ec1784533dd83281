// Activations: forward functor plus one fused backward functor each (see activation.h).
// Integer inputs follow the op table (Note [Integer inputs] in core/op_table.h): relu keeps
// their dtype, sigmoid and tanh compute them in float32, the others refuse them, as PyTorch.
#include "core/ops/activation.h"

#include "core/autograd/node.h"
#include "core/ops/elementwise.h"
#include "core/ops/view.h"
#include "core/pooled.h"

namespace kiln {
namespace {

using autograd::Node;
using autograd::SavedTensor;

// grad_in = backward_op(grad_out, saved) with the op's parameters.
struct ActivationBackward final : Node {
  BinaryOp backward_op = BinaryOp::ReluBackward;
  SavedTensor saved;  // the input or the output, as the functor expects
  ElementwiseParams params;
  std::vector<Tensor> apply(std::vector<Tensor>&& g) override {
    return {binary_kernel(backward_op, g[0], saved.unpack(*this), params)};
  }
  void release_saved() override { saved.release(); }
  std::string name() const override { return op_name(static_cast<UnaryOp>(forward_op)); }
  uint8_t forward_op = 0;
};

enum class Saves { Input, Output };

Tensor activation(const Tensor& x, UnaryOp forward, BinaryOp backward, Saves saves,
                  const ElementwiseParams& params = {}) {
  Tensor out = unary_kernel(forward, x, params);
  if (autograd::any_requires_grad({&x})) {
    auto node = make_pooled<ActivationBackward>();
    node->backward_op = backward;
    node->saved = SavedTensor(saves == Saves::Input ? x : out);
    node->params = params;
    node->forward_op = static_cast<uint8_t>(forward);
    autograd::record(node, {x}, {out});
  }
  return out;
}

}  // namespace

Tensor relu(const Tensor& x) { return activation(x, UnaryOp::Relu, BinaryOp::ReluBackward, Saves::Output); }

Tensor leaky_relu(const Tensor& x, double negative_slope) {
  return activation(x, UnaryOp::LeakyRelu, BinaryOp::LeakyReluBackward, Saves::Input, {.alpha = negative_slope});
}

Tensor sigmoid(const Tensor& x) {
  return activation(x, UnaryOp::Sigmoid, BinaryOp::SigmoidBackward, Saves::Output);
}

Tensor tanh(const Tensor& x) { return activation(x, UnaryOp::Tanh, BinaryOp::TanhBackward, Saves::Output); }

Tensor silu(const Tensor& x) { return activation(x, UnaryOp::Silu, BinaryOp::SiluBackward, Saves::Input); }

Tensor gelu(const Tensor& x, const std::string& approximate) {
  KILN_CHECK(approximate == "none" || approximate == "tanh", "gelu: approximate must be 'none' or "
             "'tanh', got '", approximate, "'");
  if (approximate == "tanh") return activation(x, UnaryOp::GeluTanh, BinaryOp::GeluTanhBackward, Saves::Input);
  return activation(x, UnaryOp::Gelu, BinaryOp::GeluBackward, Saves::Input);
}

Tensor elu(const Tensor& x, double alpha) {
  return activation(x, UnaryOp::Elu, BinaryOp::EluBackward, Saves::Input, {.alpha = alpha});
}

Tensor softplus(const Tensor& x, double beta, double threshold) {
  KILN_CHECK(beta > 0, "softplus: beta must be positive, got ", beta);
  return activation(x, UnaryOp::Softplus, BinaryOp::SoftplusBackward, Saves::Input,
                    {.alpha = beta, .beta = threshold});
}

// prelu is composed (STYLE 3): where(x > 0, x, w x) with w broadcast along dim 1, so its
// gradients for x and for the weight come from where and mul.
Tensor prelu(const Tensor& x, const Tensor& weight) {
  KILN_CHECK(x.defined() && weight.defined(), "prelu: undefined tensor");
  KILN_CHECK(weight.dim() <= 1, "prelu: weight must be 0-d or 1-d, got shape ", weight.sizes());
  const int64_t n = weight.numel();
  const int64_t channels = x.dim() >= 2 ? x.size(1) : 1;
  KILN_CHECK(n == 1 || n == channels, "prelu: weight has ", n, " elements but the input has ",
             channels, " channels (dim 1); expected 1 or ", channels);
  Tensor w = weight;
  if (n > 1) {
    std::vector<int64_t> shape(static_cast<size_t>(x.dim()), 1);
    shape[1] = n;
    w = reshape(weight, shape);
  } else {
    w = reshape(weight, {});
  }
  return where(gt(x, 0.0), x, mul(w, x));
}

}  // namespace kiln
