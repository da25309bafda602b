"""Hypernym prediction by an energy threshold (Sec. 3.3 and Table 1 of Vendrov et al.).

A pair (hyponym, hypernym) is predicted "is a" iff E(hyponym, hypernym) <= tau, tau chosen on dev
(`best_threshold`: cuts fall between distinct energies only, so ties are never split; the lowest
best cut wins) and applied to test. Beside the accuracy: AP and ROC AUC over the same cuts, the
ROC points, and Table 1's transitive-closure baseline.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from orderlib.data.hypernymy import HypernymyData, transitive_closure_predict
from orderlib.errors import InputError
from orderlib.eval.threshold import best_threshold, roc_points, threshold_accuracy
from orderlib.penalties import ENERGIES, VECTOR_ENERGIES

TIE_RULE = "the threshold cuts between distinct energies only (ties never split); the lowest best cut wins"


def pair_energies(embeddings, pairs, energy: str = "order") -> np.ndarray:
    """(P,) float64 energies E(hyponym, hypernym), low = "is a", of `pairs` (P, 2) rows of
    `embeddings` (V, D), by a name in orderlib.penalties.VECTOR_ENERGIES ("order": Eq. (2) of
    Vendrov et al.; "cosine"; "poincare", Nickel & Kiela's is-a energy at alpha 1; "cone", Ganea et
    al.'s). NaN or inf energies raise InputError."""
    if energy not in VECTOR_ENERGIES:
        raise InputError(
            "energy", f"{energy!r} is not an energy of two embeddings; known: {', '.join(VECTOR_ENERGIES)}"
        )
    x, p = torch.as_tensor(embeddings), torch.as_tensor(np.asarray(pairs, np.int64))
    if x.ndim != 2:
        raise InputError("embeddings", f"(V, D) embeddings are needed, got shape {tuple(x.shape)}")
    if p.ndim != 2 or p.shape[1] != 2 or (len(p) and (p.min() < 0 or p.max() >= len(x))):
        raise InputError("pairs", f"(P, 2) rows of the {len(x)} embeddings are needed, got shape {tuple(p.shape)}")
    with torch.no_grad():
        e = ENERGIES[energy].pairs(x[p[:, 0]], x[p[:, 1]]).double().cpu().numpy()
    bad = ~np.isfinite(e)
    if bad.any():
        raise InputError(
            "embeddings", f"the {energy} energy is NaN or inf for {int(bad.sum())} pairs (first: row {bad.argmax()})"
        )
    return e


def ap_auc(energies, labels) -> tuple[float, float]:
    """(AP, ROC AUC) in % of "positive iff E <= tau": AP sums precision over the recall steps of
    roc_points, tied energies making one step (sklearn's average_precision_score on -E)."""
    labels = np.asarray(labels, bool)
    fpr, tpr = roc_points(energies, labels)
    tp, fp = tpr * labels.sum(), fpr * (~labels).sum()
    precision = np.divide(tp, tp + fp, out=np.ones_like(tp), where=tp + fp > 0)
    return 100.0 * float(np.sum(np.diff(tpr) * precision[1:])), 100.0 * float(np.trapezoid(tpr, fpr))


def roc_frame(energies, labels, split: str) -> pd.DataFrame:
    """ROC points (roc_points) with the cut each one is: positive iff E <= threshold."""
    fpr, tpr = roc_points(energies, labels)
    cuts = np.r_[-np.inf, np.unique(np.asarray(energies, np.float64))]
    return pd.DataFrame({"split": split, "threshold": cuts, "false positive rate": fpr, "true positive rate": tpr})


@dataclass
class HypernymyResult:
    """The threshold protocol: tau (chosen on dev), and per split its accuracy, AP, ROC AUC (%),
    pairs and positives (`splits`), and the ROC points (`roc`, a DataFrame)."""

    threshold: float
    splits: dict[str, dict[str, float]]
    roc: pd.DataFrame

    def rows(self, method: str = "yours") -> list[dict]:
        """Long rows: method, split, metric, paper (None), ours."""
        rows = [dict(method=method, split="dev", metric="threshold (chosen on dev)", paper=None, ours=self.threshold)]
        for split, metrics in self.splits.items():
            rows += [dict(method=method, split=split, metric=m, paper=None, ours=v) for m, v in metrics.items()]
        return rows


def _check_labels(labels: np.ndarray, split: str) -> None:
    if labels.all() or not labels.any():
        what = "positive" if labels.all() else "negative"
        raise InputError(f"{split}_labels", f"all {len(labels)} pairs are {what}; needs both labels")


def hypernymy_metrics(dev_energies, dev_labels, test_energies, test_labels) -> HypernymyResult:
    """Table 1's protocol (Vendrov et al., Sec. 3.3) on energies (low = "is a") and boolean labels
    of dev and test pairs: tau maximises dev accuracy (`best_threshold`, ties never split), test
    accuracy at that tau, and AP and ROC AUC of each split (tied energies one step). Labels are
    booleans or 0 / 1; energies are read as float64 and must be finite.

    >>> r = hypernymy_metrics([0.0, 0.1, 2.0, 3.0], [1, 1, 0, 0], [0.2, 1.5, 0.5, 4.0], [1, 1, 0, 0])
    >>> r.threshold, r.splits["test"]["accuracy (%)"]
    (1.05, 50.0)
    """
    data = {}
    for split, (e, y) in (("dev", (dev_energies, dev_labels)), ("test", (test_energies, test_labels))):
        e, y = np.asarray(e, np.float64), np.asarray(y)
        if e.shape != y.shape or e.ndim != 1:
            raise InputError(
                f"{split}_energies", f"shape {e.shape} against {y.shape} labels; expected two equal 1-D arrays"
            )
        if not np.isfinite(e).all():
            raise InputError(f"{split}_energies", f"{int((~np.isfinite(e)).sum())} are NaN or inf")
        if not np.isin(y, (0, 1)).all():
            raise InputError(f"{split}_labels", "must be booleans or 0 / 1")
        y = y.astype(bool)
        _check_labels(y, split)
        data[split] = (e, y)
    tau, dev_acc = best_threshold(*data["dev"])
    splits = {}
    for split, (e, y) in data.items():
        ap, auc = ap_auc(e, y)
        acc = dev_acc if split == "dev" else threshold_accuracy(e, y, tau)
        splits[split] = {
            "accuracy (%)": 100.0 * acc,
            "AP (%)": ap,
            "ROC AUC (%)": auc,
            "pairs": float(len(y)),
            "positives": float(y.sum()),
        }
    roc = pd.concat([roc_frame(*data[s], s) for s in ("dev", "test")], ignore_index=True)
    return HypernymyResult(tau, splits, roc)


def transitive_closure_accuracy(data: HypernymyData) -> float:
    """Table 1's transitive-closure baseline (Sec. 3.4 of Vendrov et al.): test accuracy (%) of
    "is a iff the pair follows from the known edges", train and dev positives known, no threshold."""
    known = np.r_[data.train, data.dev[data.dev_labels]]  # (P, 2)
    return 100 * float((transitive_closure_predict(known, data.test, data.n_nodes) == data.test_labels).mean())
