"""Image-caption retrieval: ranks, Recall@K, median and mean rank (Section 4 of Vendrov et al.).

Caption k belongs to image k // captions_per_image (the vsepp layout). Ranks are counted block by
block of queries, so the full (images x captions) matrix never exists unless it is the input.
Where candidates score exactly the same (repeated captions), every metric is given under each
rule of `TIES`, the exact expectation under random tie-breaking first (docs/glossary.md#tie-rules).
NaN penalties rank last.

The API: `retrieval_metrics` on an (N, k N) score or distance matrix, `retrieval_metrics_of_embeddings`
on embeddings with a penalty of `orderlib.penalties.MATRIX_ENERGIES`; both return a
`RetrievalResult` for one protocol of `RETRIEVAL_PROTOCOLS`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from orderlib.errors import InputError
from orderlib.penalties import ENERGIES, MATRIX_ENERGIES, chunk_bytes

PenaltyMatrix = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]  # (N, D), (M, D) -> (N, M)

TIES = ("expected", "pessimistic", "optimistic", "index")
PRIMARY_TIES = "expected"
# Report columns: `ours` holds the primary rule, these the others.
TIE_COLUMNS = {"pessimistic": "ties against", "optimistic": "ties for", "index": "ties by index"}


def tie_columns(by_rule: dict) -> dict:
    """{tie rule: value} -> the report columns {"ours": primary, "ties against": ..., ...}."""
    return {"ours": by_rule[PRIMARY_TIES], **{col: by_rule[rule] for rule, col in TIE_COLUMNS.items()}}


class NonFiniteEmbeddings(InputError):
    """Embeddings hold NaN or inf: the model has diverged; its retrieval metrics would mean nothing."""

    def __init__(self, what: str):
        super().__init__("embeddings", what)
        self.args = (what,)  # str(): the message alone, which names the model and split


def _check_ties(ties: str) -> None:
    if ties not in TIES:
        raise InputError("ties", f"must be one of {TIES}, got {ties!r}")


@dataclass(frozen=True, eq=False)
class TargetRanks:
    """Per query, the counts that fix the rank of its best ground truth under any tie rule.

    ahead: non-targets scoring strictly better than the best target; tied: non-targets tied with
    it; tied_before: of those, the ones listed before the first best target (for "index");
    targets_tied: targets at the best score (>= 1). All (Q,) int64.
    """

    ahead: torch.Tensor
    tied: torch.Tensor
    tied_before: torch.Tensor
    targets_tied: torch.Tensor

    @classmethod
    def exact(cls, ranks: torch.Tensor) -> TargetRanks:
        """Counts for ranks known without ties (1-based)."""
        ranks = torch.as_tensor(ranks, dtype=torch.long)
        zero = torch.zeros_like(ranks)
        return cls(ranks - 1, zero, zero, torch.ones_like(ranks))

    @classmethod
    def cat(cls, parts: list[TargetRanks]) -> TargetRanks:
        if not parts:
            return cls.exact(torch.zeros(0, dtype=torch.long))
        return cls(
            *(torch.cat([getattr(p, f) for p in parts]) for f in ("ahead", "tied", "tied_before", "targets_tied"))
        )

    def __len__(self) -> int:
        return self.ahead.shape[0]

    def __eq__(self, other) -> bool:
        return isinstance(other, TargetRanks) and all(
            torch.equal(getattr(self, f), getattr(other, f)) for f in ("ahead", "tied", "tied_before", "targets_tied")
        )

    def __getitem__(self, idx) -> TargetRanks:
        return TargetRanks(self.ahead[idx], self.tied[idx], self.tied_before[idx], self.targets_tied[idx])

    def ranks(self, ties: str = "pessimistic") -> torch.Tensor:
        """1-based ranks (Q,) under a deterministic rule; "expected" gives expected ranks (float)."""
        _check_ties(ties)
        if ties == "expected":  # first of t targets among t + u shuffled: mean position (t+u+1)/(t+1)
            t, u = self.targets_tied.double(), self.tied.double()
            return self.ahead.double() + (t + u + 1) / (t + 1)
        extra = {"pessimistic": self.tied, "optimistic": torch.zeros_like(self.tied), "index": self.tied_before}[ties]
        return 1 + self.ahead + extra

    def prob_within(self, k: int, ties: str = PRIMARY_TIES) -> torch.Tensor:
        """P(rank <= k) per query (Q,), float64; 0/1 under the deterministic rules."""
        _check_ties(ties)
        if ties != "expected":
            return (self.ranks(ties) <= k).double()
        t, u = self.targets_tied.double(), self.tied.double()
        m = (k - self.ahead).double()  # slots of the tied group inside the top k
        # P(the first m of the shuffled group are all non-targets) = C(u, m) / C(t + u, m)
        ms = m.clamp(0).minimum(u)
        log_miss = (
            torch.lgamma(u + 1) - torch.lgamma(u - ms + 1) - torch.lgamma(t + u + 1) + torch.lgamma(t + u - ms + 1)
        )
        p = 1.0 - log_miss.exp()
        return torch.where(m <= 0, torch.zeros_like(p), torch.where(m > u, torch.ones_like(p), p))


def ranks_of_targets(
    penalty: Callable[[torch.Tensor], torch.Tensor],
    n_queries: int,
    n_candidates: int,
    targets: torch.Tensor,
    block: int | None = None,
) -> TargetRanks:
    """Return the counts that rank each query's best ground-truth candidate (see TargetRanks).

    penalty(rows) gives the (len(rows), n_candidates) penalties of those query rows; targets is
    (n_queries, T), the distinct ground-truth candidates of each query. NaN penalties rank last.
    """
    if targets.shape[0] != n_queries:
        raise ValueError(f"targets has {targets.shape[0]} rows for {n_queries} queries")
    block = block or max(1, chunk_bytes() // max(1, 16 * n_candidates))  # ~16 bytes per entry
    parts = []
    for start in range(0, n_queries, block):
        rows = torch.arange(start, min(start + block, n_queries))
        with torch.no_grad():
            p = penalty(rows)  # (b, n_candidates)
        p = torch.where(p.isnan(), torch.full_like(p, float("inf")), p)  # NaN: worst possible
        tgt = targets[rows].to(p.device)  # (b, T)
        gt = p.gather(1, tgt)  # (b, T)
        best = gt.min(1, keepdim=True).values  # (b, 1)
        at_best = gt == best  # (b, T)
        first = torch.where(at_best, tgt, torch.full_like(tgt, n_candidates)).min(1, keepdim=True).values
        tie = p == best  # (b, n_candidates)
        col = torch.arange(n_candidates, device=p.device)
        n_at_best = at_best.sum(1)
        parts.append(
            TargetRanks(
                ahead=(p < best).sum(1).cpu(),
                tied=(tie.sum(1) - n_at_best).cpu(),
                tied_before=(tie & (col < first)).sum(1).cpu(),  # no target at best lies before `first`
                targets_tied=n_at_best.cpu(),
            )
        )
        del p, tie
    return TargetRanks.cat(parts)


def penalty_matrix(penalty: str | PenaltyMatrix) -> PenaltyMatrix:
    """The all-pairs penalty of `penalty`: a name in orderlib.penalties.MATRIX_ENERGIES, or a function."""
    if not isinstance(penalty, str):
        return penalty
    if penalty not in MATRIX_ENERGIES:
        raise InputError("penalty", f"{penalty!r} has no all-pairs form; known: {', '.join(MATRIX_ENERGIES)}")
    return ENERGIES[penalty].matrix


def retrieval_ranks(
    images: torch.Tensor,
    captions: torch.Tensor,
    penalty: str | PenaltyMatrix = "order",
    captions_per_image: int = 5,
    block: int | None = None,
) -> tuple[TargetRanks, TargetRanks]:
    """Return (caption-retrieval ranks (N,), image-retrieval ranks (5N,)) for images (N, D) and
    captions (5N, D): an image query finds any of its captions; a caption query its image."""
    fn = penalty_matrix(penalty)
    n, k = images.shape[0], captions_per_image
    if captions.shape[0] != n * k:
        raise ValueError(f"{captions.shape[0]} captions for {n} images x {k} captions each")
    cap_of_img = torch.arange(n * k).view(n, k)  # (N, k)
    img_of_cap = torch.arange(n * k).div(k, rounding_mode="floor")[:, None]  # (5N, 1)
    i2t = ranks_of_targets(lambda r: fn(images[r], captions), n, n * k, cap_of_img, block)
    t2i = ranks_of_targets(lambda r: fn(images, captions[r]).T, n * k, n, img_of_cap, block)
    return i2t, t2i


def _order_statistic(ranks: TargetRanks, j: int, ties: str) -> int:
    """The j-th smallest rank (0-based) of the expected rank distribution: min{r: F(r) > j}, with
    F(r) = sum over queries of P(rank <= r). Without ties this is sorted(ranks)[j]."""
    lo, hi = 1, int((ranks.ahead + ranks.tied).max()) + 1
    while lo < hi:
        mid = (lo + hi) // 2
        if float(ranks.prob_within(mid, ties).sum()) > j + 1e-9:
            hi = mid
        else:
            lo = mid + 1
    return lo


def rank_metrics(
    ranks: TargetRanks | torch.Tensor, ks: tuple[int, ...] = (1, 5, 10), ties: str = PRIMARY_TIES
) -> dict[str, float]:
    """Return R@K (%) for each K, median and mean rank (1-based) under the tie rule `ties`.

    A plain tensor is taken as exact ranks. The median is the linearly interpolated middle of
    the rank distribution, floored, as the order-embedding and VSE++ evaluation code reports it
    (numpy.floor(numpy.median(ranks)))."""
    _check_ties(ties)
    if not isinstance(ranks, TargetRanks):
        ranks = TargetRanks.exact(ranks)
    n = len(ranks)
    if n == 0:
        raise ValueError("no queries to rank")
    out = {f"R@{k}": 100.0 * ranks.prob_within(k, ties).mean().item() for k in ks}
    h = (n - 1) * 0.5
    a = _order_statistic(ranks, int(h), ties)
    b = a if h == int(h) else _order_statistic(ranks, int(h) + 1, ties)
    out["median rank"] = float(int(a + (h - int(h)) * (b - a)))
    out["mean rank"] = ranks.ranks(ties).double().mean().item()
    return out


def check_finite(name: str, **tensors: torch.Tensor) -> None:
    """Raise NonFiniteEmbeddings naming `name` and the tensors holding NaN or inf."""
    bad = {k: int((~torch.isfinite(v)).any(-1).sum()) for k, v in tensors.items()}
    bad = {k: c for k, c in bad.items() if c}
    if bad:
        what = ", ".join(f"{c} of {tensors[k].shape[0]} {k}" for k, c in bad.items())
        raise NonFiniteEmbeddings(
            f"{name or 'retrieval'}: {what} hold NaN or inf; the model has "
            "diverged (lower the learning rate or the gradient clip, or check the inputs)"
        )


SIDES = ("caption retrieval", "image retrieval")  # image -> text, text -> image


def _side_metrics(i2t: TargetRanks, t2i: TargetRanks, ties: str, ks: tuple[int, ...]) -> dict:
    return {"caption retrieval": rank_metrics(i2t, ks, ties), "image retrieval": rank_metrics(t2i, ks, ties)}


def _with_rsum(m: dict) -> dict:
    m["rsum"] = sum(v for side in SIDES for name, v in m[side].items() if name.startswith("R@"))
    return m


def _mean(results: list[dict]) -> dict:
    """The fold-mean of per-fold {side: metrics} dicts, with rsum of the means (the 1k protocol)."""
    n = len(results)
    return _with_rsum({side: {m: sum(r[side][m] for r in results) / n for m in results[0][side]} for side in SIDES})


def _rules(ties: str | tuple[str, ...]) -> tuple[str, ...]:
    rules = (ties,) if isinstance(ties, str) else tuple(ties)
    for r in rules:
        _check_ties(r)
    return rules


def evaluate_retrieval(
    images: torch.Tensor,
    captions: torch.Tensor,
    penalty: str | PenaltyMatrix = "order",
    captions_per_image: int = 5,
    folds: int = 1,
    block: int | None = None,
    ties: str | tuple[str, ...] = PRIMARY_TIES,
    name: str = "",
) -> dict:
    """Return {"caption retrieval": metrics, "image retrieval": metrics, "rsum": float}, averaged
    over `folds` equal splits of the images (folds=5 on the 5k test gives the "1k" numbers).

    With a tuple of tie rules, return {rule: that dict}; the ranks are counted once. Non-finite
    embeddings raise NonFiniteEmbeddings naming `name` (e.g. "order-embeddings, dev split")."""
    rules = _rules(ties)
    check_finite(name, images=images, captions=captions)
    n, k = images.shape[0], captions_per_image
    if folds < 1 or n % folds:
        raise ValueError(f"{n} images do not split into {folds} equal folds")
    per = n // folds
    counted = [
        retrieval_ranks(images[f * per : (f + 1) * per], captions[f * per * k : (f + 1) * per * k], penalty, k, block)
        for f in range(folds)
    ]
    out = {rule: _mean([_side_metrics(i2t, t2i, rule, (1, 5, 10)) for i2t, t2i in counted]) for rule in rules}
    return out[rules[0]] if isinstance(ties, str) else out


# --- the protocols on a matrix or on embeddings ---------------------------------------------------

RETRIEVAL_PROTOCOLS = ("5k", "1k", "all")
DIRECTIONS = {"caption retrieval": "image→text", "image retrieval": "text→image"}


@dataclass
class RetrievalResult:
    """One protocol's retrieval metrics under every tie rule of TIES: `folds` (one {rule: metrics}
    per fold; one fold for "5k" and "all") and their `mean` ({rule: metrics}; for "1k" the
    fold-mean, as the papers report it). metrics = {"caption retrieval": {"R@1", ..., "median
    rank", "mean rank"}, "image retrieval": {...}, "rsum": the sum of the six R@K}. `fold_size`:
    images per fold (for "5k" and "all", every image)."""

    protocol: str
    fold_size: int
    folds: list[dict]
    mean: dict

    def metrics(self, ties: str = PRIMARY_TIES) -> dict:
        """The protocol's numbers under one tie rule."""
        return self.mean[ties]

    def rows(self, method: str = "yours") -> list[dict]:
        """Long rows: method, protocol, fold ("1".."n" and "mean" for 1k, else "all"), images,
        direction, metric, paper (None), `ours` under the primary rule and a column per other rule."""
        if self.protocol == "1k":
            parts = [(str(f + 1), r) for f, r in enumerate(self.folds)] + [("mean", self.mean)]
        else:
            parts = [("all", self.mean)]
        rows = []
        for fold, by_rule in parts:
            base = dict(method=method, protocol=self.protocol, fold=fold, images=self.fold_size)
            primary = by_rule[PRIMARY_TIES]
            for side, direction in DIRECTIONS.items():
                for metric in primary[side]:
                    values = {rule: by_rule[rule][side][metric] for rule in TIES}
                    rows.append(dict(base, direction=direction, metric=metric, paper=None, **tie_columns(values)))
            values = {rule: by_rule[rule]["rsum"] for rule in TIES}
            rows.append(dict(base, direction="both", metric="rsum", paper=None, **tie_columns(values)))
        return rows


def protocol_folds(protocol: str, n_images: int, fold_size: int = 1000) -> int:
    """How many equal folds `protocol` splits n_images into: "1k" folds of `fold_size` images (the
    mean over the 5 folds of COCO's 5k test), "5k" 5 x fold_size images at once, "all" every image
    at once (one fold). Raises InputError where the images do not fit the protocol."""
    if protocol not in RETRIEVAL_PROTOCOLS:
        raise InputError("protocol", f"{protocol!r}, expected one of {', '.join(RETRIEVAL_PROTOCOLS)}")
    if fold_size < 1:
        raise InputError("fold_size", f"must be >= 1, got {fold_size}")
    if protocol == "1k" and n_images % fold_size:
        raise InputError("fold_size", f"{n_images} images do not split into folds of {fold_size}")
    if protocol == "5k" and n_images != 5 * fold_size:
        raise InputError(
            "fold_size",
            f"{n_images} images; the 5k protocol takes 5 x {fold_size} = {5 * fold_size}; the all protocol takes any",
        )
    return n_images // fold_size if protocol == "1k" else 1


def _protocol_result(count, n_images: int, protocol: str, fold_size: int, ks) -> RetrievalResult:
    """count(fold, n_folds) -> (i2t, t2i) ranks of one fold; the folds' metrics and their mean."""
    rules = TIES
    n_folds = protocol_folds(protocol, n_images, fold_size)
    ranks = [count(f, n_folds) for f in range(n_folds)]
    folds = [{rule: _with_rsum(_side_metrics(i2t, t2i, rule, ks)) for rule in rules} for i2t, t2i in ranks]
    mean = {rule: _mean([f[rule] for f in folds]) for rule in rules}
    size = fold_size if protocol == "1k" else n_images
    return RetrievalResult(protocol, size, folds, mean)


def matrix_ranks(distances: torch.Tensor, captions_per_image: int = 5, block: int | None = None):
    """(caption-retrieval ranks (N,), image-retrieval ranks (k N,)) of an (N, k N) distance matrix."""
    n, k = distances.shape[0], captions_per_image
    cap_of_img = torch.arange(n * k).view(n, k)
    img_of_cap = torch.arange(n * k).div(k, rounding_mode="floor")[:, None]
    i2t = ranks_of_targets(lambda r: distances[r], n, n * k, cap_of_img, block)
    t2i = ranks_of_targets(lambda r: distances[:, r].T, n * k, n, img_of_cap, block)
    return i2t, t2i


def retrieval_metrics(
    scores,
    kind: str = "distance",
    captions_per_image: int = 5,
    protocol: str = "all",
    fold_size: int = 1000,
    ks: tuple[int, ...] = (1, 5, 10),
    block: int | None = None,
) -> RetrievalResult:
    """Caption-image retrieval (Table 2 of Vendrov et al.; VSE++'s evaluation) of an (N images,
    k N captions) matrix, caption c belonging to image c // k (k = captions_per_image): R@K for
    each K in `ks`, median and mean rank, both ways, and rsum (the sum of the R@K of both
    directions: with the default ks, the papers' rsum), under every tie rule of TIES: "expected"
    (the primary: the expectation when tied candidates are shuffled), "pessimistic" (ties count
    against), "optimistic" (for) and "index" (the lower index first, a stable sort). Image ->
    text counts the best-ranked true caption. NaN ranks last.

    `kind`: "distance" (penalty, energy; low = match) or "similarity" (high = match). `protocol`:
    "1k" (folds of `fold_size` images, each and their mean), "5k" (5 x fold_size images at once) or
    "all". Queries are ranked a block at a time (`block` rows; default: bounded by
    orderlib.penalties.chunk_bytes), on the matrix's device; integers are read as float64.

    >>> import torch
    >>> d = torch.tensor([[0.0, 1.0, 2.0, 3.0], [3.0, 2.0, 0.5, 0.0]])
    >>> r = retrieval_metrics(d, captions_per_image=2)
    >>> r.metrics()["caption retrieval"]["R@1"], r.metrics()["rsum"]
    (100.0, 600.0)
    """
    if kind not in ("distance", "similarity"):
        raise InputError("kind", f"{kind!r}, expected distance or similarity")
    m = torch.as_tensor(scores)
    if not torch.is_floating_point(m):
        m = m.double()
    if m.ndim != 2:
        raise InputError("scores", f"a matrix is needed, got shape {tuple(m.shape)}")
    if captions_per_image < 1:
        raise InputError("captions_per_image", f"must be >= 1, got {captions_per_image}")
    n, k = m.shape[0], captions_per_image
    if m.shape[1] != k * n:
        raise InputError(
            "scores",
            f"shape {tuple(m.shape)}: {m.shape[1]} captions for {n} images, expected {k} (captions_per_image) x {n}",
        )
    d = m if kind == "distance" else -m

    def count(f: int, n_folds: int):
        size = n // n_folds
        sub = d[f * size : (f + 1) * size, f * size * k : (f + 1) * size * k]
        return matrix_ranks(sub, k, block)

    return _protocol_result(count, n, protocol, fold_size, ks)


def retrieval_metrics_of_embeddings(
    images: torch.Tensor,
    captions: torch.Tensor,
    penalty: str | PenaltyMatrix = "order",
    captions_per_image: int = 5,
    protocol: str = "all",
    fold_size: int = 1000,
    ks: tuple[int, ...] = (1, 5, 10),
    block: int | None = None,
    name: str = "",
) -> RetrievalResult:
    """`retrieval_metrics` of images (N, D) and captions (k N, D) in image order, scored by
    `penalty` (a name in orderlib.penalties.MATRIX_ENERGIES: "order" is E(image, caption), Eq. (2)
    of Vendrov et al., with captions above images; or a function (N, D), (M, D) -> (N, M), low =
    match). The matrix is never held whole: a block of queries at a time, on the inputs' device.
    Metrics and tie rules as retrieval_metrics. Non-finite embeddings raise NonFiniteEmbeddings (an
    InputError) naming `name`."""
    fn = penalty_matrix(penalty)
    images, captions = torch.as_tensor(images), torch.as_tensor(captions)
    for arg, x in (("images", images), ("captions", captions)):
        if x.ndim != 2:
            raise InputError(arg, f"(rows, dim) embeddings are needed, got shape {tuple(x.shape)}")
    check_finite(name, images=images, captions=captions)
    n, k = images.shape[0], captions_per_image
    if captions_per_image < 1:
        raise InputError("captions_per_image", f"must be >= 1, got {captions_per_image}")
    if captions.shape[0] != k * n:
        raise InputError(
            "captions", f"{captions.shape[0]} captions for {n} images, expected {k} (captions_per_image) x {n}"
        )
    if captions.shape[1] != images.shape[1]:
        raise InputError("captions", f"{captions.shape[1]}-d captions, but {images.shape[1]}-d images")

    def count(f: int, n_folds: int):
        size = n // n_folds
        im, cap = images[f * size : (f + 1) * size], captions[f * size * k : (f + 1) * size * k]
        return retrieval_ranks(im, cap, fn, k, block)

    return _protocol_result(count, n, protocol, fold_size, ks)


def topk_hits(penalties: torch.Tensor, relevant: torch.Tensor, k: int, ties: str = PRIMARY_TIES) -> torch.Tensor:
    """Return how many relevant candidates each query has among its k lowest penalties, (b,)
    float64, under the tie rule `ties` (at the k-th place several candidates may tie).

    penalties (b, M), relevant (b, M) bool. NaN penalties rank last. precision@k = hits / k.
    """
    _check_ties(ties)
    if penalties.shape != relevant.shape or not 1 <= k <= penalties.shape[1]:
        raise ValueError(
            f"penalties {tuple(penalties.shape)} and relevant {tuple(relevant.shape)} "
            f"must match, with 1 <= k <= {penalties.shape[-1]}"
        )
    p = torch.where(penalties.isnan(), torch.full_like(penalties, float("inf")), penalties)
    kth = p.kthvalue(k, dim=1, keepdim=True).values  # (b, 1)
    better, tie = p < kth, p == kth  # (b, M)
    need = (k - better.sum(1)).double()  # slots left for the tied group, >= 1
    g, hg = tie.sum(1).double(), (tie & relevant).sum(1).double()
    hits = (better & relevant).sum(1).double()
    if ties == "expected":
        return hits + need * hg / g
    if ties == "pessimistic":
        return hits + (need - (g - hg)).clamp(min=0)
    if ties == "optimistic":
        return hits + torch.minimum(need, hg)
    first = tie.long().cumsum(1) <= need[:, None]  # tied candidates in index order
    return hits + (tie & relevant & first).sum(1).double()
