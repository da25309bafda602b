"""WordNet hypernym prediction data: the paper's protocol and a clean one (Sec. 3.2 of Vendrov et al.).

A pair (u, v) means u is a hyponym of v (v is a hypernym, direct or transitive).
Pairs are int64 arrays of shape (P, 2).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

PROTOCOLS = ("paper", "clean")


def listed_pairs(parents: list[list[int]]) -> np.ndarray:
    """List (synset, ancestor) by a depth-first walk from every synset with no visited set.

    A pair appears once per hypernym path, as in the authors' code (838,073 pairs on WordNet 3.1).
    """
    memo: dict[int, list[int]] = {}

    def ancestors(s: int) -> list[int]:  # ancestors in DFS order, one per path
        if s not in memo:
            out: list[int] = []
            for p in parents[s]:
                out.append(p)
                out.extend(ancestors(p))
            memo[s] = out
        return memo[s]

    rows = [(s, a) for s in range(len(parents)) for a in ancestors(s)]
    return np.asarray(rows, dtype=np.int64).reshape(-1, 2)


def closure_pairs(parents: list[list[int]]) -> np.ndarray:
    """Return the distinct pairs of the transitive closure, sorted, shape (P, 2)."""
    return unique_pairs(listed_pairs(parents), len(parents))


def pair_codes(pairs: np.ndarray, n: int) -> np.ndarray:
    """Encode pairs as u * n + v (int64) for set operations."""
    return pairs[:, 0].astype(np.int64) * n + pairs[:, 1]


def decode_pairs(codes: np.ndarray, n: int) -> np.ndarray:
    """Invert `pair_codes`: codes (P,) -> pairs (P, 2)."""
    return np.stack([codes // n, codes % n], axis=1)


def unique_pairs(pairs: np.ndarray, n: int) -> np.ndarray:
    return decode_pairs(np.unique(pair_codes(pairs, n)), n)


def in_set(pairs: np.ndarray, sorted_codes: np.ndarray, n: int) -> np.ndarray:
    """Return a bool mask: which pairs are in the sorted code set."""
    if len(sorted_codes) == 0:
        return np.zeros(len(pairs), dtype=bool)
    c = pair_codes(pairs, n)
    i = np.clip(np.searchsorted(sorted_codes, c), 0, len(sorted_codes) - 1)
    return sorted_codes[i] == c


def corrupt(pairs: np.ndarray, n: int, rng: np.random.Generator,
            forbidden: np.ndarray | None = None, max_tries: int = 100) -> np.ndarray:
    """Replace one side of each pair (fair coin) with a uniformly random concept.

    With `forbidden` (sorted pair codes, e.g. the closure), resample until the corrupted pair is
    a verified non-edge and not a self-pair; without it, no check (the authors' protocol).
    """
    out = pairs.copy()
    todo = np.arange(len(pairs))
    for _ in range(max_tries):
        side = rng.integers(0, 2, size=len(todo))
        out[todo] = pairs[todo]
        out[todo, side] = rng.integers(0, n, size=len(todo))
        if forbidden is None:
            return out
        bad = in_set(out[todo], forbidden, n) | (out[todo, 0] == out[todo, 1])
        todo = todo[bad]
        if len(todo) == 0:
            return out
    raise RuntimeError(f"could not draw verified negatives for {len(todo)} pairs")


@dataclass
class HypernymyData:
    """Splits for one protocol. `dev`/`test` hold positives then their fixed corruptions."""

    protocol: str
    n_nodes: int
    train: np.ndarray  # (P, 2) positives; negatives are redrawn every epoch
    dev: np.ndarray  # (2 * n_dev, 2)
    dev_labels: np.ndarray  # (2 * n_dev,) bool
    test: np.ndarray
    test_labels: np.ndarray
    closure: np.ndarray  # sorted codes of every true pair in WordNet
    stats: dict = field(default_factory=dict)

    def train_negatives(self, rng: np.random.Generator, pos: np.ndarray | None = None) -> np.ndarray:
        """Draw one corrupted pair per positive (verified non-edges under the clean protocol)."""
        pos = self.train if pos is None else pos
        forbidden = self.closure if self.protocol == "clean" else None
        return corrupt(pos, self.n_nodes, rng, forbidden)


def make_splits(parents: list[list[int]], protocol: str = "paper", n_test: int = 4000,
                n_dev: int = 4000, seed: int = 0) -> HypernymyData:
    """Split hypernym pairs into train / dev / test under `protocol`.

    paper: the 838k listed pairs (duplicates kept), seeded permutation, first `n_test` test, next
    `n_dev` dev; negatives unchecked. clean: distinct closure pairs; verified non-edge negatives.
    """
    if protocol not in PROTOCOLS:
        raise ValueError(f"unknown protocol {protocol!r}; expected one of {PROTOCOLS}")
    n = len(parents)
    listed = listed_pairs(parents)
    closure = np.unique(pair_codes(listed, n))
    pool = listed if protocol == "paper" else decode_pairs(closure, n)
    if n_test + n_dev >= len(pool):
        raise ValueError(f"n_test + n_dev = {n_test + n_dev} leaves no training pairs of {len(pool)}")
    rng = np.random.default_rng(seed)
    pool = pool[rng.permutation(len(pool))]
    test_pos, dev_pos, train = pool[:n_test], pool[n_test:n_test + n_dev], pool[n_test + n_dev:]
    forbidden = closure if protocol == "clean" else None
    dev_neg = corrupt(dev_pos, n, rng, forbidden)
    test_neg = corrupt(test_pos, n, rng, forbidden)
    lab = lambda k: np.r_[np.ones(k, bool), np.zeros(k, bool)]  # noqa: E731
    data = HypernymyData(protocol, n, train, np.r_[dev_pos, dev_neg], lab(len(dev_pos)),
                         np.r_[test_pos, test_neg], lab(len(test_pos)), closure)
    data.stats = protocol_facts(data, listed, sum(len(p) for p in parents))
    return data


def protocol_facts(data: HypernymyData, listed: np.ndarray, n_edges: int) -> dict:
    """Count what changes how Table 1 reads: leaks into train and true pairs among negatives."""
    n = data.n_nodes
    train_codes = np.unique(pair_codes(data.train, n))
    test_pos = data.test[data.test_labels]
    test_neg = data.test[~data.test_labels]
    false_neg = in_set(test_neg, data.closure, n)
    return {
        "synsets": n,
        "direct edges": int(n_edges),
        "listed pairs": int(len(listed)),
        "distinct pairs": int(len(data.closure)),
        "train positives": int(len(data.train)),
        "dev pairs": int(len(data.dev)),
        "test pairs": int(len(data.test)),
        "test positives also in train": int(in_set(test_pos, train_codes, n).sum()),
        "test negatives that are true pairs": int(false_neg.sum()),
        "accuracy ceiling (%)": 100.0 * (1 - false_neg.sum() / len(data.test)),
    }


def transitive_closure_predict(known: np.ndarray, queries: np.ndarray, n: int) -> np.ndarray:
    """Predict (u, v) positive iff v is reachable from u over the `known` pairs (Sec. 3.4 baseline)."""
    order = np.argsort(known[:, 0], kind="stable")
    src, dst = known[order, 0], known[order, 1]
    start = np.searchsorted(src, np.arange(n + 1))
    reach: dict[int, set[int]] = {}

    def reachable(u: int) -> set[int]:
        if u not in reach:
            seen: set[int] = set()
            stack = [u]
            while stack:
                x = stack.pop()
                for y in dst[start[x]:start[x + 1]].tolist():
                    if y not in seen:
                        seen.add(y)
                        stack.append(y)
            reach[u] = seen
        return reach[u]

    return np.fromiter((int(v) in reachable(int(u)) for u, v in queries), bool, len(queries))
