"""Image-caption retrieval: ranks, Recall@K, median/mean rank (Section 4 of Vendrov et al.).

Ranks are counted block by block of queries: each block's penalty rows are computed, the
candidates that score at least as well as the best ground truth are counted, and the block is
dropped, so the full (images x captions) matrix never exists. Ties count against the model.
Caption k belongs to image k // captions_per_image (the `*_precomp` layout).
"""
from __future__ import annotations

from typing import Callable

import torch

from orderlib.penalties import chunk_bytes, cosine_distance_matrix, order_violation_matrix

PenaltyMatrix = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]  # (N, D), (M, D) -> (N, M)

# Penalty of (image, caption) pairs; low = good match. Order: the image is the specific side,
# E(image, caption) with captions above images in the order (Section 4.1 of Vendrov et al.).
PENALTY_MATRICES: dict[str, PenaltyMatrix] = {
    "order": order_violation_matrix,
    "cosine": cosine_distance_matrix,
}


def ranks_of_targets(penalty: Callable[[torch.Tensor], torch.Tensor], n_queries: int,
                     n_candidates: int, targets: torch.Tensor, block: int | None = None) -> torch.Tensor:
    """Return the 1-based rank of each query's best ground-truth candidate, pessimistic in ties.

    penalty(rows) gives the (len(rows), n_candidates) penalties of those query rows; targets is
    (n_queries, T), the ground-truth candidates of each query. rank = 1 + #{non-target
    candidates whose penalty is <= the best target's}.
    """
    if targets.shape[0] != n_queries:
        raise ValueError(f"targets has {targets.shape[0]} rows for {n_queries} queries")
    block = block or max(1, chunk_bytes() // max(1, 8 * n_candidates))
    ranks = []
    for start in range(0, n_queries, block):
        rows = torch.arange(start, min(start + block, n_queries))
        with torch.no_grad():
            p = penalty(rows)  # (b, n_candidates)
        tgt = targets[rows].to(p.device)  # (b, T)
        gt = p.gather(1, tgt)  # (b, T)
        best = gt.min(1, keepdim=True).values  # (b, 1)
        ahead = (p <= best).sum(1) - (gt <= best).sum(1)  # non-targets at least as good
        ranks.append(1 + ahead.cpu())
        del p
    return torch.cat(ranks) if ranks else torch.zeros(0, dtype=torch.long)


def retrieval_ranks(images: torch.Tensor, captions: torch.Tensor, penalty: str | PenaltyMatrix = "order",
                    captions_per_image: int = 5, block: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Return (caption-retrieval ranks (N,), image-retrieval ranks (5N,)) for images (N, D) and
    captions (5N, D): an image query finds any of its captions; a caption query its image."""
    fn = PENALTY_MATRICES[penalty] if isinstance(penalty, str) else penalty
    n, k = images.shape[0], captions_per_image
    if captions.shape[0] != n * k:
        raise ValueError(f"{captions.shape[0]} captions for {n} images x {k} captions each")
    cap_of_img = torch.arange(n * k).view(n, k)  # (N, k)
    img_of_cap = torch.arange(n * k).div(k, rounding_mode="floor")[:, None]  # (5N, 1)
    i2t = ranks_of_targets(lambda r: fn(images[r], captions), n, n * k, cap_of_img, block)
    t2i = ranks_of_targets(lambda r: fn(images, captions[r]).T, n * k, n, img_of_cap, block)
    return i2t, t2i


def rank_metrics(ranks: torch.Tensor, ks: tuple[int, ...] = (1, 5, 10)) -> dict[str, float]:
    """Return R@K (%) for each K, median and mean rank (1-based) of a rank vector.

    The median is floored, as the order-embedding and VSE++ evaluation code reports it."""
    r = ranks.double()
    out = {f"R@{k}": 100.0 * (r <= k).double().mean().item() for k in ks}
    out["median rank"] = float(r.quantile(0.5).floor().item())
    out["mean rank"] = r.mean().item()
    return out


def evaluate_retrieval(images: torch.Tensor, captions: torch.Tensor, penalty: str | PenaltyMatrix = "order",
                       captions_per_image: int = 5, folds: int = 1, block: int | None = None) -> dict:
    """Return {"caption retrieval": metrics, "image retrieval": metrics, "rsum": float}, averaged
    over `folds` equal splits of the images (folds=5 on the 5k test gives the "1k" numbers)."""
    n, k = images.shape[0], captions_per_image
    if folds < 1 or n % folds:
        raise ValueError(f"{n} images do not split into {folds} equal folds")
    per = n // folds
    results = []
    for f in range(folds):
        im = images[f * per:(f + 1) * per]
        cap = captions[f * per * k:(f + 1) * per * k]
        i2t, t2i = retrieval_ranks(im, cap, penalty, k, block)
        results.append((rank_metrics(i2t), rank_metrics(t2i)))
    avg = {name: {m: sum(r[j][m] for r in results) / folds for m in results[0][j]}
           for j, name in enumerate(("caption retrieval", "image retrieval"))}
    avg["rsum"] = sum(v for d in (avg["caption retrieval"], avg["image retrieval"])
                      for m, v in d.items() if m.startswith("R@"))
    return avg
