#!/usr/bin/env python3
"""Writes the MONAI fixture of tests/train/test_segmentation_metrics.cpp: segmentation_metrics.npz.

For each case <name> of CASES: one-hot float32 "<name>_pred" and "<name>_truth" [B, C, d...]
(blobs: smoothed noise thresholded into classes, the prediction a perturbed copy of the
truth; some cases empty a class in one or both), "<name>_spacing", and per metric
"<name>_<metric>" [B, C'], the value of monai.metrics' function with the arguments below:
  dice           compute_dice(include_background=True)
  dice_all       compute_dice(include_background=True, ignore_empty=False)
  iou            compute_iou(include_background=False)
  iou_all        compute_iou(include_background=True, ignore_empty=False)
  hd             compute_hausdorff_distance(spacing=spacing)
  hd95           compute_hausdorff_distance(percentile=95, spacing=spacing)
  hd95_directed  compute_hausdorff_distance(percentile=95, directed=True, include_background=True)
  asd            compute_average_surface_distance(spacing=spacing)
  asd_symmetric  compute_average_surface_distance(symmetric=True, include_background=True, spacing=spacing)

Needs torch, numpy, scipy and monai (a virtual environment; Kiln's build never depends on them).
Run from this folder: python3 make_fixtures.py
"""
import warnings

import numpy as np
import torch
from monai.metrics import (compute_average_surface_distance, compute_dice, compute_hausdorff_distance,
                           compute_iou)
from scipy.ndimage import gaussian_filter

C = 3


def blobs(rng, shape, sigma):
    field = np.stack([gaussian_filter(rng.standard_normal(shape), sigma) for _ in range(C - 1)])
    labels = np.zeros(shape, dtype=np.int64)
    for c in range(C - 1):
        labels[field[c] > 0.35 * field[c].std() * (1 + c)] = c + 1
    return labels


def one_hot(labels):
    return np.stack([(labels == c) for c in range(C)]).astype(np.float32)


def case(rng, batch, shape, spacing, empty=()):
    truth, pred = [], []
    for b in range(batch):
        t = blobs(rng, shape, 2.0)
        p = t.copy()
        noise = rng.random(shape) < 0.08
        p[noise] = rng.integers(0, C, noise.sum())
        p = np.roll(p, 1, axis=0)
        tb, pb = one_hot(t), one_hot(p)
        for (eb, ec, which) in empty:
            if eb == b:
                if which in ("truth", "both"):
                    tb[0][tb[ec] > 0] = 1
                    tb[ec] = 0
                if which in ("pred", "both"):
                    pb[0][pb[ec] > 0] = 1
                    pb[ec] = 0
        truth.append(tb)
        pred.append(pb)
    return np.stack(pred), np.stack(truth), np.asarray(spacing, dtype=np.float64)


CASES = {
    "volumes": dict(batch=2, shape=(12, 10, 14), spacing=(0.8, 1.2, 2.5)),
    "empty_classes": dict(batch=3, shape=(10, 12, 9), spacing=(1.0, 1.0, 1.5),
                          empty=((0, 1, "truth"), (1, 2, "pred"), (2, 1, "both"))),
    "slices": dict(batch=2, shape=(20, 17), spacing=(0.5, 0.7)),
}


def metrics(pred, truth, spacing):
    p, t = torch.from_numpy(pred), torch.from_numpy(truth)
    s = spacing.tolist()
    return {
        "dice": compute_dice(p, t, include_background=True),
        "dice_all": compute_dice(p, t, include_background=True, ignore_empty=False),
        "iou": compute_iou(p, t, include_background=False),
        "iou_all": compute_iou(p, t, include_background=True, ignore_empty=False),
        "hd": compute_hausdorff_distance(p, t, spacing=s),
        "hd95": compute_hausdorff_distance(p, t, percentile=95, spacing=s),
        "hd95_directed": compute_hausdorff_distance(p, t, percentile=95, directed=True, include_background=True),
        "asd": compute_average_surface_distance(p, t, spacing=s),
        "asd_symmetric": compute_average_surface_distance(p, t, symmetric=True, include_background=True, spacing=s),
    }


if __name__ == "__main__":
    import monai
    warnings.simplefilter("ignore")
    rng = np.random.default_rng(20261202)
    out = {}
    for name, args in CASES.items():
        pred, truth, spacing = case(rng, **args)
        out[name + "_pred"], out[name + "_truth"], out[name + "_spacing"] = pred, truth, spacing
        for metric, value in metrics(pred, truth, spacing).items():
            out[f"{name}_{metric}"] = value.double().numpy()
    np.savez("segmentation_metrics.npz", **out)
    print("torch", torch.__version__, "monai", monai.__version__, len(CASES), "cases")
    for k in sorted(out):
        if "empty" in k and not k.endswith(("pred", "truth")):
            print(k, np.round(out[k], 3).tolist())
