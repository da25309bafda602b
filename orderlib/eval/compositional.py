"""Attribute-object recognition metrics (Utama; Misra et al.; Purushwalkam et al. / Mancini et al.).

- closed world (Misra et al.'s protocol, Utama's Table 1): rank only the unseen test pairs for
  each test image, top-k accuracy with the project's tie rules (orderlib.eval.retrieval);
- generalised (the "natural" split): candidates are seen and unseen pairs; a calibration bias
  added to every unseen pair's score trades seen accuracy for unseen accuracy. The sweep here is
  exact: each image is right on one interval of biases, so the whole seen/unseen curve follows
  from one threshold per image (the field's code samples the biases). Reported: best seen, best
  unseen, best harmonic mean and the area under the curve.
"""

from __future__ import annotations

import numpy as np
import torch

from orderlib.eval.retrieval import PRIMARY_TIES, TargetRanks, rank_metrics, ranks_of_targets


def target_ranks(scores: torch.Tensor, target: torch.Tensor) -> TargetRanks:
    """Tie-aware rank counts of each row's target column in scores (N, P), high = better."""
    scores = torch.as_tensor(scores)
    target = torch.as_tensor(target, dtype=torch.long).reshape(-1, 1)  # (N, 1)
    return ranks_of_targets(lambda rows: -scores[rows], scores.shape[0], scores.shape[1], target)


def topk_accuracy(scores: torch.Tensor, target: torch.Tensor, ks=(1, 2, 3), ties: str = PRIMARY_TIES) -> dict:
    """Top-k accuracy (%) of targets (N,) among candidate scores (N, P), and their mean
    ("average", Utama's Table 1 column)."""
    m = rank_metrics(target_ranks(scores, target), ks, ties)
    out = {f"top-{k}": m[f"R@{k}"] for k in ks}
    out["average"] = float(np.mean(list(out.values())))
    return out


def _thresholds(scores: torch.Tensor, target: torch.Tensor, unseen: torch.Tensor):
    """Per image: whether its target is an unseen pair, whether it can be right at any bias, and
    the bias threshold (right below it for seen targets, above it for unseen ones)."""
    scores = torch.as_tensor(scores, dtype=torch.float64)
    n = scores.shape[0]
    rows = torch.arange(n)
    s_t = scores[rows, target]  # (N,)
    others = scores.clone()
    others[rows, target] = -float("inf")
    best_seen = torch.where(~unseen[None], others, torch.tensor(-float("inf"), dtype=torch.float64)).max(1).values
    best_unseen = torch.where(unseen[None], others, torch.tensor(-float("inf"), dtype=torch.float64)).max(1).values
    is_unseen = unseen[target]
    possible = torch.where(is_unseen, s_t > best_unseen, s_t > best_seen)
    thr = torch.where(is_unseen, best_seen - s_t, s_t - best_unseen)
    return is_unseen.numpy(), possible.numpy(), thr.numpy()


def accuracy_at_bias(scores, target, unseen, bias: float) -> dict:
    """Seen and unseen accuracy (%) and their harmonic mean with `bias` added to unseen pairs."""
    is_unseen, possible, thr = _thresholds(scores, torch.as_tensor(target), torch.as_tensor(unseen))
    seen_ok = possible & ~is_unseen & (bias < thr)
    unseen_ok = possible & is_unseen & (bias > thr)
    s, u = 100 * seen_ok[~is_unseen].mean(), 100 * unseen_ok[is_unseen].mean()
    return {"seen": float(s), "unseen": float(u), "hm": float(2 * s * u / (s + u)) if s + u else 0.0}


def generalised_sweep(scores, target, unseen) -> dict:
    """Exact calibration-bias sweep over scores (N, P) of images with target pairs (N,), where
    unseen (P,) marks unseen candidate pairs. Returns best seen / unseen accuracy and best
    harmonic mean (%), the AUC of the seen-unseen curve (%, as a fraction of the unit square:
    100 x area), the bias at the best harmonic mean, and the curve."""
    target, unseen = torch.as_tensor(target, dtype=torch.long), torch.as_tensor(unseen, dtype=torch.bool)
    is_unseen, possible, thr = _thresholds(scores, target, unseen)
    if is_unseen.all() or not is_unseen.any():
        raise ValueError("the generalised sweep needs images of both seen and unseen pairs")
    t = np.unique(thr[possible])
    # one bias below every threshold, one between each two, one above all: every distinct point
    biases = np.concatenate([[t[0] - 1.0], (t[:-1] + t[1:]) / 2, [t[-1] + 1.0]]) if len(t) else np.zeros(1)
    seen_thr = np.sort(thr[possible & ~is_unseen])
    unseen_thr = np.sort(thr[possible & is_unseen])
    seen_acc = 100 * (len(seen_thr) - np.searchsorted(seen_thr, biases, side="right")) / (~is_unseen).sum()
    unseen_acc = 100 * np.searchsorted(unseen_thr, biases, side="left") / is_unseen.sum()
    hm = np.where(seen_acc + unseen_acc > 0, 2 * seen_acc * unseen_acc / np.maximum(seen_acc + unseen_acc, 1e-12), 0)
    order = np.argsort(seen_acc, kind="stable")
    auc = float(np.trapezoid(unseen_acc[order], seen_acc[order])) / 100.0
    best = int(np.argmax(hm))
    return {
        "best seen": float(seen_acc.max()),
        "best unseen": float(unseen_acc.max()),
        "best hm": float(hm[best]),
        "auc": auc,
        "bias": float(biases[best]),
        "curve": (seen_acc, unseen_acc),
    }


def context_dependence(shifts: np.ndarray) -> np.ndarray:
    """Per attribute, 1 - the mean cosine between its feature shifts on different objects.

    shifts (A, O, F): mean of feature(item under attribute) - feature(plain item) over items of
    each object. 0: the attribute moves every object the same way; near 1: unrelated ways."""
    v = shifts / np.maximum(np.linalg.norm(shifts, axis=-1, keepdims=True), 1e-12)  # (A, O, F)
    cos = np.einsum("aof,apf->aop", v, v)  # (A, O, O)
    o = shifts.shape[1]
    mean_off = (cos.sum((1, 2)) - np.trace(cos, axis1=1, axis2=2)) / (o * (o - 1))
    return 1.0 - mean_off
