"""Fashion-MNIST Facts (`fmnist-facts-v1`): facts <S>, <S,P> and <S,P,O> drawn on 64x64 canvases of
Fashion-MNIST items, a stand-in for Sherlock's data sets (docs/sherlock.md).

Training counts follow a long tail (`long_tail_counts`) so that Sherlock's Table 5 cases,
few-example facts whose parts were seen often, occur. Deterministic in (version, split, seed, sizes).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from orderlib.data.attributes import ATTRS, CANVAS, MAX_JITTER, OBJECTS, render_item
from orderlib.data.fashion_mnist import FashionMNIST
from orderlib.data.scenes import SOURCES, source_range
from orderlib.paths import DataError

VERSION = "fmnist-facts-v1"
RELATIONS = ("left of", "right of", "above", "below", "bigger than", "smaller than")
FACT_CANVAS = 2 * CANVAS
WILD = "*"


@dataclass(frozen=True)
class Fact:
    """A structured fact; None marks a wild-card slot (<S> = (S, None, None))."""

    s: str
    p: str | None = None
    o: str | None = None

    @property
    def order(self) -> int:
        return 1 + (self.p is not None) + (self.o is not None)

    def phrase(self) -> str:
        """The fact as words: "sandal", "red sandal", "sandal left of bag"."""
        if self.o is not None:
            return f"{self.s} {self.p} {self.o}"
        return f"{self.p} {self.s}" if self.p is not None else self.s

    def __str__(self) -> str:
        return "<" + ", ".join(x for x in (self.s, self.p, self.o) if x is not None) + ">"


def all_facts() -> list[Fact]:
    """Every fact of the stand-in: first, second, then third order, each in vocabulary order."""
    return (
        [Fact(s) for s in OBJECTS]
        + [Fact(s, p) for s in OBJECTS for p in ATTRS]
        + [Fact(s, r, o) for s in OBJECTS for r in RELATIONS for o in OBJECTS]
    )


def long_tail_counts(
    facts: list[Fact],
    total: int,
    exponent: float = 1.0,
    unseen: float = 0.1,
    shares: tuple[float, float, float] = (0.2, 0.3, 0.5),
    seed: int = 0,
) -> np.ndarray:
    """Training images per fact (n_facts,) int64, long-tailed the way real fact data is: every
    word gets a Zipf popularity (rank^-exponent, ranks in random order, per slot), a fact the
    product of its words' popularities times log-normal noise; each fact order gets its `shares`
    of `total`, split by weight (at least 1 image per seen fact); a random fraction `unseen` of
    the facts gets none. Rare words make some part combinations rare, so Sherlock's Table 5
    cases differ from one another."""
    rng = np.random.default_rng([seed, len(facts), total])

    def popularity(words):
        ranks = rng.permutation(len(words)) + 1
        return dict(zip(words, 1.0 / ranks**exponent))

    pop = {
        "s": popularity(sorted({f.s for f in facts})),
        "p": popularity(sorted({f.p for f in facts if f.p})),
        "o": popularity(sorted({f.o for f in facts if f.o})),
    }
    weight = np.array(
        [np.prod([pop[k][getattr(f, k)] for k in "spo" if getattr(f, k) is not None]) for f in facts]
    ) * rng.lognormal(0.0, 1.0, len(facts))
    weight[rng.permutation(len(facts))[: int(round(unseen * len(facts)))]] = 0.0
    order = np.array([f.order for f in facts])
    counts = np.zeros(len(facts), np.int64)
    for k, share in zip((1, 2, 3), shares):
        sel = (order == k) & (weight > 0)
        if sel.any():
            counts[sel] = np.maximum(1, np.floor(share * total * weight[sel] / weight[sel].sum()))
    return counts


def _cell(rng: np.random.Generator, relation: str | None) -> tuple[int, int]:
    """Cells (row-major 0..3) of S and O for a relation (S alone: O = -1)."""
    if relation is None:
        return int(rng.integers(4)), -1
    if relation in ("left of", "right of", "bigger than", "smaller than"):
        row = int(rng.integers(2))
        a, b = 2 * row, 2 * row + 1  # left, right
        if relation == "right of" or (relation in ("bigger than", "smaller than") and rng.random() < 0.5):
            a, b = b, a
        return a, b
    col = int(rng.integers(2))
    a, b = col, 2 + col  # top, bottom
    return (a, b) if relation == "above" else (b, a)


@dataclass
class FactImages:
    """Images of facts: image k shows fact `facts[fact[k]]` with items `items[k]` (S item, O item
    or -1) from Fashion-MNIST split `source.split`, in cells `cells[k]`."""

    split: str
    seed: int
    facts: list[Fact]
    fact: np.ndarray  # (n,) int64 index into facts
    items: np.ndarray  # (n, 2) int64
    cells: np.ndarray  # (n, 2) int64
    seeds: np.ndarray  # (n,) int64 per-image variation
    source: FashionMNIST = field(repr=False)
    version: str = VERSION

    def __len__(self) -> int:
        return len(self.fact)

    def render(self, idx=None) -> np.ndarray:
        """Images idx (default all) as uint8 (n, 64, 64, 3)."""
        idx = np.arange(len(self)) if idx is None else np.atleast_1d(idx)
        out = np.zeros((len(idx), FACT_CANVAS, FACT_CANVAS, 3), np.uint8)
        for k, i in enumerate(idx):
            f, rng = self.facts[self.fact[i]], np.random.default_rng(int(self.seeds[i]))
            looks = {"bigger than": ("large", "small"), "smaller than": ("small", "large")}.get(f.p, (None, None))
            attr_s = f.p if f.order == 2 else looks[0]
            for item, cell, attr in (
                (self.items[i, 0], self.cells[i, 0], attr_s),
                (self.items[i, 1], self.cells[i, 1], looks[1]),
            ):
                if item < 0:
                    continue
                y, x = CANVAS * (cell // 2), CANVAS * (cell % 2)
                jitter = tuple(rng.integers(-MAX_JITTER, MAX_JITTER + 1, 2))
                out[k, y : y + CANVAS, x : x + CANVAS] = render_item(
                    self.source.images[item],
                    attr,
                    int(self.source.labels[item]),
                    jitter,
                    int(rng.integers(4)),
                    int(rng.integers(2**31)),
                )
        return out

    def fingerprint(self) -> str:
        h = hashlib.sha256(f"{self.version}|{self.split}|{self.seed}|{len(self.facts)}".encode())
        for a in (self.fact, self.items, self.cells, self.seeds):
            h.update(np.ascontiguousarray(a).tobytes())
        return h.hexdigest()


def make_fact_images(
    source: FashionMNIST, split: str, facts: list[Fact], counts: np.ndarray, seed: int = 0
) -> FactImages:
    """counts[f] images of each fact f for `split` ("train", "dev", "test"; items as SOURCES)."""
    lo, hi = source_range(source, split, "facts")
    pools = [lo + np.flatnonzero(source.labels[lo:hi] == c) for c in range(len(OBJECTS))]
    counts = np.asarray(counts, np.int64)
    if counts.shape != (len(facts),) or (counts < 0).any():
        raise ValueError(f"counts must be ({len(facts)},) non-negative, got shape {counts.shape}")
    rng = np.random.default_rng([seed, list(SOURCES).index(split), len(facts), int(counts.sum())])
    obj = {w: i for i, w in enumerate(OBJECTS)}
    fact = np.repeat(np.arange(len(facts)), counts)
    items = np.full((len(fact), 2), -1, np.int64)
    cells = np.full((len(fact), 2), -1, np.int64)
    for k, f in enumerate(fact):
        fc = facts[f]
        items[k, 0] = rng.choice(pools[obj[fc.s]])
        if fc.o is not None:
            items[k, 1] = rng.choice(pools[obj[fc.o]])
        cells[k] = _cell(rng, fc.p if fc.o is not None else None)
    return FactImages(split, seed, list(facts), fact, items, cells, rng.integers(0, 2**31, len(fact)), source)


def implies(facts: list[Fact]) -> np.ndarray:
    """(F, F) bool: implies[a, b] when fact b is true of every image of fact a by structure: b is a,
    or a with its trailing slots made wild-cards (<sandal> of <sandal, red> and of <sandal, left
    of, bag>)."""

    def generalisations(f):
        return {f, Fact(f.s), Fact(f.s, f.p)}

    index = {f: i for i, f in enumerate(facts)}
    out = np.zeros((len(facts), len(facts)), bool)
    for a, f in enumerate(facts):
        for g in generalisations(f):
            if g in index:
                out[a, index[g]] = True
    return out


CASES = ("SP, O", "SO, P", "SO, PO", "SO, SP")  # Sherlock's Table 5: the parts seen >= `often` times


def generalisation_cases(
    facts: list[Fact], train_counts: np.ndarray, few: int = 5, often: int = 15
) -> dict[str, np.ndarray]:
    """SPO facts with at most `few` training images whose parts occur in at least `often` training
    images of *other* SPO facts, per Sherlock's Table 5 case ("SP, O": <S,P,*> and <*,*,O>; "SO,
    P": <S,*,O> and <*,P,*>; "SO, PO"; "SO, SP"). Returns case -> fact indices (a fact may be in
    several cases)."""
    spo = [i for i, f in enumerate(facts) if f.order == 3]
    keys = {"S": lambda f: f.s, "P": lambda f: f.p, "O": lambda f: f.o}
    part_key = lambda f, part: tuple(keys[c](f) for c in part)
    totals: dict[tuple, int] = {}
    for i in spo:
        for part in ("SP", "SO", "PO", "S", "P", "O"):
            k = (part, part_key(facts[i], part))
            totals[k] = totals.get(k, 0) + int(train_counts[i])
    out = {}
    for case in CASES:
        parts = [p.strip() for p in case.split(",")]
        hits = [
            i
            for i in spo
            if train_counts[i] <= few
            and all(totals[(p, part_key(facts[i], p))] - train_counts[i] >= often for p in parts)
        ]
        out[case] = np.array(hits, np.int64)
    return out


def parse_fact(text: str) -> Fact:
    """ "<sandal, left of, bag>", "<sandal, red>", "<sandal>" or tab/comma-separated slots with
    "*" or empty for wild-cards -> Fact. Raise ValueError on anything else."""
    body = text.strip()
    if body.startswith("<") and body.endswith(">"):
        body = body[1:-1]
    slots = [s.strip() for s in (body.split("\t") if "\t" in body else body.split(","))]
    slots = [None if s in ("", WILD) else s for s in slots] + [None] * (3 - len(slots))
    if len(slots) != 3 or slots[0] is None or (slots[2] is not None and slots[1] is None):
        raise ValueError(f"not a fact <S>, <S,P> or <S,P,O>: {text!r}")
    return Fact(*slots)


def read_fact_annotations(path: str | Path) -> list[tuple[str, Fact]]:
    """Read a fact annotation file: per line an image path, a tab, then the fact ("<s, p, o>" or
    tab-separated S, P, O with "*" for wild-cards); blank lines and "#" comments skipped. Errors
    name the file and line."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such file (fact annotations: image<TAB>fact per line)")
    out = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        image, _, fact = line.partition("\t")
        if not fact:
            raise DataError(f"{path}:{n}: expected an image path, a tab and a fact, got {line!r}")
        try:
            out.append((image.strip(), parse_fact(fact)))
        except ValueError as e:
            raise DataError(f"{path}:{n}: {e}") from e
    return out
