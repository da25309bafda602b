"""Bi-directional fact retrieval metrics (Sherlock, "Evaluation Metrics"; notes/protocols.md).

- image -> fact (language view retrieval): rank the candidate facts for each image, top-k
  accuracy (K1 / K5 / K10) under the project's tie rules (orderlib.eval.compositional);
- fact -> image (visual view retrieval): rank the test images for each fact; AP = the mean of
  the precision at the rank of each relevant image; mAP over facts with at least one relevant
  image. AP@100 only looks at the top 100 images: the sum of the precision at each relevant image
  within them, divided by min(number relevant, 100), so a fact whose relevant images all sit in
  the top 100 can still reach 1 (TREC's truncated AP). Ties between equal distances are broken by
  image index (distances are continuous; exact ties do not occur in practice).
"""
from __future__ import annotations

import numpy as np
import torch

from orderlib.eval.compositional import topk_accuracy


def fact_topk(dist: torch.Tensor, target, ks=(1, 5, 10)) -> dict:
    """K@k (%) of each image's fact among candidate facts: dist (N, F) low = relevant, target (N,)."""
    acc = topk_accuracy(-torch.as_tensor(dist), torch.as_tensor(target), ks)
    return {f"K{k}": acc[f"top-{k}"] for k in ks}


def average_precision(dist: torch.Tensor, relevant: torch.Tensor, top: int | None = None) -> np.ndarray:
    """AP of each query row (F,) float64: dist (F, N) low = relevant, relevant (F, N) bool.
    With `top`, truncated AP over the first `top` ranks (normalised by min(R, top)). Rows without
    a relevant image give NaN."""
    dist, relevant = torch.as_tensor(dist), torch.as_tensor(relevant, dtype=torch.bool)
    if dist.shape != relevant.shape:
        raise ValueError(f"dist {tuple(dist.shape)} and relevant {tuple(relevant.shape)} must match")
    order = torch.sort(dist, dim=1, stable=True).indices  # (F, N), index order among ties
    hits = relevant.gather(1, order).double()  # (F, N) relevant at rank r?
    if top is not None:
        hits = hits[:, :top]
    ranks = torch.arange(1, hits.shape[1] + 1, dtype=torch.float64)
    precision = hits.cumsum(1) / ranks  # (F, n)
    n_rel = relevant.sum(1).double()
    denom = n_rel if top is None else n_rel.clamp(max=top)
    ap = (precision * hits).sum(1) / denom
    return torch.where(n_rel > 0, ap, torch.full_like(ap, float("nan"))).numpy()


def fact_map(dist: torch.Tensor, image_fact, query_facts, top: int | None = None) -> float:
    """mAP (%) of fact queries over test images: dist (Q, N) between query facts and images,
    image_fact (N,) the fact of each image, query_facts (Q,) the fact of each query."""
    image_fact, query_facts = torch.as_tensor(image_fact), torch.as_tensor(query_facts)
    relevant = query_facts[:, None] == image_fact[None, :]  # (Q, N)
    ap = average_precision(dist, relevant, top)
    return 100.0 * float(np.nanmean(ap))
