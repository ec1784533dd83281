// Matrix products: bmm is the primitive (Backend::bmm, with its own backward node);
// matmul and linear are composed from views and bmm, so their gradients come for free.
// All three are autocast's lower-precision ops (core/autocast.h): under autocast their
// floating inputs are cast to the autocast dtype first.
#include "core/ops/matmul.h"

#include "core/autocast.h"
#include "core/autograd/node.h"
#include "core/backend.h"
#include "core/ops/elementwise.h"
#include "core/ops/factory.h"
#include "core/ops/view.h"
#include "core/pooled.h"

namespace kiln {
namespace {

using autograd::Node;
using autograd::SavedTensor;

// d(A B) = (g B^T, A^T g), batch by batch. Saves B only if A needs a gradient, and A only
// if B does. The transposes are views: the backend multiplies strided operands.
struct BmmBackward final : Node {
  SavedTensor a, b;
  std::vector<Tensor> apply(std::vector<Tensor>&& g) override {
    Tensor ga, gb;
    if (needs_input_grad(0)) ga = bmm(g[0], b.unpack(*this).transpose(1, 2));
    if (needs_input_grad(1)) gb = bmm(a.unpack(*this).transpose(1, 2), g[0]);
    return {ga, gb};
  }
  void release_saved() override {
    a.release();
    b.release();
  }
  std::string name() const override { return "bmm"; }
};

void check_same_dtype_and_device(const Tensor& a, const Tensor& b, const char* op) {
  KILN_CHECK(a.defined() && b.defined(), op, ": undefined tensor");
  KILN_CHECK(a.dtype() == b.dtype(), op, ": expected both operands to have the same dtype, got ", a.dtype(),
             " and ", b.dtype());
  KILN_CHECK(a.device() == b.device(), op, ": expected both operands on the same device, got ", a.device(),
             " and ", b.device());
  KILN_CHECK(a.dtype() != DType::Bool, op, ": not supported for bool tensors");
}

}  // namespace

Tensor bmm(const Tensor& a_in, const Tensor& b_in) {
  const Tensor a = autocast_input(a_in, AutocastPolicy::LowerPrecision);
  const Tensor b = autocast_input(b_in, AutocastPolicy::LowerPrecision);
  check_same_dtype_and_device(a, b, "bmm");
  KILN_CHECK(a.dim() == 3 && b.dim() == 3, "bmm: expected 3-d tensors, got shapes ", a.sizes(), " and ",
             b.sizes());
  KILN_CHECK(a.size(0) == b.size(0) && a.size(2) == b.size(1), "bmm: shapes ", a.sizes(), " and ", b.sizes(),
             " cannot be multiplied (need [B, M, K] and [B, K, N])");
  const int64_t batch = a.size(0), m = a.size(1), k = a.size(2), n = b.size(2);
  Tensor out = empty({batch, m, n}, {.dtype = a.dtype(), .device = a.device()});
  if (out.numel() > 0) {
    if (k == 0) {
      backend(out.device()).fill(out, 0);
    } else {
      backend(out.device()).bmm(a, b, out);
    }
  }
  if (autograd::any_requires_grad({&a, &b})) {
    auto node = make_pooled<BmmBackward>();
    if (b.requires_grad()) node->a = SavedTensor(a);
    if (a.requires_grad()) node->b = SavedTensor(b);
    autograd::record(node, {a, b}, {out});
  }
  return out;
}

// torch.matmul: a 1-d operand becomes a matrix (a row for the left, a column for the
// right) and that dim is removed from the result; leading dims broadcast as batch dims.
// When the right operand is a plain matrix, the left's batch dims fold into its rows, so
// the whole product is one GEMM (the common x @ W case) and no operand is copied.
Tensor matmul(const Tensor& a_in, const Tensor& b_in) {
  const Tensor a = autocast_input(a_in, AutocastPolicy::LowerPrecision);
  const Tensor b = autocast_input(b_in, AutocastPolicy::LowerPrecision);
  check_same_dtype_and_device(a, b, "matmul");
  KILN_CHECK(a.dim() >= 1 && b.dim() >= 1, "matmul: both arguments need at least 1 dimension, got shapes ",
             a.sizes(), " and ", b.sizes());
  const Tensor a2 = a.dim() == 1 ? a.unsqueeze(0) : a;
  const Tensor b2 = b.dim() == 1 ? b.unsqueeze(1) : b;
  const int64_t m = a2.size(-2), k = a2.size(-1), n = b2.size(-1);
  KILN_CHECK(b2.size(-2) == k, "matmul: shapes ", a.sizes(), " and ", b.sizes(), " cannot be multiplied (",
             k, " vs ", b2.size(-2), ")");
  const std::vector<int64_t> batch_a(a2.sizes().begin(), a2.sizes().end() - 2);
  const std::vector<int64_t> batch_b(b2.sizes().begin(), b2.sizes().end() - 2);
  const std::vector<int64_t> batch = broadcast_shapes(batch_a, batch_b, "matmul");
  int64_t batch_numel = 1;
  for (int64_t s : batch) batch_numel *= s;

  Tensor product;
  if (batch_b.empty()) {
    const int64_t rows = batch_numel * m;
    product = bmm(a2.reshape({1, rows, k}), b2.unsqueeze(0));
  } else {
    std::vector<int64_t> a_shape = batch, b_shape = batch;
    a_shape.insert(a_shape.end(), {m, k});
    b_shape.insert(b_shape.end(), {k, n});
    product = bmm(a2.expand(a_shape).reshape({batch_numel, m, k}), b2.expand(b_shape).reshape({batch_numel, k, n}));
  }
  std::vector<int64_t> out_shape = batch;
  if (a.dim() > 1) out_shape.push_back(m);
  if (b.dim() > 1) out_shape.push_back(n);
  return product.reshape(out_shape);
}

Tensor linear(const Tensor& x_in, const Tensor& weight_in, const Tensor& bias_in) {
  KILN_CHECK(x_in.defined() && weight_in.defined(), "linear: undefined tensor");
  const Tensor x = autocast_input(x_in, AutocastPolicy::LowerPrecision);
  const Tensor weight = autocast_input(weight_in, AutocastPolicy::LowerPrecision);
  const Tensor bias = autocast_input(bias_in, AutocastPolicy::LowerPrecision);
  KILN_CHECK(weight.dim() == 2, "linear: weight must be 2-d [out_features, in_features], got shape ",
             weight.sizes());
  KILN_CHECK(x.dim() >= 1 && x.size(-1) == weight.size(1), "linear: input's last dimension (shape ", x.sizes(),
             ") must equal in_features = ", weight.size(1), " (weight shape ", weight.sizes(), ")");
  Tensor y = matmul(x, weight.t());
  if (bias.defined()) {
    KILN_CHECK(bias.dim() == 1 && bias.size(0) == weight.size(0), "linear: bias must have shape [",
               weight.size(0), "], got ", bias.sizes());
    y = add(y, bias);
  }
  return y;
}

}  // namespace kiln
