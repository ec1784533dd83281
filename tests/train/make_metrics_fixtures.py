#!/usr/bin/env python3
"""Expected values for tests/train/test_metrics.cpp, from scikit-learn and MedMNIST's
evaluator (medmnist/evaluator.py: getAUC, getACC), on fixed score vectors.

Run: python3 tests/train/make_metrics_fixtures.py   (needs numpy and scikit-learn)
The test has these numbers written into it; this script is how they were made.
"""
import numpy as np
from sklearn.metrics import accuracy_score, confusion_matrix, roc_auc_score, roc_curve


def medmnist_auc(y_true, y_score, task):
    # MedMNIST's getAUC, as published.
    y_true = y_true.squeeze()
    y_score = y_score.squeeze()
    if task == "multi-label, binary-class":
        return sum(roc_auc_score(y_true[:, i], y_score[:, i]) for i in range(y_score.shape[1])) / y_score.shape[1]
    if task == "binary-class":
        if y_score.ndim == 2:
            y_score = y_score[:, -1]
        return roc_auc_score(y_true, y_score)
    return sum(roc_auc_score((y_true == i).astype(float), y_score[:, i]) for i in range(y_score.shape[1])) / y_score.shape[1]


def medmnist_acc(y_true, y_score, task, threshold=0.5):
    # MedMNIST's getACC, as published.
    y_true = y_true.squeeze()
    y_score = y_score.squeeze()
    if task == "multi-label, binary-class":
        y_pre = y_score > threshold
        return sum(accuracy_score(y_true[:, i], y_pre[:, i]) for i in range(y_true.shape[1])) / y_true.shape[1]
    if task == "binary-class":
        if y_score.ndim == 2:
            y_score = y_score[:, -1]
        return accuracy_score(y_true, y_score > threshold)
    return accuracy_score(y_true, np.argmax(y_score, axis=-1))


def show(name, value):
    print(f"{name} = {value!r}")


# Binary, with ties (two positives and a negative share 0.7; 0.5 itself appears).
binary_true = np.array([0, 1, 1, 0, 1, 0, 0, 1, 1, 0])
binary_pos = np.array([0.1, 0.7, 0.7, 0.7, 0.5, 0.5, 0.2, 0.9, 0.3, 0.6])
binary_score = np.stack([1 - binary_pos, binary_pos], axis=1)
show("binary auc", medmnist_auc(binary_true, binary_score, "binary-class"))
show("binary acc", medmnist_acc(binary_true, binary_score, "binary-class"))
show("binary confusion at 0.5 (>)", confusion_matrix(binary_true, binary_pos > 0.5).tolist())
fpr, tpr, thresholds = roc_curve(binary_true, binary_pos)
best = int(np.argmax(tpr - fpr))
show("youden threshold", thresholds[best])
show("acc at youden (>=)", accuracy_score(binary_true, binary_pos >= thresholds[best]))

# Multi-class, 3 classes, ties within a column.
multi_true = np.array([0, 2, 1, 2, 0, 1, 1, 2])
multi_score = np.array([[0.6, 0.3, 0.1], [0.2, 0.2, 0.6], [0.3, 0.4, 0.3], [0.1, 0.3, 0.6],
                        [0.4, 0.4, 0.2], [0.5, 0.3, 0.2], [0.2, 0.7, 0.1], [0.3, 0.3, 0.4]])
show("multi auc", medmnist_auc(multi_true, multi_score, "multi-class"))
show("multi per-class auc", [roc_auc_score((multi_true == i).astype(float), multi_score[:, i]) for i in range(3)])
show("multi acc", medmnist_acc(multi_true, multi_score, "multi-class"))
show("multi confusion", confusion_matrix(multi_true, np.argmax(multi_score, axis=1)).tolist())

# Multi-label, 2 labels.
label_true = np.array([[1, 0], [0, 1], [1, 1], [0, 0], [1, 0], [0, 1]])
label_score = np.array([[0.8, 0.1], [0.4, 0.6], [0.5, 0.9], [0.2, 0.3], [0.6, 0.6], [0.3, 0.5]])
show("multi-label auc", medmnist_auc(label_true, label_score, "multi-label, binary-class"))
show("multi-label acc", medmnist_acc(label_true, label_score, "multi-label, binary-class"))
