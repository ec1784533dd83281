// Loss functions (loss.h), each composed from existing ops (STYLE 3): they validate their
// arguments, build the per-element loss from gather / log_softmax / softplus / where /
// arithmetic, and reduce it. Their gradients are those of the ops they are made of.
//
// Note [Loss reductions]: None returns the per-element loss, Sum its sum, Mean its mean,
// except for nll_loss and cross_entropy with class indices, whose Mean is a weighted mean:
// the sum of the losses divided by the sum of the weights of the targets that were not
// ignored (PyTorch's definition); when every target is ignored that is 0 / 0 = NaN, as in
// PyTorch.
//
// Note [Loss shapes]: a per-element loss takes input and target of one shape. Broadcasting
// them would turn an [N, 1] prediction against an [N] target into an [N, N] matrix of
// every pairing, whose mean is a wrong loss that still trains (PyTorch only warns), so
// differing shapes are an error. Per-element weights (binary_cross_entropy_with_logits'
// weight and pos_weight) may broadcast to the input's shape but never widen it.
//
// Every loss is an autocast float32 op (core/autocast.h): under autocast the public entry
// casts float16/bfloat16 inputs, floating targets and weights to float32, and the ops it
// is composed of then see float32 only (their own autocast casts are no-ops).
#include "core/ops/loss.h"

#include <string>
#include <vector>

#include "core/autocast.h"
#include "core/ops/activation.h"
#include "core/ops/elementwise.h"
#include "core/ops/factory.h"
#include "core/ops/index.h"
#include "core/ops/reduce.h"
#include "core/ops/softmax.h"
#include "core/ops/view.h"

namespace kiln {
namespace {

Tensor float32_under_autocast(const Tensor& t) { return autocast_input(t, AutocastPolicy::Float32); }

Tensor reduce_loss(const Tensor& loss, Reduction reduction) {
  switch (reduction) {
    case Reduction::None: return loss;
    case Reduction::Sum: return sum(loss);
    case Reduction::Mean: return mean(loss);
  }
  return loss;
}

void check_floating_input(const Tensor& input, const char* op) {
  KILN_CHECK(input.defined(), op, ": undefined input");
  KILN_CHECK(input.is_floating_point(), op, ": expected a floating-point input, got ", input.dtype());
}

// Note [Loss shapes]: the target has the input's shape.
void check_same_shape(const Tensor& input, const Tensor& target, const char* op) {
  KILN_CHECK(target.sizes() == input.sizes(), op, ": input shape ", input.sizes(), " and target shape ",
             target.sizes(),
             " differ; they must be equal (broadcasting them would average every pairing). "
             "Hint: reshape one to the other, e.g. squeeze the prediction's size-1 dim");
}

// Note [Loss shapes]: `weight` broadcasts to the input's shape without widening it.
void check_broadcasts_to_input(const Tensor& input, const Tensor& weight, const char* name, const char* op) {
  const std::vector<int64_t> shape = broadcast_shapes(weight.sizes(), input.sizes(), op);
  KILN_CHECK(shape == input.sizes(), op, ": ", name, " of shape ", weight.sizes(),
             " must broadcast to the input shape ", input.sizes(), ", not widen it to ", shape);
}

// The class dim of [N, C, d...] (1) or of an unbatched [C] (0).
int64_t class_dim(const Tensor& input) { return input.dim() == 1 ? 0 : 1; }

// target [N, d...] for input [N, C, d...], or [] for input [C]; Int64 class indices.
void check_index_target(const Tensor& input, const Tensor& target, const char* op) {
  KILN_CHECK(target.defined(), op, ": undefined target");
  KILN_CHECK(target.dtype() == DType::Int64, op, ": class-index targets must be Int64, got ",
             target.dtype(), ". Hint: target.to(DType::Int64)");
  KILN_CHECK(target.device() == input.device(), op, ": input on ", input.device(),
             " but target on ", target.device());
  KILN_CHECK(input.dim() >= 1, op, ": input must be [C] or [N, C, d...], got shape ", input.sizes());
  std::vector<int64_t> expected;
  if (input.dim() >= 2) {
    expected.push_back(input.size(0));
    expected.insert(expected.end(), input.sizes().begin() + 2, input.sizes().end());
  }
  KILN_CHECK(target.sizes() == expected, op, ": input of shape ", input.sizes(),
             " expects a target of shape ", expected, ", got ", target.sizes());
}

void check_class_weight(const Tensor& input, const Tensor& weight, const char* op) {
  if (!weight.defined()) return;
  const int64_t classes = input.size(class_dim(input));
  KILN_CHECK(weight.dim() == 1 && weight.size(0) == classes, op, ": weight must have shape [",
             classes, "] (one per class), got ", weight.sizes());
  KILN_CHECK(weight.dtype() == input.dtype(), op, ": weight has dtype ", weight.dtype(),
             " but input has ", input.dtype());
  KILN_CHECK(weight.device() == input.device(), op, ": input on ", input.device(),
             " but weight on ", weight.device());
}

// Every target that is not ignore_index must be a class in [0, C); names the first that
// is not. Reads every target on the host, so it runs only once the gather that picks the
// log-probabilities has found a bad index (Note [Target range check]).
void check_target_range(const Tensor& target, int64_t classes, int64_t ignore_index, const char* op) {
  for (int64_t value : target.to_vector<int64_t>()) {
    KILN_CHECK(value == ignore_index || (value >= 0 && value < classes), op, ": target ", value,
               " is out of bounds: expected a class in [0, ", classes, ") or ignore_index (",
               ignore_index, ")");
  }
}

// Each target's class weight (1 without weights), 0 where the target is ignored.
Tensor target_weights(const Tensor& input, const Tensor& safe_target, const Tensor& kept,
                      const Tensor& weight) {
  Tensor w = weight.defined()
                 ? reshape(index_select(weight, 0, reshape(safe_target, {-1})), safe_target.sizes())
                 : ones(safe_target.sizes(), {.dtype = input.dtype(), .device = input.device()});
  return where(kept, w, 0.0);
}

// Sum of the losses over the sum of the kept targets' weights (Note [Loss reductions]).
Tensor reduce_weighted(const Tensor& loss, const Tensor& weights, Reduction reduction) {
  if (reduction == Reduction::Mean) return div(sum(loss), sum(weights));
  return reduce_loss(loss, reduction);
}

// log p[target] per target (0 where ignored), picked with gather along the class dim.
// Note [Target range check]: gather bounds-checks its index anyway (on CUDA that is the
// one host-device sync of the loss), so a separate range check up front would cost a
// second pass and, on a GPU, a second sync every step. Instead a gather error is turned
// into the loss's own message naming the bad target; ignored targets were replaced by 0
// in safe_target, so gather only fails on a real out-of-range class.
Tensor picked_log_probs(const Tensor& input, const Tensor& target, const Tensor& safe_target,
                        int64_t ignore_index, const char* op) {
  const int64_t cdim = class_dim(input);
  try {
    return squeeze(gather(input, cdim, unsqueeze(safe_target, cdim)), cdim);
  } catch (const Error&) {
    check_target_range(target, input.size(cdim), ignore_index, op);
    throw;
  }
}

// weight reshaped to broadcast along the class dim of `input`.
Tensor class_weight_view(const Tensor& weight, const Tensor& input) {
  std::vector<int64_t> shape(static_cast<size_t>(input.dim()), 1);
  shape[static_cast<size_t>(class_dim(input))] = weight.size(0);
  return reshape(weight, shape);
}

// cross_entropy with class probabilities (PyTorch's formula): the target is smoothed
// towards uniform, -sum_c w_c t_c log p_c per position; Mean divides by N * prod(d...).
Tensor cross_entropy_probabilities(const Tensor& input, const Tensor& target,
                                   const CrossEntropyOptions& options) {
  const char* op = "cross_entropy";
  KILN_CHECK(target.sizes() == input.sizes(), op, ": probability targets must have the input's shape ",
             input.sizes(), ", got ", target.sizes());
  KILN_CHECK(target.dtype() == input.dtype(), op, ": probability targets have dtype ", target.dtype(),
             " but input has ", input.dtype());
  const int64_t cdim = class_dim(input);
  const int64_t classes = input.size(cdim);
  Tensor t = target;
  if (options.label_smoothing > 0) {
    t = add(mul(target, 1.0 - options.label_smoothing), options.label_smoothing / static_cast<double>(classes));
  }
  Tensor terms = mul(log_softmax(input, cdim), t);
  if (options.weight.defined()) terms = mul(terms, class_weight_view(options.weight, input));
  const Tensor loss = neg(sum(terms, {cdim}));
  if (options.reduction == Reduction::Mean) {
    return div(sum(loss), static_cast<double>(input.numel() / classes));
  }
  return reduce_loss(loss, options.reduction);
}

}  // namespace

Tensor nll_loss(const Tensor& input_in, const Tensor& target, const NllLossOptions& options_in) {
  const char* op = "nll_loss";
  const Tensor input = float32_under_autocast(input_in);
  NllLossOptions options = options_in;
  options.weight = float32_under_autocast(options.weight);
  check_floating_input(input, op);
  check_index_target(input, target, op);
  check_class_weight(input, options.weight, op);
  const Tensor kept = ne(target, options.ignore_index);
  const Tensor safe_target = where(kept, target, 0);
  const Tensor picked = picked_log_probs(input, target, safe_target, options.ignore_index, op);
  const Tensor weights = target_weights(input, safe_target, kept, options.weight);
  const Tensor loss = neg(mul(picked, weights));
  return reduce_weighted(loss, weights, options.reduction);
}

// Index targets with label smoothing ε (PyTorch's formula): (1 - ε) nll + ε / C * smooth,
// where smooth = -sum_c w_c log p_c per kept target, reduced like nll (Mean divides by
// the kept targets' weights).
Tensor cross_entropy(const Tensor& input_in, const Tensor& target_in, const CrossEntropyOptions& options_in) {
  const char* op = "cross_entropy";
  const Tensor input = float32_under_autocast(input_in);
  const Tensor target = float32_under_autocast(target_in);
  CrossEntropyOptions options = options_in;
  options.weight = float32_under_autocast(options.weight);
  check_floating_input(input, op);
  KILN_CHECK(input.dim() >= 1, op, ": input must be [C] or [N, C, d...], got shape ", input.sizes());
  KILN_CHECK(options.label_smoothing >= 0.0 && options.label_smoothing <= 1.0, op,
             ": label_smoothing must be in [0, 1], got ", options.label_smoothing);
  KILN_CHECK(target.defined(), op, ": undefined target");
  check_class_weight(input, options.weight, op);
  if (target.is_floating_point()) return cross_entropy_probabilities(input, target, options);

  const int64_t cdim = class_dim(input);
  const Tensor log_probs = log_softmax(input, cdim);
  const NllLossOptions nll_options{
      .weight = options.weight, .ignore_index = options.ignore_index, .reduction = options.reduction};
  const Tensor nll = nll_loss(log_probs, target, nll_options);
  if (options.label_smoothing == 0.0) return nll;

  const Tensor kept = ne(target, options.ignore_index);
  Tensor terms = log_probs;
  if (options.weight.defined()) terms = mul(terms, class_weight_view(options.weight, input));
  const Tensor smooth = where(kept, neg(sum(terms, {cdim})), 0.0);
  const Tensor weights = target_weights(input, where(kept, target, 0), kept, options.weight);
  const double eps = options.label_smoothing;
  const double classes = static_cast<double>(input.size(cdim));
  return add(mul(nll, 1.0 - eps), mul(reduce_weighted(smooth, weights, options.reduction), eps / classes));
}

// Per element (1 - y) x + l softplus(-x) with l = 1 + (pos_weight - 1) y. softplus(-x) is
// log(1 + exp(-|x|)) + max(-x, 0), computed by one stable functor (log1p, linear past its
// threshold); unlike that two-term form it has no kink at x = 0, so its gradient there is
// the true -sigmoid(-x) = -1/2 (a zero-initialised head outputs exactly 0).
Tensor binary_cross_entropy_with_logits(const Tensor& input_in, const Tensor& target_in,
                                        const BceWithLogitsOptions& options_in) {
  const char* op = "binary_cross_entropy_with_logits";
  const Tensor input = float32_under_autocast(input_in);
  const Tensor target = float32_under_autocast(target_in);
  BceWithLogitsOptions options = options_in;
  options.weight = float32_under_autocast(options.weight);
  options.pos_weight = float32_under_autocast(options.pos_weight);
  check_floating_input(input, op);
  KILN_CHECK(target.defined(), op, ": undefined target");
  check_same_shape(input, target, op);
  KILN_CHECK(target.is_floating_point(), op, ": target must be floating-point, got ", target.dtype());
  Tensor loss = mul(1.0 - target, input);
  Tensor softplus_neg = softplus(neg(input));
  if (options.pos_weight.defined()) {
    check_broadcasts_to_input(input, options.pos_weight, "pos_weight", op);
    softplus_neg = mul(add(mul(sub(options.pos_weight, 1.0), target), 1.0), softplus_neg);
  }
  loss = add(loss, softplus_neg);
  if (options.weight.defined()) {
    check_broadcasts_to_input(input, options.weight, "weight", op);
    loss = mul(loss, options.weight);
  }
  return reduce_loss(loss, options.reduction);
}

namespace {

void check_regression(const Tensor& input, const Tensor& target, const char* op) {
  check_floating_input(input, op);
  KILN_CHECK(target.defined(), op, ": undefined target");
  KILN_CHECK(target.is_floating_point(), op, ": target must be floating-point, got ", target.dtype());
  check_same_shape(input, target, op);
}

}  // namespace

Tensor mse_loss(const Tensor& input_in, const Tensor& target_in, Reduction reduction) {
  const Tensor input = float32_under_autocast(input_in);
  const Tensor target = float32_under_autocast(target_in);
  check_regression(input, target, "mse_loss");
  return reduce_loss(square(sub(input, target)), reduction);
}

Tensor l1_loss(const Tensor& input_in, const Tensor& target_in, Reduction reduction) {
  const Tensor input = float32_under_autocast(input_in);
  const Tensor target = float32_under_autocast(target_in);
  check_regression(input, target, "l1_loss");
  return reduce_loss(abs(sub(input, target)), reduction);
}

// Both branches are computed and where picks one, so each element's gradient is its
// branch's: d / beta inside, sign(d) outside (0 at d = 0, abs's subgradient).
Tensor smooth_l1_loss(const Tensor& input_in, const Tensor& target_in, Reduction reduction, double beta) {
  const Tensor input = float32_under_autocast(input_in);
  const Tensor target = float32_under_autocast(target_in);
  check_regression(input, target, "smooth_l1_loss");
  KILN_CHECK(beta >= 0, "smooth_l1_loss: beta must be non-negative, got ", beta);
  const Tensor d = sub(input, target);
  const Tensor abs_d = abs(d);
  if (beta == 0.0) return reduce_loss(abs_d, reduction);
  const Tensor quadratic = div(mul(square(d), 0.5), beta);
  return reduce_loss(where(lt(abs_d, beta), quadratic, sub(abs_d, 0.5 * beta)), reduction);
}

}  // namespace kiln
