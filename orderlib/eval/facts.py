"""Bi-directional fact retrieval metrics (Sherlock, "Evaluation Metrics"; docs/protocols.md).

Two protocols, as the authors' evaluation scripts (mhelhoseiny/sherlock, eval/metrics):
- `strict` (GetSherlockResults.m): an image's annotated fact is its only correct answer; image ->
  fact top-k accuracy (K1 / K5 / K10) under the project's tie rules (orderlib.eval.compositional);
  fact -> image AP over the images of that fact.
- `implied` (GetSherlockResults_notharsh_v2.m): a fact is compared with an image on its own slots
  only and scored per fact (`fact_scores`); an image's implied lower-order facts are true too
  (`implied_topk`); an <S> or <S,P> query's relevant images include its completions
  (`flexible_relevance`).

AP (calcAP.m): the mean of the precision at the rank of each relevant image found. AP@100 looks
at the top 100 images only and divides by the number of relevant images found there (not by
min(R, 100)); a fact with none there scores 0. mAP averages over the query facts (all have test
images). Ties between equal scores are broken by image index (a stable sort, as MATLAB's).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np
import torch

from orderlib.data.fact_tasks import FactTask
from orderlib.data.facts import Fact, generalisation_cases, implies
from orderlib.errors import InputError
from orderlib.eval.compositional import topk_accuracy

STRICT, IMPLIED = "strict", "implied"
FACT_PROTOCOLS = (STRICT, IMPLIED)
SCORINGS = ("euc", "dot")  # how `implied` scores a (images x facts) matrix: implied_scores


def fact_topk(dist: torch.Tensor, target, ks=(1, 5, 10)) -> dict:
    """K@k (%) of each image's fact among candidate facts: dist (N, F) low = relevant, target (N,)."""
    acc = topk_accuracy(-torch.as_tensor(dist), torch.as_tensor(target), ks)
    return {f"K{k}": acc[f"top-{k}"] for k in ks}


def average_precision(
    dist: torch.Tensor, relevant: torch.Tensor, top: int | None = None, normalise: str = "found"
) -> np.ndarray:
    """AP of each query row (F,) float64: dist (F, N) low = relevant, relevant (F, N) bool.
    With `top`, only the first `top` ranks count, and the sum of precisions is divided by the
    relevant images found there (calcAP.m; 0 when none is found), or with normalise="min(R,top)"
    by min(R, top) (TREC's truncated AP, the project's earlier column). Without `top` both are
    plain AP. Rows without any relevant image give NaN."""
    if normalise not in ("found", "min(R,top)"):
        raise ValueError(f"normalise must be 'found' or 'min(R,top)', got {normalise!r}")
    dist, relevant = torch.as_tensor(dist), torch.as_tensor(relevant, dtype=torch.bool)
    if dist.shape != relevant.shape:
        raise ValueError(f"dist {tuple(dist.shape)} and relevant {tuple(relevant.shape)} must match")
    order = torch.sort(dist, dim=1, stable=True).indices  # (F, N), index order among ties
    hits = relevant.gather(1, order).double()  # (F, N) relevant at rank r?
    if top is not None:
        hits = hits[:, :top]
    ranks = torch.arange(1, hits.shape[1] + 1, dtype=torch.float64)
    total = (hits.cumsum(1) / ranks * hits).sum(1)  # sum of precisions at the relevant ranks
    n_rel = relevant.sum(1).double()
    if top is None:
        ap = total / n_rel
    elif normalise == "found":
        found = hits.sum(1)
        ap = torch.where(found > 0, total / found.clamp(min=1), torch.zeros_like(total))
    else:
        ap = total / n_rel.clamp(max=top)
    return torch.where(n_rel > 0, ap, torch.full_like(ap, float("nan"))).numpy()


def fact_map(dist: torch.Tensor, image_fact, query_facts, top: int | None = None, relevant=None) -> float:
    """mAP (%) of fact queries over test images: dist (Q, N) between query facts and images,
    image_fact (N,) the fact of each image, query_facts (Q,) the fact of each query. `relevant`
    (Q, N) bool overrides "the image's fact is the query" (e.g. `flexible_relevance`)."""
    if relevant is None:
        image_fact, query_facts = torch.as_tensor(image_fact), torch.as_tensor(query_facts)
        relevant = query_facts[:, None] == image_fact[None, :]  # (Q, N)
    ap = average_precision(dist, relevant, top)
    return 100.0 * float(np.nanmean(ap))


# --- the `implied` protocol (GetSherlockResults_notharsh_v2.m) ------------------------------------


def slot_scores(
    v: torch.Tensor, l: torch.Tensor, orders: torch.Tensor, metric: str = "euc", block: int = 512
) -> torch.Tensor:
    """(N, F) float64 per-fact scores (high = match) of images v (N, 3, d) against facts l (F, 3, d)
    of `orders` (F,), each fact compared on its own slots only (S; S and P; S, P and O), as the
    v2 script slices the [S | P | O] vector. metric: "euc" (log of exp(-d^2 / 2 sigma_f^2), sigma_f
    the median distance of fact f over the images), "cos" (cosine over the fact's slots) or "dot".
    Images are taken `block` at a time: memory O(block * F) beyond the (N, F) result."""
    v, l = torch.as_tensor(v, dtype=torch.float64), torch.as_tensor(l, dtype=torch.float64)
    w = (torch.arange(3)[None] < torch.as_tensor(orders)[:, None]).double()  # (F, 3) slots of each fact
    l_sq = (l.pow(2).sum(-1) * w).sum(1)  # (F,) squared norm over the fact's slots
    parts = []
    for i in range(0, len(v), block):
        vb = v[i : i + block]  # (B, 3, d)
        dot = sum((vb[:, k] @ l[:, k].T) * w[None, :, k] for k in range(3))  # (B, F)
        v_sq = vb.pow(2).sum(-1) @ w.T  # (B, F) squared norm of the image over each fact's slots
        if metric == "dot":
            parts.append(dot)
        elif metric == "cos":
            parts.append(dot / (v_sq.sqrt() * l_sq.sqrt()[None]).clamp(min=1e-12))
        elif metric == "euc":
            parts.append((v_sq - 2 * dot + l_sq[None]).clamp(min=0))  # squared distance, normalised below
        else:
            raise ValueError(f"metric must be 'euc', 'cos' or 'dot', got {metric!r}")
    out = torch.cat(parts)
    return fact_scores(out) if metric == "euc" else out


def fact_scores(dist_sq: torch.Tensor) -> torch.Tensor:
    """(N, F) float64 `euc` scores of squared distances dist_sq (N images, F facts): the log of
    exp(-d^2 / 2 sigma_f^2), sigma_f the median over the images of fact f's distance d (GetX_Scores.m
    with one fact at a time). The log keeps the order without underflow; a fact whose median is 0
    scores 0 where d = 0 and -inf elsewhere."""
    d2 = torch.as_tensor(dist_sq, dtype=torch.float64).clamp(min=0)
    sigma = torch.as_tensor(np.median(d2.sqrt().numpy(), axis=0))  # (F,); the middle two averaged, as MATLAB
    return -d2 / (2 * sigma.pow(2))[None].clamp(min=1e-300)


def implied_truth(implies: np.ndarray, image_fact) -> torch.Tensor:
    """(N, F) bool: the facts true of each image: its own and the lower-order facts it implies
    (an <S,P,O> image: its <S,P> where that fact exists, and its <S>); `implies` (F, F) from
    orderlib.data.facts.implies."""
    return torch.as_tensor(np.asarray(implies)[np.asarray(image_fact)])


def flexible_relevance(implies: np.ndarray, image_fact, query_facts) -> torch.Tensor:
    """(Q, N) bool, the v2 script's flag_flexible_map: an <S> query's relevant images are every
    image whose subject is S, an <S,P> query's its <S,P> and <S,P,O> images, an <S,P,O> query's
    its own."""
    return implied_truth(implies, image_fact)[:, torch.as_tensor(query_facts)].T


def implied_hits(scores: torch.Tensor, truth: torch.Tensor, ks=(1, 5, 10), block: int = 512) -> dict:
    """{k: (N,) float64}: per image, the fraction of its true facts found "within k" among all
    candidates ranked by score (high first, index order among ties), the v2 script's rule: a true
    fact at rank r with a true facts ranked above it is found when r - a <= k + n - 1, n the
    image's number of true facts (the true facts ranked above do not count against it, and n - 1
    more places are allowed). With one true fact this is plain top-k. Rows without a true fact: NaN."""
    scores, truth = torch.as_tensor(scores), torch.as_tensor(truth, dtype=torch.bool)
    if scores.shape != truth.shape:
        raise ValueError(f"scores {tuple(scores.shape)} and truth {tuple(truth.shape)} must match")
    out = {k: [] for k in ks}
    for i in range(0, len(scores), block):
        order = torch.sort(-scores[i : i + block].double(), dim=1, stable=True).indices
        t = truth[i : i + block].gather(1, order)  # (B, F) true at rank r?
        n = t.sum(1, keepdim=True)  # (B, 1)
        rank = torch.arange(1, t.shape[1] + 1)[None]
        above = t.cumsum(1) - t.long()  # true facts ranked above each position
        for k in ks:
            found = (t & (rank - above <= k + n - 1)).sum(1).double()
            out[k].append(torch.where(n[:, 0] > 0, found / n[:, 0].clamp(min=1), torch.full_like(found, float("nan"))))
    return {k: torch.cat(v) for k, v in out.items()}


def implied_topk(scores: torch.Tensor, truth: torch.Tensor, ks=(1, 5, 10)) -> dict:
    """K@k (%) under the `implied` protocol: the mean over images of `implied_hits`."""
    return {f"K{k}": 100.0 * float(np.nanmean(h.numpy())) for k, h in implied_hits(scores, truth, ks).items()}


def implied_chance(n_true, n_candidates: int, k: int) -> float:
    """Expected `implied` K@k (%) of random scores: a true fact is found when at most k + n - 2
    false facts rank above it, and among itself and the F - n false facts its place is uniform."""
    n = np.asarray(n_true, np.float64)
    false = n_candidates - n
    return 100.0 * float(np.mean(np.minimum(k + n - 1, false + 1) / (false + 1)))


# ---------------------------------------------------------------------------------------------
# The protocols over a FactTask: a method's (test images, facts) distances -> Table 4 / 5 rows.

# Sherlock's Table 4, large-scale row: K1 / K5 / K10 (%) and mAP100 (%).
PAPER_TABLE4 = {
    "SEM-A": (16.39, 17.62, 18.41, 0.96),
    "SEM-B": (13.27, 14.19, 14.80, 0.73),
    "MV CCA": (12.28, 12.84, 13.15, 1.0),
    "ESZSL": (5.80, 5.84, 5.86, 0.4),
    "order-embeddings (symm.), caption-trained": (3.48, 3.48, 3.5, 0.021),
    "order-embeddings (symm.), retrained on facts": (5.87, 6.06, 6.15, 0.29),
}
# Table 5 (K10, SPO facts with <= 5 training images): case -> {method: K10}, and the number of facts.
PAPER_TABLE5 = {
    "SP, O": (
        {
            "SEM-A": 2.063,
            "SEM-B": 1.751,
            "ESZSL": 0.149,
            "order-embeddings (symm.), caption-trained": 0.013,
            "order-embeddings (symm.), retrained on facts": 0.367,
            "MV CCA": 1.221,
        },
        10605,
    ),
    "SO, P": (
        {
            "SEM-A": 3.022,
            "SEM-B": 1.961,
            "ESZSL": 0.098,
            "order-embeddings (symm.), caption-trained": 0.025,
            "order-embeddings (symm.), retrained on facts": 0.473,
            "MV CCA": 1.462,
        },
        4842,
    ),
    "SO, PO": (
        {
            "SEM-A": 3.092,
            "SEM-B": 1.645,
            "ESZSL": 0.041,
            "order-embeddings (symm.), caption-trained": 0.000,
            "order-embeddings (symm.), retrained on facts": 0.543,
            "MV CCA": 1.786,
        },
        1755,
    ),
    "SO, SP": (
        {
            "SEM-A": 2.962,
            "SEM-B": 2.097,
            "ESZSL": 0.038,
            "order-embeddings (symm.), caption-trained": 0.013,
            "order-embeddings (symm.), retrained on facts": 0.586,
            "MV CCA": 1.109,
        },
        3133,
    ),
}
PAPER_STRUCTURE_ABLATION_K1 = 8.1  # "averaged S, P and O parts" (vs SEM-A's 16.39)
PAPER_TABLE4["SEM-A, S/P/O averaged (ablation)"] = (PAPER_STRUCTURE_ABLATION_K1, None, None, None)

ALL, SAME_ORDER = "all facts", "facts of the image's order"


def same_order(dist: torch.Tensor, task: FactTask) -> torch.Tensor:
    """dist (test images, facts) with facts of another order than the image's fact set to +inf:
    image -> fact retrieval when the fact type is given (a diagnostic beyond the paper)."""
    img_order = task.orders[torch.as_tensor(task.test.fact)]
    return dist.masked_fill(img_order[:, None] != task.orders[None, :], float("inf"))


def implied_scores(dist: torch.Tensor, scoring: str = "euc") -> torch.Tensor:
    """(N, F) `implied` scores (high = match) of (test images, facts) distances. "euc": the v2
    script's per-fact `euc` (fact_scores) of the distance taken as squared (the SEM rows' is the
    squared Euclidean distance over the fact's own slots; CCA's and the symmetric caption model's
    1 - cos is half a squared distance between unit vectors; order violations are squared norms).
    "dot": the script's `dot`, for a "distance" that is minus a compatibility score (ESZSL's)."""
    if scoring not in SCORINGS:
        raise ValueError(f"scoring must be one of {SCORINGS}, got {scoring!r}")
    d = torch.as_tensor(dist, dtype=torch.float64)
    return -d if scoring == "dot" else fact_scores(d)


@dataclass
class Protocol:
    """One protocol's view of a method's distances: scores (high = match), each image's true facts
    (N, F) and each fact's relevant images (F, N)."""

    name: str
    scores: torch.Tensor
    truth: torch.Tensor
    relevant: torch.Tensor

    def typed(self, task: FactTask) -> tuple[torch.Tensor, torch.Tensor]:
        """Scores and truth with the facts of another order than the image's fact left out."""
        other = task.orders[torch.as_tensor(task.test.fact)][:, None] != task.orders[None, :]
        return self.scores.masked_fill(other, -float("inf")), self.truth & ~other

    def topk(self, scores: torch.Tensor, truth: torch.Tensor, target: torch.Tensor, ks=(1, 5, 10)) -> dict:
        """K@k: the project's top-k (strict) or the v2 script's rule over the true facts (implied)."""
        return fact_topk(-scores, target, ks) if self.name == STRICT else implied_topk(scores, truth, ks)

    def map(self, qf: torch.Tensor, top: int | None = None) -> float:
        return fact_map(-self.scores[:, qf].T, None, None, top, relevant=self.relevant[qf])


def protocols(dist: torch.Tensor, task: FactTask, names=FACT_PROTOCOLS, scoring: str = "euc") -> list[Protocol]:
    """The `strict` (GetSherlockResults.m) and `implied` (GetSherlockResults_notharsh_v2.m) views;
    `implied` scores the distances by `scoring` (implied_scores)."""
    img_fact = torch.as_tensor(task.test.fact)
    dist = torch.as_tensor(dist)
    out = []
    for name in names:
        if name == STRICT:
            own = torch.nn.functional.one_hot(img_fact, len(task.facts)).bool()  # (N, F)
            out.append(Protocol(STRICT, -dist, own, own.T))
        else:
            imp = implies(task.facts)
            out.append(
                Protocol(
                    IMPLIED,
                    implied_scores(dist, scoring),
                    implied_truth(imp, img_fact),
                    flexible_relevance(imp, img_fact, torch.arange(len(task.facts))),
                )
            )
    return out


def retrieval_rows(
    method: str,
    dist: torch.Tensor,
    task: FactTask,
    paper: dict = PAPER_TABLE4,
    names=FACT_PROTOCOLS,
    scoring: str = "euc",
) -> list[dict]:
    """Table 4 rows of one method from its (test images, facts) distances, per protocol: image ->
    fact K1/5/10 among all facts (the paper) and among the facts of the image's order, and fact ->
    image mAP / mAP@100 (calcAP.m's), overall and per fact order. The `strict` rows use the
    distances as they are (the project's ties); the paper's values stand beside both protocols."""
    img_fact = torch.as_tensor(task.test.fact)
    paper_values = dict(zip(("K1", "K5", "K10", "mAP@100"), paper.get(method, (None,) * 4)))  # the "all" scope's
    rows = []
    for p in protocols(dist, task, names, scoring):
        typed_scores, typed_truth = p.typed(task)
        ap = {top: average_precision(-p.scores.T, p.relevant, top) for top in (None, 100)}  # (F,) each, once
        if p.name == IMPLIED:  # per-image credit, once for every image; a scope averages its images'
            hits = {
                c: implied_hits(s, t)
                for c, (s, t) in ((ALL, (p.scores, p.truth)), (SAME_ORDER, (typed_scores, typed_truth)))
            }
        for scope, sel in (
            ("all", torch.ones(len(img_fact), dtype=torch.bool)),
            *[(f"order {k}", task.orders[img_fact] == k) for k in (1, 2, 3)],
        ):
            if not bool(sel.any()):  # no test image of this order: no query, no row
                continue
            qf = torch.unique(img_fact[sel]).numpy()

            def topk(candidates, s, t):
                if p.name == STRICT:
                    return p.topk(s[sel], t[sel], img_fact[sel])
                return {f"K{k}": 100.0 * float(np.nanmean(h[sel].numpy())) for k, h in hits[candidates].items()}

            metrics = {
                **topk(ALL, p.scores, p.truth),
                "mAP": 100.0 * float(np.nanmean(ap[None][qf])),
                "mAP@100": 100.0 * float(np.nanmean(ap[100][qf])),
            }
            rows += [
                dict(
                    method=method,
                    protocol=p.name,
                    scope=scope,
                    candidates=ALL,
                    metric=metric,
                    paper=paper_values.get(metric) if scope == "all" else None,
                    ours=value,
                )
                for metric, value in metrics.items()
            ]
            rows += [
                dict(
                    method=method,
                    protocol=p.name,
                    scope=scope,
                    candidates=SAME_ORDER,
                    metric=metric,
                    paper=None,
                    ours=value,
                )
                for metric, value in topk(SAME_ORDER, typed_scores, typed_truth).items()
            ]
    return rows


def chance_rows(task: FactTask) -> list[dict]:
    """Chance: k / number of candidate facts for K@k (all facts; facts of the image's order); under
    `implied`, among all facts, the expected v2 credit of random scores (eval.facts.implied_chance)."""
    img_fact = torch.as_tensor(task.test.fact)
    img_order = task.orders[img_fact]
    n_typed = torch.bincount(task.orders, minlength=4)[img_order].double()  # (N,) candidates of each image
    n_true = implied_truth(implies(task.facts), img_fact).sum(1).numpy()
    rows = []
    for protocol in FACT_PROTOCOLS:
        for k in (1, 5, 10):
            k_all = (
                100.0 * min(k, len(task.facts)) / len(task.facts)
                if protocol == STRICT
                else implied_chance(n_true, len(task.facts), k)
            )
            rows.append(
                dict(
                    method="chance",
                    protocol=protocol,
                    scope="all",
                    candidates=ALL,
                    metric=f"K{k}",
                    paper=None,
                    ours=k_all,
                )
            )
            rows.append(
                dict(
                    method="chance",
                    protocol=protocol,
                    scope="all",
                    candidates=SAME_ORDER,
                    metric=f"K{k}",
                    paper=None,
                    ours=100.0 * float((k / n_typed).clamp(max=1).mean()),
                )
            )
    return rows


def generalisation_rows(
    method: str, dist: torch.Tensor, task: FactTask, cases: dict | None = None, scoring: str = "euc"
) -> list[dict]:
    """Table 5: K10 over test images of the few-example SPO facts of each case, among all facts
    (the paper) and among the SPO facts, per protocol."""
    cases = cases if cases is not None else generalisation_cases(task.facts, task.train_counts)
    img_fact = np.asarray(task.test.fact)
    rows = []
    for p in protocols(dist, task, scoring=scoring):
        typed = p.typed(task)
        for case, fact_ids in cases.items():
            paper_k10, paper_facts = PAPER_TABLE5.get(case, ({}, None))
            sel = torch.as_tensor(np.isin(img_fact, fact_ids))
            target = torch.as_tensor(img_fact)[sel]
            for candidates, (s, t) in ((ALL, (p.scores, p.truth)), (SAME_ORDER, typed)):
                value = p.topk(s[sel], t[sel], target, ks=(10,))["K10"] if bool(sel.any()) else float("nan")
                rows.append(
                    dict(
                        method=method,
                        protocol=p.name,
                        case=case,
                        candidates=candidates,
                        metric="K10",
                        paper=paper_k10.get(method) if candidates == ALL else None,
                        ours=value,
                    )
                )
            rows.append(
                dict(
                    method=method,
                    protocol=p.name,
                    case=case,
                    candidates="",
                    metric="facts",
                    paper=paper_facts,
                    ours=float(len(fact_ids)),
                )
            )
    return rows


# --- the protocols on plain arrays ------------------------------------------------------------------


@dataclass
class FactRetrievalResult:
    """Long rows of Sherlock's Table 4 protocols (retrieval_rows), one dict each: protocol ("strict",
    "implied"), scope ("all", or "order 1" to "order 3" where the test images have facts of that
    order), candidates (ALL = "all facts", or SAME_ORDER = "facts of the image's order", K@k only),
    metric (K1, K5, K10; mAP, mAP@100 among all facts), ours (%)."""

    table: list[dict]

    def rows(self, method: str = "yours") -> list[dict]:
        """The rows with `method` filled in, as `orderlib eval facts` writes them."""
        return [dict(r, method=method) for r in self.table]

    def metric(self, metric: str, protocol: str = STRICT, scope: str = "all", candidates: str = ALL) -> float:
        """One number, e.g. metric("K10", "implied")."""
        for r in self.table:
            if (r["metric"], r["protocol"], r["scope"], r["candidates"]) == (metric, protocol, scope, candidates):
                return r["ours"]
        raise KeyError((metric, protocol, scope, candidates))


def fact_retrieval(
    matrix, facts: list[Fact], image_fact, kind: str = "distance", *, scoring: str, names=FACT_PROTOCOLS
) -> FactRetrievalResult:
    """Sherlock's bi-directional fact retrieval (Table 4 of Elhoseiny et al.) on an (N images,
    F facts) matrix: image -> fact K1/K5/K10 among all facts and among the facts of the image's
    order, fact -> image mAP and mAP@100 (calcAP.m), overall and per fact order, under `strict`
    (GetSherlockResults.m: the annotated fact only) and `implied` (GetSherlockResults_notharsh_v2.m:
    an image's implied lower-order facts are true too). Ties: strict K@k by the expected rule
    (ties shuffled; 1 / (j + 1) of a hit at K1 when tied with j others); implied K@k, and mAP under
    both, by index (a stable sort, as MATLAB's). NaN ranks last.

    kind: "distance" (low = match) or "similarity". scoring (required, never guessed): how
    `implied` scores the matrix: "euc" (the script's per-fact euc of the distances read as
    squared distances, >= 0) or "dot" (the similarities as they are). image_fact (N,): each
    image's fact (a row of `facts`). names: "strict", "implied" or both (the default).

    >>> from orderlib.data.facts import Fact
    >>> facts = [Fact("dog"), Fact("dog", "runs"), Fact("cat")]
    >>> d = [[0.0, 1.0, 4.0], [1.0, 0.0, 4.0], [4.0, 4.0, 0.0]]
    >>> fact_retrieval(d, facts, [0, 1, 2], scoring="euc").metric("K1")
    100.0
    """
    if kind not in ("distance", "similarity"):
        raise InputError("kind", f"{kind!r}, expected distance or similarity")
    if scoring not in SCORINGS:
        raise InputError("scoring", f"{scoring!r}, expected one of {', '.join(SCORINGS)}")
    names = (names,) if isinstance(names, str) else tuple(names)
    if not names or any(n not in FACT_PROTOCOLS for n in names):
        raise InputError("names", f"{names!r}: expected some of {', '.join(FACT_PROTOCOLS)}")
    m = torch.as_tensor(np.asarray(matrix))
    if not torch.is_floating_point(m):
        m = m.double()
    image_fact = np.asarray(image_fact, np.int64)
    if m.ndim != 2 or m.shape[1] != len(facts):
        raise InputError("matrix", f"shape {tuple(m.shape)}: expected (images, {len(facts)} facts)")
    if len(image_fact) != m.shape[0] or image_fact.min(initial=0) < 0 or image_fact.max(initial=0) >= len(facts):
        raise InputError(
            "image_fact", f"{len(image_fact)} facts in 0..{len(facts) - 1} needed, one per row of the matrix"
        )
    dist = m if kind == "distance" else -m
    if IMPLIED in names and scoring == "euc" and (dist < 0).any():
        raise InputError(
            "matrix",
            f"{int((dist < 0).sum())} negative distances; `euc` reads distances as squared distances (>= 0): "
            "give scores with kind similarity and scoring dot",
        )
    task = SimpleNamespace(
        facts=list(facts), orders=torch.tensor([f.order for f in facts]), test=SimpleNamespace(fact=image_fact)
    )
    return FactRetrievalResult(retrieval_rows("", dist, task, paper={}, names=names, scoring=scoring))
