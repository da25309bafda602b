"""Fashion-MNIST Scenes (`fmnist-scenes-v1`): a stand-in for COCO in Table 2 and Section 4.6 of
Vendrov et al., built from real Fashion-MNIST items and WordNet 3.0.

Each 60x60 image holds 1-4 items and has five captions, from a one-word gist to a full layout
(`make_captions`; docs/order_embeddings.md), so abstract and detailed captions describe one image.
Deterministic in (version, split, seed, size).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

import numpy as np

from orderlib.data.fashion_mnist import SYNSETS, FashionMNIST

VERSION = "fmnist-scenes-v1"
CANVAS, SLOT, ITEM = 60, 30, 28
SLOT_NAMES = ("top left", "top right", "bottom left", "bottom right")  # slot s: row s // 2, col s % 2
MAX_JITTER = SLOT - ITEM  # item origin = slot origin + 0..2 pixels
SOURCES = {  # scene split -> (Fashion-MNIST split, first item, end)
    "train": ("train", 0, 50000),
    "dev": ("train", 50000, 60000),
    "test": ("test", 0, 10000),
}
LEVELS = ("gist", "one item", "abstract", "inventory", "layout")
TOP = "artifact.n.01"  # ladders stop here: above it WordNet says "whole", "object", "entity"
MASS_NOUNS = {"clothing.n.01", "footwear.n.02", "woman's_clothing.n.01"}
PLURAL_ONLY = {"trouser": ("pair of trousers", "pairs of trousers"), "pant": ("pair of pants", "pairs of pants")}
NUMBERS = ("zero", "one", "two", "three", "four")
_TOKEN = re.compile(r"[a-z0-9]+(?:['-][a-z0-9]+)*")


def caption_tokenize(text: str) -> list[str]:
    """Lowercase word tokens, keeping "t-shirt" and "woman's" whole, dropping punctuation."""
    return _TOKEN.findall(text.lower())


@dataclass(frozen=True)
class Lexicon:
    """What the captions may say: for each class, its WordNet ladder (class synset first, up to
    artifact.n.01), and the words of each synset (class synsets: all lemmas; ancestors: the
    first lemma)."""

    ladders: tuple[tuple[str, ...], ...]  # per class: (class synset, parent, ..., artifact.n.01)
    words: dict[str, tuple[str, ...]]

    @classmethod
    def from_wordnet(cls, wn, synsets: tuple[str, ...] = SYNSETS) -> Lexicon:
        ladders, words = [], {}
        for name in synsets:
            s = wn.synset(name)
            path = min(s.hypernym_paths(), key=len)[::-1]  # (class, ..., entity): the shortest path
            names = [p.name() for p in path]
            ladder = names[: names.index(TOP) + 1] if TOP in names else names
            ladders.append(tuple(ladder))
            for i, n in enumerate(ladder):
                lemmas = wn.synset(n).lemma_names() if i == 0 else wn.synset(n).lemma_names()[:1]
                words.setdefault(n, tuple(dict.fromkeys(l.replace("_", " ").lower() for l in lemmas)))
        return cls(tuple(ladders), words)

    def ancestors(self, label: int) -> set[str]:
        """The class synset of `label` and every synset above it on its ladder."""
        return set(self.ladders[label])

    def lowest_common(self, labels) -> str:
        """The lowest synset on the first label's ladder that every label's ladder holds."""
        common = set.intersection(*(self.ancestors(int(c)) for c in labels))
        return next(s for s in self.ladders[int(labels[0])] if s in common)


def _plural(word: str) -> str:
    head, _, last = word.rpartition(" ")
    if last.endswith(("s", "sh", "ch", "x", "z")):
        last += "es"
    elif last.endswith("y") and last[-2:-1] not in "aeiou":
        last = last[:-1] + "ies"
    else:
        last += "s"
    return f"{head} {last}" if head else last


def noun_phrase(word: str, count: int | None, mass: bool = False) -> str:
    """Render `word` with a count: None = bare plural (or the mass noun), 1 = "a/an word",
    n = "two words"; plural-only nouns say "a pair of trousers"."""
    if mass:
        return word
    singular, plural = PLURAL_ONLY.get(word, (word, _plural(word)))
    if count is None:
        return plural
    if count == 1:
        return ("an " if singular[0] in "aeiou" else "a ") + singular
    return f"{NUMBERS[count]} {plural}"


def join_phrases(phrases: list[str]) -> str:
    return phrases[0] if len(phrases) == 1 else ", ".join(phrases[:-1]) + " and " + phrases[-1]


@dataclass
class Scenes:
    """One split of Fashion-MNIST Scenes. Slot s of scene k holds `items[k, s]` (an index into the
    Fashion-MNIST split `source.split`, -1 if empty) with class `labels[k, s]` at canvas offset
    `offsets[k, s]` = (y, x). Captions of scene k are `captions[5k:5k+5]`, one per LEVEL."""

    split: str
    seed: int
    items: np.ndarray  # (n, 4) int64
    labels: np.ndarray  # (n, 4) int64
    offsets: np.ndarray  # (n, 4, 2) int64
    captions: list[str]
    claims: list[list[tuple]]
    source: FashionMNIST = field(repr=False)
    version: str = VERSION

    def __len__(self) -> int:
        return len(self.items)

    def render(self, idx=None) -> np.ndarray:
        """Return the canvases of scenes idx (default all) as (n, 60, 60) uint8."""
        idx = np.arange(len(self)) if idx is None else np.atleast_1d(idx)
        out = np.zeros((len(idx), CANVAS, CANVAS), np.uint8)
        for k, i in enumerate(idx):
            for s in np.flatnonzero(self.items[i] >= 0):
                y, x = self.offsets[i, s]
                out[k, y : y + ITEM, x : x + ITEM] = self.source.images[self.items[i, s]]
        return out

    def fingerprint(self) -> str:
        h = hashlib.sha256(f"{self.version}|{self.split}|{self.seed}".encode())
        for a in (self.items, self.offsets):
            h.update(np.ascontiguousarray(a).tobytes())
        h.update("\n".join(self.captions).encode())
        return h.hexdigest()


def _relation(a: int, b: int, rng) -> str:
    """A true spatial relation of slot a to slot b (distinct slots of the 2x2 grid)."""
    ra, ca, rb, cb = a // 2, a % 2, b // 2, b % 2
    options = []
    if ca != cb:
        options.append("to the left of" if ca < cb else "to the right of")
    if ra != rb:
        options.append("above" if ra < rb else "below")
    return options[rng.integers(len(options))]


def make_captions(labels: np.ndarray, lex: Lexicon, rng: np.random.Generator) -> tuple[list[str], list[list[tuple]]]:
    """Return the 5 captions of one scene (labels: (4,) class per slot, -1 empty) and their claims.

    Claims: ("all", synset) every item is under synset; ("some", synset) some item is;
    ("inventory", [synset, ...]) the items, each named once by a synset above (or at) its class;
    ("is", slot, synset) the item in slot is of that class; ("rel", a, b, relation) slot a's item
    stands in that relation to slot b's; ("at", slot, position).
    """
    slots = [int(s) for s in np.flatnonzero(labels >= 0)]  # reading order
    cls = [int(labels[s]) for s in slots]

    def word(synset: str) -> str:
        options = lex.words[synset]
        return options[rng.integers(len(options))]

    def counted(synsets: list[str]) -> str:
        order = list(dict.fromkeys(synsets))  # first-mention order
        return join_phrases(
            [noun_phrase(word(s), None if s in MASS_NOUNS else synsets.count(s), s in MASS_NOUNS) for s in order]
        )

    caps, claims = [], []
    # 0 gist: lowest common ancestor (a random proper ancestor for one item)
    if len(cls) == 1:
        ladder = lex.ladders[cls[0]]
        top = ladder[1 + rng.integers(len(ladder) - 1)]
        caps.append(noun_phrase(word(top), 1, top in MASS_NOUNS))
    else:
        top = lex.lowest_common(cls)
        caps.append(noun_phrase(word(top), None, top in MASS_NOUNS))
    claims.append([("all", top)])
    # 1 one item, by its class
    pick = cls[rng.integers(len(cls))]
    caps.append(noun_phrase(word(lex.ladders[pick][0]), 1))
    claims.append([("some", lex.ladders[pick][0])])
    # 2 abstract inventory: every item at one depth above its class
    depth = 1 + rng.integers(max(len(lex.ladders[c]) for c in cls) - 1)
    named = [lex.ladders[c][min(depth, len(lex.ladders[c]) - 1)] for c in cls]
    caps.append(counted(named))
    claims.append([("inventory", named)])
    # 3 inventory at class level
    named = [lex.ladders[c][0] for c in cls]
    caps.append(counted(named))
    claims.append([("inventory", named)])
    # 4 layout: random pairs with a true relation; a left-over item gets its position
    perm = [slots[i] for i in rng.permutation(len(slots))]
    phrases, layout = [], []
    for i in range(0, len(perm) - 1, 2):
        a, b = perm[i], perm[i + 1]
        rel = _relation(a, b, rng)
        sa, sb = lex.ladders[int(labels[a])][0], lex.ladders[int(labels[b])][0]
        phrases.append(f"{noun_phrase(word(sa), 1)} {rel} {noun_phrase(word(sb), 1)}")
        layout += [("is", a, sa), ("is", b, sb), ("rel", a, b, rel)]
    if len(perm) % 2:
        s = perm[-1]
        syn = lex.ladders[int(labels[s])][0]
        phrases.append(f"{noun_phrase(word(syn), 1)} at the {SLOT_NAMES[s]}")
        layout += [("is", s, syn), ("at", s, SLOT_NAMES[s])]
    caps.append(" and ".join(phrases))
    claims.append(layout)
    return caps, claims


def source_range(source: FashionMNIST, split: str, what: str = "scenes") -> tuple[int, int]:
    """The item range [lo, hi) of `source` that `split` ("train", "dev", "test") draws from
    (SOURCES); errors if `source` is the wrong Fashion-MNIST split or too short."""
    if split not in SOURCES:
        raise ValueError(f"unknown split {split!r}; expected one of {list(SOURCES)}")
    fm_split, lo, hi = SOURCES[split]
    if source.split != fm_split:
        raise ValueError(f"{split} {what} take items from Fashion-MNIST {fm_split}, got {source.split}")
    if len(source) < hi:
        raise ValueError(f"Fashion-MNIST {fm_split} has {len(source)} images; {split} {what} need {hi}")
    return lo, hi


def make_scenes(source: FashionMNIST, split: str, n: int, lex: Lexicon, seed: int = 0) -> Scenes:
    """Generate `n` scenes of `split` ("train", "dev", "test") from the matching Fashion-MNIST
    items (see SOURCES), deterministically from (split, seed)."""
    lo, hi = source_range(source, split, "scenes")
    rng = np.random.default_rng([seed, list(SOURCES).index(split), n])
    items = np.full((n, 4), -1, np.int64)
    labels = np.full((n, 4), -1, np.int64)
    offsets = np.zeros((n, 4, 2), np.int64)
    captions, claims = [], []
    for k in range(n):
        count = 1 + rng.integers(4)
        slots = np.sort(rng.choice(4, count, replace=False))
        items[k, slots] = lo + rng.choice(hi - lo, count, replace=False)
        labels[k, slots] = source.labels[items[k, slots]]
        for s in slots:
            offsets[k, s] = (
                SLOT * (s // 2) + rng.integers(MAX_JITTER + 1),
                SLOT * (s % 2) + rng.integers(MAX_JITTER + 1),
            )
        caps, cl = make_captions(labels[k], lex, rng)
        captions += caps
        claims += cl
    return Scenes(split, seed, items, labels, offsets, captions, claims, source)
