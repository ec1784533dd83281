#!/usr/bin/env python3
"""Writes the MONAI fixture of tests/core/test_segmentation_loss.cpp: segmentation_loss.npz.

For each case <name> of CASES: "<name>_input" (the network's output, float64 or, for the
focal losses, float32: MONAI's FocalLoss computes in float32 whatever its input), the
target "<name>_target" (one-hot, soft or a label map [B, 1, d...]), the loss
"<name>_loss" of the MONAI loss built with the case's arguments, the weights
"<name>_weights_out" (shaped like the loss) and the gradient "<name>_grad_input" of
sum(loss * weights_out) with respect to the input. test_segmentation_loss.cpp builds each
case's Kiln options by hand; keep the two lists in step.

Needs torch, numpy and monai (a virtual environment; Kiln's build never depends on them).
Run from this folder: python3 make_fixtures.py
"""
import numpy as np
import torch
from monai.losses import DiceCELoss, DiceFocalLoss, DiceLoss, FocalLoss

B, C, SPATIAL = 2, 3, (4, 3, 5)


def logits(dtype, channels=C):
    return torch.randn(B, channels, *SPATIAL, dtype=dtype) * 2


def probabilities(dtype, channels=C):
    return torch.rand(B, channels, *SPATIAL, dtype=dtype)


def labels(dtype, classes=C, sentinel=None):
    y = torch.randint(0, classes, (B, 1, *SPATIAL)).to(dtype)
    if sentinel is not None:
        y[torch.rand(y.shape) < 0.2] = sentinel
    return y


def one_hot(y, classes=C):
    return torch.nn.functional.one_hot(y[:, 0].long(), classes).movedim(-1, 1).to(y.dtype)


F64, F32 = torch.float64, torch.float32

# name: (loss, input, target)
CASES = {
    "dice_probabilities": (lambda: DiceLoss(), lambda: probabilities(F64), lambda: one_hot(labels(F64))),
    "dice_softmax_labels": (lambda: DiceLoss(to_onehot_y=True, softmax=True), lambda: logits(F64),
                            lambda: labels(F64)),
    "dice_sigmoid_no_background": (lambda: DiceLoss(sigmoid=True, include_background=False),
                                   lambda: logits(F64), lambda: one_hot(labels(F64))),
    # a float64 one-hot target: MONAI's to_onehot_y encodes in float32, exact for the sums
    # of the plain form but rounded by the norms of squared_pred's (Kiln encodes in the
    # input's dtype)
    "dice_squared_jaccard": (lambda: DiceLoss(softmax=True, squared_pred=True, jaccard=True),
                             lambda: logits(F64), lambda: one_hot(labels(F64))),
    "dice_batch_sum": (lambda: DiceLoss(to_onehot_y=True, softmax=True, batch=True, reduction="sum"),
                       lambda: logits(F64), lambda: labels(F64)),
    "dice_none_weighted": (lambda: DiceLoss(to_onehot_y=True, softmax=True, reduction="none",
                                            weight=torch.tensor([1.0, 2.0, 3.0], dtype=F64)),
                           lambda: logits(F64), lambda: labels(F64)),
    "dice_none_batch_scalar_weight": (lambda: DiceLoss(softmax=True, include_background=False, batch=True,
                                                       reduction="none", weight=torch.tensor(0.5, dtype=F64)),
                                      lambda: logits(F64), lambda: one_hot(labels(F64))),
    "dice_soft_label": (lambda: DiceLoss(sigmoid=True, soft_label=True), lambda: logits(F64),
                        lambda: probabilities(F64)),
    "dice_soft_label_squared": (lambda: DiceLoss(softmax=True, soft_label=True, squared_pred=True, jaccard=True),
                                lambda: logits(F64), lambda: torch.softmax(logits(F64), 1)),
    "dice_smoothing_weight_no_background": (
        lambda: DiceLoss(to_onehot_y=True, softmax=True, include_background=False, smooth_nr=0.0, smooth_dr=1e-3,
                         weight=torch.tensor([2.0, 1.0], dtype=F64)),
        lambda: logits(F64), lambda: labels(F64)),
    "dice_ignore_sentinel": (lambda: DiceLoss(to_onehot_y=True, softmax=True, ignore_index=255),
                             lambda: logits(F64), lambda: labels(F64, sentinel=255)),
    "dice_ignore_class": (lambda: DiceLoss(to_onehot_y=True, softmax=True, ignore_index=1),
                          lambda: logits(F64), lambda: labels(F64)),
    "dice_one_channel": (lambda: DiceLoss(sigmoid=True), lambda: logits(F64, 1), lambda: labels(F64, 2)),
    "focal_one_hot": (lambda: FocalLoss(), lambda: logits(F32), lambda: one_hot(labels(F32))),
    "focal_softmax_alpha": (lambda: FocalLoss(to_onehot_y=True, use_softmax=True, alpha=0.25),
                            lambda: logits(F32), lambda: labels(F32)),
    "focal_alpha_per_class_weight_sum": (
        lambda: FocalLoss(gamma=1.5, alpha=[0.2, 0.5, 0.8], weight=[1.0, 2.0, 3.0], reduction="sum"),
        lambda: logits(F32), lambda: one_hot(labels(F32))),
    "focal_softmax_no_background_none": (
        lambda: FocalLoss(to_onehot_y=True, use_softmax=True, include_background=False, alpha=0.25, weight=2.0,
                          reduction="none"),
        lambda: logits(F32), lambda: labels(F32)),
    "focal_ignore_sum": (lambda: FocalLoss(to_onehot_y=True, ignore_index=255, reduction="sum"),
                         lambda: logits(F32), lambda: labels(F32, sentinel=255)),
    "focal_ignore_mean": (lambda: FocalLoss(to_onehot_y=True, use_softmax=True, ignore_index=255, gamma=0.0),
                          lambda: logits(F32), lambda: labels(F32, sentinel=255)),
    "dice_ce_labels": (lambda: DiceCELoss(to_onehot_y=True, softmax=True), lambda: logits(F64),
                       lambda: labels(F64)),
    "dice_ce_weight_no_background_smoothing": (
        lambda: DiceCELoss(to_onehot_y=True, softmax=True, include_background=False, reduction="sum",
                           weight=torch.tensor([1.0, 2.0, 3.0], dtype=F64), label_smoothing=0.1,
                           lambda_dice=0.7, lambda_ce=1.3),
        lambda: logits(F64), lambda: labels(F64)),
    "dice_ce_one_hot": (lambda: DiceCELoss(softmax=True, batch=True), lambda: logits(F64),
                        lambda: one_hot(labels(F64))),
    "dice_ce_one_channel": (lambda: DiceCELoss(sigmoid=True, weight=torch.tensor([2.0], dtype=F64)),
                            lambda: logits(F64, 1), lambda: labels(F64, 2)),
    "dice_focal_labels": (lambda: DiceFocalLoss(to_onehot_y=True, softmax=True), lambda: logits(F32),
                          lambda: labels(F32)),
    "dice_focal_no_background_weight": (
        lambda: DiceFocalLoss(sigmoid=True, include_background=False, weight=[1.0, 2.0], alpha=0.25, gamma=1.0,
                              lambda_dice=0.5, lambda_focal=2.0),
        lambda: logits(F32), lambda: one_hot(labels(F32))),
}


def case(out, name, make_loss, make_input, make_target):
    x = make_input().requires_grad_(True)
    y = make_target()
    loss = make_loss()(x, y)
    w = torch.randn(loss.shape, dtype=loss.dtype) if loss.dim() > 0 else torch.ones((), dtype=loss.dtype)
    (loss * w).sum().backward()
    out[name + "_input"], out[name + "_target"] = x.detach().numpy(), y.numpy()
    out[name + "_loss"], out[name + "_weights_out"] = loss.detach().numpy(), w.numpy()
    out[name + "_grad_input"] = x.grad.numpy()


if __name__ == "__main__":
    import monai
    torch.manual_seed(20261202)
    out = {}
    for name, (make_loss, make_input, make_target) in CASES.items():
        case(out, name, make_loss, make_input, make_target)
    np.savez("segmentation_loss.npz", **out)
    print("torch", torch.__version__, "monai", monai.__version__, len(CASES), "cases")
