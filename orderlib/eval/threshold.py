"""Threshold classification of energies (Sec. 3.3 of Vendrov et al.): positive iff E <= tau."""

from __future__ import annotations

import numpy as np


def best_threshold(energies, labels) -> tuple[float, float]:
    """Return (tau, accuracy) of the accuracy-maximising cut "positive iff E <= tau".

    Cuts fall only between distinct energies (ties are never split), at the midpoint; the lowest
    such cut wins among equals. Choose it on dev, then apply it to test.
    """
    e = np.asarray(energies, dtype=np.float64)
    y = np.asarray(labels, dtype=bool)
    if e.shape != y.shape or e.ndim != 1 or len(e) == 0:
        raise ValueError(f"expected two equal-length 1-D arrays, got {e.shape} and {y.shape}")
    if not np.isfinite(e).all():
        raise ValueError("energies contain NaN or inf")
    order = np.argsort(e, kind="stable")
    e, y = e[order], y[order]
    # correct(k) = positives among the first k + negatives among the rest
    pos_before = np.r_[0, np.cumsum(y)]
    neg_after = (~y).sum() - np.r_[0, np.cumsum(~y)]
    correct = pos_before + neg_after  # (n + 1,), k = 0..n
    valid = np.r_[True, e[1:] > e[:-1], True]  # a cut after k items must not split a tie
    correct = np.where(valid, correct, -1)
    k = int(np.argmax(correct))
    if k == 0:
        tau = e[0] - 1.0
    elif k == len(e):
        tau = e[-1] + 1.0
    else:
        tau = 0.5 * (e[k - 1] + e[k])
    return float(tau), float(correct[k] / len(e))


def threshold_accuracy(energies, labels, tau: float) -> float:
    """Return the accuracy of "positive iff E <= tau"."""
    e = np.asarray(energies, dtype=np.float64)
    y = np.asarray(labels, dtype=bool)
    return float(((e <= tau) == y).mean())


def roc_points(energies, labels) -> tuple[np.ndarray, np.ndarray]:
    """Return (false positive rate, true positive rate) of "positive iff E <= tau" for every cut
    between distinct energies, from nothing positive to everything positive."""
    e = np.asarray(energies, dtype=np.float64)
    y = np.asarray(labels, dtype=bool)
    order = np.argsort(e, kind="stable")
    e, y = e[order], y[order]
    last = np.r_[e[1:] > e[:-1], True]  # cut only after the last of equal energies
    tp = np.r_[0, np.cumsum(y)[last]]
    fp = np.r_[0, np.cumsum(~y)[last]]
    return fp / max(1, (~y).sum()), tp / max(1, y.sum())
