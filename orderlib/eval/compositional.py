"""Attribute-object recognition metrics (Utama; Misra et al.; Purushwalkam et al. / Mancini et al.).

- closed world (Misra et al.'s protocol, Utama's Table 1): rank only the unseen test pairs for
  each test image, top-k accuracy with the project's tie rules (orderlib.eval.retrieval);
- generalised (the "natural" split): candidates are seen and unseen pairs; a calibration bias
  added to every unseen pair's score trades seen accuracy for unseen accuracy. The sweep here is
  exact: each image is right on one interval of biases, so the whole seen/unseen curve follows
  from one threshold per image (the field's code samples the biases: `sampled_sweep`). Reported:
  best seen, best unseen, best harmonic mean and the area under the curve.

Ties count the same way in both, by the expected rule: with tied candidates shuffled, a target is
worth the probability that it lands within the top k (1 / (j + 1) of a hit at top-1 when tied
with j others).
"""

from __future__ import annotations

import numpy as np
import torch

from orderlib.errors import InputError
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


def closed_world_chance(n_candidates: int, ks=(1, 2, 3)) -> dict:
    """Chance top-k (%) among `n_candidates` pairs, min(k, P) / P, and their mean ("average")."""
    chance = {f"top-{k}": 100.0 * min(k, n_candidates) / n_candidates for k in ks}
    chance["average"] = float(np.mean(list(chance.values())))
    return chance


def closed_world_topk(scores, labels, unseen, ks=(1, 2, 3), ties: str = PRIMARY_TIES) -> dict:
    """Misra et al.'s closed world, Utama's Table 1: each image of an unseen pair ranks the unseen
    pairs only. scores (N images, P pairs), high = match; labels (N,) each image's pair; unseen (P,)
    bool. Returns {"top-k": %, ..., "average": %} under `ties` ("expected": the probability that the
    target lands within k when ties are shuffled, 1 / (j + 1) at top-1 when tied with j others;
    or "pessimistic", "optimistic", "index"), and chance under "chance".

    >>> s = torch.tensor([[0.9, 0.1, 0.5], [0.2, 0.8, 0.1], [0.3, 0.2, 0.4]])
    >>> r = closed_world_topk(s, [0, 2, 2], [False, True, True], ks=(1,))
    >>> r["top-1"], r["chance"]["top-1"]
    (50.0, 50.0)
    """
    scores = torch.as_tensor(scores)
    if not torch.is_floating_point(scores):
        scores = scores.double()
    labels, unseen = np.asarray(labels, np.int64), np.asarray(unseen, bool)
    if scores.ndim != 2 or unseen.shape != (scores.shape[1],) or labels.shape != (scores.shape[0],):
        raise InputError(
            "scores",
            f"shape {tuple(scores.shape)}: needs one row per label ({len(labels)}) and one column per pair ({len(unseen)})",
        )
    if len(labels) and (labels.min() < 0 or labels.max() >= len(unseen)):
        raise InputError("labels", f"pairs must be in 0..{len(unseen) - 1}")
    cols, rows = np.flatnonzero(unseen), np.flatnonzero(unseen[labels])
    if not len(rows):
        raise InputError("labels", "no image of an unseen pair: the closed world needs some")
    target = np.searchsorted(cols, labels[rows])
    acc = topk_accuracy(scores[torch.as_tensor(rows)][:, torch.as_tensor(cols)], torch.as_tensor(target), ks, ties)
    return {**acc, "chance": closed_world_chance(len(cols), ks)}


def _thresholds(scores: torch.Tensor, target: torch.Tensor, unseen: torch.Tensor):
    """Per image: whether its target is an unseen pair, its credit when it wins (1 / (1 + ties with
    candidates of its own group), the expected tie rule of the closed world), its ties with the
    other group's best at the threshold, and the bias threshold (right below it for seen targets,
    above it for unseen ones). An image beaten within its own group has credit 0."""
    scores = torch.as_tensor(scores, dtype=torch.float64)
    n = scores.shape[0]
    rows = torch.arange(n)
    s_t = scores[rows, target]  # (N,)
    others = scores.clone()
    others[rows, target] = -float("inf")
    neg = torch.tensor(-float("inf"), dtype=torch.float64)
    is_unseen = unseen[target]
    same = torch.where(unseen[None] == is_unseen[:, None], others, neg)  # (N, P) own group, target out
    other = torch.where(unseen[None] != is_unseen[:, None], others, neg)
    best_other = other.max(1).values
    ties_same = (same == s_t[:, None]).sum(1).to(torch.float64)
    credit = torch.where(s_t >= same.max(1).values, 1.0 / (1.0 + ties_same), 0.0)
    ties_other = (other == best_other[:, None]).sum(1).to(torch.float64)
    thr = torch.where(is_unseen, best_other - s_t, s_t - best_other)
    return is_unseen.numpy(), credit.numpy(), ties_other.numpy(), thr.numpy()


def accuracy_at_bias(scores, target, unseen, bias: float) -> dict:
    """Seen and unseen accuracy (%) and their harmonic mean with `bias` added to unseen pairs.
    A tie with the other group's best at exactly the threshold is split like any other tie."""
    is_unseen, credit, ties_other, thr = _thresholds(scores, torch.as_tensor(target), torch.as_tensor(unseen))
    wins = np.where(is_unseen, bias > thr, bias < thr)
    tied = bias == thr
    shared = credit / (1.0 + credit * ties_other)  # 1 / (1 + ties in own group + ties in the other)
    ok = np.where(wins, credit, np.where(tied, shared, 0.0))
    s, u = 100 * ok[~is_unseen].mean(), 100 * ok[is_unseen].mean()
    return {"seen": float(s), "unseen": float(u), "hm": float(2 * s * u / (s + u)) if s + u else 0.0}


def _curve(is_unseen, credit, thr, biases):
    """Seen and unseen accuracy (%) at each of `biases`, none of them equal to a threshold."""
    seen, unseen = ~is_unseen & (credit > 0), is_unseen & (credit > 0)
    s_order, u_order = np.argsort(thr[seen]), np.argsort(thr[unseen])
    s_thr, s_cum = thr[seen][s_order], np.r_[0.0, np.cumsum(credit[seen][s_order])]
    u_thr, u_cum = thr[unseen][u_order], np.r_[0.0, np.cumsum(credit[unseen][u_order])]
    seen_acc = 100 * (s_cum[-1] - s_cum[np.searchsorted(s_thr, biases, side="right")]) / (~is_unseen).sum()
    unseen_acc = 100 * u_cum[np.searchsorted(u_thr, biases, side="left")] / is_unseen.sum()
    return seen_acc, unseen_acc


def _hm(seen_acc, unseen_acc):
    total = seen_acc + unseen_acc
    return np.where(total > 0, 2 * seen_acc * unseen_acc / np.maximum(total, 1e-12), 0.0)


def _inputs(scores, target, unseen):
    target, unseen = torch.as_tensor(target, dtype=torch.long), torch.as_tensor(unseen, dtype=torch.bool)
    is_unseen, credit, _, thr = _thresholds(scores, target, unseen)
    if is_unseen.all() or not is_unseen.any():
        raise InputError("target", "the generalised sweep needs images of both seen and unseen pairs")
    return is_unseen, credit, thr


def generalised_sweep(scores, target, unseen) -> dict:
    """The generalised protocol (Purushwalkam et al.; Mancini et al.'s czsl), swept exactly: scores
    (N, P) of images with target pairs (N,), unseen (P,) marking unseen candidate pairs, a bias
    added to every unseen pair's score; scores high = match. Ties: a target tied with j candidates
    is 1 / (j + 1) of a hit. Returns best seen / unseen accuracy and best
    harmonic mean (%), the AUC of the seen-unseen curve (%, as a fraction of the unit square:
    100 x area), the bias at the best harmonic mean, and the curve in rising-bias order.

    The curve's points follow the bias: seen accuracy falls and unseen accuracy rises along it, so
    the area is taken along that path (ordering by seen accuracy alone would zig-zag where seen
    accuracy is flat)."""
    is_unseen, credit, thr = _inputs(scores, target, unseen)
    t = np.unique(thr[credit > 0])
    # one bias below every threshold, one between each two, one above all: every distinct point
    biases = np.concatenate([[t[0] - 1.0], (t[:-1] + t[1:]) / 2, [t[-1] + 1.0]]) if len(t) else np.zeros(1)
    seen_acc, unseen_acc = _curve(is_unseen, credit, thr, biases)
    hm = _hm(seen_acc, unseen_acc)
    auc = float(np.trapezoid(unseen_acc[::-1], seen_acc[::-1])) / 100.0  # seen rising along the path
    best = int(np.argmax(hm))
    return {
        "best seen": float(seen_acc.max()),
        "best unseen": float(unseen_acc.max()),
        "best hm": float(hm[best]),
        "auc": auc,
        "bias": float(biases[best]),
        "curve": (seen_acc, unseen_acc),
    }


def sampled_sweep(scores, target, unseen, bins: int = 20, margin: float = 1e-4) -> dict:
    """The sweep as the field's evaluator samples it (ExplainableML/czsl, `Evaluator`; ties as in
    `generalised_sweep`): biases at
    every (len // bins)-th threshold of the unseen images that can be right, each less `margin`,
    plus the point at a very large bias; points joined linearly. Best seen, best harmonic mean and
    AUC come out at or below the exact sweep's; reported beside it so rows compare with published
    MIT-States numbers. Returns best seen, best unseen, best hm and auc (no bias, no curve)."""
    is_unseen, credit, thr = _inputs(scores, target, unseen)
    diffs = np.sort(thr[is_unseen & (credit > 0)]) - margin
    biases = diffs[:: max(len(diffs) // bins, 1)]
    seen_acc, unseen_acc = _curve(is_unseen, credit, thr, np.r_[biases, np.inf])
    hm = _hm(seen_acc, unseen_acc)
    return {
        "best seen": float(seen_acc.max()),
        "best unseen": float(unseen_acc.max()),
        "best hm": float(hm.max()),
        "auc": float(np.trapezoid(seen_acc, unseen_acc)) / 100.0,
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


@torch.no_grad()
def predict_scores(model, x, pairs, batch: int = 2048) -> torch.Tensor:
    """(N, P) scores of inputs x (features or uint8 images) against pairs (P, 2), on the CPU, of a
    recogniser (any model with `scores(x, pairs)`: orderlib.training.composition)."""
    model.eval()
    pairs = torch.as_tensor(pairs)
    return torch.cat([model.scores(x[i : i + batch], pairs).cpu() for i in range(0, len(x), batch)])
