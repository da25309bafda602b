"""Extra negatives for Table 1's trainers, one per true pair each (Athiwaratkun & Wilson's kinds)."""

from __future__ import annotations

import numpy as np

from orderlib.data.hypernymy import HypernymyData, in_set, pair_codes

NEGATIVE_KINDS = {  # extra negatives, one per true pair (u, v) each (Athiwaratkun & Wilson's kinds)
    "random": "another corruption of one side by a uniformly random concept (their S1)",
    "swap": "the reversed pair (v, u) (their S2)",
    "sibling": "(w, u) for w another known hyponym of v that is not below u (their S4, drawn per pair)",
}


class Siblings:
    """Train positives grouped by hypernym, for the "sibling" negatives."""

    def __init__(self, data: HypernymyData):
        train = data.train[np.argsort(data.train[:, 1], kind="stable")]
        self.hyponyms = train[:, 0]  # grouped by hypernym
        self.start = np.searchsorted(train[:, 1], np.arange(data.n_nodes + 1))  # (N + 1,)
        self.known = data.closure if data.protocol == "clean" else np.unique(pair_codes(data.train, data.n_nodes))

    def draw(self, data: HypernymyData, pos: np.ndarray, rng: np.random.Generator, tries: int = 10) -> np.ndarray:
        """Return (w, u) per (u, v): w a random known hyponym of v with (w, u) not a known pair;
        pairs with none found in `tries` draws get a random corruption instead."""
        u, v = pos[:, 0], pos[:, 1]
        lo, count = self.start[v], self.start[v + 1] - self.start[v]  # count >= 1: (u, v) itself
        out = data.train_negatives(rng, pos)  # the fallback
        todo = np.arange(len(pos))
        for _ in range(tries):
            w = self.hyponyms[lo[todo] + (rng.random(len(todo)) * count[todo]).astype(np.int64)]
            cand = np.stack([w, u[todo]], axis=1)
            ok = (w != u[todo]) & ~in_set(cand, self.known, data.n_nodes)
            out[todo[ok]] = cand[ok]
            todo = todo[~ok]
            if len(todo) == 0:
                break
        return out


def extra_negatives(
    kind: str, data: HypernymyData, pos: np.ndarray, rng: np.random.Generator, siblings: Siblings | None = None
) -> np.ndarray:
    """Return one negative of `kind` (NEGATIVE_KINDS) per true pair of pos (P, 2), shape (P, 2)."""
    if kind == "random":
        return data.train_negatives(rng, pos)
    if kind == "swap":
        return np.ascontiguousarray(pos[:, ::-1])
    if kind == "sibling":
        return (siblings or Siblings(data)).draw(data, pos, rng)
    raise ValueError(f"unknown negative kind {kind!r}; expected one of {sorted(NEGATIVE_KINDS)}")
