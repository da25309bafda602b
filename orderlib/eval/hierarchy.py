"""Flat hit@k and hierarchical precision@k (Section 4 of Frome et al., DeViSE).

hp@k grows rings of hypernym and hyponym edges around the true label, keeping candidate labels,
until a whole ring brings the kept set to at least k labels; precision is |top-k ∩ kept| / k
(docs/protocols.md). Because whole rings are kept, the set may exceed k and precision 1 is reachable.
"""

from __future__ import annotations

from collections import deque

import numpy as np


def neighbours(parents: list[list[int]]) -> list[list[int]]:
    """Undirected adjacency (hypernyms + hyponyms) of a graph given as parent lists."""
    adj = [list(p) for p in parents]
    for child, ps in enumerate(parents):
        for p in ps:
            adj[p].append(child)
    return adj


def ring_set(true: int, candidates: set[int], k: int, adj: list[list[int]]) -> set[int]:
    """Candidates within the fewest whole rings around `true` that hold at least k of them."""
    kept = {true} & candidates
    if len(kept) >= k:
        return kept
    seen, frontier = {true}, [true]
    while frontier:
        ring = []
        for u in frontier:
            for v in adj[u]:
                if v not in seen:
                    seen.add(v)
                    ring.append(v)
        kept |= candidates.intersection(ring)
        if len(kept) >= k:
            break
        frontier = ring
    return kept


def hit_at_k(ranked: np.ndarray, true: np.ndarray, ks=(1, 2, 5, 10)) -> dict[str, float]:
    """ranked: (N, >= max k) candidate labels, best first; true: (N,) labels. Returns % per k."""
    return {f"hit@{k}": 100.0 * float((ranked[:, :k] == true[:, None]).any(1).mean()) for k in ks}


def hierarchical_precision(
    ranked: np.ndarray, true: np.ndarray, candidates, adj: list[list[int]], ks=(2, 5, 10, 20)
) -> dict[str, float]:
    """Mean |top-k ∩ ring_set(true, candidates, k)| / k per k (a fraction, as the paper prints it)."""
    cand = set(int(c) for c in candidates)
    out = {}
    for k in ks:
        sets = {t: ring_set(int(t), cand, k, adj) for t in np.unique(true)}
        out[f"hp@{k}"] = float(np.mean([len(sets[t].intersection(r[:k].tolist())) / k for r, t in zip(ranked, true)]))
    return out


def hops_from(sources, adj: list[list[int]], max_hops: int) -> dict[int, int]:
    """Node -> hop distance (<= max_hops) from the nearest source over undirected edges."""
    dist = {int(s): 0 for s in sources}
    queue = deque(dist)
    while queue:
        u = queue.popleft()
        if dist[u] == max_hops:
            continue
        for v in adj[u]:
            if v not in dist:
                dist[v] = dist[u] + 1
                queue.append(v)
    return dist
