"""WordNet hypernym prediction data: the paper's protocol and a clean one (Sec. 3.2 of Vendrov et al.).

A pair (u, v) means u is a hyponym of v (v is a hypernym, direct or transitive).
Pairs are int64 arrays of shape (P, 2).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from orderlib.checkpoint import fingerprint
from orderlib.data.torch7 import Torch7Generator

if TYPE_CHECKING:
    from orderlib.data.wordnet import NounGraph

SPLIT_PROTOCOLS = ("paper", "clean")  # how Table 1 draws its pairs (make_splits)


def listed_pairs(parents: list[list[int]], order: Sequence[int] | None = None) -> np.ndarray:
    """List (synset, ancestor) by a depth-first walk from every synset with no visited set.

    A pair appears once per hypernym path, as in the authors' code (838,073 pairs on WordNet 3.1).
    Walks start from the synsets in `order` (default: index order) and follow `parents[s]` in its
    order, as Graph.lua's `dfs` of Vendrov et al. does.
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

    starts = np.arange(len(parents)) if order is None else np.asarray(order, dtype=np.int64).reshape(-1)
    chains = [ancestors(s) for s in starts.tolist()]
    lengths = np.fromiter(map(len, chains), np.int64, len(chains))
    dst = np.fromiter(itertools.chain.from_iterable(chains), np.int64, int(lengths.sum()))
    return np.stack([np.repeat(starts, lengths), dst], axis=1)  # (P, 2)


def closure_pairs(parents: list[list[int]]) -> np.ndarray:
    """Return the distinct pairs of the transitive closure, sorted, shape (P, 2)."""
    return unique_pairs(listed_pairs(parents), len(parents))


def pair_codes(pairs: np.ndarray, n: int) -> np.ndarray:
    """Encode pairs as u * n + v (int64) for set operations."""
    return pairs[:, 0].astype(np.int64) * n + pairs[:, 1]


def decode_pairs(codes: np.ndarray, n: int) -> np.ndarray:
    """Invert `pair_codes`: codes (P,) -> pairs (P, 2)."""
    return np.stack([codes // n, codes % n], axis=1)


def sorted_unique(codes: np.ndarray) -> np.ndarray:
    """Return the distinct values of `codes`, sorted (np.unique by a plain sort: faster on 1e6 codes)."""
    s = np.sort(codes)
    return s[np.r_[True, s[1:] != s[:-1]]] if len(s) else s


def unique_pairs(pairs: np.ndarray, n: int) -> np.ndarray:
    return decode_pairs(sorted_unique(pair_codes(pairs, n)), n)


def in_set(pairs: np.ndarray, sorted_codes: np.ndarray, n: int) -> np.ndarray:
    """Return a bool mask: which pairs are in the sorted code set."""
    if len(sorted_codes) == 0:
        return np.zeros(len(pairs), dtype=bool)
    c = pair_codes(pairs, n)
    i = np.clip(np.searchsorted(sorted_codes, c), 0, len(sorted_codes) - 1)
    return sorted_codes[i] == c


def corrupt(
    pairs: np.ndarray, n: int, rng: np.random.Generator, forbidden: np.ndarray | None = None, max_tries: int = 100
) -> np.ndarray:
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
    split: str = "ours"  # "ours" (make_splits) or "authors" (authors_split: Vendrov et al.'s own pairs)

    def key(self) -> str:
        """Content fingerprint of what training and evaluation read (the checkpoint keys' "data")."""
        return fingerprint(
            self.protocol,
            self.n_nodes,
            self.train,
            self.dev,
            self.dev_labels,
            self.test,
            self.test_labels,
            self.closure,
        )

    def epoch_positives(self, rng: np.random.Generator, fraction: float = 1.0) -> np.ndarray:
        """Shuffle the training positives and keep the first `fraction` of them (at least one), (P, 2):
        one epoch's positives, the same draws for every trainer."""
        pos = self.train[rng.permutation(len(self.train))]
        return pos[: max(1, int(round(fraction * len(pos))))]

    def train_negatives(self, rng: np.random.Generator, pos: np.ndarray | None = None) -> np.ndarray:
        """Draw one corrupted pair per positive (verified non-edges under the clean protocol)."""
        pos = self.train if pos is None else pos
        forbidden = self.closure if self.protocol == "clean" else None
        return corrupt(pos, self.n_nodes, rng, forbidden)


def make_splits(
    parents: list[list[int]], protocol: str = "paper", n_test: int = 4000, n_dev: int = 4000, seed: int = 0
) -> HypernymyData:
    """Split hypernym pairs into train / dev / test under `protocol`.

    paper: the 838k listed pairs (duplicates kept), seeded permutation, first `n_test` test, next
    `n_dev` dev; negatives unchecked. clean: distinct closure pairs; verified non-edge negatives.
    """
    if protocol not in SPLIT_PROTOCOLS:
        raise ValueError(f"unknown protocol {protocol!r}; expected one of {SPLIT_PROTOCOLS}")
    n = len(parents)
    listed = listed_pairs(parents)
    closure = sorted_unique(pair_codes(listed, n))
    pool = listed if protocol == "paper" else decode_pairs(closure, n)
    if n_test + n_dev >= len(pool):
        raise ValueError(f"n_test + n_dev = {n_test + n_dev} leaves no training pairs of {len(pool)}")
    rng = np.random.default_rng(seed)
    pool = pool[rng.permutation(len(pool))]
    test_pos, dev_pos, train = pool[:n_test], pool[n_test : n_test + n_dev], pool[n_test + n_dev :]
    forbidden = closure if protocol == "clean" else None
    dev_neg = corrupt(dev_pos, n, rng, forbidden)
    test_neg = corrupt(test_pos, n, rng, forbidden)
    lab = lambda k: np.r_[np.ones(k, bool), np.zeros(k, bool)]  # noqa: E731
    data = HypernymyData(
        protocol,
        n,
        train,
        np.r_[dev_pos, dev_neg],
        lab(len(dev_pos)),
        np.r_[test_pos, test_neg],
        lab(len(test_pos)),
        closure,
    )
    data.stats = protocol_facts(data, listed, sum(len(p) for p in parents))
    return data


# The order in which createDatasets.lua's `for name, hnyms in pairs(sets)` visits the table
# constructor `{test = ..., val = ..., train = ...}` under Torch's LuaJIT 2.1 (torch/luajit-rocks
# fb8461a, pinned by torch/distro in Nov 2015). The parser (lj_parse.c expr_table) builds a template
# table on the first constant key with hsize2hbits(1) = 1 (2 nodes) and inserts the keys in source
# order; the third key finds no free node, so rehashtab resizes to 4 nodes (total = 1 + 2) and
# reinserts test, val, then train, colliding ones taking free nodes from the top (lj_tab_newkey).
# Torch's string hash (tommyds, lj_str.c since luajit-rocks cafad2e) puts all three keys' main
# node at 0 of 2 and 2 of 4, so test -> node 2, val -> node 3, train -> node 1 (stock LuaJIT's
# hash: train -> 0, test -> 2, val -> 3); lj_tab_next walks nodes 0..hmask, giving train, test,
# val either way. A LuaJIT built from fb8461a prints the same order.
AUTHORS_SET_ORDER = ("train", "test", "val")
_LUA_SETS = ("test", "val", "train")


def authors_listing(graph: NounGraph) -> np.ndarray:
    """List the closure as createDatasets.lua's `graph.transitiveClosure` does: (P, 2), our indices.

    Edges come from preprocessWordnet.py (synsets in `all_synsets('n')` order, each one's hypernyms
    then instance hypernyms, each sorted by name under NLTK 3.0). Graph.lua's `pairs(adj)` visits
    ids 2..N ascending: inserting integer keys 2, 3, ... into an empty LuaJIT table rehashes on each
    key past the array part (no hash part to spill into), and bestasize always finds them dense,
    so every key lives in the array part, which lj_tab_next walks in index order. That holds when
    only the first synset lacks a parent (WordNet's entity.n.01); other graphs raise ValueError.
    """
    if graph.nltk_order is None or graph.authors_parents is None:
        raise ValueError(
            "the graph has no nltk_order/authors_parents: load it with "
            "orderlib.data.wordnet.load_noun_graph (cache format 2)"
        )
    roots = [i for i, s in enumerate(graph.nltk_order) if not graph.authors_parents[s]]
    if roots != [0]:
        raise ValueError(
            f"the authors' pairs() order is derived only for graphs whose single root comes "
            f"first in all_synsets order; roots at positions {roots[:5]}"
        )
    return listed_pairs(graph.authors_parents, graph.nltk_order)


def n_entities_of(graph: NounGraph) -> int:
    """Return createDatasets.lua's numEntities: the largest 1-based id in the edge list."""
    rank = np.empty(len(graph.names), dtype=np.int64)  # our index -> 0-based id in all_synsets order
    rank[np.asarray(graph.nltk_order, dtype=np.int64)] = np.arange(len(graph.names))
    ends = [s for s, ps in enumerate(graph.authors_parents) if ps] + [p for ps in graph.authors_parents for p in ps]
    return int(rank[np.asarray(ends, dtype=np.int64)].max()) + 1


def torch_contrastive_negatives(
    pos: np.ndarray, gen: Torch7Generator, n_entities: int, entity_index: np.ndarray
) -> np.ndarray:
    """Corrupt each pair as Dataset.lua's genNegatives('contrastive') does, drawing from `gen`.

    randomEntities = ceil(rand(n,1) * N) (at least 1), then index = ceil(rand(n,1) * 2) (at least
    1); column `index` of each pair becomes its random entity. Entity ids are 1-based positions in
    all_synsets order, mapped to our indices through `entity_index` (graph.nltk_order).
    """
    n = len(pos)
    entity = np.maximum(np.ceil(gen.rand(n) * n_entities), 1).astype(np.int64)  # (n,) 1..N
    side = np.maximum(np.ceil(gen.rand(n) * 2), 1).astype(np.int64) - 1  # (n,) 0 hyponym, 1 hypernym
    neg = pos.copy()
    neg[np.arange(n), side] = entity_index[entity - 1]
    return neg  # (n, 2)


def authors_split(
    graph: NounGraph,
    n_test: int = 4000,
    n_dev: int = 4000,
    *,
    seed: int = 1,
    set_order: Sequence[str] = AUTHORS_SET_ORDER,
) -> HypernymyData:
    """Regenerate Vendrov et al.'s own train/dev/test split, as createDatasets.lua ('trans') makes it.

    torch.manualSeed(1); the listed pairs (duplicates kept) are permuted by torch.randperm; the
    first `n_test` are test, the next `n_dev` val (our dev), the rest train. Dataset() then draws
    each set's fixed negatives in `set_order` (LuaJIT's pairs() order). Pairs are in our node
    indices; train negatives are redrawn per epoch by our trainer, as the authors' Dataset did.
    """
    if sorted(set_order) != sorted(_LUA_SETS):
        raise ValueError(f"set_order must order {_LUA_SETS}, got {tuple(set_order)!r}")
    listed = authors_listing(graph)  # (P, 2)
    n = len(graph.names)
    if n_test + n_dev >= len(listed):
        raise ValueError(f"n_test + n_dev = {n_test + n_dev} leaves no training pairs of {len(listed)}")
    n_entities = n_entities_of(graph)
    gen = Torch7Generator(seed)
    pool = listed[gen.randperm(len(listed))]  # hypernyms:index(1, order)
    sets = {"test": pool[:n_test], "val": pool[n_test : n_test + n_dev], "train": pool[n_test + n_dev :]}
    entity_index = np.asarray(graph.nltk_order, dtype=np.int64)  # (N,) 0-based id -> our index
    negatives = {name: torch_contrastive_negatives(sets[name], gen, n_entities, entity_index) for name in set_order}
    lab = lambda k: np.r_[np.ones(k, bool), np.zeros(k, bool)]  # noqa: E731
    closure = sorted_unique(pair_codes(listed, n))
    data = HypernymyData(
        "paper",
        n,
        sets["train"],
        np.r_[sets["val"], negatives["val"]],
        lab(n_dev),
        np.r_[sets["test"], negatives["test"]],
        lab(n_test),
        closure,
        split="authors",
    )
    data.stats = protocol_facts(data, listed, graph.n_edges)
    return data


def protocol_facts(data: HypernymyData, listed: np.ndarray, n_edges: int) -> dict:
    """Count what changes how Table 1 reads: leaks into train and true pairs among negatives."""
    n = data.n_nodes
    train_codes = sorted_unique(pair_codes(data.train, n))
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
                for y in dst[start[x] : start[x + 1]].tolist():
                    if y not in seen:
                        seen.add(y)
                        stack.append(y)
            reach[u] = seen
        return reach[u]

    return np.fromiter((int(v) in reachable(int(u)) for u, v in queries), bool, len(queries))
