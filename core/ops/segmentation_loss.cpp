// Dice, focal, DiceCE and DiceFocal losses (segmentation_loss.h), composed from existing
// ops in the order MONAI applies them: activation, one-hot encoding of a label map, the
// background dropped, the ignore mask, then the loss itself.
//
// Note [Segmentation losses]: with p the prediction and g the target of one channel,
// summed over the spatial dims (and the batch with `batch`):
//   Dice:     tp = sum p g, fp = sum p - tp, fn = sum g - tp (halved unless jaccard);
//             loss = 1 - (2 tp + smooth_nr) / (2 (tp + fp + fn) + smooth_dr).
//             squared_pred or soft_label use the norm form tp = (|p| + |g| - |p - g|) / 2
//             (L2 norms squared, or L1 norms), exact for soft targets.
//   Focal:    sigmoid: (x - x g - log sigmoid(x)) * exp(gamma log sigmoid(-x (2g - 1)));
//             softmax: -(1 - exp(ls))^gamma ls g with ls = log_softmax over the channels;
//             alpha (scalar) weighs positives by alpha and negatives by 1 - alpha (sigmoid),
//             or the background by 1 - alpha and the rest by alpha (softmax).
// An ignore mask (ignore_index) multiplies input and target before the loss (and the
// focal loss after): a label map's voxels of that label, a one-hot target's voxels of that
// class, or, for a label outside the classes, the voxels with no class at all. The focal
// loss's means then divide by the mask's sum (at least float32's epsilon, as MONAI).
//
// Where Kiln departs from MONAI: MONAI's FocalLoss computes in float32 whatever the input,
// and its to_onehot_y encodes in float32 (exact for the plain Dice's sums, rounded by the
// norms of squared_pred and soft_label); Kiln computes and encodes in the input's dtype. A label outside the
// classes is a kiln::Error naming the loss and the label (MONAI's one_hot fails inside scatter). A
// one-channel input ignores softmax, to_onehot_y and include_background with a warning, as MONAI does.
#include "core/ops/segmentation_loss.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/autocast.h"
#include "core/ops/activation.h"
#include "core/ops/elementwise.h"
#include "core/ops/factory.h"
#include "core/ops/index.h"
#include "core/ops/reduce.h"
#include "core/ops/shape.h"
#include "core/ops/softmax.h"
#include "core/ops/view.h"
#include "core/warning.h"

namespace kiln {
namespace {

Tensor float32_under_autocast(const Tensor& t) { return autocast_input(t, AutocastPolicy::Float32); }

void check_segmentation_input(const Tensor& input, const char* op) {
  KILN_CHECK(input.defined(), op, ": undefined input");
  KILN_CHECK(input.is_floating_point(), op, ": expected a floating-point input, got ", input.dtype());
  KILN_CHECK(input.dim() >= 3, op, ": input must be [B, N, d...] with at least one spatial dim, got shape ",
             input.sizes());
}

void check_target(const Tensor& input, const Tensor& target, const char* op) {
  KILN_CHECK(target.defined(), op, ": undefined target");
  KILN_CHECK(target.device() == input.device(), op, ": input on ", input.device(), " but target on ",
             target.device());
  KILN_CHECK(target.dim() == input.dim(), op, ": input of shape ", input.sizes(), " and target of shape ",
             target.sizes(), " have different ranks; a label map is [B, 1, d...]");
}

void warn_one_channel(const char* option, const char* op) {
  warn_once(std::string(op) + option,
            std::string(op) + ": single-channel prediction, " + option + " ignored (as MONAI)");
}

// Every label in [0, classes); names the first that is not. Reads the labels on the host,
// so it runs only once scatter_add has found a bad index (Note [Target range check] in
// loss.cpp).
void check_label_range(const Tensor& labels, int64_t classes, const char* op) {
  for (double value : labels.to(DType::Float64).to_vector<double>()) {
    KILN_CHECK(std::trunc(value) >= 0 && std::trunc(value) < static_cast<double>(classes), op, ": label ",
               value, " is outside the ", classes, " classes [0, ", classes, ")");
  }
}

// 1 where the voxel counts, 0 where ignore_index masks it: [B, 1, d...] of `dtype`, from
// the target as given (label map or one-hot).
Tensor ignore_mask(const Tensor& target, int64_t ignore_index, DType dtype) {
  if (target.size(1) == 1) return ne(target, ignore_index).to(dtype);
  if (ignore_index >= 0 && ignore_index < target.size(1)) {
    return add(neg(narrow(target, 1, ignore_index, 1).to(dtype)), 1.0);
  }
  return gt(sum(target.to(dtype), {1}, /*keepdim=*/true), 0).to(dtype);
}

// The target as the loss compares it with the input (MONAI's order): a label map one-hot
// encoded (an ignore_index outside the classes first set to class 0), the background
// dropped from both, the ignore mask applied to both, the target in the input's dtype.
struct Prepared {
  Tensor input;
  Tensor target;
  Tensor mask;  // [B, 1, d...], or undefined without ignore_index
};

Prepared prepare(const Tensor& input, const Tensor& target, bool to_onehot_y, bool include_background,
                 std::optional<int64_t> ignore_index, const char* op) {
  check_target(input, target, op);
  const int64_t channels = input.size(1);
  Prepared out{input, target, {}};
  if (to_onehot_y && channels == 1) warn_one_channel("to_onehot_y=true", op);
  if (to_onehot_y && channels > 1) {
    Tensor labels = target;
    if (ignore_index && (*ignore_index < 0 || *ignore_index >= channels)) {
      labels = where(eq(labels, *ignore_index), zeros_like(labels), labels);
    }
    out.target = one_hot(labels, channels, input.dtype(), op);
  }
  if (!include_background && channels == 1) warn_one_channel("include_background=false", op);
  if (!include_background && channels > 1) {
    out.input = slice(out.input, 1, 1, std::nullopt);
    out.target = slice(out.target, 1, 1, std::nullopt);
  }
  KILN_CHECK(out.target.sizes() == out.input.sizes(), op, ": target of shape ", out.target.sizes(),
             " does not match the input's ", out.input.sizes(),
             to_onehot_y ? "" : ". Hint: a label map [B, 1, d...] needs to_onehot_y");
  if (out.target.dtype() != input.dtype()) out.target = out.target.to(input.dtype());
  if (ignore_index) {
    out.mask = ignore_mask(target, *ignore_index, input.dtype());
    out.input = mul(out.input, out.mask);
    out.target = mul(out.target, out.mask);
  }
  return out;
}

// A class-weight-like tensor: 0-d or [classes], floating, on the input's device (or a 0-d
// CPU tensor), non-negative when its values can be read without a device sync.
Tensor checked_class_values(const Tensor& values, int64_t classes, const Tensor& like, const char* name,
                            const char* op) {
  KILN_CHECK(values.dim() == 0 || (values.dim() == 1 && values.size(0) == classes), op, ": ", name,
             " must be 0-d or have shape [", classes,
             "] (one per class after the background is dropped), got ", values.sizes());
  KILN_CHECK(values.device() == like.device() || (values.dim() == 0 && values.device().is_cpu()), op, ": ",
             name, " on ", values.device(), " but the input on ", like.device());
  if (values.device().is_cpu()) check_non_negative_values(values, name, op);
  return values.to(like.dtype());
}

// [classes] reshaped to broadcast along dim 1 of a [B, classes, d...] tensor.
Tensor along_channels(const Tensor& per_class, int64_t rank) {
  if (per_class.dim() == 0) return per_class;
  std::vector<int64_t> shape(static_cast<size_t>(rank), 1);
  shape[1] = per_class.size(0);
  return reshape(per_class, shape);
}

std::vector<int64_t> spatial_dims(int64_t rank) {
  std::vector<int64_t> dims;
  for (int64_t d = 2; d < rank; ++d) dims.push_back(d);
  return dims;
}

// Sums over `dims` of p, g and |p - g| with the power `ord` (1 or 2): the norm form.
struct Overlap {
  Tensor tp, fp, fn;
};
Overlap overlap(const Tensor& p, const Tensor& g, const std::vector<int64_t>& dims, bool norm_form,
                bool squared) {
  if (!norm_form) {
    Tensor tp = sum(mul(p, g), dims);
    return {tp, sub(sum(p, dims), tp), sub(sum(g, dims), tp)};
  }
  const auto power = [&](const Tensor& x) { return sum(squared ? square(x) : abs(x), dims); };
  const Tensor pred = power(p), ground = power(g);
  const Tensor tp = mul(sub(add(pred, ground), power(sub(p, g))), 0.5);
  return {tp, sub(pred, tp), sub(ground, tp)};
}

Tensor reduce_dice(const Tensor& f, Reduction reduction, int64_t rank) {
  switch (reduction) {
    case Reduction::Mean:
      return mean(f);
    case Reduction::Sum:
      return sum(f);
    case Reduction::None: {
      std::vector<int64_t> shape(f.sizes().begin(), f.sizes().end());
      shape.resize(std::min<size_t>(shape.size(), 2));
      shape.resize(shape.size() + static_cast<size_t>(rank - 2), 1);
      return reshape(f, shape);
    }
  }
  return f;
}

Tensor log_sigmoid(const Tensor& x) { return neg(softplus(neg(x))); }

Tensor sigmoid_focal(const Tensor& x, const Tensor& t, double gamma) {
  const Tensor bce = sub(sub(x, mul(x, t)), log_sigmoid(x));
  const Tensor log_one_minus_pt = log_sigmoid(mul(neg(x), sub(mul(t, 2.0), 1.0)));
  return mul(exp(mul(log_one_minus_pt, gamma)), bce);
}

Tensor softmax_focal(const Tensor& x, const Tensor& t, double gamma) {
  const Tensor ls = log_softmax(x, 1);
  return neg(mul(mul(pow(add(neg(exp(ls)), 1.0), gamma), ls), t));
}

// MONAI's alpha factor: sigmoid scalar alpha t + (1 - alpha)(1 - t), sigmoid per class
// alpha_c where t == 1 (else 1), softmax [1 - alpha, alpha, ...] or alpha_c per channel.
Tensor focal_alpha(const Tensor& t, const FocalLossOptions& options, bool softmax, const char* op) {
  const int64_t classes = t.size(1);
  if (options.alpha) {
    const double a = *options.alpha;
    if (!softmax) return add(mul(t, a), mul(add(neg(t), 1.0), 1.0 - a));
    const TensorOptions like{.dtype = t.dtype(), .device = t.device()};
    return along_channels(cat({full({1}, 1.0 - a, like), full({classes - 1}, a, like)}), t.dim());
  }
  KILN_CHECK(options.alpha_per_class.dim() == 1, op, ": alpha_per_class must be [", classes, "], got ",
             options.alpha_per_class.sizes());
  const Tensor alpha = along_channels(
      checked_class_values(options.alpha_per_class, classes, t, "alpha_per_class", op), t.dim());
  if (softmax) return alpha;
  return where(eq(t, 1.0), expand(alpha, t.sizes()), 1.0);
}

Tensor reduce_focal(const Tensor& loss, const Tensor& mask, Reduction reduction) {
  const double eps = std::numeric_limits<float>::epsilon();
  const std::vector<int64_t> dims = spatial_dims(loss.dim());
  switch (reduction) {
    case Reduction::None:
      return loss;
    case Reduction::Mean:
      return mask.defined() ? div(sum(loss), clamp(sum(mask), eps, std::nullopt)) : mean(loss);
    case Reduction::Sum:
      if (!mask.defined()) return sum(mean(loss, dims));
      return sum(div(sum(loss, dims, true), clamp(sum(mask, dims, true), eps, std::nullopt)));
  }
  return loss;
}

void check_combined(const Tensor& input, const Tensor& target, const DiceLossOptions& dice, const char* op) {
  check_segmentation_input(input, op);
  check_target(input, target, op);
  KILN_CHECK(target.size(1) == 1 || target.size(1) == input.size(1), op, ": target has ", target.size(1),
             " channels, neither 1 (a label map) nor the input's ", input.size(1));
  KILN_CHECK(!dice.ignore_index, op,
             ": ignore_index is not supported (as MONAI); combine dice_loss with "
             "another loss instead");
}

void check_lambda(double lambda, const char* name, const char* op) {
  KILN_CHECK(lambda >= 0.0, op, ": ", name, " must be non-negative, got ", lambda);
}

}  // namespace

Tensor one_hot(const Tensor& labels, int64_t classes, DType dtype, const char* op) {
  KILN_CHECK(labels.defined(), op, ": undefined label map");
  KILN_CHECK(labels.dim() >= 2 && labels.size(1) == 1, op, ": a label map must be [B, 1, d...], got shape ",
             labels.sizes());
  KILN_CHECK(classes >= 1, op, ": the number of classes must be positive, got ", classes);
  std::vector<int64_t> shape(labels.sizes().begin(), labels.sizes().end());
  shape[1] = classes;
  const Tensor index = labels.dtype() == DType::Int64 ? labels : labels.to(DType::Int64);
  const TensorOptions options{.dtype = dtype, .device = labels.device()};
  try {
    return scatter_add(zeros(shape, options), 1, index, ones(labels.sizes(), options));
  } catch (const Error&) {
    check_label_range(labels, classes, op);
    throw;
  }
}

void check_non_negative_values(const Tensor& values, const char* name, const char* op) {
  for (double v : values.to(Device::cpu(), DType::Float64).to_vector<double>()) {
    KILN_CHECK(std::isfinite(v) && v >= 0.0, op, ": ", name, " values must be finite and non-negative, got ",
               v);
  }
}

Tensor dice_loss(const Tensor& input_in, const Tensor& target_in, const DiceLossOptions& options) {
  const char* op = "dice_loss";
  const Tensor input = float32_under_autocast(input_in);
  const Tensor target = float32_under_autocast(target_in);
  check_segmentation_input(input, op);
  KILN_CHECK(!(options.sigmoid && options.softmax), op, ": sigmoid and softmax are exclusive");
  const int64_t rank = input.dim();
  Tensor x = options.sigmoid ? sigmoid(input) : input;
  if (options.softmax && input.size(1) == 1) warn_one_channel("softmax=true", op);
  if (options.softmax && input.size(1) > 1) x = softmax(x, 1);
  const Prepared p =
      prepare(x, target, options.to_onehot_y, options.include_background, options.ignore_index, op);

  std::vector<int64_t> dims = spatial_dims(rank);
  if (options.batch) dims.insert(dims.begin(), 0);
  Overlap o =
      overlap(p.input, p.target, dims, options.squared_pred || options.soft_label, options.squared_pred);
  if (!options.jaccard) {
    o.fp = mul(o.fp, 0.5);
    o.fn = mul(o.fn, 0.5);
  }
  const Tensor numerator = add(mul(o.tp, 2.0), options.smooth_nr);
  const Tensor denominator = add(mul(add(add(o.tp, o.fp), o.fn), 2.0), options.smooth_dr);
  Tensor f = add(neg(div(numerator, denominator)), 1.0);
  const int64_t classes = p.target.size(1);
  if (options.weight.defined() && classes != 1) {
    f = mul(f, checked_class_values(float32_under_autocast(options.weight), classes, f, "weight", op));
  }
  return reduce_dice(f, options.reduction, rank);
}

Tensor focal_loss(const Tensor& input_in, const Tensor& target_in, const FocalLossOptions& options) {
  const char* op = "focal_loss";
  const Tensor input = float32_under_autocast(input_in);
  const Tensor target = float32_under_autocast(target_in);
  check_segmentation_input(input, op);
  KILN_CHECK(options.gamma >= 0.0, op, ": gamma must be non-negative, got ", options.gamma);
  KILN_CHECK(!(options.alpha && options.alpha_per_class.defined()), op,
             ": give alpha or alpha_per_class, not both");
  const Prepared p =
      prepare(input, target, options.to_onehot_y, options.include_background, options.ignore_index, op);
  Tensor loss = options.use_softmax ? softmax_focal(p.input, p.target, options.gamma)
                                    : sigmoid_focal(p.input, p.target, options.gamma);
  const bool scalar_alpha_dropped =
      options.use_softmax && !options.include_background && options.alpha.has_value();
  if (scalar_alpha_dropped) {
    warn_once("focal_loss alpha",
              "focal_loss: include_background=false, scalar alpha ignored with softmax (as MONAI)");
  }
  if ((options.alpha && !scalar_alpha_dropped) || options.alpha_per_class.defined()) {
    loss = mul(focal_alpha(p.target, options, options.use_softmax, op), loss);
  }
  if (p.mask.defined()) loss = mul(loss, p.mask);
  if (options.weight.defined()) {
    const int64_t classes = loss.size(1);
    KILN_CHECK(options.weight.dim() == 0 || classes != 1, op,
               ": a per-class weight needs more than one channel (a 0-d weight scales a one-channel loss)");
    const Tensor weight =
        checked_class_values(float32_under_autocast(options.weight), classes, loss, "weight", op);
    loss = mul(loss, along_channels(weight, loss.dim()));
  }
  return reduce_focal(loss, p.mask, options.reduction);
}

Tensor dice_ce_loss(const Tensor& input_in, const Tensor& target_in, const DiceCeLossOptions& options) {
  const char* op = "dice_ce_loss";
  const Tensor input = float32_under_autocast(input_in);
  const Tensor target = float32_under_autocast(target_in);
  check_combined(input, target, options.dice, op);
  KILN_CHECK(options.dice.reduction != Reduction::None, op, ": reduction must be Mean or Sum (as MONAI)");
  check_lambda(options.lambda_dice, "lambda_dice", op);
  check_lambda(options.lambda_ce, "lambda_ce", op);
  const Tensor weight = float32_under_autocast(options.dice.weight);
  DiceLossOptions dice = options.dice;
  if (weight.defined() && !dice.include_background) {
    KILN_CHECK(weight.dim() == 1, op, ": weight must be [", input.size(1), "] to drop the background's, got ",
               weight.sizes());
    dice.weight = slice(weight, 0, 1, std::nullopt);
  }
  const Tensor dice_term = dice_loss(input, target, dice);
  Tensor ce_term;
  if (input.size(1) == 1) {
    ce_term = binary_cross_entropy_with_logits(input, target.to(input.dtype()),
                                               {.reduction = options.dice.reduction, .pos_weight = weight});
  } else {
    const CrossEntropyOptions ce{
        .weight = weight, .reduction = options.dice.reduction, .label_smoothing = options.label_smoothing};
    const bool labels = target.size(1) == 1;
    ce_term =
        cross_entropy(input, labels ? squeeze(target, 1).to(DType::Int64) : target.to(input.dtype()), ce);
  }
  return add(mul(dice_term, options.lambda_dice), mul(ce_term, options.lambda_ce));
}

Tensor dice_focal_loss(const Tensor& input_in, const Tensor& target_in, const DiceFocalLossOptions& options) {
  const char* op = "dice_focal_loss";
  const Tensor input = float32_under_autocast(input_in);
  Tensor target = float32_under_autocast(target_in);
  check_combined(input, target, options.dice, op);
  check_lambda(options.lambda_dice, "lambda_dice", op);
  check_lambda(options.lambda_focal, "lambda_focal", op);
  const int64_t channels = input.size(1);
  if (options.dice.to_onehot_y && channels == 1) warn_one_channel("to_onehot_y=true", op);
  if (options.dice.to_onehot_y && channels > 1) target = one_hot(target, channels, input.dtype(), op);
  DiceLossOptions dice = options.dice;
  dice.to_onehot_y = false;
  const FocalLossOptions focal{.include_background = dice.include_background,
                               .gamma = options.gamma,
                               .alpha = options.alpha,
                               .weight = dice.weight,
                               .reduction = dice.reduction};
  return add(mul(dice_loss(input, target, dice), options.lambda_dice),
             mul(focal_loss(input, target, focal), options.lambda_focal));
}

}  // namespace kiln
