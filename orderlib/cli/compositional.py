"""`orderlib eval compositional`: attribute-object recognition (Utama's Table 1; czsl's generalised
protocol) from a score matrix over (attribute, object) pairs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from orderlib.cli.common import add_kind, add_output, add_parser, as_score, parse_ks
from orderlib.cli.inputs import read_ints, read_matrix
from orderlib.cli.report import Report
from orderlib.errors import InputError
from orderlib.eval.compositional import closed_world_topk, generalised_sweep, sampled_sweep
from orderlib.eval.retrieval import PRIMARY_TIES

EXAMPLE = """\
  orderlib eval compositional --scores tests/data/cli/compositional_scores.npy --kind similarity \\
      --labels tests/data/cli/compositional_labels.txt --seen tests/data/cli/compositional_seen.txt \\
      --out /tmp/orderlib-report
"""
SWEEP_METRICS = ("best seen", "best unseen", "best hm", "auc")


def add(sub) -> None:
    p = add_parser(
        sub,
        "compositional",
        "unseen attribute-object pairs: closed-world top-k; seen / unseen / HM / AUC",
        "Closed world: each image of an unseen pair ranks the unseen pairs only (top-k). Generalised: "
        "every image ranks every pair, a bias added to unseen pairs' scores is swept exactly and as "
        "czsl samples it.",
        EXAMPLE,
    )
    g = p.add_argument_group("input")
    g.add_argument("--scores", required=True, help="(N images, P pairs) matrix: .npy, .npz or CSV/TSV numbers")
    add_kind(g)
    g.add_argument("--labels", required=True, help="each image's pair (column of --scores), one a line, or .npy")
    g.add_argument("--seen", required=True, help="the pairs seen in training (columns), one a line, or .npy")
    g.add_argument("--ks", type=parse_ks, default=(1, 2, 3), help="closed-world k (default 1,2,3, Utama's)")
    add_output(p, "compositional")
    p.set_defaults(run=run, command="eval compositional")


def load(args) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(scores (N, P) high = match, labels (N,), unseen mask (P,))."""
    scores = as_score(read_matrix(args.scores), args.kind)
    n, p = scores.shape
    labels = read_ints(args.labels, p, "pair")
    if len(labels) != n:
        raise InputError(args.labels, f"{len(labels)} labels for {n} images (rows of {args.scores})")
    seen = read_ints(args.seen, p, "pair")
    if len(np.unique(seen)) != len(seen):
        dup = seen[np.flatnonzero(np.diff(np.sort(seen)) == 0)[0]]
        raise InputError(args.seen, f"pair {dup} listed twice")
    unseen = np.ones(p, bool)
    unseen[seen] = False
    if not unseen.any():
        raise InputError(args.seen, f"lists all {p} pairs: no unseen pair left")
    if not unseen[labels].any() or unseen[labels].all():
        kind = "unseen" if not unseen[labels].any() else "seen"
        raise InputError(args.labels, f"no image of a {kind} pair; both protocols need images of unseen and seen pairs")
    return scores, labels, unseen


def closed_world(scores: np.ndarray, labels: np.ndarray, unseen: np.ndarray, ks, method: str) -> list[dict]:
    """Top-k of the images of unseen pairs among the unseen pairs, and chance."""
    acc = closed_world_topk(scores, labels, unseen, ks)
    chance = acc.pop("chance")
    return [
        dict(method=name, protocol="closed world", metric=m, paper=None, ours=v)
        for name, values in ((method, acc), ("chance", chance))
        for m, v in values.items()
    ]


def generalised(scores: np.ndarray, labels: np.ndarray, unseen: np.ndarray, method: str) -> list[dict]:
    """The exact bias sweep, then czsl's sampled biases."""
    exact = generalised_sweep(torch.as_tensor(scores), labels, unseen)
    sampled = sampled_sweep(torch.as_tensor(scores), labels, unseen)
    rows = [dict(method=method, protocol="generalised", metric=m, paper=None, ours=exact[m]) for m in SWEEP_METRICS]
    rows.append(dict(method=method, protocol="generalised", metric="bias at best hm", paper=None, ours=exact["bias"]))
    rows += [
        dict(method=method, protocol="generalised", metric=f"{m} (sampled biases)", paper=None, ours=sampled[m])
        for m in SWEEP_METRICS
    ]
    return rows


def run(args) -> Report:
    scores, labels, unseen = load(args)
    counts = dict(
        images=len(labels),
        pairs=len(unseen),
        unseen_pairs=int(unseen.sum()),
        images_of_unseen_pairs=int(unseen[labels].sum()),
    )
    rows = closed_world(scores, labels, unseen, args.ks, args.method) + generalised(scores, labels, unseen, args.method)
    rows += [
        dict(method="input", protocol="", metric=k.replace("_", " "), paper=None, ours=float(v))
        for k, v in counts.items()
    ]
    return Report(
        table=pd.DataFrame(rows),
        protocol="closed world (unseen pairs only, Misra et al.; Utama's Table 1) and generalised "
        "(calibration-bias sweep, exact and czsl's sampled biases)",
        ties=f"{PRIMARY_TIES}: a target tied with j others is 1 / (j + 1) of a hit",
        inputs={"scores": args.scores, "labels": args.labels, "seen": args.seen},
        settings={"kind": args.kind, "ks": list(args.ks), **counts},
        title=f"Attribute-object pairs: {args.method}",
        notes="Percentages; auc in percent of the unit square (docs/glossary.md#seen-unseen-hm-and-auc).",
    )
