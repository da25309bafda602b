"""Sherlock's tables and figures from each method's (test images, facts) distances (notebook 09):
Table 1 (caption models), Table 4 with chance, the v2 script's scorings, Table 5, Figure 7's
images-per-fact curve, Figure 4's scale points and retrieval examples."""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from orderlib.data.fact_tasks import FactTask
from orderlib.data.facts import generalisation_cases, implies
from orderlib.eval.facts import (
    ALL,
    FACT_PROTOCOLS,
    IMPLIED,
    SAME_ORDER,
    chance_rows,
    fact_map,
    generalisation_rows,
    implied_topk,
    implied_truth,
    protocols,
    retrieval_rows,
    slot_scores,
)

# Sherlock's Table 1 on 6DS (186 facts, the largest of its Table 1 sets): (i2f top-1, f2i mAP).
PAPER_TABLE1 = {
    ("order-embeddings (symm.)", "captions"): (15.71, 9.37),
    ("order-embeddings (symm.)", "fact phrases"): (26.13, 26.17),
    ("order-embeddings", "captions"): (12.56, 10.21),
    ("order-embeddings", "fact phrases"): (31.57, 35.23),
}
CAPTION_METHODS = ("order-embeddings", "order-embeddings (symm.)")  # Vendrov et al.'s model; Kiros et al.'s (TACL15)
TRAININGS = {"captions": "caption-trained", "fact phrases": "retrained on facts"}


def scoring_of(result: dict) -> str:
    """How `implied` scores a method's distances: its result's "scoring" (ESZSL's "dot"), else "euc"."""
    return result.get("scoring", "euc")


def table(rows: list[dict]) -> pd.DataFrame:
    return pd.DataFrame(rows)


def sherlock_table1(results: dict, task: FactTask) -> pd.DataFrame:
    """Sherlock's Table 1: the caption models caption-trained vs retrained on facts; i2f top-1
    among all facts, f2i mAP, per protocol; the paper's column: 6DS."""
    img_fact = torch.as_tensor(task.test.fact)
    rows = []
    for m in CAPTION_METHODS:
        for training, suffix in TRAININGS.items():
            method = f"{m}, {suffix}"
            paper = PAPER_TABLE1[(m, training)]
            for p in protocols(results[method]["dist"], task, scoring=scoring_of(results[method])):
                values = (p.topk(p.scores, p.truth, img_fact, ks=(1,))["K1"], p.map(torch.unique(img_fact)))
                rows += [
                    dict(method=m, protocol=p.name, training=training, metric=metric, paper=pv, ours=v)
                    for metric, pv, v in zip(("i2f top-1", "f2i mAP"), paper, values)
                ]
    return pd.DataFrame(rows)


def table4(results: dict, task: FactTask) -> pd.DataFrame:
    rows = [r for m, res in results.items() for r in retrieval_rows(m, res["dist"], task, scoring=scoring_of(res))]
    return pd.DataFrame(rows + chance_rows(task))


def scoring_rows(embeddings: dict[str, torch.Tensor], task: FactTask, metrics=("euc", "cos", "dot")) -> pd.DataFrame:
    """The v2 script's three scorings (GetX_Scores.m: euc, cos, dot) of SEM rows' slot embeddings of
    the test images ({method: (N, 3, d)}), each fact compared on its own slots (eval.facts.slot_scores,
    in blocks of images), under the `implied` protocol: image -> fact K1/5/10 among all facts, fact ->
    image mAP / mAP@100. Table 4's `implied` rows use `euc`."""
    img_fact = torch.as_tensor(task.test.fact)
    truth = implied_truth(implies(task.facts), img_fact)
    qf = torch.unique(img_fact)
    rows = []
    for m, v in embeddings.items():
        for metric in metrics:
            s = slot_scores(v, task.language, task.orders, metric)
            q = -s[:, qf].T
            values = {
                **implied_topk(s, truth),
                "mAP": fact_map(q, None, None, relevant=truth.T[qf]),
                "mAP@100": fact_map(q, None, None, 100, relevant=truth.T[qf]),
            }
            rows += [dict(method=m, protocol=IMPLIED, scoring=metric, metric=k, ours=x) for k, x in values.items()]
    return pd.DataFrame(rows)


def table5(results: dict, task: FactTask) -> pd.DataFrame:
    """Table 5's four cases plus the SPO facts never seen in training (beyond the paper)."""
    cases = generalisation_cases(task.facts, task.train_counts)
    cases["unseen SPO facts"] = np.flatnonzero((task.orders.numpy() == 3) & (task.train_counts == 0))
    return pd.DataFrame(
        [r for m, res in results.items() for r in generalisation_rows(m, res["dist"], task, cases, scoring_of(res))]
    )


def top_ties(results: dict, task: FactTask) -> pd.DataFrame:
    """Per method and protocol, the test images whose best score two or more facts share (`strict`
    counts such ties as shuffled, `implied` breaks them by fact index) and the most facts sharing one."""
    rows = []
    for m, res in results.items():
        for p in protocols(res["dist"], task, scoring=scoring_of(res)):
            shared = (p.scores == p.scores.max(1, keepdim=True).values).sum(1)
            rows.append(dict(method=m, protocol=p.name, images=int((shared > 1).sum()), most=int(shared.max())))
    return pd.DataFrame(rows)


FIG7_BINS = ((0, 0), (1, 1), (2, 5), (6, 15), (16, 50), (51, None))


def images_per_fact_curve(results: dict, task: FactTask, bins=FIG7_BINS) -> pd.DataFrame:
    """Figure 7: K10 (all facts) of test images of SPO facts by the fact's training images, per protocol."""
    img_fact = np.asarray(task.test.fact)
    n = task.train_counts[img_fact]
    spo = task.orders.numpy()[img_fact] == 3
    views = {m: protocols(res["dist"], task, scoring=scoring_of(res)) for m, res in results.items()}
    rows = []
    for protocol in FACT_PROTOCOLS:
        for lo, hi in bins:
            sel = spo & (n >= lo) & (n <= (hi if hi is not None else np.inf))
            label = f"{lo}" if lo == hi else (f"{lo}+" if hi is None else f"{lo}-{hi}")
            s = torch.as_tensor(sel)
            for m in results:
                p = next(v for v in views[m] if v.name == protocol)
                value = (
                    p.topk(p.scores[s], p.truth[s], torch.as_tensor(img_fact[sel]), ks=(10,))["K10"]
                    if sel.any()
                    else np.nan
                )
                rows.append(
                    dict(
                        bin=label,
                        facts=len(np.unique(img_fact[sel])),
                        images=int(sel.sum()),
                        method=m,
                        protocol=protocol,
                        K10=value,
                    )
                )
    return pd.DataFrame(rows)


def scale_point(results: dict, task: FactTask) -> list[dict]:
    """One Figure 4 point per method and protocol: K1 among all facts and among the image's order."""
    img_fact = torch.as_tensor(task.test.fact)
    points = []
    for m, res in results.items():
        for p in protocols(res["dist"], task, scoring=scoring_of(res)):
            for c, (s, t) in ((ALL, (p.scores, p.truth)), (SAME_ORDER, p.typed(task))):
                points.append(
                    dict(
                        facts=len(task.facts),
                        method=m,
                        protocol=p.name,
                        candidates=c,
                        K1=p.topk(s, t, img_fact, ks=(1,))["K1"],
                    )
                )
    return points


def examples(dist: torch.Tensor, task: FactTask, n_images: int = 6, n_facts: int = 3, k: int = 5, seed: int = 0):
    """Image -> fact: (test image, its fact, top-k facts) for images of every order; fact ->
    image: (fact, top-k test images, which are relevant) for SPO facts seen in training."""
    rng = np.random.default_rng(seed)
    img_fact = np.asarray(task.test.fact)
    orders = task.orders.numpy()
    picks = np.concatenate(
        [rng.choice(np.flatnonzero(orders[img_fact] == o), n_images // 3, replace=False) for o in (1, 2, 3)]
    )
    i2f = [
        (int(i), str(task.facts[img_fact[i]]), [str(task.facts[j]) for j in dist[i].argsort()[:k].tolist()])
        for i in picks
    ]
    seen_spo = np.flatnonzero((orders == 3) & (task.train_counts > 0))
    f2i = []
    for f in rng.choice(seen_spo, n_facts, replace=False):
        ranked = dist[:, f].argsort()[:k].tolist()
        f2i.append((str(task.facts[f]), ranked, [bool(img_fact[i] == f) for i in ranked]))
    return i2f, f2i
